"""Credentials: a bearer key becomes a Principal, or the call is refused.

Keys are random, shown once and stored only as their sha256, so a lookup by
hash is a constant-time comparison in effect; the configured platform key is
compared with `hmac.compare_digest`. No function here logs or echoes a key.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from gateway.errors import ForbiddenError, InvalidInputError, UnauthenticatedError
from ingest.payload import DEFAULT_CLEARANCE, Classification
from settings.records import WORKSPACE_ROLES, ApiKey, Role

KEY_PREFIX = "kbg_"
PLATFORM_KEY_ID = "platform"
_MAX_KEY_CHARS = 200


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
    lookup: KeyLookup, platform_key: str | None, authorization: str | None
) -> Principal:
    """The Principal behind a bearer header; UnauthenticatedError for anything else.

    `lookup` finds a stored key by the sha256 of its secret.
    """
    secret = bearer_secret(authorization)
    if platform_key is not None and hmac.compare_digest(
        secret.encode("utf-8"), platform_key.encode("utf-8")
    ):
        return Principal(key_id=PLATFORM_KEY_ID, roles=frozenset({Role.PLATFORM}))
    record = await lookup(hash_key(secret))
    if record is None:
        raise UnauthenticatedError("unknown credentials")
    return principal_of(record)


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


def issue_key(
    *, org_id: str, tenant_id: str, roles: Iterable[str], clearance: str | None
) -> tuple[str, ApiKey]:
    """A new secret and the record that stores its hash. The secret is shown once."""
    try:
        level = Classification(clearance) if clearance is not None else DEFAULT_CLEARANCE
    except ValueError:
        raise InvalidInputError(f"unknown clearance {clearance!r}", field="clearance") from None
    secret = new_secret()
    record = ApiKey(
        key_id=new_key_id(),
        key_hash=hash_key(secret),
        org_id=org_id,
        tenant_id=tenant_id,
        roles=[role.value for role in workspace_roles(roles)],
        clearance=level.value,
        created_at=datetime.now(UTC).isoformat(),
    )
    return secret, record
