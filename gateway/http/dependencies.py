"""What handlers may ask for by name, through Litestar's dependency injection.

The composition root (`gateway.runtime.services`) builds the adapters and wires each use
case once; `create_app` registers `dependencies()` on the app, and a handler names the
use case or port it uses as a parameter (`retrieval: Injected[Retrieval]`,
`store: Injected[SettingsStore]`, ...). Each provider below is used by some handler. A
parameter is annotated `Injected[T]`: named for injection and not validated (the
composition root built it; checking it again on every request would only cost time).
Middleware and the console's helpers, which Litestar does not inject, read their parts
with the `..._of(state)` functions.
"""

from __future__ import annotations

from typing import Annotated, TypeAlias, TypeVar

from litestar.datastructures import State
from litestar.di import Dependency, Provide
from litestar.params import SkipValidationMarker

from gateway.access.admission import Admission, Authentication
from gateway.admin.calibration import Calibration
from gateway.admin.knowledge import Documents, Knowledge
from gateway.admin.lifecycle import Deletions
from gateway.admin.migration import Migrations
from gateway.admin.transfer import Transfer
from gateway.admin.workspace import WorkspaceSettings
from gateway.retrieval.citations import Citations
from gateway.retrieval.plan import Planning
from gateway.retrieval.postcheck import GroundingCheck
from gateway.retrieval.turn import Retrieval
from gateway.runtime.readiness import Readiness
from gateway.runtime.services import Services
from gateway.safety.egress import Egress
from gateway.telemetry import Telemetry
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


def telemetry_of(state: State) -> Telemetry:
    return services_of(state).telemetry


def authentication_of(state: State) -> Authentication:
    return services_of(state).authentication


def admission_of(state: State) -> Admission:
    return services_of(state).admission


def _config(state: State) -> Config:
    return services_of(state).config


def _store(state: State) -> SettingsStore:
    return services_of(state).store


def _settings(state: State) -> CachedSettings:
    return services_of(state).settings


def _index(state: State) -> Index:
    return services_of(state).index


def _readiness(state: State) -> Readiness:
    return services_of(state).readiness


def _planning(state: State) -> Planning:
    return services_of(state).planning


def _retrieval(state: State) -> Retrieval:
    return services_of(state).retrieval


def _citations(state: State) -> Citations:
    return services_of(state).citations


def _grounding(state: State) -> GroundingCheck:
    return services_of(state).grounding


def _egress(state: State) -> Egress:
    return services_of(state).egress


def _workspaces(state: State) -> WorkspaceSettings:
    return services_of(state).workspaces


def _knowledge(state: State) -> Knowledge:
    return services_of(state).knowledge


def _documents(state: State) -> Documents:
    return services_of(state).documents


def _calibration(state: State) -> Calibration:
    return services_of(state).calibration


def _migrations(state: State) -> Migrations:
    return services_of(state).migrations


def _deletions(state: State) -> Deletions:
    return services_of(state).deletions


def _transfer(state: State) -> Transfer:
    return services_of(state).transfer


def dependencies() -> dict[str, Provide]:
    """The app's providers, by the parameter name a handler uses."""
    providers = {
        "config": _config,
        "telemetry": telemetry_of,
        "store": _store,
        "settings_cache": _settings,
        "index": _index,
        "readiness": _readiness,
        "authentication": authentication_of,
        "admission": admission_of,
        "planning": _planning,
        "retrieval": _retrieval,
        "citations": _citations,
        "grounding": _grounding,
        "egress": _egress,
        "workspaces": _workspaces,
        "knowledge": _knowledge,
        "documents": _documents,
        "calibration": _calibration,
        "migrations": _migrations,
        "deletions": _deletions,
        "transfer": _transfer,
    }
    # Each is a field read: run inline, never in a worker thread.
    return {name: Provide(provide, sync_to_thread=False) for name, provide in providers.items()}
