"""Fixtures of the isolation suite: gateways on each engine, the probe campaign, faults.

The campaign (`gateway.probe`, the same catalogue `kbgate probe` runs) is driven once
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
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from gateway.app import create_app
from gateway.probe import PHASES, Campaign, LegacyDocument, Reply, Report
from gateway.redaction import Redactor
from gateway.services import Services, build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.embedding import Embedder, build_embedder
from ingest.index import Index
from ingest.payload import Classification
from ingest.qdrant_server import ServerIndex
from ingest.sync import Document, Target
from settings.config import Config, load_config
from tests.isolation.faults import CLAUSES, break_scope_filters
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


def broken_clause(config: pytest.Config) -> str | None:
    chosen = config.getoption("--break-scope", default=None) or os.environ.get(
        "KBGATE_BREAK_SCOPE"
    )
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
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    """The real model, loaded once per session."""
    return build_embedder(
        model_dir=tmp_path_factory.mktemp("models"), model_name=None, threads=None, batch_size=16
    )


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
    client: AsyncTestClient  # type: ignore[type-arg]  # Litestar's client is generic over the app
    services: Services
    logs: io.StringIO
    config: Config


class ClientTransport:
    """The probe campaign's transport over Litestar's in-process test client."""

    def __init__(self, client: AsyncTestClient) -> None:  # type: ignore[type-arg]  # as above
        self.client = client

    async def request(self, method: str, path: str, *, key: str | None, body: Any) -> Reply:
        headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
        if body is None:
            response = await self.client.request(method, path, headers=headers)
        else:
            response = await self.client.request(method, path, headers=headers, json=body)
        return Reply(response.status_code, response.text)


@asynccontextmanager
async def live_gateway(
    engine: str,
    data_dir: Path,
    embedder: Embedder,
    redactor: Redactor,
    *,
    qdrant_url: str | None = None,
) -> AsyncIterator[LiveGateway]:
    """The app on one engine (edge, local, server), SQLite settings, logs captured."""
    config = load_config({}, data_dir=data_dir, platform_key=PLATFORM_KEY)
    logs = io.StringIO()
    engines: dict[str, tuple[Index, str] | None] = {"edge": None}
    if engine == "local":
        engines["local"] = (ServerIndex.local(None), "qdrant-local")
    if engine == "server" and qdrant_url is not None:
        engines["server"] = (ServerIndex.connect(qdrant_url, None, 10.0), "qdrant-server")
    services = await build_services(
        config,
        Telemetry(build_logger("DEBUG", logs)),
        embedder=embedder,
        redactor=redactor,
        engine=engines[engine],
    )
    try:
        async with AsyncTestClient(create_app(config, services)) as client:
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
        outcome = await asyncio.to_thread(services.writer.put, target, document, legacy=True)
        return outcome.passages

    return write


@dataclass
class CampaignRun:
    """One engine's campaign: its report, the fault-injection spot check, its duration."""

    engine: str
    campaign: Campaign
    report: Report
    bite: Report | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


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
    dropped (which must find leaks), then cleanup."""
    engine = str(request.param)
    urls = qdrant_url_for(engine)
    url = next(urls)
    data_dir = Path(tempfile.mkdtemp(prefix=f"{engine}-", dir=fast_root))
    try:
        async with live_gateway(engine, data_dir, embedder, redactor, qdrant_url=url) as gw:
            campaign = Campaign(
                ClientTransport(gw.client),
                PLATFORM_KEY,
                target=f"in-process app on {engine}",
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
            SUMMARIES.append({"engine": engine, **run.report.summary()})
            yield run
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
        for _ in urls:  # stop the container, if one was started
            pass


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print how many distinct probes ran (and write them out when asked)."""
    if not SUMMARIES:
        return
    terminalreporter.section("isolation probes")
    for summary in SUMMARIES:
        terminalreporter.write_line(
            f"{summary['engine']:>6}: {summary['distinct_probes']} distinct probes "
            f"(endpoint x principal x mode), {summary['requests']} requests over "
            f"{summary['endpoints']} endpoints and {summary['principals']} principals, "
            f"{summary['leaks']} leaks, {summary['failures']} failures, "
            f"{summary['total_s']} s"
        )
    target = os.environ.get("KBGATE_ISOLATION_REPORT")
    if target:
        Path(target).write_text(json.dumps(SUMMARIES, indent=2) + "\n")
        terminalreporter.write_line(f"written to {target}")
