"""The Litestar app over HTTP, on real embedded engines and the real model."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient

from gateway.http.app import create_app
from gateway.runtime.services import Services, build_services
from gateway.runtime.telemetry import Telemetry, build_logger
from ingest.embedding import Embedder
from ingest.qdrant_server import ServerIndex
from settings.config import Config, load_config
from tests.support.redactor import shared_redactor

PLATFORM_KEY = "test-platform-key-0123456789"


@dataclass
class Gateway:
    client: AsyncTestClient  # type: ignore[type-arg]  # Litestar's client is generic over the app
    services: Services
    logs: io.StringIO
    config: Config

    @property
    def platform(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {PLATFORM_KEY}"}


def gateway_config(data_dir: Path, **overrides: object) -> Config:
    """The platform config on `data_dir`, with the default `keyword_floor` at 0: keyword hits
    always count, so tests of their tiny KBs see them whatever the dense leg finds (the
    floors' own tests set them)."""
    overrides = {"defaults.keyword_floor": 0.0, **overrides}
    return load_config({}, data_dir=data_dir, platform_key=PLATFORM_KEY, **overrides)


async def start_gateway(
    tmp_path: Path, embedder: Embedder, engine: str = "edge", **overrides: object
) -> tuple[Services, io.StringIO, Config]:
    """Services on a fresh data dir, on Qdrant Edge or qdrant-client local mode."""
    config = gateway_config(tmp_path / "data", **overrides)
    logs = io.StringIO()
    index = (ServerIndex.local(None), "qdrant-local") if engine == "local" else None
    services = await build_services(
        config,
        Telemetry(build_logger("DEBUG", logs)),
        embedder=embedder,
        engine=index,
        redactor=shared_redactor(),
    )
    return services, logs, config


@pytest.fixture
async def gateway(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Gateway]:
    """A gateway on Qdrant Edge and SQLite in a fresh data dir, logs captured."""
    services, logs, config = await start_gateway(tmp_path, embedder)
    app = create_app(config, services)
    try:
        async with AsyncTestClient(app) as client:
            yield Gateway(client=client, services=services, logs=logs, config=config)
    finally:
        await services.close()


@pytest.fixture(params=["edge", "local"])
async def engine_gateway(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> AsyncIterator[Gateway]:
    """The same gateway on each engine: Qdrant Edge and qdrant-client local mode."""
    services, logs, config = await start_gateway(tmp_path, embedder, request.param)
    app = create_app(config, services)
    try:
        async with AsyncTestClient(app) as client:
            yield Gateway(client=client, services=services, logs=logs, config=config)
    finally:
        await services.close()
