"""``audit.record``: who, what, before/after, request id and source address, in the change's
transaction; the actor is whoever the request authenticated as (session, token, host agent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpResponse
from django.test import RequestFactory

import audit
from audit.chain import GENESIS_HASH, event_hash
from audit.context import Actor, AuditContextMiddleware, acting_as, actor_from_request
from audit.models import AuditEvent
from audit.selectors import event_payload
from audit.services import ObjectRef, snapshot
from configurations.services import configuration_create
from tests.configurations.factories import VLLM_EAGLE3

pytestmark = pytest.mark.django_db


def test_an_event_holds_who_what_before_after_and_chains_to_the_previous() -> None:
    user = User.objects.create_user("mona")
    config, _ = configuration_create(document=VLLM_EAGLE3, name="eagle3")
    with transaction.atomic():
        first = audit.record(action="test.first", target=config, after={"n": 1}, actor=user)
        second = audit.record(
            action="test.second",
            target=ObjectRef("auth.group", "manager", "manager"),
            before={"members": []},
            after={"members": ["mona"]},
        )
    assert (first.actor_kind, first.actor_name, first.actor_user_id) == ("user", "mona", user.pk)
    assert (first.object_type, first.object_id) == (
        "configurations.frozenconfiguration",
        str(config.pk),
    )
    assert second.actor_kind == "system"
    assert second.seq == first.seq + 1
    assert first.prev_hash == (GENESIS_HASH if first.seq == 1 else first.prev_hash)
    assert second.prev_hash == first.hash
    stored = AuditEvent.objects.get(pk=second.pk)
    assert stored.after == {"members": ["mona"]}
    assert event_hash(event_payload(stored)) == stored.hash


def test_record_refuses_to_run_outside_a_transaction() -> None:
    # pytest-django wraps the test in a transaction; leave it to see the refusal.
    from django.db import connection

    assert connection.in_atomic_block
    connection.in_atomic_block = False
    try:
        with pytest.raises(RuntimeError, match="inside the transaction"):
            audit.record(action="test.outside", target=ObjectRef("x.y", 1))
    finally:
        connection.in_atomic_block = True


def test_an_event_rolls_back_with_its_change() -> None:
    before = AuditEvent.objects.count()

    def change_then_fail() -> None:
        with transaction.atomic():
            audit.record(action="test.rolled_back", target=ObjectRef("x.y", 1))
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        change_then_fail()
    assert AuditEvent.objects.count() == before


def test_snapshot_leaves_secrets_out_and_keeps_ids() -> None:
    user = User.objects.create_user("sam", password="a-long-password-1")
    shot = snapshot(user)
    assert "password" not in shot
    assert shot["username"] == "sam"
    assert shot["groups"] == []


def test_request_id_source_address_and_session_actor_come_from_the_request(
    django_capture_on_commit_callbacks: Any, head_log: Path
) -> None:
    user = User.objects.create_user("rita")
    factory = RequestFactory()
    request = factory.get("/", HTTP_X_REQUEST_ID="ci-job-42", REMOTE_ADDR="::ffff:10.0.0.1")
    request.user = user
    seen: dict[str, AuditEvent] = {}

    def view(req: Any) -> Any:
        with transaction.atomic():
            seen["event"] = audit.record(action="test.view", target=ObjectRef("x.y", 7))
        return HttpResponse("ok")

    with django_capture_on_commit_callbacks(execute=True):
        response = AuditContextMiddleware(view)(request)
    event = seen["event"]
    assert response["X-Request-ID"] == "ci-job-42"
    assert (event.request_id, event.source_address) == ("ci-job-42", "::ffff:a00:1")
    assert (event.actor_kind, event.actor_name) == ("user", "rita")
    # the chain head goes to the log once the transaction commits
    assert f"audit head seq={event.seq} hash={event.hash}" in head_log.read_text()
    # a malformed request id is replaced, never stored as given
    bad = factory.get("/", HTTP_X_REQUEST_ID="x" * 65 + "\n")
    bad.user = user
    response = AuditContextMiddleware(lambda req: HttpResponse())(bad)
    assert len(response["X-Request-ID"]) == 32


def test_explicit_actor_for_commands() -> None:
    with acting_as(Actor.system("manage.py create_user")), transaction.atomic():
        event = audit.record(action="test.command", target=ObjectRef("x.y", 1))
    assert (event.actor_kind, event.actor_name) == ("system", "manage.py create_user")


def test_token_and_host_agent_actors(setup: Any) -> None:
    """What DRF writes back onto the request: a token's user (never the secret), a host agent."""
    from accounts.models import ApiToken
    from accounts.services import api_token_rotate
    from hosts.authentication import HostPrincipal

    key = api_token_rotate(user=setup.experimenter)
    request = RequestFactory().post("/")
    request.user = setup.experimenter
    request.auth = ApiToken.objects.get(user=setup.experimenter)  # type: ignore[attr-defined]
    actor = actor_from_request(request)
    assert (actor.kind, actor.name, actor.user_id) == ("token", "alice", setup.experimenter.pk)
    assert actor.token
    assert key not in actor.token
    assert actor.token.startswith("spt_")
    host = setup.hosts[0]
    request.user = HostPrincipal(host)
    request.auth = host  # type: ignore[attr-defined]
    assert actor_from_request(request) == Actor(kind="host", name="gpu-a")
