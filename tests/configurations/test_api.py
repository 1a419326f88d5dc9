from __future__ import annotations

import json
from typing import Any

import pytest

from accounts import roles
from configurations.models import FrozenConfiguration
from configurations.services import configuration_create
from hosts.models import GpuHost
from hosts.services import host_register
from specportal.engines.document import prepare
from tests.configurations.factories import VLLM_EAGLE3, document
from tests.fixtures import assert_role_matrix, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def config() -> FrozenConfiguration:
    return configuration_create(document=VLLM_EAGLE3, name="eagle3")[0]


@pytest.fixture
def other(config: FrozenConfiguration) -> FrozenConfiguration:
    return configuration_create(document=document(proposal__num_speculative_tokens=3))[0]


# (method, url template, body, role that may do it); ``{c}`` config id, ``{o}`` other id.
ENDPOINTS: list[tuple[str, str, dict[str, Any] | None, str]] = [
    ("get", "/api/v1/configurations/", None, roles.VIEWER),
    (
        "post",
        "/api/v1/configurations/",
        {"document": document(proposal__num_speculative_tokens=4)},
        roles.EXPERIMENTER,
    ),
    ("get", "/api/v1/configurations/{c}/", None, roles.VIEWER),
    ("patch", "/api/v1/configurations/{c}/", {"name": "renamed"}, roles.EXPERIMENTER),
    ("delete", "/api/v1/configurations/{o}/", None, roles.EXPERIMENTER),
    ("get", "/api/v1/configurations/{c}/diff/?other={o}", None, roles.VIEWER),
    ("get", "/api/v1/configurations/{c}/launch-command/", None, roles.VIEWER),
    ("get", "/api/v1/configurations/{c}/lint/", None, roles.VIEWER),
    ("post", "/api/v1/configurations/lint/", {"document": VLLM_EAGLE3}, roles.VIEWER),
    ("post", "/api/v1/configurations/launch-command/", {"document": VLLM_EAGLE3}, roles.VIEWER),
    ("post", "/api/v1/configurations/import-command/", {"command": "vllm serve m"}, roles.VIEWER),
]


@pytest.mark.parametrize(("method", "url", "body", "role"), ENDPOINTS)
def test_every_endpoint_has_the_401_403_matrix(
    method: str,
    url: str,
    body: dict[str, Any] | None,
    role: str,
    config: FrozenConfiguration,
    other: FrozenConfiguration,
) -> None:
    assert_role_matrix(method, url.format(c=config.pk, o=other.pk), body, role)


def test_create_is_idempotent_201_then_200_created_false() -> None:
    client = client_for(roles.EXPERIMENTER)
    first = client.post(
        "/api/v1/configurations/", {"document": VLLM_EAGLE3, "name": "a"}, format="json"
    )
    assert first.status_code == 201
    assert first.json()["created"] is True
    body = first.json()["configuration"]
    assert body["config_hash"] == prepare(VLLM_EAGLE3)[1].config_hash
    assert body["created_by"] == "experimenter"
    again = client.post(
        "/api/v1/configurations/",
        {"document": document(target__tensor_parallel_size=1.0), "name": "b"},
        format="json",
    )
    assert again.status_code == 200
    assert again.json()["created"] is False
    assert again.json()["configuration"]["id"] == body["id"]
    assert FrozenConfiguration.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"document": document(engine="tgi")}, "document.engine"),
        ({"document": document(proposal__method="eagle9")}, "document.proposal.method"),
        (
            {"document": document(proposal__num_speculative_token=3)},
            "document.proposal.num_speculative_token",
        ),
        (
            {"document": document(target__tensor_parallel_size="four")},
            "document.target.tensor_parallel_size",
        ),
        ({"document": document(target__max_num_seqs=-5)}, "document.target.max_num_seqs"),
        ({"document": document(target__max_model_len=10**12)}, "document.target.max_model_len"),
        ({"document": "not an object"}, "document"),
        ({"document": VLLM_EAGLE3, "labels": {"team": 3}}, "labels.team"),
        ({"document": VLLM_EAGLE3, "config_hash": "x"}, "config_hash"),
        ({"document": VLLM_EAGLE3, "name": 5}, "name"),
        ({"document": VLLM_EAGLE3, "description": ["x"]}, "description"),
    ],
)
def test_bad_input_is_400_with_dotted_paths_and_nothing_saved(
    body: dict[str, Any], field: str
) -> None:
    response = client_for(roles.EXPERIMENTER).post("/api/v1/configurations/", body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert field in error["fields"], error
    assert FrozenConfiguration.objects.count() == 0


def test_did_you_mean_reaches_the_api_and_malformed_json_is_400() -> None:
    client = client_for(roles.EXPERIMENTER)
    response = client.post(
        "/api/v1/configurations/",
        {"document": document(proposal__num_speculative_token=3)},
        format="json",
    )
    assert (
        "did you mean 'num_speculative_tokens'"
        in response.json()["error"]["fields"]["document.proposal.num_speculative_token"][0]
    )
    malformed = client.post(
        "/api/v1/configurations/", data="{nope", content_type="application/json"
    )
    assert malformed.status_code == 400
    assert malformed.json()["error"]["code"] == "malformed"
    assert FrozenConfiguration.objects.count() == 0


def test_unknown_request_fields_and_filters_get_did_you_mean(config: FrozenConfiguration) -> None:
    client = client_for(roles.OPERATOR, roles.EXPERIMENTER)
    host = client.post("/api/v1/hosts/", {"name": "gpu-05", "gpu_modle": "H100"}, format="json")
    assert host.status_code == 400
    assert "did you mean 'gpu_model'" in host.json()["error"]["fields"]["gpu_modle"][0]
    assert not GpuHost.objects.filter(name="gpu-05").exists()
    typo = client.get("/api/v1/configurations/?engin=vllm")
    assert typo.status_code == 400
    assert "did you mean 'engine'" in typo.json()["error"]["fields"]["engin"][0]
    assert client.get("/api/v1/configurations/?engine=vllm&limit=5").status_code == 200
    hosts = client.get("/api/v1/hosts/?emulatd=1")
    assert hosts.status_code == 400
    assert "did you mean 'emulated'" in hosts.json()["error"]["fields"]["emulatd"][0]
    for url in (
        f"/api/v1/configurations/{config.pk}/lint/?hots=gpu-01",
        f"/api/v1/configurations/{config.pk}/launch-command/?prot=8000",
        f"/api/v1/configurations/{config.pk}/diff/?othre={config.pk}",
    ):
        misspelt = client.get(url)
        assert misspelt.status_code == 400, url
        assert "did you mean" in next(iter(misspelt.json()["error"]["fields"].values()))[0]
    other = client.get(f"/api/v1/configurations/{config.pk}/diff/?other=abc")
    assert other.json()["error"]["fields"]["other"] == ["A valid integer is required."]


def test_identity_cannot_be_patched_but_name_and_labels_can(config: FrozenConfiguration) -> None:
    client = client_for(roles.EXPERIMENTER)
    url = f"/api/v1/configurations/{config.pk}/"
    refused = client.patch(
        url, {"document": document(proposal__num_speculative_tokens=2)}, format="json"
    )
    assert refused.status_code == 400
    assert "immutable" in refused.json()["error"]["fields"]["document"][0]
    assert client.patch(url, {"method": "ngram"}, format="json").status_code == 400
    assert client.put(url, {"name": "x"}, format="json").status_code == 405
    ok = client.patch(url, {"name": "renamed", "labels": {"team": "search"}}, format="json")
    assert ok.status_code == 200
    config.refresh_from_db()
    assert (config.name, config.labels, config.method) == ("renamed", {"team": "search"}, "eagle3")


def test_list_filters(config: FrozenConfiguration, other: FrozenConfiguration) -> None:
    baseline = configuration_create(document=document(proposal={}), labels={"role": "baseline"})[0]
    client = client_for(roles.VIEWER)
    by_method = client.get("/api/v1/configurations/?method=none").json()
    assert [row["id"] for row in by_method["results"]] == [baseline.pk]
    by_target = client.get(f"/api/v1/configurations/?target_hash={config.target_hash}").json()
    assert by_target["count"] == 3
    by_label = client.get("/api/v1/configurations/?label=role=baseline").json()
    assert [row["id"] for row in by_label["results"]] == [baseline.pk]
    assert client.get("/api/v1/configurations/?engine=sglang").json()["count"] == 0
    assert client.get("/api/v1/configurations/?engine=tgi").status_code == 400


def test_diff_launch_command_and_lint_of_stored_configurations(
    config: FrozenConfiguration, other: FrozenConfiguration
) -> None:
    client = client_for(roles.VIEWER)
    differences = client.get(f"/api/v1/configurations/{other.pk}/diff/?other={config.pk}").json()
    assert differences["differences"] == [
        {"path": "/proposal/num_speculative_tokens", "left": 3, "right": 5}
    ]
    launch = client.get(f"/api/v1/configurations/{config.pk}/launch-command/?port=8100").json()
    spec = launch["argv"][launch["argv"].index("--speculative-config") + 1]
    assert json.loads(spec) == config.document["proposal"]
    assert launch["env"] == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert launch["argv"][-2:] == ["--port", "8100"]
    rules = {
        f["rule"] for f in client.get(f"/api/v1/configurations/{other.pk}/lint/").json()["findings"]
    }
    assert "vllm-schedule-k-above-num-speculative-tokens" in rules
    host_register(name="airgap", offline=True)
    offline = client.get(f"/api/v1/configurations/{config.pk}/lint/?host=airgap").json()["findings"]
    assert {"draft-hub-id-offline": "error"}.items() <= {
        f["rule"]: f["severity"] for f in offline
    }.items()


def test_import_command_api_round_trips_with_launch_command(config: FrozenConfiguration) -> None:
    client = client_for(roles.VIEWER)
    launch = client.get(f"/api/v1/configurations/{config.pk}/launch-command/").json()
    doc = config.document
    imported = client.post(
        "/api/v1/configurations/import-command/",
        {
            "command": " ".join(f"{k}={v}" for k, v in launch["env"].items())
            + " "
            + launch["shell"],
            "engine_version": doc["engine_build"]["version"],
            "sampling": doc["sampling"],
        },
        format="json",
    )
    assert imported.status_code == 200, imported.content
    assert imported.json()["config_hash"] == config.config_hash
    bad = client.post(
        "/api/v1/configurations/import-command/", {"command": "ollama run x"}, format="json"
    )
    assert bad.status_code == 400
    assert "command" in bad.json()["error"]["fields"]


def test_import_command_api_round_trips_a_llamacpp_configuration_with_its_gguf_pins() -> None:
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples/configs/llamacpp-draft-simple.json"
    doc = json.loads(path.read_text())["document"]
    stored = configuration_create(document=doc)[0]
    client = client_for(roles.VIEWER)
    launch = client.get(f"/api/v1/configurations/{stored.pk}/launch-command/").json()
    body = {
        "command": launch["shell"],
        "engine_version": doc["engine_build"]["version"],
        "sampling": doc["sampling"],
        "model_sha256": doc["target"]["model_sha256"],
        "draft_sha256": doc["proposal"]["spec_draft_model_sha256"],
    }
    imported = client.post("/api/v1/configurations/import-command/", body, format="json")
    assert imported.status_code == 200, imported.content
    assert imported.json()["config_hash"] == stored.config_hash
    wrong = client.post(
        "/api/v1/configurations/import-command/",
        {"command": "vllm serve m", "model_sha256": "a" * 64},
        format="json",
    )
    assert wrong.status_code == 400
    assert "command" in wrong.json()["error"]["fields"]


def test_a_configuration_used_by_an_experiment_cannot_be_deleted(
    config: FrozenConfiguration,
) -> None:
    from experiments.models import Arm, Experiment

    experiment = Experiment.objects.create(name="e", workloads=[], loads=[], objectives={})
    Arm.objects.create(experiment=experiment, position=0, label="baseline", configuration=config)
    response = client_for(roles.EXPERIMENTER).delete(f"/api/v1/configurations/{config.pk}/")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "protected"
    assert FrozenConfiguration.objects.filter(pk=config.pk).exists()
