"""The 401/403 matrix and the one error shape, over EVERY route under /api/v1/.

The routes come from the URL resolver, not from a hand-written list, so an endpoint added later
(by any app) is covered the day it lands; the tables below only say which role may write where.
Permission checks run before a view looks anything up, so placeholder ids are enough here; the
allowed-role calls that must succeed are in each app's tests/<app>/test_api*.py
(``tests.fixtures.assert_role_matrix``) and tests/experiments/.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient
from rest_framework.views import APIView

from accounts import roles
from accounts.authentication import scope_allows, scope_needed
from accounts.services import api_token_create, api_token_rotate, user_create_or_update
from hosts.authentication import HostTokenAuthentication
from hosts.services import host_register, host_token_issue

pytestmark = pytest.mark.django_db

HANDLERS = ("get", "post", "put", "patch", "delete")

# Unsafe (method, route) pairs a viewer may call: they compute and store nothing.
VIEWER_MAY_POST = {
    ("post", "api/v1/configurations/lint/"),
    ("post", "api/v1/configurations/launch-command/"),
    ("post", "api/v1/configurations/import-command/"),
}
# Approvals: which roles may write (or, for the audit trail, read) each route; every other role
# must be refused.
EXP, OPS, MGR = roles.EXPERIMENTER, roles.OPERATOR, roles.MANAGER
CR = "api/v1/change-requests/<int:change_request_id>/"
APPROVAL_ROLES: dict[tuple[str, str], tuple[str, ...]] = {
    ("post", "api/v1/deployments/"): (MGR,),
    ("patch", "api/v1/deployments/<slug:name>/"): (MGR,),
    ("post", "api/v1/deployments/<slug:name>/accepted-objectives/"): (MGR,),
    ("post", "api/v1/change-requests/"): (EXP, MGR),
    ("post", CR + "open/"): (EXP, MGR),
    ("post", CR + "withdraw/"): (EXP, MGR),
    ("post", CR + "approve/"): (MGR,),
    ("post", CR + "reject/"): (MGR,),
    ("post", CR + "apply/"): (OPS, MGR),
    ("post", CR + "comments/"): (EXP, OPS, MGR),
    ("get", "api/v1/audit/events/"): (MGR,),
}
# Route prefixes whose writes need the operator role (and whose token route is operator-only).
OPERATOR_ROUTES = ("api/v1/hosts/",)
# Route prefixes every role may write to: each user's own subscriptions (webhooks, e-mail
# opt-ins). A viewer wants to hear about verdicts too; a user with no role is still refused.
ANY_ROLE_ROUTES = ("api/v1/webhooks/", "api/v1/notifications/", "api/v1/tokens/")
OPERATOR_ONLY_READS = {"api/v1/hosts/<slug:name>/token/"}


def _walk(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry.callback


def api_routes() -> list[tuple[str, str]]:
    """Every (method, route) under api/v1/ served by a DRF view."""
    found = []
    for route, callback in _walk(get_resolver().url_patterns):
        view_class = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
        if not route.startswith("api/v1/") or view_class is None:
            continue
        assert issubclass(view_class, APIView), f"{route} is not a DRF view"
        for method in HANDLERS:
            if hasattr(view_class, method):
                found.append((method, route))
    return found


def concrete(route: str) -> str:
    url = re.sub(r"<int:\w+>", "1", route)
    url = re.sub(r"<slug:\w+>", "gpu-01", url)
    return "/" + url


def is_agent_route(route: str) -> bool:
    match = get_resolver().resolve(concrete(route))
    view_class = match.func.cls  # type: ignore[attr-defined]
    return HostTokenAuthentication in view_class.authentication_classes


def role_needed(method: str, route: str) -> str:
    if route in OPERATOR_ONLY_READS:
        return roles.OPERATOR
    if method == "get" or (method, route) in VIEWER_MAY_POST or route.startswith(ANY_ROLE_ROUTES):
        return roles.VIEWER
    if route.startswith(OPERATOR_ROUTES):
        return roles.OPERATOR
    return roles.EXPERIMENTER


ROUTES = api_routes()
USER_ROUTES = [(m, r) for m, r in ROUTES if not is_agent_route(r)]
AGENT_ROUTES = [(m, r) for m, r in ROUTES if is_agent_route(r)]


def token_client(*role_names: str, username: str | None = None) -> APIClient:
    user = user_create_or_update(
        username=username or ("-".join(role_names) or "nobody"),
        password=None,
        role_names=role_names,
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_rotate(user=user)}")
    return client


def call(client: APIClient, method: str, route: str) -> Any:
    return getattr(client, method)(concrete(route), data={}, format="json")


def assert_error_shape(response: Any, status: int, codes: set[str]) -> None:
    assert response.status_code == status, (response.status_code, response.content[:300])
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "fields"}, body
    assert body["error"]["code"] in codes, body


def test_the_route_tables_see_every_app() -> None:
    routes = {route for _, route in ROUTES}
    # A sanity check that the walk reaches each app's API (not a list to keep in step).
    for expected in (
        "api/v1/whoami/",
        "api/v1/configurations/",
        "api/v1/hosts/<slug:name>/token/",
        "api/v1/schema/",
        "api/v1/docs/",
        "api/v1/experiments/",
        "api/v1/runs/<int:run_id>/requests.jsonl",
        "api/v1/agent/heartbeat",
        "api/v1/deployments/",
        "api/v1/change-requests/<int:change_request_id>/approve/",
        "api/v1/audit/events/",
    ):
        assert expected in routes
    assert len(AGENT_ROUTES) >= 5


@pytest.mark.parametrize(("method", "route"), ROUTES)
def test_no_credentials_is_401_in_the_error_shape(method: str, route: str) -> None:
    assert_error_shape(call(APIClient(), method, route), 401, {"not_authenticated"})


@pytest.mark.parametrize(("method", "route"), USER_ROUTES)
def test_a_user_without_the_role_is_403_in_the_error_shape(method: str, route: str) -> None:
    if (method, route) in APPROVAL_ROLES:
        allowed = APPROVAL_ROLES[(method, route)]
        assert_error_shape(call(token_client(), method, route), 403, {"permission_denied"})
        others = tuple(r for r in roles.ALL_ROLES if r not in allowed)
        assert_error_shape(call(token_client(*others), method, route), 403, {"permission_denied"})
        return
    needed = role_needed(method, route)
    below = {
        roles.VIEWER: (),
        roles.EXPERIMENTER: (roles.VIEWER, roles.OPERATOR, roles.MANAGER),
        roles.OPERATOR: (roles.VIEWER, roles.EXPERIMENTER, roles.MANAGER),
    }[needed]
    assert_error_shape(call(token_client(), method, route), 403, {"permission_denied"})
    if below:
        assert_error_shape(call(token_client(*below), method, route), 403, {"permission_denied"})


@pytest.mark.parametrize(("method", "route"), USER_ROUTES)
def test_a_host_token_is_refused_on_user_endpoints(method: str, route: str) -> None:
    token = host_token_issue(host=host_register(name="gpu-77"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Host {token}")
    assert_error_shape(call(client, method, route), 401, {"not_authenticated"})


@pytest.mark.parametrize(("method", "route"), AGENT_ROUTES)
def test_a_user_token_is_refused_on_agent_endpoints(method: str, route: str) -> None:
    # Even a user holding every role is no host agent.
    client = token_client(*roles.ALL_ROLES, username="everything")
    response = call(client, method, route)
    assert response.status_code in (401, 403)
    assert_error_shape(response, response.status_code, {"not_authenticated", "permission_denied"})
    client.credentials(HTTP_AUTHORIZATION="Host not-a-real-token")
    assert_error_shape(call(client, method, route), 401, {"not_authenticated"})


@pytest.mark.parametrize(
    "url", ["/api/", "/api/v1/", "/api/v1/nothing-here/", "/api/v2/configurations/"]
)
def test_unknown_api_urls_are_404_in_the_error_shape(url: str) -> None:
    for client in (APIClient(), token_client(roles.VIEWER)):
        for method in ("get", "post", "delete"):
            response = getattr(client, method)(url)
            assert_error_shape(response, 404, {"not_found"})
            assert response["Content-Type"].startswith("application/json")


def test_a_missing_trailing_slash_is_a_json_404_that_says_so_even_for_a_session_post(
    django_user_model: Any,
) -> None:
    user = user_create_or_update(
        username="browser", password="a-long-password-1", role_names=[roles.EXPERIMENTER]
    )
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    for method in ("get", "post"):
        response = getattr(client, method)("/api/v1/configurations")
        assert_error_shape(response, 404, {"not_found"})
        assert "/api/v1/configurations/" in response.json()["error"]["message"]


def test_405_415_and_malformed_json_use_the_error_shape() -> None:
    client = token_client(roles.EXPERIMENTER)
    assert_error_shape(client.put("/api/v1/configurations/"), 405, {"method_not_allowed"})
    assert_error_shape(
        client.post("/api/v1/configurations/", "hello", content_type="text/plain"),
        415,
        {"unsupported_media_type"},
    )
    assert_error_shape(
        client.post("/api/v1/configurations/", '{"document": {', content_type="application/json"),
        400,
        {"malformed"},
    )


# What a token narrower than ``full`` may do besides reading (accounts.authentication): submit
# tokens are CI's, read tokens may call the POST endpoints that store nothing.
SUBMIT_SCOPE_WRITES = {
    ("post", "api/v1/configurations/"),
    ("post", "api/v1/experiments/"),
    ("post", "api/v1/experiments/<int:experiment_id>/plan/"),
    ("post", "api/v1/experiments/<int:experiment_id>/start/"),
    ("post", "api/v1/experiments/<int:experiment_id>/cancel/"),
    ("post", "api/v1/runs/<int:run_id>/cancel/"),
    ("post", "api/v1/imports/"),
    ("post", "api/v1/change-requests/"),
}
READ_SCOPE_WRITES = {*VIEWER_MAY_POST, ("post", "api/v1/objectives/validate/")}
UNSAFE_USER_ROUTES = [(m, r) for m, r in USER_ROUTES if m != "get"]


def test_the_scope_tables_match_the_views() -> None:
    declared: dict[str, set[tuple[str, str]]] = {"read": set(), "submit": set(), "full": set()}
    for method, route in UNSAFE_USER_ROUTES:
        view = get_resolver().resolve(concrete(route)).func.cls()  # type: ignore[attr-defined]
        declared[scope_needed(view, method.upper())].add((method, route))
    assert declared["read"] == READ_SCOPE_WRITES
    assert declared["submit"] == SUBMIT_SCOPE_WRITES


@pytest.mark.parametrize(("method", "route"), UNSAFE_USER_ROUTES)
def test_a_token_of_a_narrower_scope_is_403_token_scope(method: str, route: str) -> None:
    # A user holding every role: only the scope can refuse.
    user = user_create_or_update(username="everything", password=None, role_names=roles.ALL_ROLES)
    view = get_resolver().resolve(concrete(route)).func.cls()  # type: ignore[attr-defined]
    needed = scope_needed(view, method.upper())
    for scope in ("read", "submit"):
        _, secret = api_token_create(user=user, name=scope, scope=scope)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
        response = call(client, method, route)
        if scope_allows(scope, needed):
            assert response.status_code != 403 or response.json()["error"]["code"] != "token_scope"
        else:
            assert_error_shape(response, 403, {"token_scope"})
