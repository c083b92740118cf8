"""The composition root: builds every adapter from the Config, once per process.

`create_app` calls `build_services` in its lifespan unless a test passed its own
`Services`, and hands handlers the parts they need through Litestar's dependency
injection (`gateway.http.dependencies`). With `KBGATE_REDIS_URL` set, one Redis client
(one connection pool) serves the settings store, both rate limiters, the
authentication-failure counter and the console's sessions. Command-line tools build
single parts with `build_store`, `build_index` and `build_embedder`.
"""

from __future__ import annotations

import asyncio
import importlib
import time
import weakref
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from gateway.access.auth import KeyUsage, Principal
from gateway.access.expensive import ExpensiveWork
from gateway.access.ratelimit import (
    FailureCounter,
    InProcessFailures,
    InProcessLimiter,
    RateLimiter,
    RedisFailures,
    RedisLimiter,
)
from gateway.errors import RateLimitedError
from gateway.retrieval.off_topic_line import OffTopicLines
from gateway.retrieval.query_embedding import QueryEmbeddings, TurnsInFlight
from gateway.runtime.background import BackgroundTasks
from gateway.runtime.telemetry import Telemetry
from gateway.safety.operators import Anonymizer
from gateway.safety.redaction import Redactor
from ingest.embedding import MINILM_MODEL_NAME, Embedder, FastEmbedder
from ingest.index import Index, IndexUnavailableError
from ingest.lru import LruCache
from ingest.payload import PiiSpan
from ingest.sync import DocumentWriter
from settings.cache import CachedSettings
from settings.config import Config
from settings.pii_allow_list import AllowList
from settings.store import SettingsStore, StoreUnavailableError

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from gateway.http.console.sessions import ConsoleSessions

T = TypeVar("T")


class KeyedLocks:
    """One asyncio lock per key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[Hashable, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    @asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        lock = self._locks.get(key)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[key] = lock
        async with lock:
            yield


@dataclass
class Services:
    """Everything a request handler may use; built once per process."""

    config: Config
    index: Index
    store: SettingsStore
    embedder: Embedder
    telemetry: Telemetry
    index_engine: str
    store_engine: str
    writer: DocumentWriter
    settings: CachedSettings
    redactor: Redactor  # PII detection and redaction, offline
    rate_limiter: RateLimiter
    # Turns embed questions through a cache, and analyse passages stored without a
    # current PII analysis through a cache; both caches are partitioned by tenant.
    query_embeddings: QueryEmbeddings
    analysis_cache: LruCache[tuple[str, str], tuple[PiiSpan, ...]]
    #: one budget per workspace, shared by all its keys (beside `rate_limiter`'s per key)
    workspace_limiter: RateLimiter
    #: failed authentications per client address
    auth_failures: FailureCounter
    #: when each key was last used, written to the store at most once a minute per key
    key_usage: KeyUsage
    #: grounding checks, call-time redaction and ingest embedding (`gateway.access.expensive`)
    expensive: ExpensiveWork
    #: the admin console's sign-ins (in memory, or in the shared Redis)
    console_sessions: ConsoleSessions
    #: the process's one Redis client (None when embedded), closed last
    redis: Redis | None = None
    # One writer per document at a time in this process: replacing is read-then-write.
    document_locks: KeyedLocks = field(default_factory=KeyedLocks)
    #: work left running by a request (a KB's evaluation), cancelled first at close
    background: BackgroundTasks = field(default_factory=BackgroundTasks)
    #: retrieval turns running now: a lone turn embeds in its own thread
    turns: TurnsInFlight = field(default_factory=TurnsInFlight)
    #: each KB Scope's measured dense floor, where no setting gives one
    off_topic_lines: OffTopicLines = field(default_factory=OffTopicLines)
    #: workspaces' PII allow-lists, parsed once per list of entries
    allow_lists: LruCache[tuple[str, ...], AllowList] = field(default_factory=lambda: LruCache(256))

    async def admit(self, principal: Principal) -> None:
        """Raise RateLimitedError when the key's budget, or its workspace's, is spent."""
        wait_s = await self.rate_limiter.hit(principal.key_id)
        if wait_s is None and principal.tenant_id:
            wait_s = await self.workspace_limiter.hit(principal.tenant_id)
            if wait_s is not None:
                self.telemetry.count("rate_limited")
                raise RateLimitedError(wait_s, workspace=True)
        if wait_s is not None:
            self.telemetry.count("rate_limited")
            raise RateLimitedError(wait_s)

    async def readiness(self) -> dict[str, dict[str, Any]]:
        """Per-dependency status; each check bounded by its timeout."""
        return {
            "index": await self._check(
                "index",
                self.index_engine,
                asyncio.to_thread(self.index.ping),
                self.config.qdrant_timeout_s,
            ),
            "store": await self._check(
                "store", self.store_engine, self.store.ping(), self.config.redis_timeout_s
            ),
            "embedder": {"status": "up", "dense_dim": self.embedder.dense_dim},
        }

    async def _check(self, name: str, engine: str, probe: Any, timeout_s: float) -> dict[str, Any]:
        try:
            await asyncio.wait_for(probe, timeout=timeout_s)
        except (IndexUnavailableError, StoreUnavailableError, TimeoutError, OSError):
            self.telemetry.dependency_up.labels(dependency=name).set(0)
            return {"status": "down", "engine": engine}
        self.telemetry.dependency_up.labels(dependency=name).set(1)
        return {"status": "up", "engine": engine}

    async def close(self) -> None:
        await self.background.close()
        await self.key_usage.close()
        await self.rate_limiter.close()
        await self.workspace_limiter.close()
        await self.auth_failures.close()
        self.expensive.close()
        self.query_embeddings.close()
        await self.store.close()
        await asyncio.to_thread(self.index.close)
        if self.redis is not None:
            await self.redis.aclose()


async def build_services(
    config: Config,
    telemetry: Telemetry,
    *,
    embedder: Embedder | None = None,
    redactor: Redactor | None = None,
    engine: tuple[Index, str] | None = None,
) -> Services:
    """Open the store and index named by the config and load the embedding model.

    A caller may pass an already loaded `embedder` (tests share one model) or an
    `engine`, an (index, name) pair (tests run the same suite on qdrant-client local mode).
    """
    config.data_dir.mkdir(parents=True, exist_ok=True)
    redis = _open_redis(config)
    store, store_engine = await build_store(config, redis)
    if engine is None:
        engine = await asyncio.to_thread(build_index, config)
    index, index_engine = engine
    await asyncio.to_thread(_optimize_index, index, telemetry)
    # The model and presidio load side by side: start-up is mostly their imports. Both
    # import numpy, whose first import from two threads at once can fail half-initialised
    # ("partially initialized module"), so it is imported once before.
    await asyncio.to_thread(importlib.import_module, "numpy")
    model, pii = await asyncio.gather(
        _given_or_built(embedder, lambda: build_embedder(config)),
        # PII redaction, offline: presidio's analyzer and its anonymizer, one each per process
        _given_or_built(redactor, lambda: Redactor.build(anonymizer=Anonymizer())),
    )
    return Services(
        config=config,
        index=index,
        store=store,
        embedder=model,
        redactor=pii,
        telemetry=telemetry,
        index_engine=index_engine,
        store_engine=store_engine,
        writer=DocumentWriter(
            index,
            model,
            model_id=config.embedding_model or MINILM_MODEL_NAME,
            analyzer=pii,
            stage=telemetry.tracing.span,
        ),
        settings=CachedSettings(
            store,
            config.settings_staleness_s,
            on_stale_read=lambda: telemetry.count("settings_stale_reads"),
        ),
        rate_limiter=_build_rate_limiter(
            redis, telemetry, config.rate_limit_per_s, config.rate_limit_burst, "kbgate:rate"
        ),
        workspace_limiter=_build_rate_limiter(
            redis,
            telemetry,
            config.rate_limit_workspace_per_s,
            config.rate_limit_workspace_burst,
            "kbgate:wsrate",
        ),
        auth_failures=_build_failure_counter(redis, config, telemetry),
        key_usage=KeyUsage(store.record_key_use),
        query_embeddings=QueryEmbeddings(
            model.embed_queries,
            LruCache(config.query_cache_size),
            model=model if isinstance(model, FastEmbedder) else None,
        ),
        analysis_cache=LruCache(config.redaction_cache_size),
        expensive=ExpensiveWork(
            config.expensive_threads, config.expensive_per_workspace, telemetry
        ),
        console_sessions=_build_console_sessions(redis),
        redis=redis,
    )


def _optimize_index(index: Index, telemetry: Telemetry) -> None:
    """Index what was written since the last start, before the first turn: Edge's
    optimizer stops the whole process while it runs (`ingest.qdrant_edge`)."""
    started = time.perf_counter()
    try:
        changed = index.optimize()
    except IndexUnavailableError:
        # Unindexed segments are still searched, exactly: serve rather than not start.
        telemetry.log.warning("index_optimize_failed")
        return
    if changed:
        telemetry.log.info(
            "index_optimized",
            collections=len(changed),
            duration_ms=round((time.perf_counter() - started) * 1000),
        )


async def _given_or_built(given: T | None, build: Callable[[], T]) -> T:
    return given if given is not None else await asyncio.to_thread(build)


def _open_redis(config: Config) -> Redis | None:
    """The process's one Redis client (every call bounded by the Redis timeout), or None."""
    if not config.redis_url:
        return None
    from settings.redis_store import redis_client

    return redis_client(config.redis_url, config.redis_timeout_s)


def _build_console_sessions(redis: Redis | None) -> ConsoleSessions:
    # Imported here: the console package imports the core, which imports this module.
    from gateway.http.console.sessions import ConsoleSessions

    return ConsoleSessions.build(redis)


def _build_rate_limiter(
    redis: Redis | None, telemetry: Telemetry, rate: float, burst: int, prefix: str
) -> RateLimiter:
    if redis is not None:
        return RedisLimiter(
            redis,
            rate,
            burst,
            on_outage=lambda: telemetry.count("rate_limit_unavailable"),
            prefix=prefix,
        )
    return InProcessLimiter(rate, burst)


def _build_failure_counter(
    redis: Redis | None, config: Config, telemetry: Telemetry
) -> FailureCounter:
    if redis is not None:
        return RedisFailures(
            redis,
            config.auth_failures_per_min,
            on_outage=lambda: telemetry.count("rate_limit_unavailable"),
        )
    return InProcessFailures(config.auth_failures_per_min)


async def build_store(config: Config, redis: Redis | None = None) -> tuple[SettingsStore, str]:
    """The settings store the config names: Redis (on `redis`, the caller's shared client,
    when given; else on a client of its own), or SQLite in the data directory."""
    if config.redis_url:
        from settings.redis_store import RedisStore

        if redis is not None:
            return RedisStore.sharing(redis, config.redis_timeout_s), "redis"
        return RedisStore.connect(config.redis_url, config.redis_timeout_s), "redis"
    from settings.sqlite_store import SqliteStore

    return await SqliteStore.open(config.data_dir / "kbgate.sqlite3"), "sqlite"


def for_a_command(config: Config) -> Config:
    """The config of a command that opens the embedded data dir, works and exits (`kbgate
    ingest --data-dir`, `eval`, the workspace commands): it serves no turns, so its large
    collections stay in its own process rather than each getting a host process."""
    return msgspec.structs.replace(config, edge_host_from_points=0)


def check_index_server(config: Config) -> None:
    """Refuse a configured Qdrant server too old for the adapter, before anything starts.

    Raises IncompatibleServerError. A server that does not answer yet is not refused
    here: readiness reports the index down until it answers, and checks it then.
    """
    if config.qdrant_url:
        build_index(config)[0].close()


def build_index(config: Config) -> tuple[Index, str]:
    """The index the config names, and its engine's name: a Qdrant server or Qdrant Edge."""
    if config.qdrant_url:
        from ingest.qdrant_server import CollectionLayout, ServerIndex

        server = ServerIndex.connect(
            config.qdrant_url,
            config.qdrant_api_key,
            config.qdrant_timeout_s,
            layout=CollectionLayout(
                shards=config.qdrant_shards,
                replication_factor=config.qdrant_replication_factor,
                write_consistency=config.qdrant_write_consistency,
            ),
        )
        return server, "qdrant-server"
    from ingest.qdrant_edge import EdgeIndex

    return EdgeIndex(
        config.data_dir,
        indexing_threshold_kb=config.edge_indexing_threshold_kb,
        search_threads=config.edge_search_threads,
        host_from_points=config.edge_host_from_points or None,
        min_free_mb=config.min_free_disk_mb,
    ), "qdrant-edge"


def build_embedder(config: Config) -> Embedder:
    """The embedding model the config names, loaded (downloaded once into the model dir)."""
    from ingest import embedding

    return embedding.build_embedder(
        model_dir=config.model_dir,
        model_name=config.embedding_model,
        threads=config.embedding_threads,
        batch_size=config.embedding_batch_size,
        workers=config.embedding_workers,
        query_threads=config.embedding_query_threads or None,
    )
