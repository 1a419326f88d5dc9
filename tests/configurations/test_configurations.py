from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, connections, transaction
from django.db.models import QuerySet

from configurations.models import (
    ConfigurationTombstone,
    FrozenConfiguration,
    IdentityMismatchError,
    ImmutableConfigurationError,
)
from configurations.services import configuration_create, configuration_update
from specportal.api.errors import ApplicationError
from specportal.engines.document import canonical_json, prepare
from tests.configurations.factories import VLLM_EAGLE3, document

pytestmark = pytest.mark.django_db(databases=["default", "sqlite"])


def test_creating_the_same_content_twice_returns_the_stored_configuration() -> None:
    first, created = configuration_create(document=VLLM_EAGLE3, name="eagle3")
    reordered = dict(reversed(list(document(target__tensor_parallel_size=1.0).items())))
    second, created_again = configuration_create(document=reordered, name="another name")
    assert created
    assert not created_again
    assert second.pk == first.pk
    assert second.name == "eagle3"
    assert FrozenConfiguration.objects.count() == 1


def test_identity_columns_are_derived_from_the_document() -> None:
    config, _ = configuration_create(document=VLLM_EAGLE3)
    other, _ = configuration_create(document=document(proposal__num_speculative_tokens=4))
    assert config.engine == "vllm"
    assert config.method == "eagle3"
    assert len(config.config_hash) == 64
    assert config.target_hash == other.target_hash
    assert config.proposal_hash != other.proposal_hash


def test_invalid_documents_are_refused_with_dotted_paths_and_nothing_is_saved() -> None:
    with pytest.raises(ApplicationError) as raised:
        configuration_create(document=document(proposal__num_speculative_token=3))
    assert "document.proposal.num_speculative_token" in raised.value.fields
    assert FrozenConfiguration.objects.count() == 0


def test_orm_refuses_identity_changes_but_allows_name_description_and_labels() -> None:
    config, _ = configuration_create(document=VLLM_EAGLE3)
    config.document = document(proposal__num_speculative_tokens=3)
    with pytest.raises(ImmutableConfigurationError):
        config.save()
    with pytest.raises(ImmutableConfigurationError):
        FrozenConfiguration.objects.filter(pk=config.pk).update(method="ngram")
    fresh = FrozenConfiguration.objects.get(pk=config.pk)
    configuration_update(config=fresh, name="renamed", labels={"team": "search"})
    fresh.refresh_from_db()
    assert (fresh.name, fresh.labels) == ("renamed", {"team": "search"})
    assert fresh.document["proposal"]["num_speculative_tokens"] == 5


@pytest.mark.parametrize("alias", ["default", "sqlite"])
@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("method", "'ngram'"),
        ("config_hash", "'0000'"),
        ("engine", "'sglang'"),
        ("target_hash", "'x'"),
        ("proposal_hash", "'x'"),
    ],
)
def test_the_database_itself_refuses_raw_sql_identity_updates(
    alias: str, column: str, value: str
) -> None:
    config = _stored(alias)
    with (
        pytest.raises(DatabaseError, match="immutable"),
        transaction.atomic(using=alias),
        connections[alias].cursor() as cursor,
    ):
        cursor.execute(
            f"UPDATE configurations_frozenconfiguration SET {column} = {value} WHERE id = %s",
            [config.pk],
        )
    assert FrozenConfiguration.objects.using(alias).get(pk=config.pk).method == "eagle3"


@pytest.mark.parametrize("alias", ["default", "sqlite"])
def test_raw_sql_may_still_rename_and_relabel(alias: str) -> None:
    config = _stored(alias)
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "UPDATE configurations_frozenconfiguration SET name = 'renamed', description = 'why' "
            "WHERE id = %s",
            [config.pk],
        )
    assert FrozenConfiguration.objects.using(alias).get(pk=config.pk).name == "renamed"


@pytest.mark.parametrize("alias", ["default", "sqlite"])
def test_the_database_refuses_a_document_update_that_bypasses_the_model(alias: str) -> None:
    config = _stored(alias)
    changed = document(proposal__num_speculative_tokens=3)
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic(using=alias):
        # The plain QuerySet.update skips the model's own refusal: only the trigger stands.
        QuerySet.update(
            FrozenConfiguration.objects.using(alias).filter(pk=config.pk), document=changed
        )


@pytest.mark.parametrize("alias", ["default", "sqlite"])
def test_orm_save_refuses_on_both_vendors(alias: str) -> None:
    config = FrozenConfiguration.objects.using(alias).get(pk=_stored(alias).pk)
    config.method = "ngram"
    with pytest.raises(ImmutableConfigurationError):
        config.save(using=alias)


def test_postgres_guard_can_be_switched_off_explicitly_for_a_data_migration() -> None:
    config = _stored("default")
    with transaction.atomic(), connections["default"].cursor() as cursor:
        cursor.execute("SET LOCAL specportal.identity_guard = 'off'")
        cursor.execute(
            "UPDATE configurations_frozenconfiguration SET method = 'eagle' WHERE id = %s",
            [config.pk],
        )
    assert FrozenConfiguration.objects.get(pk=config.pk).method == "eagle"


def test_a_referenced_configuration_cannot_be_deleted_in_the_database() -> None:
    # (the table vanishes with the test transaction)
    config = _stored("default")
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "CREATE TABLE test_referrer (config_id bigint NOT NULL "
            "REFERENCES configurations_frozenconfiguration (id))"
        )
        cursor.execute("INSERT INTO test_referrer VALUES (%s)", [config.pk])
    with (
        pytest.raises(DatabaseError),
        transaction.atomic(),
        connections["default"].cursor() as cursor,
    ):
        cursor.execute("DELETE FROM configurations_frozenconfiguration WHERE id = %s", [config.pk])
    assert FrozenConfiguration.objects.filter(pk=config.pk).exists()


def test_the_creator_cannot_be_deleted_while_their_configurations_exist() -> None:
    from django.db.models import ProtectedError

    user = User.objects.create_user("author")
    configuration_create(document=VLLM_EAGLE3, created_by=user)
    with pytest.raises(ProtectedError):
        user.delete()


def _stored(alias: str) -> FrozenConfiguration:
    if alias == "default":
        return configuration_create(document=VLLM_EAGLE3)[0]
    from specportal.engines.document import prepare

    normalised, ident = prepare(VLLM_EAGLE3)
    return FrozenConfiguration.objects.using(alias).create(
        config_hash=ident.config_hash,
        target_hash=ident.target_hash,
        proposal_hash=ident.proposal_hash,
        engine="vllm",
        method=ident.method,
        document=normalised,
    )


# --- identity on INSERT, ids never reused (issue 15, finding 10) --------------------------------


def raw_insert_values(doc: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """Column values of a raw INSERT of ``doc`` whose identity agrees, then ``overrides``."""
    normalised, ident = prepare(doc)
    values: dict[str, Any] = {
        "config_hash": ident.config_hash,
        "target_hash": ident.target_hash,
        "proposal_hash": ident.proposal_hash,
        "engine": normalised["engine"],
        "method": ident.method,
        "document": json.dumps(normalised),
        "name": "raw",
        "description": "",
        "labels": "{}",
        "created_at": "2026-12-01 10:00:00+00:00",
        "canonical": ident.canonical,
        "target_canonical": canonical_json(normalised["target"]),
        "proposal_canonical": canonical_json(normalised["proposal"]),
    }
    values.update(overrides)
    return values


def raw_insert(cursor: Any, values: dict[str, Any]) -> None:
    columns = ", ".join(values)
    cursor.execute(
        f"INSERT INTO configurations_frozenconfiguration ({columns}) "
        f"VALUES ({', '.join(['%s'] * len(values))})",
        list(values.values()),
    )


OTHER = document(proposal__num_speculative_tokens=2)


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"config_hash": "0" * 64}, id="config_hash-not-the-documents"),
        pytest.param({"target_hash": "0" * 64}, id="target_hash-not-the-targets"),
        pytest.param({"proposal_hash": "0" * 64}, id="proposal_hash-not-the-proposals"),
        pytest.param(
            {"document": json.dumps(prepare(OTHER)[0])}, id="document-not-the-canonical-bytes"
        ),
        pytest.param(
            {"canonical": prepare(OTHER)[1].canonical}, id="canonical-of-another-document"
        ),
        pytest.param({"canonical": b"\xff\xfe not json"}, id="canonical-not-json"),
        pytest.param(
            {"target_canonical": canonical_json({"model": "other"})}, id="target-bytes-differ"
        ),
        pytest.param({"engine": "sglang"}, id="engine-not-the-documents"),
        pytest.param(
            {
                key: raw_insert_values(OTHER)[key]
                for key in ("config_hash", "target_hash", "proposal_hash", "canonical")
            },
            id="another-documents-identity-beside-this-document",
        ),
    ],
)
def test_postgres_refuses_an_insert_whose_identity_does_not_match_its_document(
    overrides: dict[str, Any],
) -> None:
    with (
        pytest.raises(DatabaseError, match="does not match its document"),
        transaction.atomic(),
        connections["default"].cursor() as cursor,
    ):
        raw_insert(cursor, raw_insert_values(VLLM_EAGLE3, **overrides))
    assert not FrozenConfiguration.objects.exists()


def test_postgres_accepts_a_raw_insert_whose_identity_agrees() -> None:
    with connections["default"].cursor() as cursor:
        raw_insert(cursor, raw_insert_values(VLLM_EAGLE3))
    stored = FrozenConfiguration.objects.get()
    assert stored.identity_problems() == []


@pytest.mark.parametrize("alias", ["default", "sqlite"])
@pytest.mark.parametrize(
    "changes",
    [
        {"config_hash": "0" * 64},
        {"method": "ngram"},
        {"engine": "sglang"},
        {"target_hash": "1" * 64},
    ],
)
def test_the_model_refuses_an_insert_whose_identity_does_not_match(
    alias: str, changes: dict[str, Any]
) -> None:
    # On SQLite (no sha256() in SQL) this is the only check of an INSERT; the README says so.
    normalised, ident = prepare(VLLM_EAGLE3)
    fields: dict[str, Any] = {
        "config_hash": ident.config_hash,
        "target_hash": ident.target_hash,
        "proposal_hash": ident.proposal_hash,
        "engine": "vllm",
        "method": ident.method,
        "document": normalised,
        **changes,
    }
    manager = FrozenConfiguration.objects.using(alias)
    with pytest.raises(IdentityMismatchError):
        manager.create(**fields)
    with pytest.raises(IdentityMismatchError):
        manager.bulk_create([FrozenConfiguration(**fields)])
    assert not manager.exists()


@pytest.mark.parametrize("alias", ["default", "sqlite"])
def test_a_deleted_id_cannot_be_inserted_again_with_another_document(alias: str) -> None:
    config = _stored(alias)
    with connections[alias].cursor() as cursor:
        cursor.execute("DELETE FROM configurations_frozenconfiguration WHERE id = %s", [config.pk])
    tombstone = ConfigurationTombstone.objects.using(alias).get(pk=config.pk)
    assert tombstone.config_hash == config.config_hash
    # A coherent row (hashes agree with its document) under the deleted id: still refused.
    for doc in (OTHER, VLLM_EAGLE3):
        values = raw_insert_values(doc, id=config.pk)
        with (
            pytest.raises(DatabaseError, match="deleted and cannot be used again"),
            transaction.atomic(using=alias),
            connections[alias].cursor() as cursor,
        ):
            raw_insert(cursor, values)
    assert not FrozenConfiguration.objects.using(alias).filter(pk=config.pk).exists()
    # the same document may be stored again, under a new id
    again = FrozenConfiguration.objects.using(alias).create(**_fields(VLLM_EAGLE3))
    assert again.pk != config.pk


@pytest.mark.parametrize("alias", ["default", "sqlite"])
@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM configurations_configurationtombstone WHERE id = %s",
        "UPDATE configurations_configurationtombstone SET id = id + 1000 WHERE id = %s",
    ],
)
def test_tombstones_are_append_only(alias: str, statement: str) -> None:
    config = _stored(alias)
    FrozenConfiguration.objects.using(alias).filter(pk=config.pk).delete()
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(using=alias),
        connections[alias].cursor() as cursor,
    ):
        cursor.execute(statement, [config.pk])
    assert ConfigurationTombstone.objects.using(alias).filter(pk=config.pk).exists()


@pytest.mark.parametrize("alias", ["default", "sqlite"])
@pytest.mark.parametrize("column", ["canonical", "target_canonical", "proposal_canonical"])
def test_the_canonical_bytes_are_identity_too(alias: str, column: str) -> None:
    config = _stored(alias)
    with (
        pytest.raises(DatabaseError, match="immutable"),
        transaction.atomic(using=alias),
        connections[alias].cursor() as cursor,
    ):
        cursor.execute(
            f"UPDATE configurations_frozenconfiguration SET {column} = %s WHERE id = %s",
            [b"{}", config.pk],
        )
    with pytest.raises(ImmutableConfigurationError):
        FrozenConfiguration.objects.using(alias).filter(pk=config.pk).update(**{column: b"{}"})


def _fields(doc: dict[str, Any]) -> dict[str, Any]:
    normalised, ident = prepare(doc)
    return {
        "config_hash": ident.config_hash,
        "target_hash": ident.target_hash,
        "proposal_hash": ident.proposal_hash,
        "engine": normalised["engine"],
        "method": ident.method,
        "document": normalised,
    }
