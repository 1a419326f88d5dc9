"""Names refuse bidirectional overrides and other invisible formatting (issue 15, finding 12).

The probe stored ``"baseline\u202e"``-style names (a right-to-left override makes a name display
as another one). Every name the API takes — configuration, experiment, team, labels (names and
values), arm labels — and usernames given to ``create_user`` refuse the twelve characters with a
400 in the one error shape naming the field; other non-ASCII text is a name like any other.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from accounts import roles
from accounts.services import user_create_or_update
from configurations.models import FrozenConfiguration
from experiments.models import Experiment
from specportal.protocol.invisible import INVISIBLE_FORMATTING, invisible_formatting
from tests.fixtures import BASELINE, LOADS, OBJECTIVES, WORKLOADS, Setup, api_as

pytestmark = pytest.mark.django_db

RLO = "\u202e"
ALL = sorted(INVISIBLE_FORMATTING)


def test_the_set_is_exactly_the_embeddings_overrides_isolates_and_marks() -> None:
    expected = {*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C}
    assert {ord(c) for c in INVISIBLE_FORMATTING} == expected
    assert invisible_formatting("gpu-a") is None
    # letters of any script, combining marks and the zero-width joiner of emoji stay allowed
    assert invisible_formatting("café ملف 日本 👩\u200d💻") is None
    why = invisible_formatting(f"evil{RLO}txt.exe")
    assert why is not None
    assert "U+202E RIGHT-TO-LEFT OVERRIDE at position 4" in why


def _refused(response: Any, field: str) -> str:
    assert response.status_code == 400, response.content[:400]
    error = response.json()["error"]
    assert set(error) == {"code", "message", "fields"}
    assert field in error["fields"], error
    message: str = error["fields"][field][0]
    assert "invisible formatting" in message, message
    return message


@pytest.mark.parametrize("char", ALL, ids=[f"U+{ord(c):04X}" for c in ALL])
def test_every_character_is_refused_in_a_configuration_name(setup: Setup, char: str) -> None:
    api = api_as(setup.experimenter)
    document = {**copy.deepcopy(BASELINE), "sampling": {"temperature": 0, "seed": 7}}
    response = api.post(
        "/api/v1/configurations/", {"document": document, "name": f"base{char}line"}, format="json"
    )
    assert f"U+{ord(char):04X}" in _refused(response, "name")
    assert (
        not FrozenConfiguration.objects.filter(name__startswith="base")
        .exclude(name="baseline")
        .exists()
    )


def test_configuration_labels_and_renames_are_checked(setup: Setup) -> None:
    api = api_as(setup.experimenter)
    document = {**copy.deepcopy(BASELINE), "sampling": {"temperature": 0, "seed": 8}}
    url = "/api/v1/configurations/"
    _refused(api.post(url, {"document": document, "labels": {f"team{RLO}": "x"}}, format="json"),
             f"labels.team{RLO}")  # fmt: skip
    _refused(api.post(url, {"document": document, "labels": {"team": f"x{RLO}"}}, format="json"),
             "labels.team")  # fmt: skip
    detail = f"/api/v1/configurations/{setup.baseline.pk}/"
    _refused(api.patch(detail, {"name": f"base{RLO}"}, format="json"), "name")
    setup.baseline.refresh_from_db()
    assert setup.baseline.name == "baseline"
    # a name in another script is a name
    renamed = api.patch(detail, {"name": "référence ملف"}, format="json")
    assert renamed.status_code == 200, renamed.content
    assert renamed.json()["name"] == "référence ملف"


def test_host_labels_are_checked(setup: Setup) -> None:
    operator = api_as(
        user_create_or_update(username="otto", password=None, role_names=[roles.OPERATOR])
    )
    created = operator.post(
        "/api/v1/hosts/", {"name": "gpu-z", "labels": {"rack": f"r1{RLO}"}}, format="json"
    )
    _refused(created, "labels.rack")
    changed = operator.patch("/api/v1/hosts/gpu-a/", {"labels": {"\u2066rack": "1"}}, format="json")
    _refused(changed, "labels.\u2066rack")


def _experiment_body(s: Setup, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "ngram vs eagle",
        "baseline": s.baseline.pk,
        "candidates": [s.ngram.pk],
        "labels": ["baseline", "ngram"],
        "workloads": copy.deepcopy(WORKLOADS),
        "loads": copy.deepcopy(LOADS),
        "objectives": copy.deepcopy(OBJECTIVES),
        "hosts": ["gpu-a"],
        "repetitions": 2,
    }
    body.update(changes)
    return body


def test_experiment_names_and_arm_labels_are_checked(setup: Setup) -> None:
    api = api_as(setup.experimenter)
    url = "/api/v1/experiments/"
    _refused(api.post(url, _experiment_body(setup, name="ngram\u200f vs eagle"), format="json"),
             "name")  # fmt: skip
    _refused(api.post(url, _experiment_body(setup, labels=["baseline", f"ng{RLO}ram"]),
                      format="json"), "labels.1")  # fmt: skip
    # an arm given inline, stored by content, names its configuration
    inline = {"document": {**copy.deepcopy(BASELINE), "sampling": {"seed": 9}}, "name": f"b{RLO}"}
    _refused(api.post(url, _experiment_body(setup, baseline=inline), format="json"),
             "baseline.name")  # fmt: skip
    assert not Experiment.objects.exists()


def test_deployment_teams_are_checked(setup: Setup) -> None:
    manager = api_as(
        user_create_or_update(username="mia", password=None, role_names=[roles.MANAGER])
    )
    body = {
        "name": "chat-prod",
        "owner_team": "serving\u061c",
        "configuration": setup.baseline.pk,
        "workloads": copy.deepcopy(WORKLOADS),
        "loads": copy.deepcopy(LOADS),
        "objectives": copy.deepcopy(OBJECTIVES),
    }
    _refused(manager.post("/api/v1/deployments/", body, format="json"), "owner_team")
    # a deployment's own name is a slug: ASCII only, refused as before
    body["owner_team"], body["name"] = "serving", f"chat{RLO}prod"
    refused = manager.post("/api/v1/deployments/", body, format="json")
    assert refused.status_code == 400
    assert "name" in refused.json()["error"]["fields"]


def test_create_user_refuses_such_a_username_in_one_line() -> None:
    with pytest.raises(CommandError, match=r"the username must not contain invisible formatting "
                       r"characters \(U\+202E"):  # fmt: skip
        call_command("create_user", f"admin{RLO}", "--role", roles.VIEWER)
