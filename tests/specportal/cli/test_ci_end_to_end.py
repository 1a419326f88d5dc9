"""The issue's "Done when": ``specportal ci run`` as a CI job runs it (a subprocess, a
submit-scoped token in ``SPECPORTAL_TOKEN``) against a real portal — pytest's live server on PostgreSQL, a real portal
Celery worker on Redis, agents of two emulated hosts — and gates on the verdict the worker stored.

Four jobs at once, as four pipelines would:

- KEEP (exit 0): EAGLE-3 (a head: draft cost 0.05, chat acceptance 0.74) against the baseline at
  concurrency 1 roughly doubles output throughput; the objective asks for ≥ 1.05×.
- DROP (exit 1): a draft model as large as the target (draft cost 1, so four draft passes make a
  step cost five) cuts output throughput well below 1.05×.
- INCONCLUSIVE (exit 3): the same EAGLE-3 candidate on two repetitions, where the exact one-sided
  Mann–Whitney test cannot go below 1/C(4,2) = 0.17 > 0.05.
- undecided (exit 4): a job whose ``--timeout`` runs out before its runs get a host.

One objective in one cell makes the family one test, so four repetitions per arm decide
(1/C(8,4) = 0.014 ≤ 0.05; ``analysis.verdict.family_plan`` says three is the floor). The KEEP job
submits through a proxy that drops the answer to its first ``POST /api/v1/experiments/``: the
command retries with the same ``Idempotency-Key`` and the portal creates one experiment.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
import xmlschema
from django.test import Client

from accounts import roles
from approvals.models import ChangeRequest
from approvals.services import deployment_create
from experiments.models import Experiment
from tests.approvals.helpers import person
from tests.fixtures import BASELINE, EAGLE, REVISION, Setup
from tests.harness import Process, process_logs, start_agent, start_portal_worker
from tests.specportal.cli.test_ci import SCHEMAS, DroppingProxy
from verdicts.selectors import verdict_document

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# A draft model the size of its target: every draft pass costs a full target step.
DRAFT_AS_LARGE = {
    **BASELINE,
    "proposal": {
        "method": "draft_model",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "revision": REVISION,
        "num_speculative_tokens": 4,
    },
}
WORKLOAD = {"name": "chat", "dataset_name": "bundled", "category": "chat", "output_len": 32,
            "ignore_eos": True}  # fmt: skip
THROUGHPUT = {
    "schema": 1,
    "objectives": [
        {"metric": "output_throughput", "statistic": "value", "op": ">=", "threshold": 1.05,
         "scope": "relative"},
    ],
}  # fmt: skip
LOADS = [{"name": "c1", "concurrency": 1, "requests": 3}]
CONTEXT = {"repository": "github.com/acme/serving", "commit": "9f1c2ab", "branch": "eagle3",
           "pull_request": "812", "job_url": "https://ci.example/jobs/77"}  # fmt: skip


def _document(name: str, candidate: dict[str, Any], label: str, repetitions: int) -> dict[str, Any]:
    return {
        "name": name,
        "baseline": {"document": copy.deepcopy(BASELINE), "name": "baseline"},
        "candidates": [{"document": copy.deepcopy(candidate), "name": label}],
        "labels": ["baseline", label],
        "workloads": [WORKLOAD],
        "loads": copy.deepcopy(LOADS),
        "objectives": copy.deepcopy(THROUGHPUT),
        "hosts": ["gpu-a", "gpu-b"],
        "repetitions": repetitions,
        "context": {**CONTEXT, "job_url": f"https://ci.example/jobs/{name}"},
        "lint_override_reason": "CI end-to-end test: a deliberately small experiment",
    }


class Job:
    """One CI job: ``specportal ci run`` with its own reports and step summary."""

    def __init__(self, name: str, document: dict[str, Any], portal: str, token: str,
                 out: Path, *extra: str) -> None:  # fmt: skip
        self.name = name
        self.dir = out / name
        self.dir.mkdir(parents=True)
        self.junit, self.markdown = self.dir / "verdict.xml", self.dir / "verdict.md"
        self.summary = self.dir / "step-summary.md"
        self.summary.write_text("earlier step\n")
        path = self.dir / "experiment.json"
        path.write_text(json.dumps(document))
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYTEST", "DATABASE_URL", "SPECPORTAL_"))}  # fmt: skip
        env.update(SPECPORTAL_TOKEN=token, CI_JOB_ID=f"job-{name}",
                   GITHUB_STEP_SUMMARY=str(self.summary), PYTHONUNBUFFERED="1")  # fmt: skip
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "specportal", "ci", "run", str(path), "--portal", portal,
             "--poll", "0.5", "--junit", str(self.junit), "--markdown", str(self.markdown),
             *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        self.stdout = self.stderr = ""
        self.code: int | None = None

    def wait(self, timeout: float) -> int:
        self.stdout, self.stderr = self.popen.communicate(timeout=timeout)
        self.code = self.popen.returncode
        return self.code

    def reason(self) -> str:
        return self.stderr.strip().splitlines()[-1]

    def experiment(self) -> Experiment:
        return Experiment.objects.get(name=self.name)


def test_ci_run_gates_on_keep_drop_inconclusive_and_undecided(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    from accounts.services import api_token_create

    processes.append(start_portal_worker(broker, tmp_path))
    for host in ("gpu-a", "gpu-b"):
        processes.append(start_agent(host, setup.tokens[host], live_server.url, broker, tmp_path))
    # What a team gives its pipeline: a token that may submit and start, never decide.
    _, token = api_token_create(user=setup.experimenter, name="ci", scope="submit")
    # A demo deployment (the hosts are emulated) on the baseline, measured as the jobs measure.
    deployment_create(
        user=person("mia", roles.MANAGER), name="chat-demo", owner_team="serving",
        configuration=setup.baseline, workloads=[copy.deepcopy(WORKLOAD)], loads=copy.deepcopy(LOADS),
        objectives=copy.deepcopy(THROUGHPUT), is_demo=True,
    )  # fmt: skip
    proxy = DroppingProxy(int(live_server.url.rsplit(":", 1)[1]))
    through_proxy = f"http://127.0.0.1:{proxy.port}"
    try:
        jobs = {
            "keep": Job("keep", _document("keep", EAGLE, "eagle3", 4), through_proxy, token,
                        tmp_path, "--open-change-request", "chat-demo"),
            "drop": Job("drop", _document("drop", DRAFT_AS_LARGE, "draft", 4), live_server.url,
                        token, tmp_path, "--open-change-request", "chat-demo"),
            "inconclusive": Job("inconclusive", _document("inconclusive", EAGLE, "eagle3", 2),
                                live_server.url, token, tmp_path),
        }  # fmt: skip
        # Submitted last, its runs queue behind the others' on both hosts: its timeout runs out.
        jobs["undecided"] = Job("undecided", _document("undecided", EAGLE, "eagle3", 3),
                                live_server.url, token, tmp_path, "--timeout", "4")  # fmt: skip
        codes = {name: job.wait(240) for name, job in jobs.items()}
    finally:
        proxy.close()
    logs = process_logs(processes)
    detail = "\n".join(f"--- {n}: {j.code}\n{j.stdout}\n{j.stderr}" for n, j in jobs.items())
    assert codes == {"keep": 0, "drop": 1, "inconclusive": 3, "undecided": 4}, detail + logs()

    # The dropped answer was retried with its key: one experiment, as for every other job.
    assert proxy.dropped == 1
    for name in jobs:
        assert Experiment.objects.filter(name=name).count() == 1, name
    keep, drop, unsure, late = (jobs[n] for n in ("keep", "drop", "inconclusive", "undecided"))
    assert keep.experiment().context["pull_request"] == "812"

    # Each reason on one line, as the verdict the portal worker stored says; no traceback.
    assert keep.reason() == "KEEP: eagle3"
    assert drop.reason() == "DROP: draft"
    assert unsure.reason() == "INCONCLUSIVE: eagle3 (more runs needed)"
    late_id = late.experiment().pk
    assert late.reason() == (
        f"specportal ci: error: timed out after 4 s; experiment {late_id} cancelled"
    )
    assert late.experiment().status == Experiment.Status.CANCELLED
    assert not late.junit.exists()
    assert not late.markdown.exists()
    assert late.summary.read_text() == "earlier step\n"
    for job in jobs.values():
        assert "Traceback" not in job.stderr, job.stderr

    verdicts = {}
    pages = Client()
    pages.force_login(setup.experimenter)
    for job, state in ((keep, "KEEP"), (drop, "DROP"), (unsure, "INCONCLUSIVE")):
        experiment = job.experiment()
        assert experiment.status == Experiment.Status.DONE
        verdict = verdict_document(experiment_id=experiment.pk)
        assert verdict is not None
        verdicts[job.name] = verdict
        # gated on the verdict of every run, not one computed before the last run ended
        runs = set(experiment.runs.filter(status="done").values_list("pk", flat=True))
        assert len(runs) == 2 * experiment.repetitions
        assert set(verdict["inputs"]) == runs
        [candidate] = verdict["candidates"]
        assert candidate["state"] == state, json.dumps(verdict["cells"], indent=1)
        [cell] = verdict["cells"]
        [entry] = cell["candidates"]
        assert entry["state"] == state
        portal = through_proxy if job is keep else live_server.url
        assert f"experiment {experiment.pk} created: {portal}/experiments/{experiment.pk}/" in (
            job.stdout
        )
        assert f"overall: {entry['arm']}: {state}" in job.stdout
        assert job.stdout.count(" repetition ") == len(runs)  # one line per finished run
        _check_junit(job, entry, state)
        _check_markdown(job, experiment.pk, entry, state, live_server.url, through_proxy)
        # the pages the comment links to exist
        for page in (
            f"/experiments/{experiment.pk}/",
            f"/experiments/{experiment.pk}/cells/chat/c1/",
        ):
            assert pages.get(page).status_code == 200, page

    # After the KEEP (never after the DROP) a change request moves the deployment to EAGLE-3,
    # the experiment its evidence; the evidence rules pass on a demo deployment.
    [change] = ChangeRequest.objects.all()
    experiment = keep.experiment()
    assert change.deployment.name == "chat-demo"
    assert change.state == "open"
    assert change.author == setup.experimenter
    assert change.to_configuration == experiment.arms.get(label="eagle3").configuration
    assert list(change.evidence.all()) == [experiment]
    assert change.reason == (
        f"eagle3 keeps every objective in experiment {experiment.pk} (pull_request 812, commit "
        f"9f1c2ab, job_url https://ci.example/jobs/keep)"
    )
    url = f"{through_proxy}/change-requests/{change.pk}/"
    assert f"change request {change.pk} open on chat-demo: {url} (evidence rules pass)" in (
        keep.stdout
    )
    assert (
        f"Change request [{change.pk}]({url}) open on deployment `chat-demo`: the evidence "
        "rules pass." in keep.markdown.read_text()
    )
    assert "change request" not in drop.stdout

    # The figures behind the gates: EAGLE-3 well above 1.05×, the big draft well below.
    ratio = {
        n: v["cells"][0]["candidates"][0]["objectives"][0]["ratio"] for n, v in verdicts.items()
    }
    print(f"output throughput, candidate / baseline: {ratio}")  # shown with -rP or on failure
    assert ratio["keep"] > 1.3, ratio
    assert ratio["inconclusive"] > 1.3, ratio
    assert ratio["drop"] < 0.9, ratio
    # two repetitions cannot decide whatever the effect; the floor of this family is three
    assert verdicts["inconclusive"]["cells"][0]["candidates"][0]["runs_needed"] == 3


def _check_junit(job: Job, entry: dict[str, Any], state: str) -> None:
    xml = job.junit.read_text()
    for schema in ("JUnit.xsd", "jenkins-xunit-junit-10.xsd"):
        assert list(xmlschema.XMLSchema(SCHEMAS / schema).iter_errors(xml)) == [], schema
    [root] = ET.fromstring(xml).iter("testsuite")
    [case] = root.iter("testcase")
    assert case.get("name") == f"{entry['arm']} chat/c1"
    failure, skipped = case.find("failure"), case.find("skipped")
    if state == "KEEP":
        assert failure is None
        assert skipped is None
        assert root.get("failures") == "0"
        assert root.get("skipped") == "0"
    elif state == "DROP":
        assert failure is not None
        assert skipped is None
        assert failure.get("message") == entry["reasons"][0]
        assert failure.text == "\n".join(entry["reasons"])
        assert root.get("failures") == "1"
    else:
        assert skipped is not None
        assert failure is None
        assert skipped.get("message") == (
            f"INCONCLUSIVE: a new experiment of {entry['runs_needed']} repetitions per arm "
            "would likely decide"
        )
        assert skipped.text == "\n".join(entry["reasons"])
        assert root.get("skipped") == "1"


def _check_markdown(job: Job, experiment_id: int, entry: dict[str, Any], state: str,
                    portal: str, proxy: str) -> None:  # fmt: skip
    text = job.markdown.read_text()
    base = proxy if job.name == "keep" else portal
    link = f"{base}/experiments/{experiment_id}/"
    assert text.startswith(f"### SpecPortal: {job.reason()}\n")
    assert f"Experiment [{experiment_id}]({link})" in text
    assert f"| {entry['arm']} | [chat/c1]({link}cells/chat/c1/) | **{state}** |" in text
    assert "pull_request `812`" in text
    assert "commit `9f1c2ab`" in text
    # the same comment appended to the step summary, after what earlier steps wrote
    assert job.summary.read_text() == "earlier step\n" + text
