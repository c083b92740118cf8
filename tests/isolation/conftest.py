"""Fixtures of the isolation suite: gateways on each engine, the probe campaign, faults.

The campaign (`gateway.tools.probe`, the same catalogue `kbgate probe` runs) is driven once
per engine and module through the in-process app; the tests then read its report.

Fault injection (never in product code): `--break-scope=CLAUSE` (or the environment
variable `KBGATE_BREAK_SCOPE=CLAUSE`) makes both adapters' scope filters drop one clause
(`tenant`, `kb`, `clearance` or `org`) for the whole session, so the suite must fail:

    uv run pytest tests/isolation --break-scope=tenant -q

Data directories live on /dev/shm where it exists: Qdrant Edge flushes (fsyncs) every
write, which costs a few hundred milliseconds on a network disk and nothing in RAM, and
no isolation property depends on durability.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import Phase, settings
from kbgate_client import AsyncClient

from gateway.http.app import create_app
from gateway.runtime.services import Services, build_services
from gateway.safety.redaction import Redactor
from gateway.telemetry import Telemetry, build_logger
from gateway.tools.probe.campaign import Campaign
from gateway.tools.probe.client import ClientTransport
from gateway.tools.probe.report import Report
from gateway.tools.probe.world import PHASES, LegacyDocument
from ingest.embedder.embedding import Embedder, build_embedder
from ingest.engines.server.index import ServerIndex
from ingest.payload import Classification
from ingest.sync import Document, Target
from settings.config import Config, load_config
from tests.isolation.faults import CLAUSES, break_scope_filters
from tests.support.asgi import asgi_client
from tests.support.redis_server import RedisServer
from tests.support.services import require_docker

PLATFORM_KEY = "isolation-platform-key-0123456789"
QDRANT_IMAGE = "qdrant/qdrant:v1.20.0"  # per-scope IDF needs Qdrant >= 1.19
SUMMARIES: list[dict[str, Any]] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--break-scope",
        choices=CLAUSES,
        default=None,
        help="fault injection: drop this clause from every scope filter (the suite must fail)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Under fault injection, report failing property examples as found (no shrinking:
    shrinking against a broken filter only makes the expected failure slow)."""
    if broken_clause(config):
        settings.register_profile("broken-scope", phases=[Phase.explicit, Phase.generate])
        settings.load_profile("broken-scope")


def broken_clause(config: pytest.Config) -> str | None:
    chosen = config.getoption("--break-scope", default=None) or os.environ.get("KBGATE_BREAK_SCOPE")
    return str(chosen) if chosen else None


@pytest.fixture(scope="session", autouse=True)
def _fault_injection(request: pytest.FixtureRequest) -> Iterator[None]:
    """With --break-scope, every scope filter of this session misses one clause."""
    clause = broken_clause(request.config)
    if clause is None:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        break_scope_filters(patch, clause)
        yield


@pytest.fixture(scope="session")
def embedder(model_dir: Path) -> Embedder:
    """The real model, loaded once per session. One onnxruntime thread: the campaign keeps
    several requests in flight, and on a small machine per-call thread pools only contend."""
    return build_embedder(model_dir=model_dir, model_name=None, threads=1)


@pytest.fixture(scope="session")
def redactor() -> Redactor:
    """presidio, built once per session (building it takes seconds)."""
    return Redactor.build()


@pytest.fixture(scope="session")
def fast_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A RAM-backed directory for data dirs when the machine has one."""
    shm = Path("/dev/shm")  # noqa: S108 — a RAM disk on purpose; removed at session end
    if shm.is_dir() and os.access(shm, os.W_OK):
        root = Path(tempfile.mkdtemp(prefix="kbgate-isolation-", dir=shm))
        yield root
        shutil.rmtree(root, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("isolation")


@dataclass
class LiveGateway:
    engine: str
    client: httpx.AsyncClient
    services: Services
    logs: io.StringIO
    config: Config


def probe_transport(client: httpx.AsyncClient) -> ClientTransport:
    """The probe campaign's transport over an httpx client of the in-process app."""
    return ClientTransport(AsyncClient(str(client.base_url), http=client))


@asynccontextmanager
async def live_gateway(
    engine: str,
    data_dir: Path,
    embedder: Embedder,
    redactor: Redactor,
    *,
    qdrant_url: str | None = None,
    redis_url: str | None = None,
) -> AsyncIterator[LiveGateway]:
    """The app on one engine (edge, local, server), SQLite or Redis settings, logs captured."""
    # The probe presents forged keys on purpose, many more than a client address's default
    # failure budget allows; the limit itself is tested in tests/api/test_rate_limits.py.
    config = load_config(
        {},
        data_dir=data_dir,
        platform_key=PLATFORM_KEY,
        redis_url=redis_url,
        auth_failures_per_min=1_000_000,
    )
    logs = io.StringIO()
    engines: dict[str, tuple[Any, str] | None] = {"edge": None}
    if engine == "local":
        # local mode runs on the event loop: one call at a time, as its emulation needs
        engines["local"] = (ServerIndex.local(None), "qdrant-local")
    if engine == "server" and qdrant_url is not None:
        engines["server"] = (await ServerIndex.connect(qdrant_url, None, 10.0), "qdrant-server")
    services = await build_services(
        config,
        Telemetry(build_logger("DEBUG", logs)),
        embedder=embedder,
        redactor=redactor,
        engine=engines[engine],
    )
    app = create_app(config, services)
    try:
        async with asgi_client(app) as client:
            yield LiveGateway(engine, client, services, logs, config)
    finally:
        await services.close()


def legacy_writer(services: Services) -> Any:
    """Writes a document without `orgId` through the internal writer (the HTTP API can't)."""

    async def write(doc: LegacyDocument) -> int:
        target = Target(
            org_id=doc.org_id, tenant_id=doc.tenant_id, kb_id=doc.kb_id, storage=doc.storage
        )
        document = Document(
            document_id=doc.document_id,
            text=doc.text,
            classification=Classification(doc.classification),
            title=doc.title,
            source="kbgate-probe",
        )
        outcome = await asyncio.to_thread(
            services.documents.writer.put, target, document, legacy=True
        )
        return outcome.passages

    return write


@dataclass
class CampaignRun:
    """One engine's campaign: its report, the fault-injection spot check, its duration."""

    engine: str
    campaign: Campaign = field(repr=False)
    report: Report = field(repr=False)
    bite: Report | None = field(default=None, repr=False)
    seconds: float = 0.0


def qdrant_url_for(engine: str) -> Iterator[str | None]:
    """A Qdrant server in a container for the `server` engine (skips without Docker)."""
    if engine != "server":
        yield None
        return
    require_docker()
    from testcontainers.community.qdrant import QdrantContainer

    with QdrantContainer(image=QDRANT_IMAGE) as container:
        yield f"http://{container.rest_host_address}"


@pytest.fixture(scope="module", params=["edge", "local", "server"])
async def campaign_run(
    request: pytest.FixtureRequest, embedder: Embedder, redactor: Redactor, fast_root: Path
) -> AsyncIterator[CampaignRun]:
    """The whole probe campaign on one engine, then a spot check with the tenant clause
    dropped (which must find leaks), then cleanup. Qdrant Edge runs with the embedded
    SQLite store; qdrant-client (local mode, or a server) with Redis, the deployed pairing,
    when a redis-server binary is installed (SQLite otherwise)."""
    engine = str(request.param)
    urls = qdrant_url_for(engine)
    url = next(urls)
    data_dir = Path(tempfile.mkdtemp(prefix=f"{engine}-", dir=fast_root))
    with ExitStack() as stack:
        redis_url = None
        if engine != "edge" and shutil.which("redis-server"):
            redis_url = stack.enter_context(RedisServer(data_dir / "redis")).url
        store = "Redis" if redis_url else "SQLite"
        async with live_gateway(
            engine, data_dir, embedder, redactor, qdrant_url=url, redis_url=redis_url
        ) as gw:
            campaign = Campaign(
                probe_transport(gw.client),
                PLATFORM_KEY,
                target=f"in-process app on {engine} with {store}",
                legacy_writer=legacy_writer(gw.services),
                log_reader=gw.logs.getvalue,
            )
            run = CampaignRun(engine, campaign, campaign.report)

            async def bite() -> None:
                with pytest.MonkeyPatch.context() as patch:
                    break_scope_filters(patch, "tenant")
                    run.bite = await campaign.spot_check()

            started = time.perf_counter()
            run.report = await campaign.run_campaign(PHASES, before_cleanup=bite)
            run.seconds = time.perf_counter() - started
            summary = run.report.summary()
            SUMMARIES.append(
                {
                    "suite": f"campaign on {engine} + {store}",
                    "line": (
                        f"{summary['distinct_probes']} distinct probes (endpoint x principal "
                        f"x mode), {summary['requests']} requests over {summary['endpoints']} "
                        f"endpoints and {summary['principals']} principals, {summary['leaks']} "
                        f"leaks, {summary['failures']} failures, {summary['total_s']} s"
                    ),
                    **summary,
                }
            )
            yield run
    shutil.rmtree(data_dir, ignore_errors=True)
    for _ in urls:  # stop the container, if one was started
        pass


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print how many distinct probes ran (and write them out when asked)."""
    if not SUMMARIES:
        return
    terminalreporter.section("isolation probes")
    for summary in SUMMARIES:
        terminalreporter.write_line(f"{summary['suite']}: {summary['line']}")
    target = os.environ.get("KBGATE_ISOLATION_REPORT")
    if target:
        Path(target).write_text(json.dumps(SUMMARIES, indent=2) + "\n")
        terminalreporter.write_line(f"written to {target}")
