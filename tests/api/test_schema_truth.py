"""The schema's promises, checked against the server one by one.

``additionalProperties: false`` on a request body is a promise that an unknown field is refused
(400, the field named): every such operation is called with one, on real objects, so the rule in
``specportal.api.schema`` cannot drift from what the views do. Filters with an enum refuse other
values with a suggestion.
"""

from __future__ import annotations

from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from accounts.roles import ALL_ROLES
from tests.api.seeding import seed_every_kind
from tests.fixtures import Setup, client_for

pytestmark = pytest.mark.django_db

UNKNOWN = "zz_not_a_field"


def _path_values(seeded: dict[str, Any], path: str) -> dict[str, Any]:
    ids = seeded["ids"]
    name = "chat-prod" if path.startswith("/api/v1/deployments/") else seeded["spare"]
    return {
        "run_id": ids["run_id"][0],
        "experiment_id": ids["experiment_id"][1],  # the draft: plan and start read bodies
        "config_id": ids["config_id"][0],
        "change_request_id": ids["change_request_id"][0],
        "webhook_id": ids["webhook_id"][0],
        "name": name,
    }


def _strict_body_operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    components = schema["components"]["schemas"]
    found = []
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            content = operation.get("requestBody", {}).get("content", {})
            ref = content.get("application/json", {}).get("schema", {}).get("$ref", "")
            component = components.get(ref.rsplit("/", 1)[-1], {})
            if component.get("additionalProperties") is False:
                found.append((method, path, operation))
    return found


def test_every_body_that_says_no_unknown_fields_refuses_one(setup: Setup, broker: str) -> None:
    seeded = seed_every_kind(setup)
    schema = SchemaGenerator().get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
    operations = _strict_body_operations(schema)
    assert len(operations) >= 20
    wrong = []
    for method, path, operation in operations:
        client = APIClient()
        scheme = "Host" if {"hostToken": []} in operation.get("security", []) else "Token"
        token = seeded["host_token"] if scheme == "Host" else seeded["user_token"]
        client.credentials(HTTP_AUTHORIZATION=f"{scheme} {token}")
        values = _path_values(seeded, path)
        url = path.format(**values)
        answer = getattr(client, method)(url, {UNKNOWN: 1}, format="json")
        fields: dict[str, Any] = answer.json().get("error", {}).get("fields", {})
        if answer.status_code != 400 or UNKNOWN not in fields:
            wrong.append(f"{method.upper()} {path}: {answer.status_code} {answer.content[:200]!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("url", "parameter", "says"),
    [
        ("/api/v1/hosts/?emulated=banana", "emulated", "'banana' is not true or false"),
        ("/api/v1/hosts/?mode=managd", "mode", "did you mean 'managed'?"),
        ("/api/v1/runs/?status=bogus", "status", "one of: planned, queued"),
        ("/api/v1/runs/?status=runnin", "status", "did you mean 'running'?"),
        ("/api/v1/runs/?experiment=abc", "experiment", "valid integer"),
        ("/api/v1/experiments/?mode=imprt", "mode", "did you mean 'import'?"),
        ("/api/v1/configurations/?engine=vlm", "engine", "did you mean 'vllm'?"),
        ("/api/v1/configurations/?offset=9223372036854775808", "offset", "less than or equal"),
        ("/api/v1/change-requests/?state=open,aproved", "state", "did you mean 'approved'?"),
        ("/api/v1/audit/events/?since=yesterday", "since", "Date has wrong format"),
        ("/api/v1/runs/?host=a%00b", "host", "must not contain NUL"),
    ],
)
def test_a_filter_value_outside_its_enum_or_type_is_refused_with_a_suggestion(
    url: str, parameter: str, says: str
) -> None:
    answer = client_for(*ALL_ROLES).get(url)
    assert answer.status_code == 400, answer.content
    messages = answer.json()["error"]["fields"][parameter]
    assert any(says in message for message in messages), messages


def test_known_filter_values_still_filter(setup: Setup) -> None:
    client = client_for(*ALL_ROLES)
    assert [h["name"] for h in client.get("/api/v1/hosts/?emulated=true").json()] == [
        "gpu-a",
        "gpu-b",
    ]
    assert client.get("/api/v1/hosts/?emulated=false").json() == []
    assert client.get("/api/v1/hosts/?mode=").status_code == 200  # empty: no filter
    assert client.get("/api/v1/runs/?status=running").json() == []


def test_a_multipart_import_without_a_boundary_is_a_400_not_a_500(setup: Setup) -> None:
    # Found by schemathesis (coverage phase): Django's multipart parser raised through the view.
    answer = client_for(*ALL_ROLES).post(
        "/api/v1/imports/?experiment=1", b'""', content_type="multipart/form-data"
    )
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"]["code"] == "malformed"
    assert "boundary" in answer.json()["error"]["fields"]["body"][0]


def test_every_operation_documents_its_errors_in_the_one_shape() -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
    paths = schema["paths"]
    error = {"$ref": "#/components/schemas/Error"}
    for item in paths.values():
        for operation in item.values():
            for status in ("401", "403", "429"):
                content = operation["responses"][status]["content"]
                assert content == {"application/json": {"schema": error}}
    run = paths["/api/v1/runs/{run_id}/"]["get"]["responses"]
    assert set(run) == {"200", "401", "403", "404", "429"}
    created = paths["/api/v1/experiments/"]["post"]["responses"]
    assert {"201", "400", "409", "413", "415"} <= set(created)
    assert "409" not in paths["/api/v1/objectives/validate/"]["post"]["responses"]
    assert "404" in paths["/api/v1/imports/"]["post"]["responses"]
    hosts = {p["name"]: p["schema"] for p in paths["/api/v1/hosts/"]["get"]["parameters"]}
    assert hosts["mode"]["enum"] == ["managed", "endpoint"]
    assert hosts["emulated"]["type"] == "boolean"
