"""The app factory: `create_app(config, services=None) -> Litestar`.

The lifespan builds the services (`gateway.runtime.services`, the composition root)
unless a test hands its own in, and the console's sessions on their Redis client; each
handler receives the use case or port it names by dependency injection
(`gateway.http.dependencies`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress

from litestar import Litestar
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.openapi.spec import Components
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from gateway.admin.migration import resume_migrations
from gateway.admin.upkeep import run_upkeep
from gateway.errors import GatewayError
from gateway.http.console import (
    CalibrationConsoleController,
    ConsoleController,
    ConsoleSessions,
    KnowledgeAdminController,
    console_template_config,
)
from gateway.http.dependencies import dependencies
from gateway.http.forwarding import ForwardedClientMiddleware, TrustedProxies
from gateway.http.openapi import BEARER_SCHEME, document_problems
from gateway.http.problems import problem_details_plugin, status_of
from gateway.http.routes.calibration import CalibrationController
from gateway.http.routes.grounding import GroundingController
from gateway.http.routes.health import HealthController
from gateway.http.routes.keys import KeyController
from gateway.http.routes.knowledge import AgentController, KnowledgeBaseController
from gateway.http.routes.migration import MigrationController
from gateway.http.routes.provisioning import ProvisioningController
from gateway.http.routes.redaction import RedactionController
from gateway.http.routes.retrieval import RetrievalController
from gateway.http.routes.transfer import TransferController
from gateway.http.routes.workspace import WorkspaceController
from gateway.http.security import PUBLIC_PATHS, BearerKeyMiddleware
from gateway.http.shutdown import Drain, DrainMiddleware
from gateway.http.strict_body import enforce_strict_body
from gateway.runtime.services import Services, build_services
from gateway.telemetry import Telemetry, build_logger
from gateway.tracing import build_tracing
from ingest.index import IndexUnavailableError
from ingest.sync import AnalysisFailedError, EmbeddingFailedError
from settings.cache import CachedSettings, InvalidationSource, follow_invalidations
from settings.config import Config
from settings.store import SettingsStore, StoreUnavailableError

API_VERSION = "1.0.0"


def create_app(
    config: Config, services: Services | None = None, *, drain: Drain | None = None
) -> Litestar:
    """Build the gateway. With `services` given, the caller owns (and closes) them.

    `drain` is the server's shutdown state (`gateway.http.shutdown`): while it drains, new
    requests answer 503.
    """
    telemetry = services.telemetry if services else _telemetry(config)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        started = time.perf_counter()
        owned = services is None
        built = services or await build_services(config, telemetry)
        # the writer's worker threads call the index on the loop that serves
        built.documents.writer.index.bind(asyncio.get_running_loop())
        app.state.services = built
        # the console's sign-ins: in memory, or in Redis on the process's one client
        app.state.console_sessions = ConsoleSessions.build(built.redis)
        telemetry.log.info(
            "started",
            index=built.index_engine,
            store=built.store_engine,
            startup_ms=round((time.perf_counter() - started) * 1000, 1),
        )
        follower = _follow_invalidations(built.store, built.settings)
        upkeep = asyncio.create_task(run_upkeep(built.upkeep))
        await resume_migrations(built.migrations)
        try:
            yield
        finally:
            for task in (upkeep, follower):
                if task is not None:
                    task.cancel()
                    with suppress(asyncio.CancelledError):
                        await task
            if owned:
                await built.close()
                telemetry.tracing.close()

    def log_exception(exception: Exception, scope: Scope) -> None:
        # The type only: messages of unexpected errors may quote user input.
        telemetry.log.error(
            "unhandled_error",
            error_type=type(exception).__name__,
            route=scope.get("path_template", "unmatched"),
        )

    app = Litestar(
        route_handlers=[
            HealthController,
            ProvisioningController,
            TransferController,
            KeyController,
            KnowledgeBaseController,
            CalibrationController,
            MigrationController,
            AgentController,
            RetrievalController,
            RedactionController,
            WorkspaceController,
            GroundingController,
            ConsoleController,
            KnowledgeAdminController,
            CalibrationConsoleController,
        ],
        lifespan=[lifespan],
        dependencies=dependencies(),
        template_config=console_template_config(),
        middleware=[
            DefineMiddleware(
                ForwardedClientMiddleware, proxies=TrustedProxies(config.trusted_proxies)
            ),
            DefineMiddleware(DrainMiddleware, drain=drain or Drain()),
            DefineMiddleware(_RequestTelemetry, telemetry=telemetry),
            DefineMiddleware(
                BearerKeyMiddleware,
                exclude=list(PUBLIC_PATHS),
                exclude_http_methods=[],  # OPTIONS and HEAD are authenticated too
            ),
        ],
        plugins=[problem_details_plugin()],
        before_request=enforce_strict_body,
        after_exception=[_only_unexpected(log_exception)],
        openapi_config=OpenAPIConfig(
            title="kbgate",
            version=API_VERSION,
            description="Multi-tenant retrieval gateway over Qdrant.",
            path="/schema",
            # The document only: an interactive page would load its script from a CDN on
            # the console's origin. Any OpenAPI viewer can read /schema/openapi.json.
            render_plugins=[JsonRenderPlugin()],
            components=Components(security_schemes={"bearer": BEARER_SCHEME}),
        ),
        request_max_body_size=config.max_body_bytes,
        logging_config=None,
        debug=False,
    )
    document_problems(app.openapi_schema)
    return app


def _telemetry(config: Config) -> Telemetry:
    return Telemetry(build_logger(config.log_level), build_tracing(config))


def _follow_invalidations(
    store: SettingsStore, settings: CachedSettings
) -> asyncio.Task[None] | None:
    """On a shared store, drop cached settings whenever another replica changes them."""
    if not isinstance(store, InvalidationSource):
        return None
    return asyncio.create_task(follow_invalidations(store, settings))


_EXPECTED = (
    HTTPException,
    GatewayError,
    IndexUnavailableError,
    StoreUnavailableError,
    EmbeddingFailedError,
    AnalysisFailedError,
)


def _only_unexpected(
    log: Callable[[Exception, Scope], None],
) -> Callable[[Exception, Scope], Awaitable[None]]:
    async def hook(exception: Exception, scope: Scope) -> None:
        if not isinstance(exception, _EXPECTED):
            log(exception, scope)

    return hook


class _RequestTelemetry:
    """Counts and times every routed request by its route template, never its path."""

    def __init__(self, app: ASGIApp, telemetry: Telemetry) -> None:
        self.app = app
        self.telemetry = telemetry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        responded = False

        async def send_wrapper(message: Message) -> None:
            nonlocal status, responded
            if message["type"] == "http.response.start":
                status = int(message["status"])
                responded = True
            await send(message)

        method = str(scope.get("method", ""))
        with self.telemetry.tracing.server_span(method, scope["headers"]) as span:
            try:
                await self.app(scope, receive, send_wrapper)
            except Exception as error:
                if not responded:
                    # Raised before a response started (the key check, the rate limit): the
                    # exception handler outside this middleware answers with its status.
                    status = status_of(error)
                raise
            finally:
                route = str(scope.get("path_template", "unmatched"))
                if span is not None:
                    span.update_name(f"{method} {route}")
                    span.set_attributes({"http.route": route, "http.response.status_code": status})
                self.telemetry.observe_request(
                    route=route,
                    method=method,
                    status=status,
                    seconds=time.perf_counter() - started,
                )
