"""Request and answer bodies of a KB's model migration (`gateway.admin.migration`)."""

from __future__ import annotations

import msgspec

from gateway.admin.migration_figures import Validation
from gateway.http.schemas import Strict
from settings.migration import MigrationStatus


class StartMigration(Strict):
    #: the dense model to move to: the bundled MiniLM, its integer re-quantization
    #: (`kbgate/all-MiniLM-L6-v2-int8-questions`) or a fastembed model in the model cache
    model: str
    #: a policy: once built, validate on the golden set and switch when the new vectors'
    #: nDCG@10 is not below the old ones' by more than this (0..1)
    switch_when_not_worse_by: float | None = msgspec.field(default=None)


class SwitchMigration(Strict):
    #: switch without a finished validation on the golden set (a KB without one)
    override: bool = False
    #: refuse (409) when the new vectors' nDCG@10 is below the old ones' by more
    max_ndcg_drop: float | None = msgspec.field(default=None)


class MigrationProgressOut(msgspec.Struct, kw_only=True):
    #: passages holding the new vectors, of the KB's passages
    done: int
    total: int
    #: passages embedded per second lately (0 while idle)
    rate: float


class MigrationStepOut(msgspec.Struct, kw_only=True):
    at: str
    key_id: str
    action: str


class VectorSetOut(msgspec.Struct, kw_only=True):
    """One vector set of the KB: its model and named vector, and whether turns use it."""

    model: str
    vector: str
    answering: bool


class MigrationOut(msgspec.Struct, kw_only=True):
    migration_id: str
    kb_id: str
    status: MigrationStatus
    source_model: str
    target_model: str
    created_at: str
    updated_at: str
    #: the key (id) that started it
    key_id: str
    #: the switch policy it was started with (None: the admin switches)
    switch_when_not_worse_by: float | None
    progress: MigrationProgressOut
    error: str | None
    #: the golden set on both vector sets, side by side (once run)
    validation: Validation | None
    #: the KB's vector sets while both are kept, else the one left
    vector_sets: list[VectorSetOut]
    steps: list[MigrationStepOut]
