"""Credentials: bearer parsing, hashing, key issue rules."""

from __future__ import annotations

import pytest

from gateway.access.auth import bearer_secret, hash_key, issue_key, workspace_roles
from gateway.errors import InvalidInputError, UnauthenticatedError
from settings.records import Role


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer ", "Basic abc", "Token x"])
def test_bearer_header_must_be_well_formed(header: str | None) -> None:
    """Anything but `Bearer <key>` is unauthenticated."""
    with pytest.raises(UnauthenticatedError):
        bearer_secret(header)


def test_bearer_secret_is_extracted() -> None:
    """The key after the scheme is returned, case-insensitive scheme."""
    assert bearer_secret("bearer kbg_abc") == "kbg_abc"


def test_issued_key_is_stored_only_as_its_hash() -> None:
    """The record holds the sha256 of the secret and never the secret."""
    secret, record = issue_key(org_id="o", tenant_id="t", roles=["retrieve"], clearance=None)
    assert secret.startswith("kbg_")
    assert record.key_hash == hash_key(secret)
    assert secret not in repr(record)
    assert record.clearance == "internal"


def test_keys_are_unique() -> None:
    """Two issued keys never share a secret or an id."""
    first = issue_key(org_id="o", tenant_id="t", roles=["retrieve"], clearance="public")
    second = issue_key(org_id="o", tenant_id="t", roles=["retrieve"], clearance="public")
    assert first[0] != second[0]
    assert first[1].key_id != second[1].key_id


@pytest.mark.parametrize("roles", [[], ["platform"], ["superuser"], ["admin", "platform"]])
def test_workspace_keys_take_workspace_roles_only(roles: list[str]) -> None:
    """Workspace keys carry admin/ingest/retrieve, at least one, never platform."""
    with pytest.raises(InvalidInputError):
        workspace_roles(roles)


def test_roles_are_deduplicated_in_order() -> None:
    """Repeated roles collapse, order kept."""
    assert workspace_roles(["ingest", "admin", "ingest"]) == [Role.INGEST, Role.ADMIN]


def test_unknown_clearance_is_refused() -> None:
    """A clearance outside the labels is a field error."""
    with pytest.raises(InvalidInputError) as caught:
        issue_key(org_id="o", tenant_id="t", roles=["retrieve"], clearance="cosmic")
    assert caught.value.field == "clearance"
