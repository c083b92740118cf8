"""The Litestar app over HTTP, on real embedded engines and the real model."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import redis.asyncio
from litestar.testing import AsyncTestClient

from gateway.http.app import create_app
from gateway.runtime.services import Services, build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.embedder.embedding import Embedder
from ingest.engines.server.index import ServerIndex
from settings.config import Config, load_config
from tests.support.asgi import asgi_client
from tests.support.redactor import shared_languages, shared_redactor
from tests.support.redis_server import RedisServer

PLATFORM_KEY = "test-platform-key-0123456789"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """schemathesis makes an item per API operation (`test_schemathesis.py`), but under
    pytest 9 they all get the test function's node id (its items pass no callspec), and
    pytest-xdist, which tells items apart by node id, would run one operation of 48.
    Each gets its operation as its node id's parameters."""
    for item in items:
        label = getattr(item, "operation_label", None)
        if label is not None and isinstance(item, pytest.Function) and item.parent is not None:
            item._id = item.parent.id.child(item.originalname).with_params(label)


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
        languages=shared_languages(),
    )
    return services, logs, config


@asynccontextmanager
async def serving(
    tmp_path: Path, embedder: Embedder, engine: str = "edge", **overrides: object
) -> AsyncIterator[Gateway]:
    """A gateway on a fresh data dir, its lifespan running (so its start-up upkeep too).
    Requests run on the test's own event loop (httpx's ASGI transport), as a Redis client's
    connections belong to the loop that opened them."""
    services, logs, config = await start_gateway(tmp_path, embedder, engine, **overrides)
    async with served(services, logs, config) as gateway:
        yield gateway


@asynccontextmanager
async def served(services: Services, logs: io.StringIO, config: Config) -> AsyncIterator[Gateway]:
    """The app over `services`, its lifespan running; the services closed after."""
    app = create_app(config, services)
    try:
        async with asgi_client(app) as client:
            yield Gateway(client=cast(Any, client), services=services, logs=logs, config=config)
    finally:
        await services.close()


@asynccontextmanager
async def serving_stack(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder, **overrides: object
) -> AsyncIterator[Gateway]:
    """`serving` on the stack `request.param` names: "edge+sqlite" (Qdrant Edge, SQLite) or
    "local+redis" (qdrant-client local mode, the module's redis-server flushed first)."""
    engine = "edge"
    if request.param == "local+redis":
        engine = "local"
        url: str = request.getfixturevalue("redis_url")
        await flush_redis(url)
        overrides["redis_url"] = url
    async with serving(tmp_path, embedder, engine, **overrides) as gw:
        yield gw


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server shared by a module's tests (`flush_redis` it between them)."""
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server.url


async def flush_redis(url: str) -> None:
    """Empty the Redis database at `url`."""
    client = redis.asyncio.Redis.from_url(url)
    try:
        await client.flushdb()
    finally:
        await client.aclose()


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
