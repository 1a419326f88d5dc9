"""The agent's inventory: real nvidia-smi / vLLM / llama.cpp / SGLang formats, read from stand-in
executables on PATH that print what the real tools print (this machine has no GPU)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from specportal.agent.inventory import (
    VISIBILITY_VARIABLES,
    collect,
    detect_engines,
    gpu_inventory,
    merge_engines,
    parse_gpu_csv,
    parse_llama_server_version,
    parse_smi_versions,
    parse_version_output,
)
from tests.specportal.agent.standins import (
    DRIVER_DOWN,
    H100_CSV,
    LEGACY_BANNER,
    R610_BANNER,
    SMI_Q,
    nvidia_smi,
    stand_in,
)


@pytest.fixture
def path_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH holds only the stand-ins' folder (and the shell they need)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    for name in VISIBILITY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return bin_dir


# --- parsers --------------------------------------------------------------------------------------


def test_gpu_csv_rows_become_gpus_with_mib_and_driver() -> None:
    gpus = parse_gpu_csv(H100_CSV)
    assert [g["index"] for g in gpus] == [0, 1]
    assert gpus[0] == {
        "index": 0,
        "uuid": "GPU-6c7a2b1e-3f4d-5e6f-7a8b-9c0d1e2f3a4b",
        "name": "NVIDIA H100 80GB HBM3",
        "memory_mib": 81559,
        "driver_version": "550.54.15",
    }


def test_gpu_csv_accepts_units_and_not_available_cells_and_refuses_other_shapes() -> None:
    (gpu,) = parse_gpu_csv("0, [N/A], NVIDIA A10G, 23028 MiB, 535.104.05\n\n")
    assert gpu["uuid"] is None
    assert gpu["memory_mib"] == 23028
    assert parse_gpu_csv("") == []
    with pytest.raises(ValueError, match="expected 5 fields"):
        parse_gpu_csv("NVIDIA H100 80GB HBM3, 81559, 550.54.15\n")


def test_driver_and_cuda_versions_from_legacy_and_r610_banners_and_from_q() -> None:
    assert parse_smi_versions(LEGACY_BANNER) == {
        "driver_version": "550.54.15",
        "cuda_version": "12.4",
    }
    assert parse_smi_versions(R610_BANNER) == {
        "driver_version": "610.43.02",
        "cuda_version": "13.3",
    }
    assert parse_smi_versions(SMI_Q) == {"driver_version": "450.66", "cuda_version": "11.0"}
    assert parse_smi_versions("No devices were found") == {
        "driver_version": None,
        "cuda_version": None,
    }


def test_vllm_version_is_the_last_bare_version_line_after_import_logs() -> None:
    logs = "INFO 11-29 20:13:45 [__init__.py:216] Automatically detected platform cuda.\n0.11.0\n"
    assert parse_version_output(logs) == "0.11.0"
    assert parse_version_output("0.10.2rc2.dev4+g1a2b3c4\n") == "0.10.2rc2.dev4+g1a2b3c4"
    assert parse_version_output("usage: vllm [-h] [-v]\n") is None


def test_llama_server_version_in_both_formats_becomes_its_build_name() -> None:
    old = "version: 4589 (eb7cf15a)\nbuilt with cc (Ubuntu 13.2.0-23ubuntu4) 13.2.0 for x86_64\n"
    assert parse_llama_server_version(old) == "b4589-eb7cf15a"
    new = (
        "load_backend: loaded CPU backend\n"
        "version: 0.5.0-dev (build 1, commit 0c1e570)\n"
        "built with GNU 13.3.0 for Linux x86_64\n"
    )
    assert parse_llama_server_version(new) == "b1-0c1e570"
    assert parse_llama_server_version("error: unknown argument: --version") is None


# --- nvidia-smi on PATH ---------------------------------------------------------------------------


def test_gpus_driver_and_cuda_come_from_a_working_nvidia_smi(path_only: Path) -> None:
    nvidia_smi(path_only, H100_CSV)
    found = gpu_inventory()
    assert found["status"] == "ok"
    assert found["reason"] == ""
    assert [g["name"] for g in found["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 2
    assert found["driver_version"] == "550.54.15"
    assert found["cuda_version"] == "12.4"
    assert found["path"] == str(path_only / "nvidia-smi")


def test_a_failing_nvidia_smi_reports_no_gpus_and_keeps_its_words(path_only: Path) -> None:
    stand_in(path_only, "nvidia-smi", f'echo "{DRIVER_DOWN}"\nexit 9\n')
    found = gpu_inventory()
    assert found["status"] == "failed"
    assert found["gpus"] == []
    assert "exited with status 9" in found["reason"]
    assert "couldn't communicate with the NVIDIA driver" in found["reason"]


def test_no_nvidia_smi_on_path_is_absent_not_an_error(path_only: Path) -> None:
    found = gpu_inventory()
    assert found == {
        "status": "absent",
        "reason": "nvidia-smi is not on PATH",
        "path": None,
        "gpus": [],
        "driver_version": None,
        "cuda_version": None,
        "visible_devices": {},
        "hidden": 0,
        "listed": 0,
        "visible_unknown": "",
    }


# --- CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES ------------------------------------------------

UUIDS = (
    "GPU-6c7a2b1e-3f4d-5e6f-7a8b-9c0d1e2f3a4b",
    "GPU-0d9e8f7a-6b5c-4d3e-2f1a-0b9c8d7e6f5a",
    "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6",
    "GPU-8932f9aa-0000-4106-c12f-20bd9faed9f6",
)
FOUR_H100 = "".join(
    f"{i}, {uuid}, NVIDIA H100 80GB HBM3, 81559, 550.54.15\n" for i, uuid in enumerate(UUIDS)
)


def _visible(path_only: Path, environ: dict[str, str], csv: str = FOUR_H100) -> list[int]:
    nvidia_smi(path_only, csv)
    found = gpu_inventory(environ=environ)
    assert found["status"] == "ok"
    assert found["hidden"] == len(parse_gpu_csv(csv)) - len(found["gpus"])
    assert found["visible_devices"] == environ
    return [g["index"] for g in found["gpus"]]


@pytest.mark.parametrize(
    ("value", "indices"),
    [
        ("2,0", [0, 2]),  # only those named; listed in nvidia-smi's order
        (" 3 , 1 ", [1, 3]),
        (f"{UUIDS[1]},3", [1, 3]),  # by UUID
        ("GPU-6c7a2b1e", [0]),  # by a UUID's unique prefix
        ("0,-1,1", [0]),  # an invalid entry hides it and every one after it
        ("0,7,1", [0]),  # an index no GPU has is invalid
        ("1,GPU-8932f9", [1]),  # an ambiguous prefix is invalid
        ("", []),  # empty: no GPU
        ("-1", []),
        ("1,1", [1]),
    ],
)
def test_cuda_visible_devices_leaves_only_the_gpus_cuda_would_see(
    path_only: Path, value: str, indices: list[int]
) -> None:
    assert _visible(path_only, {"CUDA_VISIBLE_DEVICES": value}) == indices


@pytest.mark.parametrize("value", ["all", "none", "void", "", "1,3", UUIDS[2]])
def test_nvidia_visible_devices_is_recorded_but_hides_no_gpu(path_only: Path, value: str) -> None:
    # given a bare host (or a privileged container) whose agent inherited NVIDIA_VISIBLE_DEVICES:
    # only the NVIDIA container runtime reads it, CUDA does not
    # then every GPU nvidia-smi lists stays visible, and the variable is recorded
    assert _visible(path_only, {"NVIDIA_VISIBLE_DEVICES": value}) == [0, 1, 2, 3]


def test_in_a_container_nvidia_visible_devices_was_already_applied(path_only: Path) -> None:
    # given a container given GPUs 2 and 3: its nvidia-smi lists just those, numbered from 0
    inside = "".join(
        f"{i}, {uuid}, NVIDIA H100 80GB HBM3, 81559, 550.54.15\n"
        for i, uuid in enumerate(UUIDS[2:])
    )
    # then both count, and CUDA_VISIBLE_DEVICES indexes them as the container numbers them
    assert _visible(path_only, {"NVIDIA_VISIBLE_DEVICES": "2,3"}, inside) == [0, 1]
    both = {"NVIDIA_VISIBLE_DEVICES": "2,3", "CUDA_VISIBLE_DEVICES": "1"}
    assert _visible(path_only, both, inside) == [1]


def test_only_cuda_visible_devices_filters_when_both_are_set(path_only: Path) -> None:
    both = {"NVIDIA_VISIBLE_DEVICES": "1,2,3", "CUDA_VISIBLE_DEVICES": "3,0,1"}
    assert _visible(path_only, both) == [0, 1, 3]


MIG = "MIG-4f1c2a7e-9b3d-5c6e-8f0a-1b2c3d4e5f6a"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (MIG, f"names a MIG instance ({MIG!r})"),  # the usual form on a MIG-partitioned A100/H100
        (f"0,{MIG}", "names a MIG instance"),
        ("MIG-GPU-6c7a2b1e-3f4d-5e6f-7a8b-9c0d1e2f3a4b/1/0", "names a MIG instance"),  # pre-R470
        ("0,nvidia0", "names a device ('nvidia0')"),
    ],
)
def test_an_entry_the_agent_cannot_resolve_makes_the_visible_gpus_unknown(
    path_only: Path, value: str, why: str
) -> None:
    nvidia_smi(path_only, FOUR_H100)
    found = gpu_inventory(environ={"CUDA_VISIBLE_DEVICES": value})
    # then no count is claimed (not 0, not 4): the portal keeps the registered GPUs
    assert found["status"] == "ok"
    assert found["gpus"] == []
    assert found["hidden"] is None
    assert found["listed"] == 4
    assert why in found["visible_unknown"]
    assert "how many GPUs the engines can use is unknown" in found["visible_unknown"]
    assert found["reason"] == found["visible_unknown"]
    assert found["visible_devices"] == {"CUDA_VISIBLE_DEVICES": value}
    assert found["cuda_version"] == "12.4"


def test_an_invalid_index_before_an_unknown_entry_still_ends_the_list(path_only: Path) -> None:
    # as CUDA documents, -1 hides every entry after it: the MIG entry is never read
    assert _visible(path_only, {"CUDA_VISIBLE_DEVICES": f"0,-1,{MIG}"}) == [0]


def test_the_agents_own_environment_is_read_and_reported(
    path_only: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvidia_smi(path_only, FOUR_H100)
    assert len(collect(detect=False)["gpus"]) == 4
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    found = collect(detect=False)
    assert [g["uuid"] for g in found["gpus"]] == list(UUIDS[:2])
    assert found["nvidia_smi"]["visible_devices"] == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert found["nvidia_smi"]["hidden"] == 2
    assert found["nvidia_smi"]["listed"] == 4
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", MIG)
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "none")
    found = collect(detect=False)
    assert found["gpus"] == []
    assert found["nvidia_smi"]["hidden"] is None
    assert "MIG instance" in found["nvidia_smi"]["visible_unknown"]
    assert found["nvidia_smi"]["visible_devices"] == {
        "NVIDIA_VISIBLE_DEVICES": "none",
        "CUDA_VISIBLE_DEVICES": MIG,
    }


def test_an_nvidia_smi_printing_something_else_fails_with_the_line(path_only: Path) -> None:
    nvidia_smi(path_only, "NVIDIA H100 80GB HBM3, 81559\n")
    found = gpu_inventory()
    assert found["status"] == "failed"
    assert "unexpected line" in found["reason"]
    assert "81559" in found["reason"]


# --- engines --------------------------------------------------------------------------------------


def test_vllm_and_llama_server_on_path_are_asked_their_versions(path_only: Path) -> None:
    stand_in(
        path_only,
        "vllm",
        'echo "INFO 11-29 20:13:45 [__init__.py:216] Automatically detected platform cuda."\n'
        '[ "$1" = "--version" ] && echo 0.11.0\n',
    )
    stand_in(
        path_only,
        "llama-server",
        'echo "version: 6550 (3ecb2f67)" >&2\necho "built with cc 13.3.0 for x86_64" >&2\n',
    )
    found = detect_engines()
    assert found["vllm"] == {
        "versions": ["0.11.0"],
        "source": "detected",
        "how": "vllm --version",
        "path": str(path_only / "vllm"),
    }
    assert found["llamacpp"]["versions"] == ["b6550-3ecb2f67"]
    assert found["llamacpp"]["source"] == "detected"


def test_an_engine_that_fails_or_is_missing_says_why(path_only: Path) -> None:
    stand_in(path_only, "vllm", 'echo "ImportError: libcudart.so.12: cannot open" >&2\nexit 1\n')
    found = detect_engines()
    assert found["vllm"]["source"] == "failed"
    assert "exited with status 1" in found["vllm"]["reason"]
    assert "libcudart" in found["vllm"]["reason"]
    assert found["llamacpp"] == {
        "versions": [],
        "source": "absent",
        "how": "llama-server --version",
        "reason": "llama-server is not on PATH",
    }


def test_sglang_is_the_version_of_its_python_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real distribution record that importlib.metadata reads, as pip would leave it.
    dist = tmp_path / "site" / "sglang-0.5.6.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.6\n")
    absent = detect_engines(sglang_python=sys.executable)["sglang"]
    assert absent["source"] == "absent"
    assert absent["reason"] == "no sglang package"
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    found = detect_engines(sglang_python=sys.executable)["sglang"]
    assert found["versions"] == ["0.5.6"]
    assert found["source"] == "detected"
    assert "importlib.metadata.version('sglang')" in found["how"]


def test_explicit_engines_win_and_say_what_was_detected_beside_them() -> None:
    detected = {
        "vllm": {"versions": ["0.11.0"], "source": "detected", "how": "vllm --version"},
        "llamacpp": {"versions": ["b6550-3ecb2f67"], "source": "detected"},
        "sglang": {"versions": [], "source": "absent", "reason": "no sglang package"},
    }
    engines, sources = merge_engines({"vllm": ["0.30.0"]}, detected)
    assert engines == {"vllm": ["0.30.0"], "llamacpp": ["b6550-3ecb2f67"]}
    assert sources["vllm"]["source"] == "flag"
    assert sources["vllm"]["detected"]["versions"] == ["0.11.0"]
    assert sources["llamacpp"]["source"] == "detected"
    assert sources["sglang"] == detected["sglang"]


def test_the_whole_inventory_from_stand_ins(path_only: Path) -> None:
    nvidia_smi(path_only, H100_CSV.splitlines()[0] + "\n", banner=R610_BANNER)
    stand_in(path_only, "vllm", "echo 0.11.0\n")
    found = collect(explicit_engines={"sglang": ["0.5.6"]})
    assert found["schema"] == 1
    assert len(found["gpus"]) == 1
    assert found["cuda_version"] == "13.3"
    assert found["driver_version"] == "550.54.15"
    assert found["nvidia_smi"]["status"] == "ok"
    assert found["engines"] == {"sglang": ["0.5.6"], "vllm": ["0.11.0"]}
    assert found["engine_sources"]["sglang"]["source"] == "flag"
    assert found["engine_sources"]["vllm"]["source"] == "detected"
    # --no-detect-engines: only what was given
    assert collect(explicit_engines={}, detect=False)["engines"] == {}
