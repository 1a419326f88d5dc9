"""The llama.cpp flag table (launch commands, the linter, the emulator's parser) matches the binary."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specportal.engines.flags import LLAMACPP, LLAMACPP_SPEC_TYPES
from specportal.realengine.server import run_to_exit

pytestmark = pytest.mark.real_engine


@pytest.fixture(scope="module")
def help_text(llama_server: Path) -> str:
    done = run_to_exit([str(llama_server), "--help"])
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_every_flag_the_table_accepts_is_an_option_of_the_real_server(help_text: str) -> None:
    spelled = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", help_text))
    missing = [
        name
        for flag in LLAMACPP.flags
        if not flag.removed
        for name in (*flag.names, *flag.negations)
        if name not in spelled
    ]
    assert missing == []


def test_spec_type_choices_are_the_real_servers(help_text: str) -> None:
    listed = re.search(r"^--spec-type ([\w,-]+)", help_text, flags=re.MULTILINE)
    assert listed is not None
    assert tuple(listed.group(1).split(",")) == LLAMACPP_SPEC_TYPES


@pytest.mark.parametrize("flag", [f for f in LLAMACPP.flags if f.removed], ids=lambda f: f.flag)
def test_removed_flags_really_refuse_to_start_with_the_tables_message(
    llama_server: Path, models: Path, flag: object
) -> None:
    from specportal.engines.flags import Flag

    assert isinstance(flag, Flag)
    done = run_to_exit(
        [str(llama_server), "-m", str(models / "tiny" / "target.gguf"), flag.flag, "4"]
    )
    assert done.returncode == LLAMACPP.argument_exit_code
    assert flag.removed_message is not None
    assert flag.removed_message in done.stdout + done.stderr


def test_an_unknown_flag_refuses_to_start_with_the_tables_message(
    llama_server: Path, models: Path
) -> None:
    done = run_to_exit(
        [str(llama_server), "-m", str(models / "tiny" / "target.gguf"), "--no-such-flag"]
    )
    assert done.returncode == LLAMACPP.argument_exit_code
    assert LLAMACPP.unknown_flag_message.format(flag="--no-such-flag") in done.stdout + done.stderr
