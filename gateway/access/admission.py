"""A request's admission: its key verified (failures counted per client address), then
its key's and its workspace's rate-limit budgets spent.

A key that verifies is always served: the key is checked first (a hash lookup through
the settings cache; the platform keys compared in constant time) and the
failed-authentication limit applies only to requests whose key does not verify.
Failures are counted per client address; past the budget a failing request from that
address gets 429 with Retry-After instead of 401 for the rest of the minute. So a
misconfigured client, or one guessing keys, slows only itself and whoever fails from its
address: never a caller with a valid key, whatever address it shares.
"""

from __future__ import annotations

from gateway.access.auth import KeyUsage, Principal, authenticate
from gateway.access.ratelimit import FailureCounter, RateLimiter
from gateway.errors import RateLimitedError, UnauthenticatedError
from gateway.telemetry import Telemetry
from settings.cache import CachedSettings
from settings.records import ApiKey


class Authentication:
    """Bearer keys checked against the settings cache and the configured platform keys
    (current, previous); failures counted per client address, uses recorded per key."""

    def __init__(
        self,
        settings: CachedSettings,
        platform_keys: tuple[str | None, str | None],
        failures: FailureCounter,
        key_usage: KeyUsage,
        telemetry: Telemetry,
    ) -> None:
        self._settings = settings
        self._platform_keys = platform_keys
        self._failures = failures
        self._key_usage = key_usage
        self._telemetry = telemetry

    async def authenticate(self, authorization: str | None, address: str) -> Principal:
        """`authenticate`; a failure is counted against `address`, and answered 429 (not
        401) once the address is past its budget. A key that verifies is served whatever
        the count.

        A request without credentials is not counted (it guesses nothing).
        """
        try:
            principal = await authenticate(self._lookup, self._platform_keys, authorization)
        except UnauthenticatedError:
            if authorization:
                await self._failed(address)
            raise
        self._key_usage.used(principal.key_id)
        return principal

    async def credential(self, key_hash: str) -> ApiKey | None:
        """A credential by the hash of its secret, through the settings cache (the console's
        sessions hold only that hash)."""
        return await self._settings.api_key(key_hash)

    def used(self, key_id: str) -> None:
        """Record a use of the key (at most one store write a minute per key)."""
        self._key_usage.used(key_id)

    async def _lookup(self, key_hash: str) -> ApiKey | None:
        known = self._settings.fresh_api_key(key_hash)
        return known if known is not None else await self._settings.api_key(key_hash)

    async def _failed(self, address: str) -> None:
        """Count a failed authentication; RateLimitedError when the address is past its
        budget."""
        wait_s = await self._failures.blocked(address)
        await self._failures.failed(address)
        if wait_s is not None:
            self._telemetry.count("auth_failures_limited")
            raise RateLimitedError(
                wait_s, message="too many failed authentications from this address; retry later"
            )


class Admission:
    """A call's budgets: its key's, then its workspace's (`gateway.access.ratelimit`)."""

    def __init__(
        self, per_key: RateLimiter, per_workspace: RateLimiter, telemetry: Telemetry
    ) -> None:
        self._per_key = per_key
        self._per_workspace = per_workspace
        self._telemetry = telemetry

    async def admit(self, principal: Principal) -> None:
        """Raise RateLimitedError when the key's budget, or its workspace's, is spent."""
        wait_s = await self._per_key.hit(principal.key_id)
        if wait_s is None and principal.tenant_id:
            wait_s = await self._per_workspace.hit(principal.tenant_id)
            if wait_s is not None:
                self._telemetry.count("rate_limited")
                raise RateLimitedError(wait_s, workspace=True)
        if wait_s is not None:
            self._telemetry.count("rate_limited")
            raise RateLimitedError(wait_s)
