"""A knowledge base's model migration, as the SettingsStore keeps it.

A migration embeds every passage of one KB with another dense model beside the vectors
it answers from (a second vector set), checks both sets on the KB's golden set, and
switches the KB between them (`gateway.admin.migration`). Which set a KB answers from is
its record's `embedding_model` (`settings.records.KnowledgeBase`), read by turns through
the settings cache; this record holds the migration's progress, its validation and its
steps, each with the acting key's id. One per KB: starting another replaces a finished
one. Deleted with the KB, beside its golden set.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec


class MigrationStatus(enum.StrEnum):
    #: the new vectors are being written (a background job, resumed at start)
    BUILDING = "building"
    #: every passage has the new vectors; the KB still answers from the old ones
    BUILT = "built"
    #: the KB answers from the new vectors; the old ones are kept (roll back is instant)
    SWITCHED = "switched"
    #: switched back: the KB answers from the old vectors again; the new ones are kept
    ROLLED_BACK = "rolled_back"
    #: the vectors the KB does not answer from were removed: the migration is over
    RETIRED = "retired"
    #: stopped while building; the new vectors were removed
    CANCELLED = "cancelled"
    #: building stopped on a fault (`error`); starting it again goes on where it was
    FAILED = "failed"


#: statuses in which both vector sets are kept (new writes embedded with both)
BOTH_SETS = frozenset(
    {
        MigrationStatus.BUILDING,
        MigrationStatus.BUILT,
        MigrationStatus.SWITCHED,
        MigrationStatus.ROLLED_BACK,
        MigrationStatus.FAILED,
    }
)


class MigrationStep(msgspec.Struct, frozen=True, kw_only=True):
    """One step of a migration: what, when, and which key (id) did it."""

    at: str
    key_id: str
    action: str


class ModelMigration(msgspec.Struct, frozen=True, kw_only=True):
    """One KB's migration from `source_model` to `target_model` (model ids)."""

    migration_id: str
    tenant_id: str
    kb_id: str
    source_model: str
    target_model: str
    #: the key (id) that started it; the background job writes as that key's workspace
    key_id: str
    created_at: str
    updated_at: str
    status: MigrationStatus = MigrationStatus.BUILDING
    #: passages holding the new vectors, and the KB's passages, when last counted
    done: int = 0
    total: int = 0
    #: passages embedded per second by the background job (its last stretch)
    rate: float = 0.0
    #: why building stopped (a short reason, never content)
    error: str | None = None
    #: the golden set's figures on both vector sets (`gateway.admin.migration`), once run
    validation: Any = None
    #: a policy: once built, validate as the starting key and switch when the new set's
    #: nDCG@10 is not below the old one's by more than this (None: the admin decides)
    switch_when_not_worse_by: float | None = None
    #: every step, oldest first
    steps: list[MigrationStep] = msgspec.field(default_factory=list)

    @property
    def both_sets(self) -> bool:
        """Whether the KB holds both vector sets (new writes get both)."""
        return self.status in BOTH_SETS
