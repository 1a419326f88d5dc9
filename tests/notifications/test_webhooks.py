"""Webhooks: registration (SSRF refused), signed deliveries, retries with backoff by a real
Celery worker, the delivery log; e-mail opt-ins through Django's backend."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core import mail

import notifications
from accounts import roles
from accounts.services import user_create_or_update
from notifications import services, signing
from notifications.models import Delivery, Webhook
from tests.fixtures import api_as, assert_role_matrix
from tests.harness import Process, start_portal_worker, wait_for


@pytest.fixture
def alice(db: None) -> User:
    for role in roles.ALL_ROLES:
        Group.objects.get_or_create(name=role)
    return user_create_or_update(username="alice", password=None, role_names=[roles.EXPERIMENTER])


class Receiver:
    """A loopback HTTP server answering the statuses given, in turn, then 200; keeps requests."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.received: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append((dict(self.headers), body))
                code = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver([500, 503])
    yield server
    server.close()


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:9/x", "a loopback address"),
        ("http://localhost/x", "a loopback address"),
        ("http://[::1]/x", "a loopback address"),
        ("http://169.254.169.254/latest/meta-data", "a link-local address"),
        ("http://10.1.2.3/x", "a private address"),
        ("http://192.168.0.10/x", "a private address"),
        ("http://[::ffff:127.0.0.1]/x", "a loopback address"),
        ("http://100.64.0.1/x", "a shared address"),
        ("ftp://93.184.216.34/x", "only http and https URLs"),
        ("http://user:pw@93.184.216.34/x", "credentials in the URL"),
    ],
)
def test_registration_refuses_inward_addresses(alice: User, url: str, reason: str) -> None:
    answer = api_as(alice).post("/api/v1/webhooks/", {"url": url, "events": ["run.failed"]},
                                format="json")  # fmt: skip
    assert answer.status_code == 400, answer.json()
    assert reason in answer.json()["error"]["fields"]["url"][0]
    assert not Webhook.objects.exists()


def test_secret_is_shown_once_and_events_are_checked(alice: User, settings: Any) -> None:
    api = api_as(alice)
    bad = api.post("/api/v1/webhooks/", {"url": "https://93.184.216.34/h", "events": ["nope"]},
                   format="json")  # fmt: skip
    assert bad.status_code == 400
    assert "events.0" in bad.json()["error"]["fields"]
    made = api.post("/api/v1/webhooks/",
                    {"url": "https://93.184.216.34/h", "events": ["experiment.finished"]},
                    format="json")  # fmt: skip
    assert made.status_code == 201
    assert made.json()["secret"].startswith("whsec_")
    listed = api.get("/api/v1/webhooks/").json()
    assert "secret" not in listed[0]
    assert "secret" not in api.get(f"/api/v1/webhooks/{made.json()['id']}/").json()
    other = user_create_or_update(username="bob", password=None, role_names=[roles.VIEWER])
    assert api_as(other).get(f"/api/v1/webhooks/{made.json()['id']}/").status_code == 404


def test_every_role_manages_its_own_subscriptions_and_no_role_is_refused(alice: User) -> None:
    # A viewer wants to hear about verdicts too: webhooks and e-mail opt-ins are each user's own,
    # open to every role (tests/accounts/test_api_matrix.py's ANY_ROLE_ROUTES), never to a user
    # without one, and nobody reaches another user's webhook.
    hook = {"url": "https://93.184.216.34/h", "events": ["verdict.changed"]}
    assert_role_matrix("post", "/api/v1/webhooks/", hook, roles.VIEWER)
    assert_role_matrix("put", "/api/v1/notifications/email/", {"events": ["run.failed"]},
                       roles.VIEWER)  # fmt: skip
    viewer = user_create_or_update(username="vera", password=None, role_names=[roles.VIEWER])
    made = api_as(viewer).post("/api/v1/webhooks/", hook, format="json").json()
    nobody = user_create_or_update(username="nobody", password=None, role_names=[])
    assert api_as(nobody).delete(f"/api/v1/webhooks/{made['id']}/").status_code == 403
    assert api_as(alice).delete(f"/api/v1/webhooks/{made['id']}/").status_code == 404
    assert api_as(viewer).delete(f"/api/v1/webhooks/{made['id']}/").status_code == 204
    assert not Webhook.objects.filter(pk=made["id"]).exists()


def test_delivery_is_signed_over_the_exact_body(
    alice: User, receiver: Receiver, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.SPECPORTAL_WEBHOOKS_ALLOW_PRIVATE = True
    receiver.statuses = []
    _webhook, secret = services.webhook_create(owner=alice, url=receiver.url, events=["run.failed"])
    with django_capture_on_commit_callbacks(execute=False):
        notifications.emit("run.failed", {"run": 12, "error": "engine exited"})
        notifications.emit("experiment.finished", {"experiment": 3})  # not registered for it
    [delivery] = Delivery.objects.all()
    done = services.webhook_deliver(delivery_id=delivery.pk)
    assert done.status == Delivery.Status.DELIVERED
    [(headers, body)] = receiver.received
    assert signing.verify(body, secret, headers[signing.HEADER])
    assert not signing.verify(body + b" ", secret, headers[signing.HEADER])
    assert headers["X-SpecPortal-Event"] == "run.failed"
    assert json.loads(body)["payload"] == {"run": 12, "error": "engine exited"}


def test_a_private_address_is_refused_again_at_delivery_time(
    alice: User, receiver: Receiver, settings: Any
) -> None:
    settings.SPECPORTAL_WEBHOOKS_ALLOW_PRIVATE = True
    webhook, _ = services.webhook_create(owner=alice, url=receiver.url, events=["run.failed"])
    settings.SPECPORTAL_WEBHOOKS_ALLOW_PRIVATE = False  # the setting was turned off since
    delivery = Delivery.objects.create(webhook=webhook, event="run.failed", body="{}")
    done = services.webhook_deliver(delivery_id=delivery.pk)
    assert done.status == Delivery.Status.FAILED
    assert "loopback" in done.last_error
    assert receiver.received == []


def test_attempts_give_up_after_the_cap(alice: User, settings: Any) -> None:
    settings.SPECPORTAL_WEBHOOKS_ALLOW_PRIVATE = True
    settings.SPECPORTAL_WEBHOOK_MAX_ATTEMPTS = 2
    failing = Receiver([500, 500, 500])
    try:
        webhook, _ = services.webhook_create(owner=alice, url=failing.url, events=["run.failed"])
        delivery = Delivery.objects.create(webhook=webhook, event="run.failed", body="{}")
        first = services.webhook_deliver(delivery_id=delivery.pk)
        assert (first.status, first.attempts, first.last_error) == ("pending", 1, "HTTP 500")
        assert first.next_attempt_at is not None
        second = services.webhook_deliver(delivery_id=delivery.pk)
        assert (second.status, second.attempts) == ("failed", 2)
    finally:
        failing.close()


def test_backoff_doubles_and_is_capped(settings: Any) -> None:
    settings.SPECPORTAL_WEBHOOK_BACKOFF_SECONDS = 30
    assert [services.backoff_seconds(n) for n in (1, 2, 3, 4)] == [30, 60, 120, 240]
    assert services.backoff_seconds(20) == 3600


def test_email_goes_to_those_who_opted_in(
    alice: User, settings: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    alice.email = "alice@example.com"
    alice.save()
    bob = user_create_or_update(username="bob", password=None, role_names=[roles.VIEWER])
    bob.email = "bob@example.com"
    bob.save()
    answer = api_as(alice).put("/api/v1/notifications/email/", {"events": ["verdict.changed"]},
                               format="json")  # fmt: skip
    assert answer.json() == {"events": ["verdict.changed"]}
    sent: list[Any] = []
    monkeypatch.setattr(services, "publish_email", lambda *a: sent.append(a))
    with django_capture_on_commit_callbacks(execute=True):
        notifications.emit("verdict.changed", {"experiment": 4, "state": "DROP"})
    [(event, body, emails)] = sent
    assert emails == ["alice@example.com"]
    assert services.email_send(event=event, body=body, emails=emails) == 1
    [message] = mail.outbox
    assert message.subject == "[SpecPortal] verdict.changed"
    assert "state: DROP" in message.body


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_real_worker_retries_with_backoff_until_delivered(
    transactional_db: None, broker: str, processes: list[Process], tmp_path: Any, settings: Any
) -> None:
    for role in roles.ALL_ROLES:
        Group.objects.get_or_create(name=role)
    owner = user_create_or_update(username="carol", password=None, role_names=[roles.VIEWER])
    settings.SPECPORTAL_WEBHOOKS_ALLOW_PRIVATE = True
    receiver = Receiver([500, 503])  # two failures, then 200
    try:
        webhook, secret = services.webhook_create(owner=owner, url=receiver.url,
                                                  events=["experiment.finished"])  # fmt: skip
        processes.append(start_portal_worker(broker, tmp_path, {
            "SPECPORTAL_WEBHOOKS_ALLOW_PRIVATE": "1", "SPECPORTAL_WEBHOOK_BACKOFF_SECONDS": "0.5",
        }))  # fmt: skip
        notifications.emit("experiment.finished", {"experiment": 9, "status": "done"})
        delivery = Delivery.objects.get(webhook=webhook)

        def delivered() -> bool:
            delivery.refresh_from_db()
            return delivery.status == Delivery.Status.DELIVERED

        wait_for(delivered, 60, "the third attempt to be delivered", processes[0].log)
        assert delivery.attempts == 3
        assert len(receiver.received) == 3
        assert all(signing.verify(body, secret, h[signing.HEADER]) for h, body in receiver.received)
        assert len({body for _, body in receiver.received}) == 1  # the same body each attempt
        log = api_as(owner).get(f"/api/v1/webhooks/{webhook.pk}/deliveries/").json()
        assert log[0]["status"] == "delivered"
        assert log[0]["attempts"] == 3
    finally:
        receiver.close()
