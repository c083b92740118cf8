"""What handlers may ask for by name, through Litestar's dependency injection.

The composition root (`gateway.runtime.services`) builds everything once; `create_app`
registers `dependencies()` on the app, and a handler names the parts it uses as
parameters (`store: SettingsStore`, `telemetry: Telemetry`, ...). `services` is the whole
set, for handlers that call a core function taking it (`gateway.admin`,
`gateway.retrieval`, `gateway.safety`). A parameter is annotated `Injected[T]`: named
for injection and not validated (the composition root built it; checking it again on
every request would only cost time). Middleware, which Litestar does not inject, reads
the same object with `services_of`.
"""

from __future__ import annotations

from typing import Annotated, TypeAlias, TypeVar

from litestar.datastructures import State
from litestar.di import Dependency, Provide
from litestar.params import SkipValidationMarker

from gateway.access.expensive import ExpensiveWork
from gateway.access.ratelimit import RateLimiter
from gateway.http.console.sessions import ConsoleSessions
from gateway.runtime.services import Services
from gateway.runtime.telemetry import Telemetry
from ingest.embedder.embedding import Embedder
from ingest.index import Index
from settings.cache import CachedSettings
from settings.config import Config
from settings.store import SettingsStore

T = TypeVar("T")

#: a handler parameter the app's providers fill in by its name
Injected: TypeAlias = Annotated[T, Dependency(kind="named"), SkipValidationMarker()]


def services_of(state: State) -> Services:
    """The process's Services, set by the app's lifespan."""
    services: Services = state.services
    return services


def _config(state: State) -> Config:
    return services_of(state).config


def _store(state: State) -> SettingsStore:
    return services_of(state).store


def _settings(state: State) -> CachedSettings:
    return services_of(state).settings


def _index(state: State) -> Index:
    return services_of(state).index


def _embedder(state: State) -> Embedder:
    return services_of(state).embedder


def _telemetry(state: State) -> Telemetry:
    return services_of(state).telemetry


def _expensive(state: State) -> ExpensiveWork:
    return services_of(state).expensive


def _rate_limiter(state: State) -> RateLimiter:
    return services_of(state).rate_limiter


def _console_sessions(state: State) -> ConsoleSessions:
    return services_of(state).console_sessions


def dependencies() -> dict[str, Provide]:
    """The app's providers, by the parameter name a handler uses."""
    providers = {
        "services": services_of,
        "config": _config,
        "store": _store,
        "settings_cache": _settings,
        "index": _index,
        "embedder": _embedder,
        "telemetry": _telemetry,
        "expensive": _expensive,
        "rate_limiter": _rate_limiter,
        "console_sessions": _console_sessions,
    }
    # Each is a field read: run inline, never in a worker thread.
    return {name: Provide(provide, sync_to_thread=False) for name, provide in providers.items()}
