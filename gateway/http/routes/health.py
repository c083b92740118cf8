"""Liveness and readiness, open to the network; metrics, behind their own credential.

Everything here is free of tenant data. `/metrics` still shows platform-wide activity
(how many turns, redactions of each kind, ...), so it answers only to a bearer token:
`KBGATE_METRICS_KEY` (for the scraper) or the platform key.
"""

from __future__ import annotations

import hmac

from litestar import Controller, Request, Response, get
from litestar.datastructures import State

from gateway.access.auth import bearer_secret
from gateway.errors import UnauthenticatedError
from gateway.http.schemas import Live, Ready
from gateway.runtime.services import Services
from settings.config import Config

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


class HealthController(Controller):
    tags = ["operations"]  # noqa: RUF012 — Litestar reads this class attribute as configuration

    @get("/health/live", summary="The process is up")
    async def live(self) -> Live:
        return Live(status="ok")

    @get("/health/ready", summary="Every dependency answers", responses=None)
    async def ready(self, state: State) -> Response[Ready]:
        services: Services = state.services
        dependencies = await services.readiness()
        up = all(check["status"] == "up" for check in dependencies.values())
        return Response(
            Ready(status="ready" if up else "unavailable", dependencies=dependencies),
            status_code=200 if up else 503,
            headers=None if up else {"Retry-After": "5"},
        )

    @get(
        "/metrics",
        summary="Prometheus metrics: counts and timings only",
        media_type=PROMETHEUS_TEXT,
    )
    async def metrics(self, request: Request[None, None, State], state: State) -> Response[bytes]:
        services: Services = state.services
        require_metrics_credential(services.config, request.headers.get("authorization"))
        return Response(services.telemetry.exposition(), media_type=PROMETHEUS_TEXT)


def require_metrics_credential(config: Config, authorization: str | None) -> None:
    """UnauthenticatedError (401) unless the bearer token is the metrics key or the
    platform key (current or previous). Every configured key is compared, so the time
    taken does not tell which one matched."""
    presented = bearer_secret(authorization).encode("utf-8")
    accepted = (config.metrics_key, config.platform_key, config.platform_key_previous)
    matches = [hmac.compare_digest(presented, key.encode("utf-8")) for key in accepted if key]
    if not any(matches):
        raise UnauthenticatedError("GET /metrics needs the metrics key or the platform key")
