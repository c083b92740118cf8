"""Credentials: a bearer key becomes a Principal, or the call is refused.

Keys are random, shown once and stored only as their sha256, so a lookup by
hash is a constant-time comparison in effect; the configured platform keys (the
current one and, while it is being rotated out, the previous one) are compared with
`hmac.compare_digest`. A key past its `expires_at` is refused like an unknown one.
No function here logs or echoes a key.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime

from gateway.errors import ForbiddenError, InvalidInputError, UnauthenticatedError
from ingest.payload import DEFAULT_CLEARANCE, Classification
from settings.records import WORKSPACE_ROLES, ApiKey, Role
from settings.store import StoreUnavailableError

KEY_PREFIX = "kbg_"
PLATFORM_KEY_ID = "platform"
_MAX_KEY_CHARS = 200
#: roles that manage a whole workspace's content, so their keys must see all of it
CONTENT_ROLES: frozenset[Role] = frozenset({Role.ADMIN, Role.INGEST})


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling. The tenant and org of every call come from here only."""

    key_id: str
    roles: frozenset[Role]
    org_id: str = ""
    tenant_id: str = ""
    clearance: Classification = DEFAULT_CLEARANCE

    @property
    def is_platform(self) -> bool:
        return Role.PLATFORM in self.roles

    @property
    def manages_all_content(self) -> bool:
        """Whether the key may manage documents: its clearance admits every label."""
        return self.is_platform or self.clearance == Classification.RESTRICTED

    def require(self, *roles: Role) -> None:
        """Raise ForbiddenError unless the principal holds one of `roles`."""
        if not self.roles & set(roles):
            names = " or ".join(f"'{role}'" for role in roles)
            raise ForbiddenError(f"this operation needs the {names} role")
        if Role.PLATFORM not in roles and not self.tenant_id:
            raise ForbiddenError("this operation needs a workspace key")


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_secret() -> str:
    """A fresh key: 256 bits of randomness behind a recognisable prefix."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def new_key_id() -> str:
    return "key_" + secrets.token_hex(8)


def bearer_secret(authorization: str | None) -> str:
    """The key inside an `Authorization: Bearer <key>` header."""
    if not authorization:
        raise UnauthenticatedError("missing credentials: send Authorization: Bearer <key>")
    scheme, _, secret = authorization.strip().partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret or len(secret) > _MAX_KEY_CHARS:
        raise UnauthenticatedError("malformed credentials: send Authorization: Bearer <key>")
    return secret


KeyLookup = Callable[[str], Awaitable[ApiKey | None]]


async def authenticate(
    lookup: KeyLookup,
    platform_key: str | Sequence[str | None] | None,
    authorization: str | None,
) -> Principal:
    """The Principal behind a bearer header; UnauthenticatedError for anything else.

    `lookup` finds a stored key by the sha256 of its secret; `platform_key` is the
    configured platform key, or several (current and previous) while rotating.
    """
    secret = bearer_secret(authorization)
    configured = [platform_key] if isinstance(platform_key, str) else list(platform_key or ())
    presented = secret.encode("utf-8")
    # Every configured key is compared, so the time taken does not tell which matched.
    matches = [
        hmac.compare_digest(presented, key.encode("utf-8")) for key in configured if key is not None
    ]
    if any(matches):
        return Principal(key_id=PLATFORM_KEY_ID, roles=frozenset({Role.PLATFORM}))
    record = await lookup(hash_key(secret))
    if record is None or not is_usable(record):
        raise UnauthenticatedError("unknown or expired credentials")
    return principal_of(record)


def is_usable(record: ApiKey, now: datetime | None = None) -> bool:
    """False once the key's `expires_at` has passed."""
    if record.expires_at is None:
        return True
    moment = now or datetime.now(UTC)
    try:
        return moment < datetime.fromisoformat(record.expires_at)
    except ValueError:
        return False  # an unreadable expiry is treated as expired


def principal_of(record: ApiKey) -> Principal:
    return Principal(
        key_id=record.key_id,
        roles=frozenset(Role(role) for role in record.roles),
        org_id=record.org_id,
        tenant_id=record.tenant_id,
        clearance=Classification(record.clearance),
    )


def workspace_roles(roles: Iterable[str]) -> list[Role]:
    """Validate the roles a workspace key may carry (never `platform`)."""
    chosen: list[Role] = []
    for raw in roles:
        try:
            role = Role(raw)
        except ValueError:
            raise InvalidInputError(f"unknown role {raw!r}", field="roles") from None
        if role not in WORKSPACE_ROLES:
            raise InvalidInputError("workspace keys cannot carry the platform role", field="roles")
        if role not in chosen:
            chosen.append(role)
    if not chosen:
        raise InvalidInputError("a key needs at least one role", field="roles")
    return chosen


def key_clearance(roles: Sequence[Role], clearance: str | None) -> Classification:
    """The clearance a new key gets.

    A key with the admin or ingest role manages every document of its workspace, so
    its clearance is `restricted` (the default for such keys; any other is refused).
    Other keys default to `internal`.
    """
    manages = bool(CONTENT_ROLES & set(roles))
    if clearance is None:
        return Classification.RESTRICTED if manages else DEFAULT_CLEARANCE
    try:
        level = Classification(clearance)
    except ValueError:
        raise InvalidInputError(f"unknown clearance {clearance!r}", field="clearance") from None
    if manages and level != Classification.RESTRICTED:
        raise InvalidInputError(
            "keys with the admin or ingest role manage every document of the workspace and "
            "need clearance 'restricted'",
            field="clearance",
        )
    return level


def issue_key(
    *,
    org_id: str,
    tenant_id: str,
    roles: Iterable[str],
    clearance: str | None,
    expires_at: str | None = None,
) -> tuple[str, ApiKey]:
    """A new secret and the record that stores its hash. The secret is shown once."""
    chosen = workspace_roles(roles)
    level = key_clearance(chosen, clearance)
    secret = new_secret()
    record = ApiKey(
        key_id=new_key_id(),
        key_hash=hash_key(secret),
        org_id=org_id,
        tenant_id=tenant_id,
        roles=[role.value for role in chosen],
        clearance=level.value,
        created_at=datetime.now(UTC).isoformat(),
        expires_at=expires_at,
    )
    return secret, record


#: at most one store write per key per this many seconds records its last use
KEY_USE_INTERVAL_S = 60.0


class KeyUsage:
    """Records when keys are used, coalesced: at most one write per key a minute.

    The write runs in the background (a request never waits for it) and a store
    outage only loses that record.
    """

    def __init__(
        self,
        record: Callable[[str, str], Awaitable[None]],
        *,
        interval_s: float = KEY_USE_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._record = record
        self._interval_s = interval_s
        self._clock = clock
        self._written: dict[str, float] = {}
        self._pending: set[asyncio.Task[None]] = set()

    def used(self, key_id: str) -> None:
        """Note a use of `key_id`; write it unless one was written within the interval."""
        now = self._clock()
        last = self._written.get(key_id)
        if last is not None and now - last < self._interval_s:
            return
        if len(self._written) > 100_000:
            self._forget_older_than(now - self._interval_s)
        self._written[key_id] = now
        task = asyncio.get_running_loop().create_task(self._write(key_id))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _write(self, key_id: str) -> None:
        with suppress(StoreUnavailableError):
            await self._record(key_id, datetime.now(UTC).isoformat())

    def _forget_older_than(self, cutoff: float) -> None:
        self._written = {key: at for key, at in self._written.items() if at >= cutoff}

    async def close(self) -> None:
        """Wait for the writes already started (the store is closed next)."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
