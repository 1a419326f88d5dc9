"""Every bad input of issue 15's findings 3, 4 and 6, against the real API on PostgreSQL: each is
a 4xx in the one error shape naming the field's path, and nothing is saved."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from accounts import roles
from experiments.models import Experiment
from runs.models import Run
from tests.fixtures import LOADS, OBJECTIVES, WORKLOADS, Setup, agent_as, api_as, client_for


@dataclass
class World:
    setup: Setup
    run: Run


@pytest.fixture
def world(
    setup: Setup, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> World:
    monkeypatch.setattr("runs.dispatch.publish", lambda **_: None)
    api = api_as(setup.experimenter)
    created = api.post("/api/v1/experiments/", experiment(setup), format="json")
    assert created.status_code == 201, created.json()
    experiment_id = created.json()["id"]
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            api.post(f"/api/v1/experiments/{experiment_id}/start/", {}, format="json").status_code
            == 200
        )
    run = Run.objects.filter(experiment_id=experiment_id, status="queued", host__name="gpu-a").get()
    agent = agent_as(setup.tokens["gpu-a"])
    assert (
        agent.post(f"/api/v1/agent/runs/{run.pk}/claim", {"attempt": 1}, format="json").status_code
        == 200
    )
    run.refresh_from_db()
    return World(setup, run)


def experiment(s: Setup, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "bad inputs",
        "baseline": s.baseline.pk,
        "candidates": [s.ngram.pk],
        "labels": ["baseline", "ngram"],
        "workloads": copy.deepcopy(WORKLOADS),
        "loads": copy.deepcopy(LOADS),
        "objectives": copy.deepcopy(OBJECTIVES),
        "hosts": ["gpu-a"],
        "repetitions": 1,
    }
    body.update(changes)
    return body


Call = Callable[[World], Any]


def get(url: str, *, role: str = roles.EXPERIMENTER) -> Call:
    def call(w: World) -> Any:
        return client_for(role).get(url.format(run=w.run.pk))

    return call


def post(url: str, body: Callable[[World], Any] | str, *, agent: bool = False) -> Call:
    """``body``: the document (built for the world), or the raw text of one."""

    def call(w: World) -> Any:
        client = agent_as(w.setup.tokens["gpu-a"]) if agent else api_as(w.setup.experimenter)
        data = body if isinstance(body, str) else json.dumps(body(w))
        return client.post(url.format(run=w.run.pk), data, content_type="application/json")

    return call


def idempotent_deep(w: World) -> Any:
    return api_as(w.setup.experimenter).post(
        "/api/v1/experiments/",
        "[" * 200_000 + "]" * 200_000,
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="deep-1",
    )


def create(**changes: Any) -> Call:
    return post("/api/v1/experiments/", lambda w: experiment(w.setup, **changes))


def create_raw(replace: str, by: str) -> Call:
    def call(w: World) -> Any:
        text = json.dumps(experiment(w.setup))
        assert replace in text
        return api_as(w.setup.experimenter).post(
            "/api/v1/experiments/", text.replace(replace, by, 1), content_type="application/json"
        )

    return call


def workload(**fields: Any) -> list[dict[str, Any]]:
    return [{**WORKLOADS[0], **fields}, *copy.deepcopy(WORKLOADS[1:])]


def load(**fields: Any) -> list[dict[str, Any]]:
    return [*copy.deepcopy(LOADS[:-1]), {**LOADS[-1], **fields}]


LAST = f"loads.{len(LOADS) - 1}"
MANY_WORKLOADS = [{**WORKLOADS[0], "name": f"w{i}"} for i in range(100)]


def heartbeat(current_run: Callable[[World], Any], inventory: Any = None) -> Call:
    return post(
        "/api/v1/agent/heartbeat",
        lambda w: {"inventory": inventory or {}, "current_run": current_run(w)},
        agent=True,
    )


def progress(**fields: Any) -> Call:
    return post(
        "/api/v1/agent/runs/{run}/progress",
        lambda w: {"attempt": 1, "phase": "running", **fields},
        agent=True,
    )


def configuration(**fields: Any) -> Call:
    from tests.fixtures import EAGLE

    doc = copy.deepcopy(EAGLE)
    doc["proposal"]["num_speculative_tokens"] = 5
    return post("/api/v1/configurations/", lambda w: {"document": doc, **fields})


CASES: list[tuple[str, Call, int, str]] = [
    # finding 4: query-string filters
    ("config search NUL", get("/api/v1/configurations/?search=%00"), 400, "search"),
    ("config method NUL", get("/api/v1/configurations/?method=a%00"), 400, "method"),
    ("config label NUL", get("/api/v1/configurations/?label=k%00"), 400, "label"),
    ("config offset 2**63", get(f"/api/v1/configurations/?offset={2**63}"), 400, "offset"),
    ("config limit 2**64", get(f"/api/v1/configurations/?limit={2**64}"), 400, "limit"),
    ("experiments repository NUL", get("/api/v1/experiments/?repository=%00"), 400, "repository"),
    ("runs host NUL", get("/api/v1/runs/?host=%00"), 400, "host"),
    ("runs workload NUL", get("/api/v1/runs/?workload=a%00"), 400, "workload"),
    ("runs experiment 2**63", get(f"/api/v1/runs/?experiment={2**63}"), 400, "experiment"),
    ("runs repetition 2**31", get(f"/api/v1/runs/?repetition={2**31}"), 400, "repetition"),
    ("audit actor NUL", get("/api/v1/audit/events/?actor=%00", role=roles.MANAGER), 400, "actor"),
    ("change requests author NUL", get("/api/v1/change-requests/?author=%00"), 400, "author"),
    ("requests after 2**63", get(f"/api/v1/runs/{{run}}/requests/?after={2**63}"), 400, "after"),
    # finding 4: JSON bodies
    ("config name NUL", configuration(name="a\x00b"), 400, "name"),
    ("config label value NUL", configuration(labels={"team": "a\x00"}), 400, "labels.team"),
    (
        "config name surrogate",
        post("/api/v1/configurations/", '{"document": {}, "name": "\\ud800"}'),
        400,
        "name",
    ),
    ("experiment context NUL", create(context={"repository": "a\x00"}), 400, "context.repository"),
    ("experiment description NUL", create(description="x\x00"), 400, "description"),
    ("experiment name surrogate", create_raw('"bad inputs"', '"bad \\udfff"'), 400, "name"),
    (
        "experiment 1e400",
        create_raw('"repetitions": 1', '"repetitions": 1e400'),
        400,
        "repetitions",
    ),
    ("experiment NaN", create_raw('"requests": 4', '"requests": NaN'), 400, "loads.0.requests"),
    (
        "experiment Infinity",
        create_raw('"requests": 4', '"requests": -Infinity'),
        400,
        "loads.0.requests",
    ),
    (
        "experiment duplicate key",
        create_raw('"repetitions": 1', '"repetitions": 1, "repetitions": 2'),
        400,
        "repetitions",
    ),
    # the body is depth 1, context 2, context.0 3...: context + 63 × ".0" is depth 65
    (
        "experiment too deep",
        post("/api/v1/experiments/", '{"context": ' + "[" * 100 + "]" * 100 + "}"),
        400,
        "context" + ".0" * 63,
    ),
    ("recursion-deep body", post("/api/v1/experiments/", "[" * 200_000 + "]" * 200_000), 400, ""),
    # the Idempotency-Key fingerprint reads the body before the view does
    ("recursion-deep body, idempotent", idempotent_deep, 400, ""),
    ("experiment warmup 2**31", create(warmup_requests=2**31), 400, "warmup_requests"),
    ("experiment max_failed_runs 2**31", create(max_failed_runs=2**31), 400, "max_failed_runs"),
    (
        "experiment output_len abc",
        create(workloads=workload(output_len="abc")),
        400,
        "workloads.0.output_len",
    ),
    (
        "heartbeat run id string",
        heartbeat(lambda w: {"id": "abc", "attempt": 1}),
        400,
        "current_run.id",
    ),
    (
        "heartbeat run id 2**63",
        heartbeat(lambda w: {"id": 2**63, "attempt": 1}),
        400,
        "current_run.id",
    ),
    (
        "heartbeat attempt string",
        heartbeat(lambda w: {"id": w.run.pk, "attempt": "x"}),
        400,
        "current_run.attempt",
    ),
    (
        "heartbeat inventory NUL",
        heartbeat(lambda w: None, inventory={"gpu": "a\x00"}),
        400,
        "inventory.gpu",
    ),
    (
        "claim attempt 2**31",
        post("/api/v1/agent/runs/{run}/claim", lambda w: {"attempt": 2**31}, agent=True),
        400,
        "attempt",
    ),
    # finding 6: experiments and progress
    ("negative duration_s", create(loads=load(duration_s=-1)), 400, f"{LAST}.duration_s"),
    ("negative request_rate", create(loads=load(request_rate=-1)), 400, f"{LAST}.request_rate"),
    (
        "negative output_len",
        create(workloads=workload(output_len=-1)),
        400,
        "workloads.0.output_len",
    ),
    ("requests 10**30", create(loads=load(requests=10**30)), 400, f"{LAST}.requests"),
    ("repetitions 1000000", create(repetitions=1_000_000), 400, "repetitions"),
    ("repetitions 0", create(repetitions=0), 400, "repetitions"),
    # 100 workloads × 2 loads × 2 arms × 30 repetitions = 12,000 runs > 10,000
    ("runs per plan", create(workloads=MANY_WORKLOADS, repetitions=30), 400, "repetitions"),
    ("progress details phase", progress(details={"phase": 3}), 400, "details.phase"),
    (
        "progress details base_url number",
        progress(details={"base_url": 3}),
        400,
        "details.base_url",
    ),
    (
        "progress details timeout string",
        progress(details={"health_timeout_seconds": "soon"}),
        400,
        "details.health_timeout_seconds",
    ),
    ("progress details NUL", progress(details={"note": "a\x00"}), 400, "details.note"),
    ("progress attempt 2**31", progress(attempt=2**31), 400, "attempt"),
]


@pytest.mark.parametrize(
    ("call", "status", "path"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input(world: World, call: Call, status: int, path: str) -> None:
    before = (Experiment.objects.count(), Run.objects.count())
    run_before = Run.objects.values().get(pk=world.run.pk)
    response = call(world)
    print(response.status_code, response.content[:300])
    assert response.status_code == status
    body = response.json()
    assert set(body) == {"error"}
    assert path in body["error"]["fields"] or (path == "" and body["error"]["code"]), body
    assert (Experiment.objects.count(), Run.objects.count()) == before
    assert Run.objects.values().get(pk=world.run.pk) == run_before


# Pages read ids from the query string too: "²" passed str.isdigit() and then failed int().
PAGE_CASES = [
    "/configurations/{config}/?other=%C2%B2",
    "/experiments/new/?from=%C2%B2",
    "/runs/{run}/?after=%C2%B2",
    "/compare/?run=%C2%B2",
    "/compare/?arm=%C2%B2:baseline:chat/c1",
    "/configurations/?search=%00",
]


@pytest.mark.parametrize("url", PAGE_CASES)
def test_a_bad_page_query_is_no_500(world: World, url: str) -> None:
    from accounts.services import user_create_or_update

    user = user_create_or_update(username="pages", password=None, role_names=roles.ALL_ROLES)
    client = Client(raise_request_exception=False)
    client.force_login(user)
    before = (Experiment.objects.count(), Run.objects.count())
    response = client.get(url.format(config=world.setup.baseline.pk, run=world.run.pk))
    assert response.status_code < 500
    assert (Experiment.objects.count(), Run.objects.count()) == before
