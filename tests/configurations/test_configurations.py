from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, connections, transaction
from django.db.models import QuerySet

from configurations.models import FrozenConfiguration, ImmutableConfigurationError
from configurations.services import configuration_create, configuration_update
from specportal.api.errors import ApplicationError
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
