"""The Redis store's golden sets, evaluations, evaluation leases and measured off-topic
lines (`settings.golden`).

`RedisStore` inherits these methods; they call Redis through its client and fail-fast
gate. Keys (ids percent-encoded, as everywhere in `settings.stores.redis.store`):

    kbgate:golden:{tenant_id}:{kb_id}             GoldenSet (JSON)
    kbgate:evaluation:{tenant_id}:{evaluation_id} Evaluation (JSON)
    kbgate:evaluations:{tenant_id}:{kb_id}        list of the KB's evaluation ids, newest first
    kbgate:evaluationlease:{tenant_id}            the running evaluation's id, with PX lease
    kbgate:lines:{tenant_id}:{kb_id}              hash: Scope -> MeasuredLines (JSON)
    kbgate:migration:{tenant_id}:{kb_id}          ModelMigration (JSON)
    kbgate:calibrated:{tenant_id}                 set of KB ids holding any of the above
    kbgate:migrating                              set of `{tenant_id}:{kb_id}` building

Ids inside the list and the lease are stored percent-encoded, so a script can build a
record's key from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import redis.asyncio

from settings.golden import (
    EVALUATIONS_KEPT,
    Evaluation,
    EvaluationStatus,
    GoldenSet,
    MeasuredLines,
)
from settings.migration import MigrationStatus, ModelMigration
from settings.records import SettingChange
from settings.store_rules import RecordDecoder, encode, no_workspace

# KEYS: workspace, golden set, calibrated set. ARGV: record, kb id. -1 no workspace, 1 stored.
_PUT_GOLDEN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[2])
return 1
"""

# KEYS: workspace, KB's lines, calibrated set. ARGV: Scope, record, kb id.
_PUT_LINES = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[3])
return 1
"""

# KEYS: workspace, lease, record, KB's list, calibrated set.
# ARGV: encoded id, record, lease ms, kept, record key prefix, kb id.
# {-1} no workspace; {0, holder} the lease is held; {1} stored.
_START = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local holder = redis.call('GET', KEYS[2])
if holder then return {0, holder} end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
redis.call('SET', KEYS[3], ARGV[2])
redis.call('LPUSH', KEYS[4], ARGV[1])
redis.call('SADD', KEYS[5], ARGV[6])
local kept = tonumber(ARGV[4])
for _, id in ipairs(redis.call('LRANGE', KEYS[4], kept, -1)) do
  redis.call('DEL', ARGV[5] .. id)
end
redis.call('LTRIM', KEYS[4], 0, kept - 1)
return {1}
"""

# KEYS: record, lease. ARGV: record, encoded id, running ('1' or '0'), lease ms.
_UPDATE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
if redis.call('GET', KEYS[2]) == ARGV[2] then
  if ARGV[3] == '1' then redis.call('PEXPIRE', KEYS[2], ARGV[4]) else redis.call('DEL', KEYS[2]) end
end
return 1
"""

# KEYS: workspace, migration, calibrated set, building set. ARGV: record, kb id, member,
# building ('1' or '0'). 0 no workspace, 1 stored.
_PUT_MIGRATION = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[2])
if ARGV[4] == '1' then
  redis.call('SADD', KEYS[4], ARGV[3])
else
  redis.call('SREM', KEYS[4], ARGV[3])
end
return 1
"""
# KEYS: golden set, KB's list, lease, KB's lines, migration, building set. ARGV: record key
# prefix, building set member. How many golden sets and evaluations went.
_DELETE = """
redis.call('DEL', KEYS[4])
redis.call('DEL', KEYS[5])
redis.call('SREM', KEYS[6], ARGV[2])
local removed = redis.call('DEL', KEYS[1])
local holder = redis.call('GET', KEYS[3])
for _, id in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  removed = removed + redis.call('DEL', ARGV[1] .. id)
  if id == holder then redis.call('DEL', KEYS[3]) end
end
redis.call('DEL', KEYS[2])
return removed
"""


#: the building migrations' `{tenant_id}:{kb_id}` (each percent-encoded)
_MIGRATING = "kbgate:migrating"


def _member(tenant_id: str, kb_id: str) -> str:
    return f"{_segment(tenant_id)}:{_segment(kb_id)}"


def _key(kind: str, *ids: str) -> str:
    """`kbgate:{kind}:{id}[:{id}]`, each id percent-encoded: the layout of
    `settings.stores.redis.store`."""
    return ":".join(("kbgate", kind, *(_segment(part) for part in ids)))


def _segment(value: str) -> str:
    return quote(value, safe="")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class RedisCalibration:
    """Golden sets and evaluations in Redis (see the module docstring)."""

    _client: redis.asyncio.Redis
    _decode: RecordDecoder

    if TYPE_CHECKING:  # defined by the store this is mixed into

        def _calling(self) -> AbstractContextManager[None]: ...

    async def _script(self, source: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        script = self._client.register_script(source)
        with self._calling():
            return await script(keys=list(keys), args=list(args))

    async def put_golden_set(self, golden: GoldenSet) -> None:
        """Create or replace the KB's golden set. NotFoundError if the workspace is unknown."""
        tenant_id = golden.tenant_id
        outcome = await self._script(
            _PUT_GOLDEN,
            [
                _key("ws", tenant_id),
                _key("golden", tenant_id, golden.kb_id),
                _key("calibrated", tenant_id),
            ],
            [encode(golden), golden.kb_id],
        )
        if outcome == -1:
            raise no_workspace(tenant_id)

    async def put_measured_lines(self, lines: MeasuredLines) -> None:
        """Keep the KB's lines for their Scope; nothing when the workspace is unknown."""
        tenant_id = lines.tenant_id
        await self._script(
            _PUT_LINES,
            [
                _key("ws", tenant_id),
                _key("lines", tenant_id, lines.kb_id),
                _key("calibrated", tenant_id),
            ],
            [lines.scope, encode(lines), lines.kb_id],
        )

    async def get_measured_lines(
        self, tenant_id: str, kb_id: str, scope: str
    ) -> MeasuredLines | None:
        with self._calling():
            raw = await self._client.hget(_key("lines", tenant_id, kb_id), scope)
        return None if raw is None else self._decode.one(MeasuredLines, raw)

    async def get_golden_set(self, tenant_id: str, kb_id: str) -> GoldenSet | None:
        with self._calling():
            raw = await self._client.get(_key("golden", tenant_id, kb_id))
        return self._decode.one_or_none(GoldenSet, raw)

    async def start_evaluation(self, evaluation: Evaluation, *, lease_s: float) -> str | None:
        """Store a running evaluation under the workspace's lease, or name the one holding it."""
        tenant_id, kb_id = evaluation.tenant_id, evaluation.kb_id
        outcome = await self._script(
            _START,
            [
                _key("ws", tenant_id),
                _key("evaluationlease", tenant_id),
                _key("evaluation", tenant_id, evaluation.evaluation_id),
                _key("evaluations", tenant_id, kb_id),
                _key("calibrated", tenant_id),
            ],
            [
                _segment(evaluation.evaluation_id),
                encode(evaluation),
                _lease_ms(lease_s),
                EVALUATIONS_KEPT,
                _key("evaluation", tenant_id, ""),
                kb_id,
            ],
        )
        if outcome[0] == -1:
            raise no_workspace(tenant_id)
        if outcome[0] == 0:
            return _text(outcome[1])
        return None

    async def update_evaluation(self, evaluation: Evaluation, *, lease_s: float) -> bool:
        """Replace it; renew (running) or give back (finished) its lease. False: it is gone."""
        running = evaluation.status is EvaluationStatus.RUNNING
        outcome = await self._script(
            _UPDATE,
            [
                _key("evaluation", evaluation.tenant_id, evaluation.evaluation_id),
                _key("evaluationlease", evaluation.tenant_id),
            ],
            [
                encode(evaluation),
                _segment(evaluation.evaluation_id),
                "1" if running else "0",
                _lease_ms(lease_s),
            ],
        )
        return bool(outcome == 1)

    async def get_evaluation(self, tenant_id: str, evaluation_id: str) -> Evaluation | None:
        with self._calling():
            raw = await self._client.get(_key("evaluation", tenant_id, evaluation_id))
        return self._decode.one_or_none(Evaluation, raw)

    async def list_evaluations(self, tenant_id: str, kb_id: str) -> list[Evaluation]:
        """The KB's evaluations, newest first."""
        prefix = _key("evaluation", tenant_id, "")
        with self._calling():
            ids = await self._client.lrange(_key("evaluations", tenant_id, kb_id), 0, -1)
            if not ids:
                return []
            raws: list[bytes | str | None] = await self._client.mget(
                [prefix + _text(found) for found in ids]
            )
        return self._decode.each(Evaluation, raws)

    async def delete_calibration(self, tenant_id: str, kb_id: str | None = None) -> int:
        """Remove golden sets and evaluations (one KB's, or all the tenant's) and their lease."""
        calibrated = _key("calibrated", tenant_id)
        if kb_id is None:
            with self._calling():
                members = await self._client.smembers(calibrated)
            kb_ids = sorted(_text(member) for member in members)
        else:
            kb_ids = [kb_id]
        removed = 0
        for each in kb_ids:
            removed += int(
                await self._script(
                    _DELETE,
                    [
                        _key("golden", tenant_id, each),
                        _key("evaluations", tenant_id, each),
                        _key("evaluationlease", tenant_id),
                        _key("lines", tenant_id, each),
                        _key("migration", tenant_id, each),
                        _MIGRATING,
                    ],
                    [_key("evaluation", tenant_id, ""), _member(tenant_id, each)],
                )
            )
            with self._calling():
                await self._client.srem(calibrated, each)
        return removed

    async def put_migration(self, migration: ModelMigration) -> bool:
        """Create or replace the KB's migration; False when the workspace is unknown."""
        tenant_id, kb_id = migration.tenant_id, migration.kb_id
        stored = await self._script(
            _PUT_MIGRATION,
            [
                _key("ws", tenant_id),
                _key("migration", tenant_id, kb_id),
                _key("calibrated", tenant_id),
                _MIGRATING,
            ],
            [
                encode(migration),
                kb_id,
                _member(tenant_id, kb_id),
                "1" if migration.status is MigrationStatus.BUILDING else "0",
            ],
        )
        return int(stored) == 1

    async def get_migration(self, tenant_id: str, kb_id: str) -> ModelMigration | None:
        with self._calling():
            raw = await self._client.get(_key("migration", tenant_id, kb_id))
        return self._decode.one_or_none(ModelMigration, raw)

    async def building_migrations(self) -> list[ModelMigration]:
        with self._calling():
            members = sorted(_text(m) for m in await self._client.smembers(_MIGRATING))
        found: list[ModelMigration] = []
        for member in members:
            tenant, _, kb = member.partition(":")
            with self._calling():
                raw = await self._client.get(f"kbgate:migration:{tenant}:{kb}")
            migration = self._decode.one_or_none(ModelMigration, raw)
            if migration is not None and migration.status is MigrationStatus.BUILDING:
                found.append(migration)
        return found

    async def append_settings_history(
        self, tenant_id: str, changes: Sequence[SettingChange]
    ) -> None:
        """Append changes stored elsewhere to the workspace's settings history."""
        if not changes:
            return
        with self._calling():
            await self._client.rpush(_key("history", tenant_id), *map(encode, changes))


def _lease_ms(lease_s: float) -> int:
    return max(1, round(lease_s * 1000))
