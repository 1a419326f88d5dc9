"""``specportal emulate --help`` documents every flag; bad emulator flags are one-line errors."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys

import pytest

from specportal.cli import emulate
from specportal.engines.flags import TABLES


def _help() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "specportal", "emulate", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_help_documents_every_emulator_flag_with_a_description() -> None:
    parser = argparse.ArgumentParser()
    emulate.add_arguments(parser)
    text = _help()
    options = [a for a in parser._actions if any(o.startswith("--") for o in a.option_strings)]
    names = {o for a in options for o in a.option_strings}
    assert {"--flavor", "--emu-time-scale", "--emu-fault-exit-after", "--emu-draft-cost"} <= names
    for action in options:
        if "--help" in action.option_strings:
            continue
        assert all(o == "--flavor" or o.startswith("--emu-") for o in action.option_strings)
        assert action.help, action.option_strings
        assert action.option_strings[0] in text


def test_help_lists_every_engine_flag_from_the_tables() -> None:
    text = " ".join(_help().split())
    for flavor, table in TABLES.items():
        assert f"{flavor}:" in text
        for flag in table.flags:
            if flag.names and not flag.removed:
                assert flag.names[0] in text, (flavor, flag.names[0])


def test_bad_emulator_flag_value_is_refused_without_a_traceback() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "specportal",
            "emulate",
            "--flavor",
            "vllm",
            "m",
            "--emu-time-scale",
            "0",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "--emu-time-scale" in done.stderr


@pytest.mark.parametrize(
    ("flavor", "engine_argv", "expected"),
    [
        ("vllm", ["m"], ["OSError: [Errno 98] Address already in use"]),
        (
            "sglang",
            ["--model-path", "m"],
            [
                "ERROR:    [Errno 98] error while attempting to bind on address "
                "('127.0.0.1', {port}): address already in use"
            ],
        ),
        (
            "llamacpp",
            ["-m", "m.gguf"],
            [
                "couldn't bind HTTP server socket, hostname: 127.0.0.1, port: {port}",
                "exiting due to HTTP server error",
            ],
        ),
    ],
)
def test_a_taken_port_fails_the_start_with_the_engines_own_words(
    flavor: str, engine_argv: list[str], expected: list[str]
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as squatter:
        port = squatter.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "specportal",
                "emulate",
                "--flavor",
                flavor,
                *engine_argv,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1, done.stderr
    for line in expected:
        assert line.format(port=port) in done.stderr
    assert "Traceback" not in done.stderr
