"""``specportal ci``: exit statuses, the verdict table, JUnit XML and Markdown from the verdict
document (issue 11's example), and a submission retried after a dropped connection against a
real portal server creating one experiment."""

from __future__ import annotations

import copy
import json
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from specportal.cli import ci_reports as reports

EXAMPLE = Path(__file__).parents[2] / "analysis" / "fixtures" / "verdict-example.json"


def _verdict(states: dict[str, str | None]) -> dict[str, Any]:
    verdict: dict[str, Any] = json.loads(EXAMPLE.read_text())
    for candidate in verdict["candidates"]:
        candidate["state"] = states.get(candidate["arm"], candidate["state"])
    return verdict


@pytest.mark.parametrize(
    ("states", "code", "reason"),
    [
        ({"ngram": "KEEP", "eagle3": "KEEP"}, 0, "KEEP: eagle3, ngram"),
        ({"ngram": "DROP", "eagle3": "KEEP"}, 1, "DROP: ngram"),
        ({"ngram": "INCONCLUSIVE", "eagle3": "KEEP"}, 3, "INCONCLUSIVE: ngram (more runs needed)"),
        ({"ngram": "INCONCLUSIVE", "eagle3": "DROP"}, 1, "DROP: eagle3"),
        ({"ngram": None, "eagle3": None}, 4, "no candidate has an objective in scope"),
    ],
)
def test_exit_status_follows_compare(states: dict[str, str | None], code: int, reason: str) -> None:
    assert reports.exit_status(_verdict(states)) == (code, reason) or (
        reports.exit_status(_verdict(states))[0] == code
        and reason in reports.exit_status(_verdict(states))[1]
    )


def test_junit_has_one_case_per_candidate_and_cell() -> None:
    verdict = json.loads(EXAMPLE.read_text())
    xml = reports.junit_xml(verdict, experiment_url="http://portal/experiments/1/")
    root = ET.fromstring(xml)
    assert root.tag == "testsuites"
    [suite] = root.findall("testsuite")
    cases = suite.findall("testcase")
    expected = [(c["workload"], c["load"], e) for c in verdict["cells"] for e in c["candidates"]]
    assert len(cases) == len(expected) == int(suite.get("tests", "0"))
    drops = [e for _, _, e in expected if e["state"] == "DROP"]
    unsure = [e for _, _, e in expected if e["state"] != "DROP" and e["state"] != "KEEP"]
    assert int(suite.get("failures", "0")) == len(drops) == len(suite.findall("testcase/failure"))
    assert int(suite.get("skipped", "0")) == len(unsure) == len(suite.findall("testcase/skipped"))
    for case, (workload, load, entry) in zip(cases, expected, strict=True):
        assert case.get("name") == f"{entry['arm']} {workload}/{load}"
        assert case.get("classname") == f"specportal.{entry['arm']}"
        failure, skipped = case.find("failure"), case.find("skipped")
        if entry["state"] == "DROP":
            assert failure is not None
            assert failure.text == "\n".join(entry["reasons"])
        elif entry["state"] == "INCONCLUSIVE":
            assert skipped is not None
            assert (skipped.get("message") or "").startswith("INCONCLUSIVE: a new experiment ")
        else:
            assert failure is None
            assert skipped is None
    # every case's reasons in the suite's output, a case holding its outcome only
    out = suite.findtext("system-out") or ""
    for _, _, entry in expected:
        assert all(reason in out for reason in entry["reasons"])
    assert suite.find("properties/property[@name='experiment_url']") is not None


SCHEMAS = Path(__file__).parent / "fixtures" / "junit"


@pytest.mark.parametrize("schema", ["JUnit.xsd", "jenkins-xunit-junit-10.xsd"])
def test_junit_is_valid_for_the_schemas_ci_servers_read(schema: str) -> None:
    import xmlschema

    xsd = xmlschema.XMLSchema(SCHEMAS / schema)
    verdict = json.loads(EXAMPLE.read_text())
    for url in ("http://portal.example:8000/experiments/7/", None):
        xml = reports.junit_xml(verdict, experiment_url=url)
        assert list(xsd.iter_errors(xml)) == []
    # every state, out of scope and a verdict without a time included
    for state in ("KEEP", "DROP", "INCONCLUSIVE", None):
        changed = copy.deepcopy(verdict)
        changed["computed_at"] = None
        for cell in changed["cells"]:
            for entry in cell["candidates"]:
                entry["state"] = state
        assert list(xsd.iter_errors(reports.junit_xml(changed))) == []
    # The schemas bite: the aggregate's skipped count, which neither allows, is refused.
    refused = reports.junit_xml(verdict).replace("<testsuites>", '<testsuites skipped="2">')
    assert not xsd.is_valid(refused)


def test_the_strict_schema_refuses_what_case_level_output_would_be() -> None:
    import xmlschema

    xsd = xmlschema.XMLSchema(SCHEMAS / "JUnit.xsd")
    xml = reports.junit_xml(json.loads(EXAMPLE.read_text()))
    inside = xml.replace('time="0" />', 'time="0"><system-out>r</system-out></testcase>', 1)
    assert inside != xml
    assert not xsd.is_valid(inside)
    zoned = re.sub(r'timestamp="([^"]+)"', r'timestamp="\1Z"', xml)
    assert not xsd.is_valid(zoned)


def test_markdown_is_a_pull_request_comment() -> None:
    verdict = json.loads(EXAMPLE.read_text())
    text = reports.markdown(verdict, portal_url="http://portal", experiment_id=1,
                            context={"pull_request": "812", "commit": "9f1c2ab"})  # fmt: skip
    assert text.startswith("### SpecPortal: ")
    assert "| candidate | cell | state | why |" in text
    assert "[chat/c1](http://portal/experiments/1/cells/chat/c1/)" in text
    assert "pull_request `812`" in text
    assert verdict["emulated_label"] in text
    assert "<details><summary>Reasons, rule by rule</summary>" in text


def test_the_token_is_never_a_flag(tmp_path: Path) -> None:
    document = tmp_path / "e.json"
    document.write_text("{}")
    env = {k: v for k, v in __import__("os").environ.items() if k != "SPECPORTAL_TOKEN"}
    done = subprocess.run([sys.executable, "-m", "specportal", "ci", "run", str(document),
                           "--portal", "http://127.0.0.1:9"], capture_output=True, text=True,
                          env=env)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().endswith(
        "set SPECPORTAL_TOKEN to an API token (it is never taken as a flag)"
    )
    assert "Traceback" not in done.stderr
    flag = subprocess.run([sys.executable, "-m", "specportal", "ci", "run", str(document),
                           "--portal", "http://x", "--token", "t"], capture_output=True, text=True)  # fmt: skip
    assert flag.returncode == 2


class DroppingProxy:
    """Forwards each HTTP request to the portal; for the first POST, forwards it (the portal acts
    on it) and then drops the client's connection without the answer."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.dropped = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _read_request(self, conn: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            body += conn.recv(65536)
        head = b"\r\n".join(line for line in head.split(b"\r\n")
                            if not line.lower().startswith(b"connection:"))  # fmt: skip
        return head + b"\r\nConnection: close\r\n\r\n" + body

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            request = self._read_request(conn)
            if not request:
                return
            with socket.create_connection(("127.0.0.1", self.target)) as upstream:
                upstream.sendall(request)
                answer = b""
                while chunk := upstream.recv(65536):
                    answer += chunk
            if request.startswith(b"POST /api/v1/experiments/ ") and self.dropped == 0:
                self.dropped += 1
                return  # the portal created it; the client never hears so
            conn.sendall(answer)

    def close(self) -> None:
        self.sock.close()


@pytest.mark.integration
def test_a_dropped_submission_is_retried_with_its_key_and_creates_one_experiment(
    live_server: Any, setup: Any, tmp_path: Path
) -> None:
    from accounts.services import api_token_create
    from experiments.models import Experiment
    from tests.fixtures import OBJECTIVES

    _, token = api_token_create(user=setup.experimenter, name="ci", scope="submit")
    document = {
        "name": "from CI", "mode": "import", "baseline": setup.baseline.pk,
        "candidates": [setup.ngram.pk], "workloads": [{"name": "chat"}],
        "loads": [{"name": "c1", "concurrency": 1}, {"name": "c4", "concurrency": 4}],
        "objectives": copy.deepcopy(OBJECTIVES),
        "context": {"repository": "github.com/acme/serving", "pull_request": "812"},
    }  # fmt: skip
    path = tmp_path / "experiment.json"
    path.write_text(json.dumps(document))
    port = int(live_server.url.rsplit(":", 1)[1])
    proxy = DroppingProxy(port)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "specportal", "ci", "run", str(path),
             "--portal", f"http://127.0.0.1:{proxy.port}", "--timeout", "2", "--poll", "0.5"],
            capture_output=True, text=True, timeout=120,
            env={**__import__("os").environ, "SPECPORTAL_TOKEN": token, "CI_JOB_ID": "77"},
        )  # fmt: skip
    finally:
        proxy.close()
    assert proxy.dropped == 1, done.stderr
    assert Experiment.objects.filter(name="from CI").count() == 1
    experiment = Experiment.objects.get(name="from CI")
    assert experiment.context["pull_request"] == "812"
    assert f"experiment {experiment.pk} created" in done.stdout
    # An import-mode experiment with nothing imported never finishes: the timeout decides.
    assert done.returncode == 4, done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(f"experiment {experiment.pk} cancelled")
    experiment.refresh_from_db()
    assert experiment.status == "cancelled"


def _ci_run(document: dict[str, Any], portal: str, tmp_path: Path, *extra: str,
            token: str = "t") -> subprocess.CompletedProcess[str]:  # fmt: skip
    path = tmp_path / "experiment.json"
    path.write_text(json.dumps(document))
    env = {**__import__("os").environ, "SPECPORTAL_TOKEN": token}
    return subprocess.run([sys.executable, "-m", "specportal", "ci", "run", str(path),
                           "--portal", portal, *extra], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip


def test_a_change_request_needs_one_candidate_and_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    # Nothing listens on port 9: the refusal comes before the portal is asked anything.
    done = _ci_run({"name": "two", "baseline": 1, "candidates": [2, 3]}, "http://127.0.0.1:9",
                   tmp_path, "--open-change-request", "chat-prod")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "specportal ci: error: --open-change-request needs an experiment of one candidate (this "
        "one has 2): with more, which configuration the deployment should move to is not the "
        "verdict's to say"
    )


@pytest.mark.integration
def test_an_unknown_deployment_is_refused_before_the_experiment_is_created(
    live_server: Any, setup: Any, tmp_path: Path
) -> None:
    from accounts.services import api_token_create
    from experiments.models import Experiment

    _, token = api_token_create(user=setup.experimenter, name="ci", scope="submit")
    document = {"name": "to nowhere", "baseline": setup.baseline.pk,
                "candidates": [setup.ngram.pk]}  # fmt: skip
    done = _ci_run(document, live_server.url, tmp_path, "--open-change-request", "nowhere",
                   token=token)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"specportal ci: error: --open-change-request: no deployment named 'nowhere' on "
        f"{live_server.url}"
    )
    assert not Experiment.objects.filter(name="to nowhere").exists()


@pytest.mark.integration
def test_a_read_scoped_token_reads_but_cannot_submit_or_cancel(
    live_server: Any, setup: Any, tmp_path: Path
) -> None:
    from accounts.services import api_token_create
    from experiments.models import Experiment
    from tests.fixtures import OBJECTIVES, api_as

    _, read = api_token_create(user=setup.experimenter, name="dashboard", scope="read")
    document = {"name": "read only", "mode": "import", "baseline": setup.baseline.pk,
                "candidates": [setup.ngram.pk], "workloads": [{"name": "chat"}],
                "loads": [{"name": "c1", "concurrency": 1}],
                "objectives": copy.deepcopy(OBJECTIVES)}  # fmt: skip
    refused = _ci_run(document, live_server.url, tmp_path, token=read)
    assert refused.returncode == 2, refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert line == (
        "specportal ci: error: SPECPORTAL_TOKEN: token lacks the submit scope (HTTP 403: This "
        "token's scope is 'read': POST here needs a token with scope 'submit' or 'full'. Create "
        "one on your account page (/account/).)"
    )
    assert not Experiment.objects.filter(name="read only").exists()
    # What it may do, it does: the status of an experiment someone else submitted.
    created = api_as(setup.experimenter).post("/api/v1/experiments/", document, format="json")
    assert created.status_code == 201, created.json()
    experiment_id = created.json()["id"]
    env = {**__import__("os").environ, "SPECPORTAL_TOKEN": read}
    ci = [sys.executable, "-m", "specportal", "ci"]
    status = subprocess.run([*ci, "status", str(experiment_id), "--portal", live_server.url],
                            capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert status.stdout == f"experiment {experiment_id} 'read only': draft, 0/0 runs finished\n"
    cancel = subprocess.run([*ci, "cancel", str(experiment_id), "--portal", live_server.url],
                            capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert cancel.returncode == 2
    assert cancel.stderr.startswith(
        "specportal ci: error: SPECPORTAL_TOKEN: token lacks the submit"
    )
    assert len(cancel.stderr.strip().splitlines()) == 1
    assert Experiment.objects.get(pk=experiment_id).status == "draft"


@pytest.mark.integration
@pytest.mark.parametrize("keep_running", [False, True])
def test_sigterm_from_a_cancelled_ci_job_cancels_the_experiment_unless_keep_running(
    live_server: Any, setup: Any, tmp_path: Path, keep_running: bool
) -> None:
    import os
    import signal
    import time

    from accounts.services import api_token_create
    from experiments.models import Experiment
    from tests.fixtures import OBJECTIVES
    from tests.harness import wait_for

    _, token = api_token_create(user=setup.experimenter, name="ci", scope="submit")
    # An import-mode experiment waits for uploads that never come: only the signal ends it.
    document = {"name": "cancelled job", "mode": "import", "baseline": setup.baseline.pk,
                "candidates": [setup.ngram.pk], "workloads": [{"name": "chat"}],
                "loads": [{"name": "c1", "concurrency": 1}],
                "objectives": copy.deepcopy(OBJECTIVES)}  # fmt: skip
    path = tmp_path / "experiment.json"
    path.write_text(json.dumps(document))
    job = subprocess.Popen(
        [sys.executable, "-m", "specportal", "ci", "run", str(path), "--portal", live_server.url,
         "--poll", "0.3", *(["--keep-running"] if keep_running else [])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "SPECPORTAL_TOKEN": token},
    )  # fmt: skip
    try:
        experiment = wait_for(
            lambda: Experiment.objects.filter(name="cancelled job", status="running").first(),
            60, "the job to start its experiment",
        )  # fmt: skip
        time.sleep(0.5)
        job.send_signal(signal.SIGTERM)
        stdout, stderr = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 4, stderr
    [line] = stderr.strip().splitlines()
    experiment.refresh_from_db()
    if keep_running:
        assert line == (
            f"specportal ci: error: SIGTERM: experiment {experiment.pk} left running "
            "(--keep-running)"
        )
        assert experiment.status == "running"
    else:
        assert line == f"specportal ci: error: SIGTERM: experiment {experiment.pk} cancelled"
        assert experiment.status == "cancelled"
    assert f"experiment {experiment.pk} created" in stdout


@pytest.mark.integration
def test_a_keep_whose_change_request_the_portal_refuses_says_why_on_one_line(
    live_server: Any, setup: Any
) -> None:
    """The step after a KEEP, on its own (the end-to-end test walks the KEEP that opens one)."""
    from accounts import roles
    from accounts.services import api_token_create
    from approvals.models import ChangeRequest
    from approvals.services import deployment_create
    from specportal.cli import CliError
    from specportal.cli.ci import _open_change_request
    from specportal.cli.portal import Portal
    from tests.approvals.helpers import person
    from tests.fixtures import LOADS, OBJECTIVES, WORKLOADS, api_as

    # The deployment runs the candidate already: there is nothing to change to.
    deployment_create(user=person("mia", roles.MANAGER), name="ngram-prod", owner_team="serving",
                      configuration=setup.ngram, workloads=copy.deepcopy(WORKLOADS),
                      loads=copy.deepcopy(LOADS), objectives=copy.deepcopy(OBJECTIVES))  # fmt: skip
    document = {"name": "kept", "mode": "import", "baseline": setup.baseline.pk,
                "candidates": [setup.ngram.pk], "workloads": copy.deepcopy(WORKLOADS),
                "loads": copy.deepcopy(LOADS), "objectives": copy.deepcopy(OBJECTIVES)}  # fmt: skip
    created = api_as(setup.experimenter).post("/api/v1/experiments/", document, format="json")
    assert created.status_code == 201, created.json()
    _, token = api_token_create(user=setup.experimenter, name="ci", scope="submit")
    portal = Portal(live_server.url, token, attempts=1)
    try:
        with pytest.raises(CliError) as refused:
            _open_change_request(portal, "ngram-prod", created.json(), b"{}")
    finally:
        portal.close()
    assert refused.value.exit_code == 2
    assert str(refused.value) == (
        "KEEP, but the change request to ngram-prod was not opened: HTTP 400: The change request "
        "is not valid. (to_configuration: ngram-prod runs this configuration already)"
    )
    assert not ChangeRequest.objects.exists()


class ThrottlingServer:
    """A loopback HTTP server that answers its first request 429 (Retry-After: ``wait``), then
    200 — as the portal does for an address throttled after wrong tokens."""

    def __init__(self, wait: str) -> None:
        import http.server

        self.requests: list[tuple[str, str | None]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests.append((self.path, self.headers.get("Idempotency-Key")))
                throttled = len(outer.requests) == 1
                body = (
                    b'{"error": {"code": "throttled", "message": "slow down"}}'
                    if throttled
                    else b'{"id": 7}'
                )
                self.send_response(429 if throttled else 201)
                if throttled:
                    self.send_header("Retry-After", wait)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_throttled_request_waits_its_retry_after_and_keeps_its_key() -> None:
    import time

    from specportal.cli.portal import Portal, PortalError

    server = ThrottlingServer("1")
    try:
        portal = Portal(server.url, "t", attempts=3)
        started = time.monotonic()
        assert portal.request("POST", "/api/v1/experiments/", json={"name": "x"}) == {"id": 7}
        assert time.monotonic() - started >= 1.0  # waited as told
        [(_, first), (_, second)] = server.requests
        assert first == second  # the same write, not a second one
    finally:
        server.close()
    # a Retry-After longer than a CI job should wait is reported as the 429 it is
    server = ThrottlingServer("3600")
    try:
        with pytest.raises(PortalError) as raised:
            Portal(server.url, "t", attempts=3).request("POST", "/api/v1/experiments/", json={})
        assert raised.value.status == 429
        assert len(server.requests) == 1
    finally:
        server.close()
