"""The real llama-server's self-report read by the agent's table, and a window it puts in force
that is not the one the configuration sets ("read the init line first").

The pinned build prints the draft window (``spec common_specu: - n_max=8, n_min=0,
p_min=0.750000``) at trace level only, so these servers run with ``-lv 4``; ``/props``, ``/slots``
and the ``loading draft model`` line are there at any verbosity. A window set through the
environment (``LLAMA_ARG_SPEC_DRAFT_N_MAX``) is a setting the configuration's proposal does not
show: the engine's default (3) is what the configuration asks for, the init line says 4.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from accounts import roles
from accounts.services import user_create_or_update
from configurations.services import configuration_create
from runs.models import Run
from specportal.agent.selfreport import collect
from specportal.engines.reports import parse_log
from specportal.engines.selfcheck import defining
from specportal.realengine.server import free_port, serve
from tests.fixtures import OBJECTIVES, api_as, register_host
from tests.harness import (
    Process,
    process_logs,
    start_and_wait,
    start_portal_worker,
)
from tests.specportal.realengine.test_experiment_real import VERSION, _agent, _document

pytestmark = [pytest.mark.real_engine]

TRACE = ("-lv", "4")


def _argv(binary: Path, port: int, document: dict[str, Any]) -> list[str]:
    from specportal.engines.launch import build_launch_command

    command = build_launch_command(document, host="127.0.0.1", port=port)
    return [str(binary), *command.argv[1:]]


def _speculating(models: Path) -> dict[str, Any]:
    document = _document(models, "pair/draft-copy.gguf")
    document["proposal"]["spec_draft_p_min"] = 0.75
    document["target"]["extra_args"] = ["--no-webui", *TRACE]
    return document


def test_the_real_server_agrees_with_its_own_configuration_on_every_reported_setting(
    llama_server: Path, models: Path
) -> None:
    document = _speculating(models)
    port = free_port()
    with serve(_argv(llama_server, port, document), port=port) as server:
        log = server.log()
        seen = collect(document, server.base_url, log_text=log)
    # The lines as the real binary prints them.
    facts = parse_log("llamacpp", log)
    assert facts["llamacpp_speculative_window"]["values"] == {
        "n_max": 8,
        "n_min": 0,
        "p_min": 0.75,
    }
    assert (
        "spec common_specu: - n_max=8, n_min=0, p_min=0.750000"
        in (facts["llamacpp_speculative_window"]["line"])
    )
    assert facts["llamacpp_speculative_types"]["values"]["types"] == ["draft-simple"]
    assert (
        facts["llamacpp_draft_model"]["values"]["path"] == document["proposal"]["spec_draft_model"]
    )
    assert seen.mismatches == [], seen.mismatches
    checked = {(c["path"], c["source"].split(" ")[0]) for c in seen.checks}
    assert {
        ("/engine_build/version", "GET"),
        ("/target/model", "GET"),
        ("/target/ctx_size", "GET"),
        ("/target/parallel", "GET"),
        ("/proposal/spec_type", "GET"),
        ("/proposal/spec_type", "log:"),
        ("/proposal/spec_draft_model", "log:"),
        ("/proposal/spec_draft_n_max", "log:"),
        ("/proposal/spec_draft_n_min", "log:"),
        ("/proposal/spec_draft_p_min", "log:"),
    } <= checked


def test_a_window_put_in_force_by_the_environment_is_flagged(
    llama_server: Path, models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = _speculating(models)
    del document["proposal"]["spec_draft_n_max"]
    monkeypatch.setenv("LLAMA_ARG_SPEC_DRAFT_N_MAX", "4")
    port = free_port()
    with serve(_argv(llama_server, port, document), port=port) as server:
        seen = collect(document, server.base_url, log_text=server.log())
    assert seen.mismatches == [
        {
            "path": "/proposal/spec_draft_n_max",
            "configured": 3,
            "reported": 4,
            "source": "log: - n_max=%d, n_min=%d, p_min=%.2f (n_max)",
            "default": True,
        }
    ]
    assert defining("llamacpp", seen.mismatches) == seen.mismatches


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_managed_run_records_and_flags_the_window_the_real_engine_put_in_force(
    db: None,
    live_server: Any,
    broker: str,
    processes: list[Process],
    tmp_path: Path,
    llama_server: Path,
    models: Path,
) -> None:
    # given arms whose runtime sets LLAMA_ARG_SPEC_DRAFT_N_MAX=4 while the candidate's proposal
    # leaves the window at the engine's default
    experimenter = user_create_or_update(
        username="sam", password=None, role_names=[roles.EXPERIMENTER]
    )
    env = {"env": {"LLAMA_ARG_SPEC_DRAFT_N_MAX": "4"}}
    baseline = _document(models, None)
    candidate = _speculating(models)
    del candidate["proposal"]["spec_draft_n_max"]
    baseline["target"]["extra_args"] = list(candidate["target"]["extra_args"])
    for document in (baseline, candidate):
        document["runtime"] = copy.deepcopy(env)
    configs = [
        configuration_create(document=baseline, name="plain")[0],
        configuration_create(document=candidate, name="env window")[0],
    ]
    host, token = register_host(
        "cpu-window", emulated=False, gpu_model="none (CPU)", engines={"llamacpp": [VERSION]}
    )
    processes.append(start_portal_worker(broker, tmp_path))
    processes.append(_agent(host.name, token, live_server.url, broker, llama_server, tmp_path))
    api = api_as(experimenter)
    created = api.post(
        "/api/v1/experiments/",
        {
            "name": "window in force",
            "baseline": configs[0].pk,
            "candidates": [configs[1].pk],
            "labels": ["plain", "env-window"],
            "workloads": [{"name": "chat", "dataset_name": "bundled", "category": "chat",
                           "output_len": 16, "ignore_eos": True}],
            "loads": [{"name": "c1", "concurrency": 1, "requests": 2}],
            "objectives": copy.deepcopy(OBJECTIVES),
            "hosts": [host.name],
            "repetitions": 1,
        },
        format="json",
    )  # fmt: skip
    assert created.status_code == 201, created.json()
    experiment_id = int(created.json()["id"])
    start_and_wait(api, experiment_id, processes, 240)
    runs = {r.arm.label: r for r in Run.objects.filter(experiment_id=experiment_id)}
    # then a managed host measures anyway (the engine was started from the configuration) and
    # the run records what the engine said and flags the window
    assert {r.status for r in runs.values()} == {Run.Status.DONE}, process_logs(processes)()
    assert runs["plain"].mismatches == []
    assert runs["env-window"].mismatches == [
        {
            "path": "/proposal/spec_draft_n_max",
            "configured": 3,
            "reported": 4,
            "source": "log: - n_max=%d, n_min=%d, p_min=%.2f (n_max)",
            "default": True,
        }
    ]
    window = runs["env-window"].engine_report["log"]["llamacpp_speculative_window"]
    assert window["values"]["n_max"] == 4
    assert "/proposal/spec_draft_p_min" in {c["path"] for c in runs["env-window"].engine_checked}
    assert runs["env-window"].engine_env == {"LLAMA_ARG_SPEC_DRAFT_N_MAX": "4"}
