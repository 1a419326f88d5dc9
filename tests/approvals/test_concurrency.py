"""Two managers decide one request at the same moment, over HTTP on PostgreSQL: one wins, the
other gets a 409, and the request holds exactly one decision."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from django.db import connections

from accounts import roles
from accounts.services import api_token_rotate
from approvals.models import ChangeRequest
from audit.chain import verify_chain
from audit.selectors import chain, events_for
from tests.approvals.helpers import (
    ALL_KEEP,
    deployment,
    finished_experiment,
    opened,
    person,
    real_host,
    verdict_document,
    verdicts,
)
from tests.fixtures import Setup

__all__ = ["verdicts"]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.mark.parametrize("second", ["approve", "reject"])
def test_two_managers_deciding_at_once_cannot_both_win(
    setup: Setup, live_server: Any, verdicts: dict[int, Any], second: str
) -> None:
    mia, max_ = person("mia", roles.MANAGER), person("max", roles.MANAGER)
    experiment = finished_experiment(setup, hosts=[real_host()])
    verdicts[experiment.pk] = verdict_document(experiment, ALL_KEEP)
    cr = opened(setup, deployment(setup, mia), experiment)
    tokens = {"mia": api_token_rotate(user=mia), "max": api_token_rotate(user=max_)}
    bodies = {"approve": {}, "reject": {"note": "not now"}}
    barrier = threading.Barrier(2)
    results: dict[str, httpx.Response] = {}

    def decide(who: str, action: str) -> None:
        with httpx.Client(base_url=live_server.url, timeout=30) as client:
            barrier.wait()
            results[who] = client.post(
                f"/api/v1/change-requests/{cr.pk}/{action}/",
                json=bodies[action],
                headers={"Authorization": f"Token {tokens[who]}"},
            )

    threads = [
        threading.Thread(target=decide, args=("mia", "approve")),
        threading.Thread(target=decide, args=("max", second)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    codes = sorted(r.status_code for r in results.values())
    assert codes == [200, 409], {k: (r.status_code, r.text[:200]) for k, r in results.items()}
    loser = next(r for r in results.values() if r.status_code == 409)
    assert loser.json()["error"]["code"] in ("illegal_transition", "concurrent_transition")
    winner = next(who for who, r in results.items() if r.status_code == 200)
    stored = ChangeRequest.objects.get(pk=cr.pk)
    assert stored.decided_by is not None
    assert stored.decided_by.username == winner
    decisions = events_for(stored).filter(
        action__in=["change_request.approve", "change_request.reject"]
    )
    assert decisions.count() == 1
    assert verify_chain(chain()).intact
    connections.close_all()
