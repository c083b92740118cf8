"""What both SettingsStores do alike, whatever they store in: records as msgspec JSON,
the conflicts that are errors (and what they say), how a settings change becomes a
workspace and its history, and whose turn a turn record is. Each store
(`settings.stores.sqlite.store`, `settings.stores.redis.store`) keeps only its storage calls.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar, cast

import msgspec

from settings.records import ApiKey, Lifecycle, Org, SettingChange, TurnRecord, Workspace
from settings.store import AlreadyExistsError, NotEmptyError, NotFoundError

R = TypeVar("R", bound=msgspec.Struct)
#: a record with a lifecycle state
Stateful = TypeVar("Stateful", Org, Workspace)
#: a record as a store hands it back: JSON bytes (Redis) or text (SQLite)
Raw = bytes | str


def encode(record: msgspec.Struct) -> bytes:
    return msgspec.json.encode(record)


class RecordDecoder:
    """Reads stored records back, with one msgspec decoder per record type (made on
    first use and kept: decoding a key or a turn is on every request's path)."""

    def __init__(self) -> None:
        self._decoders: dict[type[msgspec.Struct], msgspec.json.Decoder[Any]] = {}

    def one(self, kind: type[R], raw: Raw) -> R:
        decoder = self._decoders.get(kind)
        if decoder is None:
            decoder = self._decoders[kind] = msgspec.json.Decoder(kind)
        return cast(R, decoder.decode(raw))

    def one_or_none(self, kind: type[R], raw: Raw | None) -> R | None:
        return None if raw is None else self.one(kind, raw)

    def each(self, kind: type[R], raws: Iterable[Raw | None]) -> list[R]:
        """The records of `raws` in order, skipping the missing (None) ones."""
        return [self.one(kind, raw) for raw in raws if raw is not None]


# ---- conflicts -----------------------------------------------------------------------


def org_taken(org_id: str) -> AlreadyExistsError:
    return AlreadyExistsError(f"org {org_id!r} exists")


def no_org(org_id: str) -> NotFoundError:
    return NotFoundError(f"org {org_id!r} does not exist")


def workspace_taken(tenant_id: str) -> AlreadyExistsError:
    return AlreadyExistsError(f"workspace {tenant_id!r} exists")


def no_workspace(tenant_id: str) -> NotFoundError:
    return NotFoundError(f"workspace {tenant_id!r} does not exist")


def key_taken(key_id: str) -> AlreadyExistsError:
    return AlreadyExistsError(f"api key {key_id!r} or its hash exists")


def org_not_empty(org_id: str) -> NotEmptyError:
    return NotEmptyError(f"org {org_id!r} still has workspaces")


# ---- pseudonym keys ------------------------------------------------------------------

#: Bytes of a workspace's pseudonym key (the HMAC-SHA256 key of `gateway.safety.operators`).
PSEUDONYM_KEY_BYTES = 32


def new_pseudonym_key() -> bytes:
    """A fresh random pseudonym key."""
    return secrets.token_bytes(PSEUDONYM_KEY_BYTES)


# ---- deletion ------------------------------------------------------------------------


def marked_deleting(record: Stateful) -> Stateful:
    """The org or workspace with its state set to `deleting`."""
    return msgspec.structs.replace(record, state=Lifecycle.DELETING)


# ---- settings changes ----------------------------------------------------------------


def _same_json(left: Any, right: Any) -> bool:
    # Compare as stored JSON, not with ==: in Python 1 == 1.0 == True.
    return msgspec.json.encode(left, order="sorted") == msgspec.json.encode(right, order="sorted")


def apply_setting_changes(
    current: Mapping[str, Any], changes: Mapping[str, Any], *, key_id: str, at: str
) -> tuple[dict[str, Any], list[SettingChange]]:
    """New settings and one SettingChange per key whose stored value actually changes.

    None removes a key; `old`/`new` are None for an absent value.
    """
    settings = dict(current)
    history: list[SettingChange] = []
    for name, new in changes.items():
        old = settings.get(name)
        if new is None:
            if name not in settings:
                continue
            del settings[name]
        elif name in settings and _same_json(old, new):
            continue
        else:
            settings[name] = new
        history.append(SettingChange(at=at, key_id=key_id, setting=name, old=old, new=new))
    return settings, history


def changed_workspace(
    current: Workspace | None,
    tenant_id: str,
    changes: Mapping[str, Any],
    *,
    key_id: str,
    at: str,
) -> tuple[Workspace, list[SettingChange]]:
    """The workspace with `changes` applied and the history to append with it; no
    history means nothing changes (store nothing). NotFoundError when `current` is None."""
    if current is None:
        raise no_workspace(tenant_id)
    settings, history = apply_setting_changes(current.settings, changes, key_id=key_id, at=at)
    if not history:
        return current, history
    return msgspec.structs.replace(current, settings=settings), history


# ---- keys and turns ------------------------------------------------------------------


def with_last_use(key: ApiKey, at: Raw | None) -> ApiKey:
    """The key as listed: its record with when it was last used (None: never)."""
    used = at.decode() if isinstance(at, bytes) else at
    return msgspec.structs.replace(key, last_used_at=used)


def check_turn_ttl(ttl_s: int) -> None:
    if ttl_s < 1:
        raise ValueError("ttl_s must be at least 1")


def own_turn(turn: TurnRecord | None, tenant_id: str) -> TurnRecord | None:
    """The turn when it is the tenant's; another tenant's turn is None, as a missing one."""
    return turn if turn is not None and turn.tenant_id == tenant_id else None
