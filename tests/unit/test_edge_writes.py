"""kbgate's descriptions of writes to an Edge shard (`ingest.edge_writes`)."""

from __future__ import annotations

import pytest

from ingest.edge_writes import DeleteWhere, SetPayloadWhere
from ingest.payload import Scope

SCOPE = Scope.of(org_id="acme", tenant_id="acme-support", kb_ids=["manuals"])


def test_a_deletion_names_points_or_a_document() -> None:
    """A deletion with neither points nor a document would take the whole Scope, and one
    with both is ambiguous: both are refused when made."""
    with pytest.raises(ValueError, match="either point ids or a document"):
        DeleteWhere(SCOPE)
    with pytest.raises(ValueError, match="either point ids or a document"):
        DeleteWhere(SCOPE, point_ids=frozenset({"a"}), document_id="d")
    assert DeleteWhere(SCOPE, document_id="d").document_id == "d"


def test_a_payload_update_names_points_or_the_missing_org() -> None:
    """A payload update applies to named points or to the points without an org id,
    never to a whole Scope by default."""
    with pytest.raises(ValueError, match="either point ids or org_missing"):
        SetPayloadWhere(SCOPE, {"orgId": "acme"})
    with pytest.raises(ValueError, match="either point ids or org_missing"):
        SetPayloadWhere(SCOPE, {"orgId": "acme"}, point_ids=frozenset({"a"}), org_missing=True)
    assert SetPayloadWhere(SCOPE, {"orgId": "acme"}, org_missing=True).org_missing
