"""Liveness, readiness and metrics: open to the network, free of tenant data."""

from __future__ import annotations

from litestar import Controller, Response, get
from litestar.datastructures import State

from gateway.routes.schemas import Live, Ready
from gateway.services import Services

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
    async def metrics(self, state: State) -> Response[bytes]:
        services: Services = state.services
        return Response(services.telemetry.exposition(), media_type=PROMETHEUS_TEXT)
