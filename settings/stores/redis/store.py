"""The deployed SettingsStore: Redis, shared by every gateway replica.

Key layout (every id percent-encoded as one segment, so an id containing `:`
can never split into two segments or collide with another key):

    kbgate:org:{org_id}                    Org (JSON)
    kbgate:ws:{tenant_id}                  Workspace (JSON), settings included; no two
                                           tenant ids differ in case only
    kbgate:pseudonymkey:{tenant_id}        the workspace's pseudonym key (raw bytes)
    kbgate:history:{tenant_id}             list of SettingChange (JSON), oldest first
    kbgate:adminhistory:{tenant_id}        list of AdminChange (JSON), oldest first
    kbgate:kb:{tenant_id}:{kb_id}          KnowledgeBase (JSON)
    kbgate:kbs:{tenant_id}                 set of the tenant's KB ids (raw)
    kbgate:agent:{tenant_id}:{agent_id}    Agent (JSON)
    kbgate:agents:{tenant_id}              set of the tenant's agent ids (raw)
    kbgate:heldback:{tenant_id}:{kb_id}    integer (INCRBY)
    kbgate:keyhash:{key_hash}              ApiKey (JSON), the hot lookup
    kbgate:keyid:{key_id}                  the key's hash (keeps key ids unique)
    kbgate:keyuse                          hash: key id -> when it was last used
    kbgate:keyhistory                      list of KeyEvent (JSON), oldest first
    kbgate:deletions                       list of DeletionRecord (JSON), oldest first
    kbgate:turn:{turn_id}                  TurnRecord (JSON), with EX ttl
    (golden sets and evaluations: `settings.stores.redis.calibration`)

Writes that change a workspace, KB or agent record publish the tenant id on the
channel `kbgate:invalidate` (best effort: a failed publish does not fail the write);
`invalidations()` yields them to a cache layer. Revoking a key publishes
`CREDENTIALS_CHANGED` (the empty string, never a tenant id): every cached credential
is checked again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, TypeAlias
from urllib.parse import quote, unquote

import redis.asyncio
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from settings.records import (
    AdminChange,
    Agent,
    ApiKey,
    DeletionRecord,
    KeyEvent,
    KnowledgeBase,
    Lifecycle,
    Org,
    SettingChange,
    TurnRecord,
    Workspace,
)
from settings.store import StoreUnavailableError
from settings.store_rules import (
    RecordDecoder,
    changed_workspace,
    check_turn_ttl,
    encode,
    key_taken,
    marked_deleting,
    new_pseudonym_key,
    no_org,
    no_workspace,
    org_not_empty,
    org_taken,
    own_turn,
    with_last_use,
    workspace_taken,
)
from settings.stores.outage import DEFAULT_HOLD_S, FailFast
from settings.stores.redis.calibration import RedisCalibration

INVALIDATION_CHANNEL = "kbgate:invalidate"
#: announced on the channel when a key is revoked (no tenant id is empty)
CREDENTIALS_CHANGED = ""

# Optimistic (WATCH) retries of a settings update before giving up; only other
# replicas compete, as updates within one store wait for each other.
_UPDATE_ATTEMPTS = 32

# KEYS: org, workspace, pseudonym key. ARGV: record, key. -1 no org, 0 taken, 1 created.
_CREATE_WORKSPACE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if not redis.call('SET', KEYS[2], ARGV[1], 'NX') then return 0 end
redis.call('SET', KEYS[3], ARGV[2])
return 1
"""

# KEYS: workspace, pseudonym key. ARGV: a new key, set only where none is. The key, or nil
# when there is no such workspace.
_PSEUDONYM_KEY = """
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
redis.call('SET', KEYS[2], ARGV[1], 'NX')
return redis.call('GET', KEYS[2])
"""

# KEYS: workspace, record, id set. ARGV: record, id. -1 no workspace, 0 replaced, 1 created.
_PUT_SCOPED = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local created = redis.call('EXISTS', KEYS[2]) == 0
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[2])
if created then return 1 end
return 0
"""

# KEYS: by id, by hash, history. ARGV: hash, record, event ("" for none). 0 taken, 1 created.
_CREATE_KEY = """
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
if ARGV[3] ~= '' then redis.call('RPUSH', KEYS[3], ARGV[3]) end
return 1
"""

# KEYS: by id, use hash, history. ARGV: key id, event ("" for none), by-hash key prefix.
# The removed record, or nil when there was none.
_REVOKE_KEY = """
local key_hash = redis.call('GET', KEYS[1])
if not key_hash then return nil end
local by_hash = ARGV[3] .. key_hash
local record = redis.call('GET', by_hash)
redis.call('DEL', KEYS[1], by_hash)
redis.call('HDEL', KEYS[2], ARGV[1])
if ARGV[2] ~= '' then redis.call('RPUSH', KEYS[3], ARGV[2]) end
return record
"""

# KEYS: key history. ARGV: tenant id. Drops the tenant's events, keeps the others in order;
# returns how many went.
_FORGET_KEY_EVENTS = """
local events = redis.call('LRANGE', KEYS[1], 0, -1)
local kept = {}
for _, raw in ipairs(events) do
  local ok, event = pcall(cjson.decode, raw)
  if not (ok and type(event) == 'table' and event['tenant_id'] == ARGV[1]) then
    kept[#kept + 1] = raw
  end
end
local removed = #events - #kept
if removed > 0 then
  redis.call('DEL', KEYS[1])
  for first = 1, #kept, 1000 do
    redis.call('RPUSH', KEYS[1], unpack(kept, first, math.min(first + 999, #kept)))
  end
end
return removed
"""

# KEYS: by id, use hash. ARGV: key id, when. Only a key that still exists.
_RECORD_KEY_USE = """
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[2], ARGV[1], ARGV[2]) end
return 0
"""
_KEY_USE = "kbgate:keyuse"
_KEY_HISTORY = "kbgate:keyhistory"
_DELETIONS = "kbgate:deletions"
#: how many keys one SCAN step asks for (admin listings and deletions only)
_SCAN_COUNT = 1000


def _key(kind: str, *ids: str) -> str:
    """`kbgate:{kind}:{id}[:{id}]`, each id percent-encoded (injective, `:` never raw)."""
    return ":".join(("kbgate", kind, *(quote(part, safe="") for part in ids)))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _event(event: KeyEvent | None) -> bytes:
    return b"" if event is None else encode(event)


#: the client one process shares between its Redis stores (`redis_client`): the settings
#: store, the rate limits, the failed-authentication counter and the console's sessions
SharedRedis: TypeAlias = redis.asyncio.Redis


def redis_client(url: str, timeout_s: float) -> SharedRedis:
    """A client whose every call ends within about `timeout_s`.

    Connect and socket timeouts of timeout_s; one immediate retry on a connection
    error (a pooled connection that died with a server restart) and none on
    timeouts. redis-py's default would retry three times with backoff, multiplying
    the wait on a dead or blackholed server.
    """
    return redis.asyncio.Redis.from_url(
        url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 1, supported_errors=(redis.exceptions.ConnectionError,)),
    )


def _gate(timeout_s: float) -> FailFast:
    """While Redis is known to be down, calls fail at once (one probe at a time)."""
    return FailFast(probe_s=2 * timeout_s + DEFAULT_HOLD_S)


@contextmanager
def _unavailable() -> Iterator[None]:
    """Turn connection-level failures into StoreUnavailableError."""
    try:
        yield
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as error:
        raise StoreUnavailableError(f"redis: {error}") from error


class RedisStore(RedisCalibration):
    """SettingsStore on Redis; see the module docstring. It closes its client unless the
    client is shared (`sharing`)."""

    def __init__(
        self, client: redis.asyncio.Redis, gate: FailFast | None = None, *, owns_client: bool = True
    ) -> None:
        self._client = client
        self._owns_client = owns_client
        # After a failed call, later calls fail at once for a moment (settings/stores/outage.py).
        self._gate = gate if gate is not None else FailFast(probe_s=30.0)
        self._create_workspace = client.register_script(_CREATE_WORKSPACE)
        self._pseudonym_key = client.register_script(_PSEUDONYM_KEY)
        self._put_scoped = client.register_script(_PUT_SCOPED)
        self._create_key = client.register_script(_CREATE_KEY)
        self._revoke_key = client.register_script(_REVOKE_KEY)
        self._record_key_use = client.register_script(_RECORD_KEY_USE)
        self._forget_key_events = client.register_script(_FORGET_KEY_EVENTS)
        # Serialises this store's settings updates: WATCH then only races other replicas.
        self._settings_update = asyncio.Lock()
        self._decode = RecordDecoder()

    @classmethod
    def connect(cls, url: str, timeout_s: float) -> RedisStore:
        """A store on a new `redis_client`: each call fails within about timeout_s, and
        while Redis is known to be down calls fail at once (one probe at a time)."""
        return cls(redis_client(url, timeout_s), _gate(timeout_s))

    @classmethod
    def sharing(cls, client: redis.asyncio.Redis, timeout_s: float) -> RedisStore:
        """A store on the caller's `redis_client` (timeout_s its timeout), which the caller
        shares with other users of its connection pool and closes itself."""
        return cls(client, _gate(timeout_s), owns_client=False)

    @contextmanager
    def _calling(self) -> Iterator[None]:
        """One call to Redis through the fail-fast gate; connection failures are
        StoreUnavailableError, and so is any call made while the gate holds."""
        if not self._gate.admit():
            raise StoreUnavailableError("redis: unavailable (recent failure; retrying shortly)")
        answered = False
        try:
            with _unavailable():
                yield
            answered = True
        except StoreUnavailableError:
            self._gate.failed()
            raise
        except Exception:
            answered = True  # Redis answered; the error is about the answer
            raise
        finally:
            if answered:
                self._gate.succeeded()

    # organizations and workspaces

    async def create_org(self, org: Org) -> None:
        """Raises AlreadyExistsError if the org id is taken."""
        with self._calling():
            created = await self._client.set(_key("org", org.org_id), encode(org), nx=True)
        if not created:
            raise org_taken(org.org_id)

    async def get_org(self, org_id: str) -> Org | None:
        with self._calling():
            raw = await self._client.get(_key("org", org_id))
        return self._decode.one_or_none(Org, raw)

    async def create_workspace(self, workspace: Workspace) -> None:
        """AlreadyExistsError if the tenant id is taken in any org, ignoring case (a SCAN
        of the workspaces: creating one is rare); NotFoundError if no org."""
        if await self._taken_ignoring_case(workspace.tenant_id):
            raise workspace_taken(workspace.tenant_id)
        with self._calling():
            outcome = await self._create_workspace(
                keys=[
                    _key("org", workspace.org_id),
                    _key("ws", workspace.tenant_id),
                    _key("pseudonymkey", workspace.tenant_id),
                ],
                args=[encode(workspace), new_pseudonym_key()],
            )
        if outcome == -1:
            raise no_org(workspace.org_id)
        if outcome == 0:
            raise workspace_taken(workspace.tenant_id)
        await self._announce(workspace.tenant_id)

    async def _taken_ignoring_case(self, tenant_id: str) -> bool:
        """Whether another workspace's id differs from `tenant_id` in case only."""
        folded = tenant_id.lower()
        if folded == tenant_id.upper():
            return False  # no letters: no other case
        prefix = _key("ws", "")
        with self._calling():
            async for name in self._client.scan_iter(f"{prefix}*", count=_SCAN_COUNT):
                other = unquote(_text(name)[len(prefix) :])
                if other != tenant_id and other.lower() == folded:
                    return True
        return False

    async def get_workspace(self, tenant_id: str) -> Workspace | None:
        with self._calling():
            raw = await self._client.get(_key("ws", tenant_id))
        return self._decode.one_or_none(Workspace, raw)

    async def pseudonym_key(self, tenant_id: str) -> bytes | None:
        """The workspace's key; one stored without gets one (SET NX in one script, so
        replicas asking at once all read the key that was written first)."""
        with self._calling():
            found = await self._pseudonym_key(
                keys=[_key("ws", tenant_id), _key("pseudonymkey", tenant_id)],
                args=[new_pseudonym_key()],
            )
        return None if found is None else bytes(found)

    async def list_workspaces(self, org_id: str) -> list[Workspace]:
        """The org's workspaces, ordered by tenant id (SCAN over every workspace: an
        admin call)."""
        raws = await self._scan_records(_key("ws", ""))
        found = self._decode.each(Workspace, raws)
        return sorted(
            (workspace for workspace in found if workspace.org_id == org_id),
            key=lambda workspace: workspace.tenant_id,
        )

    async def _scan_records(self, prefix: str) -> list[bytes | str | None]:
        """The values of every key starting with `prefix` (ids in it are percent-encoded,
        so it holds no glob character)."""
        with self._calling():
            names = [
                _text(name)
                async for name in self._client.scan_iter(f"{prefix}*", count=_SCAN_COUNT)
            ]
            if not names:
                return []
            raws: list[bytes | str | None] = await self._client.mget(names)
        return raws

    # deletion

    async def mark_org_deleting(self, org_id: str) -> Org | None:
        """Set the org's state to `deleting` (None: no such org)."""
        key = _key("org", org_id)
        with self._calling():
            found = self._decode.one_or_none(Org, await self._client.get(key))
            if found is None:
                return None
            marked = marked_deleting(found)
            await self._client.set(key, encode(marked), xx=True)
        return marked

    async def mark_workspace_deleting(self, tenant_id: str) -> Workspace | None:
        """Set the workspace's state to `deleting` (None: no such workspace). A settings
        update racing it retries under WATCH and so keeps the mark."""
        key = _key("ws", tenant_id)
        with self._calling():
            found = self._decode.one_or_none(Workspace, await self._client.get(key))
            if found is None:
                return None
            marked = marked_deleting(found)
            await self._client.set(key, encode(marked), xx=True)
        await self._announce(tenant_id)
        return marked

    async def delete_workspace(self, tenant_id: str) -> bool:
        """Remove the workspace's events from the key history (one script), then the
        workspace, its pseudonym key, histories, KBs, agents and held-back counters in one
        MULTI/EXEC. Interrupted between, the record is still there (marked `deleting`)
        and the deletion is finished again."""
        with self._calling():
            await self._forget_key_events(keys=[_KEY_HISTORY], args=[tenant_id])
            kb_ids = [_text(m) for m in await self._client.smembers(_key("kbs", tenant_id))]
            agent_ids = [_text(m) for m in await self._client.smembers(_key("agents", tenant_id))]
            held_back = [
                _text(name)
                async for name in self._client.scan_iter(
                    f"{_key('heldback', tenant_id, '')}*", count=_SCAN_COUNT
                )
            ]
            names = [
                *(_key("kb", tenant_id, kb_id) for kb_id in kb_ids),
                *(_key("agent", tenant_id, agent_id) for agent_id in agent_ids),
                *held_back,
                _key("kbs", tenant_id),
                _key("agents", tenant_id),
                _key("history", tenant_id),
                _key("adminhistory", tenant_id),
                _key("pseudonymkey", tenant_id),
            ]
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.delete(*names)
                pipe.delete(_key("ws", tenant_id))
                _, removed = await pipe.execute()
        await self._announce(tenant_id)
        return bool(removed)

    async def delete_org(self, org_id: str) -> bool:
        """Remove the org record; NotEmptyError while it has a workspace."""
        if await self.list_workspaces(org_id):
            raise org_not_empty(org_id)
        with self._calling():
            return bool(await self._client.delete(_key("org", org_id)))

    async def pending_deletions(self) -> tuple[list[Org], list[Workspace]]:
        """Orgs and workspaces marked `deleting`, each ordered by id (SCAN: at start)."""
        orgs = self._decode.each(Org, await self._scan_records(_key("org", "")))
        workspaces = self._decode.each(Workspace, await self._scan_records(_key("ws", "")))
        return (
            sorted((o for o in orgs if o.state is Lifecycle.DELETING), key=lambda o: o.org_id),
            sorted(
                (w for w in workspaces if w.state is Lifecycle.DELETING),
                key=lambda w: w.tenant_id,
            ),
        )

    async def record_deletion(self, record: DeletionRecord) -> None:
        """Append the audit record of a completed deletion."""
        with self._calling():
            await self._client.rpush(_DELETIONS, encode(record))

    async def deletion_history(self) -> list[DeletionRecord]:
        """Every completed deletion's audit record, oldest first."""
        with self._calling():
            raws = await self._client.lrange(_DELETIONS, 0, -1)
        return self._decode.each(DeletionRecord, raws)

    async def purge_settings_history(self, before: str) -> int:
        """Trim every workspace's settings changes made before `before` (ISO 8601, UTC);
        returns how many went."""
        return await self._trim_before("history", SettingChange, before)

    async def purge_admin_history(self, before: str) -> int:
        """Trim every workspace's KB and agent changes made before `before`, likewise."""
        return await self._trim_before("adminhistory", AdminChange, before)

    async def _trim_before(
        self, kind: str, record: type[SettingChange] | type[AdminChange], before: str
    ) -> int:
        """Changes are appended in time order, so each list loses a head; LTRIM keeps
        whatever was appended meanwhile."""
        removed = 0
        with self._calling():
            async for name in self._client.scan_iter(f"{_key(kind, '')}*", count=_SCAN_COUNT):
                changes = self._decode.each(record, await self._client.lrange(name, 0, -1))
                old = next((i for i, c in enumerate(changes) if c.at >= before), len(changes))
                if old:
                    await self._client.ltrim(name, old, -1)
                    removed += old
        return removed

    async def update_workspace_settings(
        self, tenant_id: str, changes: Mapping[str, Any], *, key_id: str, at: str
    ) -> Workspace:
        """Apply changes and append their history in one MULTI/EXEC, under WATCH."""
        ws_key, history_key = _key("ws", tenant_id), _key("history", tenant_id)
        with self._calling():
            async with self._settings_update, self._client.pipeline(transaction=True) as pipe:
                for _ in range(_UPDATE_ATTEMPTS):
                    try:
                        await pipe.watch(ws_key)
                        current = self._decode.one_or_none(Workspace, await pipe.get(ws_key))
                        updated, history = changed_workspace(
                            current, tenant_id, changes, key_id=key_id, at=at
                        )
                        if not history:
                            return updated  # leaving the pipeline block unwatches
                        pipe.multi()  # type: ignore[no-untyped-call]  # unannotated in redis-py
                        pipe.set(ws_key, encode(updated))
                        pipe.rpush(history_key, *map(encode, history))
                        await pipe.execute()
                    except redis.exceptions.WatchError:
                        continue
                    break
                else:
                    raise StoreUnavailableError(
                        f"workspace {tenant_id!r}: settings update kept conflicting"
                    )
        await self._announce(tenant_id)
        return updated

    async def settings_history(self, tenant_id: str) -> list[SettingChange]:
        """Changes of one workspace, oldest first."""
        with self._calling():
            raws = await self._client.lrange(_key("history", tenant_id), 0, -1)
        return self._decode.each(SettingChange, raws)

    async def record_admin_change(self, change: AdminChange) -> None:
        """Append one change of a KB or agent to its workspace's history."""
        with self._calling():
            await self._client.rpush(_key("adminhistory", change.tenant_id), encode(change))

    async def admin_history(self, tenant_id: str) -> list[AdminChange]:
        """KB and agent changes of one workspace, oldest first."""
        with self._calling():
            raws = await self._client.lrange(_key("adminhistory", tenant_id), 0, -1)
        return self._decode.each(AdminChange, raws)

    # knowledge bases and agents

    async def put_knowledge_base(self, kb: KnowledgeBase) -> bool:
        """Create or replace; True when created. NotFoundError if the workspace is unknown."""
        return await self._put("kb", kb.tenant_id, kb.kb_id, encode(kb))

    async def get_knowledge_base(self, tenant_id: str, kb_id: str) -> KnowledgeBase | None:
        with self._calling():
            raw = await self._client.get(_key("kb", tenant_id, kb_id))
        return self._decode.one_or_none(KnowledgeBase, raw)

    async def list_knowledge_bases(self, tenant_id: str) -> list[KnowledgeBase]:
        """The tenant's KBs, ordered by id."""
        return self._decode.each(KnowledgeBase, await self._list("kb", tenant_id))

    async def put_agent(self, agent: Agent) -> bool:
        """Create or replace; True when created. NotFoundError if the workspace is unknown."""
        return await self._put("agent", agent.tenant_id, agent.agent_id, encode(agent))

    async def get_agent(self, tenant_id: str, agent_id: str) -> Agent | None:
        with self._calling():
            raw = await self._client.get(_key("agent", tenant_id, agent_id))
        return self._decode.one_or_none(Agent, raw)

    async def list_agents(self, tenant_id: str) -> list[Agent]:
        """The tenant's agents, ordered by id."""
        return self._decode.each(Agent, await self._list("agent", tenant_id))

    async def delete_knowledge_base(self, tenant_id: str, kb_id: str) -> bool:
        """Remove the KB record and its held-back counter; False when there was none."""
        return await self._delete("kb", tenant_id, kb_id, _key("heldback", tenant_id, kb_id))

    async def delete_agent(self, tenant_id: str, agent_id: str) -> bool:
        """Remove the agent record; False when there was none."""
        return await self._delete("agent", tenant_id, agent_id)

    async def _delete(self, kind: str, tenant_id: str, record_id: str, *also: str) -> bool:
        with self._calling():
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.delete(_key(kind, tenant_id, record_id))
                pipe.srem(_key(kind + "s", tenant_id), record_id)
                if also:
                    pipe.delete(*also)
                removed, *_ = await pipe.execute()
        await self._announce(tenant_id)
        return bool(removed)

    async def _put(self, kind: str, tenant_id: str, record_id: str, record: bytes) -> bool:
        with self._calling():
            outcome = await self._put_scoped(
                keys=[
                    _key("ws", tenant_id),
                    _key(kind, tenant_id, record_id),
                    _key(kind + "s", tenant_id),
                ],
                args=[record, record_id],
            )
        if outcome == -1:
            raise no_workspace(tenant_id)
        await self._announce(tenant_id)
        return bool(outcome == 1)

    async def _list(self, kind: str, tenant_id: str) -> list[bytes | str | None]:
        with self._calling():
            members = await self._client.smembers(_key(kind + "s", tenant_id))
            ids = sorted(_text(member) for member in members)
            if not ids:
                return []
            raws: list[bytes | str | None] = await self._client.mget(
                [_key(kind, tenant_id, record_id) for record_id in ids]
            )
        return raws

    # held-back counters

    async def add_held_back(self, tenant_id: str, kb_id: str, count: int = 1) -> int:
        """Increment and return the KB's held-back count."""
        with self._calling():
            return int(await self._client.incrby(_key("heldback", tenant_id, kb_id), count))

    async def held_back(self, tenant_id: str, kb_id: str) -> int:
        with self._calling():
            raw = await self._client.get(_key("heldback", tenant_id, kb_id))
        return 0 if raw is None else int(raw)

    # credentials

    async def create_api_key(self, key: ApiKey, event: KeyEvent | None = None) -> None:
        """Raises AlreadyExistsError on a duplicate key id or hash; `event` in the same script."""
        with self._calling():
            created = await self._create_key(
                keys=[_key("keyid", key.key_id), _key("keyhash", key.key_hash), _KEY_HISTORY],
                args=[key.key_hash, encode(key), _event(event)],
            )
        if created != 1:
            raise key_taken(key.key_id)

    async def get_api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        with self._calling():
            raw = await self._client.get(_key("keyhash", key_hash))
        return self._decode.one_or_none(ApiKey, raw)

    async def get_api_key(self, key_id: str) -> ApiKey | None:
        with self._calling():
            key_hash = await self._client.get(_key("keyid", key_id))
            if key_hash is None:
                return None
            raw = await self._client.get(_key("keyhash", _text(key_hash)))
        return self._decode.one_or_none(ApiKey, raw)

    async def list_api_keys(self) -> list[ApiKey]:
        """Every stored key, ordered by id, with `last_used_at` filled in (SCAN: an admin
        call, over every key ever created, so keys of older releases are listed too)."""
        prefix = _key("keyid", "")
        with self._calling():
            names = sorted(
                [_text(name) async for name in self._client.scan_iter(f"{prefix}*", count=1000)]
            )
            if not names:
                return []
            hashes: list[bytes | str | None] = await self._client.mget(names)
            found = [_text(key_hash) for key_hash in hashes if key_hash is not None]
            raws: list[bytes | str | None] = (
                await self._client.mget([_key("keyhash", key_hash) for key_hash in found])
                if found
                else []
            )
            keys = self._decode.each(ApiKey, raws)
            used: list[bytes | str | None] = (
                await self._client.hmget(_KEY_USE, [key.key_id for key in keys]) if keys else []
            )
        return [with_last_use(key, at) for key, at in zip(keys, used, strict=True)]

    async def revoke_api_key(self, key_id: str, event: KeyEvent | None = None) -> ApiKey | None:
        """Delete the key (by id and by hash) and append `event`, in one script; then
        announce `CREDENTIALS_CHANGED` so every replica checks its cached keys again."""
        with self._calling():
            raw = await self._revoke_key(
                keys=[_key("keyid", key_id), _KEY_USE, _KEY_HISTORY],
                args=[key_id, _event(event), _key("keyhash", "")],
            )
        if raw is None:
            return None
        await self._announce(CREDENTIALS_CHANGED)
        return self._decode.one(ApiKey, raw)

    async def record_key_use(self, key_id: str, at: str) -> None:
        """Remember when a key was last used (a revoked key's use is ignored)."""
        with self._calling():
            await self._record_key_use(keys=[_key("keyid", key_id), _KEY_USE], args=[key_id, at])

    async def key_history(self) -> list[KeyEvent]:
        """Every key creation and revocation, oldest first."""
        with self._calling():
            raws = await self._client.lrange(_KEY_HISTORY, 0, -1)
        return self._decode.each(KeyEvent, raws)

    # turn records

    async def put_turn(self, turn: TurnRecord, ttl_s: int) -> None:
        """Keep the turn for ttl_s seconds (Redis expires it)."""
        check_turn_ttl(ttl_s)
        with self._calling():
            await self._client.set(_key("turn", turn.turn_id), encode(turn), ex=ttl_s)

    async def get_turn(self, tenant_id: str, turn_id: str) -> TurnRecord | None:
        """The tenant's turn if it exists and has not expired (another tenant's: None)."""
        with self._calling():
            raw = await self._client.get(_key("turn", turn_id))
        return own_turn(self._decode.one_or_none(TurnRecord, raw), tenant_id)

    async def purge_expired_turns(self) -> int:
        """Nothing to do: Redis expires each turn record at the end of its time."""
        return 0

    async def delete_turns(self, tenant_id: str) -> int:
        """Remove every turn record of the tenant (SCAN over the live turns: turn keys
        carry no tenant id, the record does)."""
        prefix = _key("turn", "")
        with self._calling():
            names = [
                _text(name)
                async for name in self._client.scan_iter(f"{prefix}*", count=_SCAN_COUNT)
            ]
            raws: list[bytes | str | None] = await self._client.mget(names) if names else []
            theirs = [
                name
                for name, raw in zip(names, raws, strict=True)
                if raw is not None and self._decode.one(TurnRecord, raw).tenant_id == tenant_id
            ]
            return int(await self._client.delete(*theirs)) if theirs else 0

    # invalidation

    async def publish_invalidation(self, tenant_id: str) -> None:
        """Tell every replica's cache that this tenant's records changed."""
        with _unavailable():
            await self._client.publish(INVALIDATION_CHANNEL, tenant_id)

    async def _announce(self, tenant_id: str) -> None:
        # Best effort after a write that already succeeded: failing it would report
        # a stored change as failed; caches expire within their staleness bound anyway.
        with suppress(StoreUnavailableError):
            await self.publish_invalidation(tenant_id)

    async def invalidations(self) -> AsyncGenerator[str, None]:
        """Tenant ids published on `kbgate:invalidate`, from the moment of subscribing.

        Messages published before the subscription is in place are not seen;
        a broken connection ends the iteration with StoreUnavailableError.
        """
        pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        try:
            with _unavailable():
                await pubsub.subscribe(INVALIDATION_CHANNEL)
            while True:
                # Short polls: a blocking read would trip the client's socket timeout.
                with _unavailable():
                    message = await pubsub.get_message(timeout=1.0)
                if message is not None and message.get("type") == "message":
                    yield _text(message["data"])
        finally:
            await pubsub.aclose()  # type: ignore[no-untyped-call]  # unannotated in redis-py

    # operations

    async def ping(self) -> None:
        """Raise StoreUnavailableError when Redis does not answer.

        Always asks Redis (readiness must see the truth), and its outcome opens or
        closes the fail-fast gate, so a ready Redis is used again at once.
        """
        try:
            with _unavailable():
                answered = await self._client.ping()
        except StoreUnavailableError:
            self._gate.failed()
            raise
        if not answered:
            self._gate.failed()
            raise StoreUnavailableError("redis: no answer to PING")
        self._gate.succeeded()

    async def close(self) -> None:
        """Close the client and its connection pool, unless the client is shared."""
        if self._owns_client:
            await self._client.aclose()
