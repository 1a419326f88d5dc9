from __future__ import annotations

import pytest
from rest_framework import exceptions
from rest_framework.test import APIRequestFactory

from accounts.selectors import user_has_role
from hosts.authentication import HostPrincipal, HostTokenAuthentication, IsHostAgent
from hosts.models import GpuHost
from hosts.services import host_heartbeat_record, host_register, host_token_issue, host_token_revoke
from specportal.api.errors import ApplicationError

pytestmark = pytest.mark.django_db


def _authenticate(header: str | None) -> tuple[HostPrincipal, GpuHost] | None:
    factory = APIRequestFactory()
    request = factory.get("/api/v1/agent/heartbeat", HTTP_AUTHORIZATION=header or "")
    from rest_framework.request import Request

    return HostTokenAuthentication().authenticate(Request(request))


def test_register_validates_the_name_and_mode() -> None:
    host = host_register(name="gpu-01", gpu_model="H100-80GB", gpu_count=8, emulated=True)
    assert host.queue_name == "host.gpu-01"
    with pytest.raises(ApplicationError) as bad_name:
        host_register(name="GPU_01")
    assert "name" in bad_name.value.fields
    with pytest.raises(ApplicationError) as no_url:
        host_register(name="endpoint-1", mode="endpoint")
    assert "base_url" in no_url.value.fields
    with pytest.raises(ApplicationError) as taken:
        host_register(name="gpu-01")
    assert taken.value.status_code == 409
    with pytest.raises(ApplicationError) as engines:
        host_register(name="gpu-02", engines={"tgi": ["1.0"]})
    assert "engines.tgi" in engines.value.fields


def test_host_token_is_stored_hashed_authenticates_once_issued_and_stops_when_revoked() -> None:
    host = host_register(name="gpu-01")
    assert _authenticate(None) is None
    token = host_token_issue(host=host)
    host.refresh_from_db()
    assert token not in (host.token_hash, host.token_prefix)
    assert host.token_prefix
    assert token.startswith(host.token_prefix)
    result = _authenticate(f"Host {token}")
    assert result is not None
    principal, authenticated_host = result
    assert authenticated_host.pk == host.pk
    assert principal.is_authenticated
    assert principal.get_username() == "host:gpu-01"
    assert not any(user_has_role(principal, role) for role in ("viewer", "operator"))
    assert IsHostAgent().has_permission(type("R", (), {"auth": host})(), None)
    host_token_revoke(host=host)
    with pytest.raises(exceptions.AuthenticationFailed):
        _authenticate(f"Host {token}")


def test_reissuing_a_token_invalidates_the_previous_one() -> None:
    host = host_register(name="gpu-01")
    old = host_token_issue(host=host)
    new = host_token_issue(host=host)
    with pytest.raises(exceptions.AuthenticationFailed):
        _authenticate(f"Host {old}")
    assert _authenticate(f"Host {new}") is not None


def test_heartbeat_records_health_time_and_inventory() -> None:
    host = host_register(name="gpu-01")
    host_heartbeat_record(host=host, engines={"vllm": ["0.30.0"]})
    host.refresh_from_db()
    assert host.health_status == "healthy"
    assert host.last_heartbeat_at is not None
    assert host.engines == {"vllm": ["0.30.0"]}
