"""Liveness and readiness, open to the network; metrics, behind their own credential.

Everything here is free of tenant data. `/metrics` still shows platform-wide activity
(how many turns, redactions of each kind, ...), so it answers only to a bearer token:
`KBGATE_METRICS_KEY` (for the scraper) or the platform key.
"""

from __future__ import annotations

import hmac

from litestar import Controller, Request, Response, get
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec

from gateway.access.auth import bearer_secret
from gateway.errors import UnauthenticatedError
from gateway.http.dependencies import Injected
from gateway.http.openapi import BEARER, problems
from gateway.http.schemas import Live, Ready
from gateway.runtime.readiness import Readiness
from gateway.telemetry import Telemetry
from settings.config import Config

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


class HealthController(Controller):
    tags = ["operations"]  # noqa: RUF012 — Litestar reads this class attribute as configuration

    @get("/health/live", operation_id="live", summary="The process is up")
    async def live(self) -> Live:
        return Live(status="ok")

    @get(
        "/health/ready",
        operation_id="ready",
        summary="Every dependency answers",
        responses={
            503: ResponseSpec(
                data_container=Ready,
                description="A dependency is down (the body says which)",
                generate_examples=False,
            )
        },
    )
    async def ready(self, readiness: Injected[Readiness]) -> Response[Ready]:
        dependencies = await readiness.dependencies()
        up = all(check["status"] == "up" for check in dependencies.values())
        return Response(
            Ready(status="ready" if up else "unavailable", dependencies=dependencies),
            status_code=200 if up else 503,
            headers=None if up else {"Retry-After": "5"},
        )

    @get(
        "/metrics",
        operation_id="metrics",
        summary="Prometheus metrics: counts and timings only",
        media_type=PROMETHEUS_TEXT,
        security=BEARER,
        responses=problems(401),
    )
    async def metrics(
        self,
        request: Request[None, None, State],
        config: Injected[Config],
        telemetry: Injected[Telemetry],
    ) -> Response[bytes]:
        require_metrics_credential(config, request.headers.get("authorization"))
        return Response(telemetry.exposition(), media_type=PROMETHEUS_TEXT)


def require_metrics_credential(config: Config, authorization: str | None) -> None:
    """UnauthenticatedError (401) unless the bearer token is the metrics key or the
    platform key (current or previous). Every configured key is compared, so the time
    taken does not tell which one matched."""
    presented = bearer_secret(authorization).encode("utf-8")
    accepted = (config.metrics_key, config.platform_key, config.platform_key_previous)
    matches = [hmac.compare_digest(presented, key.encode("utf-8")) for key in accepted if key]
    if not any(matches):
        raise UnauthenticatedError("GET /metrics needs the metrics key or the platform key")
