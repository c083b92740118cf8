"""The composition root: builds every adapter from the Config, once per process, and
wires each use case with the ports it uses.

`create_app` calls `build_services` in its lifespan unless a test passed its own
`Services`, and hands each handler the use case or port it names through Litestar's
dependency injection (`gateway.http.dependencies`); nothing below the entry points sees
`Services`. With `KBGATE_REDIS_URL` set, one Redis client (one connection pool) serves the
settings store, both rate limiters, the authentication-failure counter and the console's
sessions (`create_app` builds them on it). Command-line tools build single parts with
`build_store`, `build_index` and `build_embedder`.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from gateway.access.admission import Admission, Authentication
from gateway.access.auth import KeyUsage
from gateway.access.expensive import ExpensiveWork
from gateway.access.ratelimit import (
    FailureCounter,
    InProcessFailures,
    InProcessLimiter,
    RateLimiter,
)
from gateway.admin.calibration import Calibration
from gateway.admin.knowledge import Documents, Knowledge
from gateway.admin.lifecycle import Deletions
from gateway.admin.migration import Migrations
from gateway.admin.transfer import Transfer
from gateway.admin.upkeep import Upkeep
from gateway.admin.workspace import WorkspaceSettings
from gateway.admin.write_guard import KeyedLocks
from gateway.background import BackgroundTasks
from gateway.calibration.evaluation import Evaluator
from gateway.calibration.runner import Evaluations
from gateway.retrieval.citations import Citations
from gateway.retrieval.legs import Search
from gateway.retrieval.off_topic_line import OffTopicLines
from gateway.retrieval.plan import Planning
from gateway.retrieval.postcheck import GroundingCheck
from gateway.retrieval.query_embedding import OtherModelQuestions, QueryEmbeddings
from gateway.retrieval.turn import Retrieval
from gateway.runtime.readiness import Readiness
from gateway.safety.egress import Egress
from gateway.safety.operators import Anonymizer
from gateway.safety.passages import PassageRedaction, RedactionPolicies
from gateway.safety.redaction import Redactor
from gateway.telemetry import Telemetry
from ingest.embedder.embedding import (
    MINILM_MODEL_NAME,
    Embedder,
    FastEmbedder,
    build_other_model,
)
from ingest.embedder.models import DenseModels
from ingest.engines.blocking import BlockingIndex
from ingest.index import Index, IndexUnavailableError
from ingest.language import LanguageDetector
from ingest.lru import LruCache
from ingest.sync import DocumentWriter
from settings.cache import CachedSettings
from settings.config import Config
from settings.store import SettingsStore

if TYPE_CHECKING:
    from settings.stores.redis.store import SharedRedis

T = TypeVar("T")


@dataclass
class Services:
    """The process's adapters, built once, and its use cases wired with them.

    Only the entry points read it: the HTTP layer's providers hand a handler the use case
    or port it names, the CLI takes the use cases it runs in-process, and `close` releases
    the adapters at the end.
    """

    config: Config
    telemetry: Telemetry
    index: Index
    index_engine: str
    store: SettingsStore
    store_engine: str
    embedder: Embedder
    #: PII detection and redaction, offline
    redactor: Redactor
    #: workspaces, agents, KBs and credentials through the cache turns read
    settings: CachedSettings
    #: the question embeddings' cache and threads
    query_embeddings: QueryEmbeddings
    #: grounding checks, call-time redaction and ingest embedding (`gateway.access.expensive`)
    expensive: ExpensiveWork
    #: per key, and one budget per workspace shared by all its keys
    rate_limiter: RateLimiter
    workspace_limiter: RateLimiter
    #: failed authentications per client address
    auth_failures: FailureCounter
    #: when each key was last used, written to the store at most once a minute per key
    key_usage: KeyUsage
    #: work left running by a request (a KB's evaluation), cancelled first at close
    background: BackgroundTasks
    #: the process's one Redis client (None when embedded), closed last
    redis: SharedRedis | None
    # The use cases, each with the ports it uses.
    authentication: Authentication
    admission: Admission
    readiness: Readiness
    planning: Planning
    retrieval: Retrieval
    citations: Citations
    grounding: GroundingCheck
    egress: Egress
    workspaces: WorkspaceSettings
    knowledge: Knowledge
    documents: Documents
    calibration: Calibration
    deletions: Deletions
    transfer: Transfer
    upkeep: Upkeep
    migrations: Migrations
    #: the dense models KBs answer from or migrate to, the deployment's among them
    models: DenseModels

    async def close(self) -> None:
        await self.background.close()
        await self.key_usage.close()
        await self.rate_limiter.close()
        await self.workspace_limiter.close()
        await self.auth_failures.close()
        self.expensive.close()
        self.query_embeddings.close()
        self.models.close()
        await self.store.close()
        await self.index.close()
        if self.redis is not None:
            await self.redis.aclose()


async def build_services(
    config: Config,
    telemetry: Telemetry,
    *,
    embedder: Embedder | None = None,
    redactor: Redactor | None = None,
    engine: tuple[Index, str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    languages: LanguageDetector | None = None,
) -> Services:
    """Open the store and index named by the config, load the embedding model, the
    recognizers and the language detector, and wire the use cases.

    A caller may pass an already loaded `embedder` (tests share one model) or an
    `engine`, an (index, name) pair (tests run the same suite on qdrant-client local mode),
    and the `clock` measured off-topic lines age by (tests move it on).
    """
    config.data_dir.mkdir(parents=True, exist_ok=True)
    redis = _open_redis(config)
    store, store_engine = await build_store(config, redis)
    if engine is None:
        engine = await build_index(config)
    index, index_engine = engine
    await _optimize_index(index, telemetry)
    # The model and presidio load side by side: start-up is mostly their imports. Both
    # import numpy, whose first import from two threads at once can fail half-initialised
    # ("partially initialized module"), so it is imported once before.
    await asyncio.to_thread(importlib.import_module, "numpy")
    model, pii, detector = await asyncio.gather(
        _given_or_built(embedder, lambda: build_embedder(config)),
        # PII redaction, offline: presidio's analyzer and its anonymizer, one each per process
        _given_or_built(redactor, lambda: Redactor.build(anonymizer=Anonymizer())),
        _given_or_built(languages, LanguageDetector.loaded),
    )
    return wire(
        config,
        telemetry,
        index=(index, index_engine),
        store=(store, store_engine),
        embedder=model,
        redactor=pii,
        redis=redis,
        clock=clock,
        languages=detector,
    )


def wire(
    config: Config,
    telemetry: Telemetry,
    *,
    index: tuple[Index, str],
    store: tuple[SettingsStore, str],
    embedder: Embedder,
    redactor: Redactor,
    redis: SharedRedis | None = None,
    clock: Callable[[], float] = time.monotonic,
    languages: LanguageDetector | None = None,
) -> Services:
    """The process's services on opened adapters: `index` and `store` each with its
    engine's name; `clock` ages the measured off-topic lines. Called on the event loop
    that opened the index: the document writer's threads call the index there."""
    engine, records = index[0], store[0]
    loop = asyncio.get_running_loop()
    settings = CachedSettings(
        records,
        config.settings_staleness_s,
        on_stale_read=lambda: telemetry.count("settings_stale_reads"),
        on_fallback=lambda: telemetry.count("settings_fallback"),
    )
    background = BackgroundTasks()
    expensive = ExpensiveWork(config.expensive_threads, config.expensive_per_workspace, telemetry)
    questions = QueryEmbeddings(
        embedder.embed_queries,
        LruCache(config.query_cache_size),
        model=embedder if isinstance(embedder, FastEmbedder) else None,
    )
    limiters = (
        _build_rate_limiter(
            redis, telemetry, config.rate_limit_per_s, config.rate_limit_burst, "kbgate:rate"
        ),
        _build_rate_limiter(
            redis,
            telemetry,
            config.rate_limit_workspace_per_s,
            config.rate_limit_workspace_burst,
            "kbgate:wsrate",
        ),
    )
    model_id = config.embedding_model or MINILM_MODEL_NAME
    models = DenseModels(embedder, model_id, partial(build_other_model, config.model_dir))
    lines = OffTopicLines(
        records, engine, embedder, background, telemetry, config=config, clock=clock
    )
    planning = Planning(settings, config, lines)
    search = Search(engine, telemetry, config)
    policies = RedactionPolicies(redactor, settings, telemetry)
    knowledge = Knowledge(records, settings, engine, lines, telemetry, config)
    evaluator = Evaluator(planning, search, embedder, expensive, records, models)
    calibration = Calibration(
        records, Evaluations(records, background, telemetry, evaluator), knowledge, telemetry
    )
    deletions = Deletions(records, settings, engine, calibration, telemetry)
    detector = languages or LanguageDetector()
    failures = _build_failure_counter(redis, config, telemetry)
    key_usage = KeyUsage(records.record_key_use)
    return Services(
        config=config,
        telemetry=telemetry,
        index=engine,
        index_engine=index[1],
        store=records,
        store_engine=store[1],
        embedder=embedder,
        redactor=redactor,
        settings=settings,
        query_embeddings=questions,
        expensive=expensive,
        rate_limiter=limiters[0],
        workspace_limiter=limiters[1],
        auth_failures=failures,
        key_usage=key_usage,
        background=background,
        redis=redis,
        authentication=Authentication(
            settings,
            (config.platform_key, config.platform_key_previous),
            failures,
            key_usage,
            telemetry,
        ),
        admission=Admission(*limiters, telemetry),
        readiness=Readiness(index, store, embedder, telemetry, config),
        planning=planning,
        retrieval=Retrieval(
            planning=planning,
            questions=questions,
            search=search,
            redaction=PassageRedaction(
                policies, LruCache(config.redaction_cache_size), engine, telemetry
            ),
            records=records,
            telemetry=telemetry,
            config=config,
            languages=detector,
            other_questions=OtherModelQuestions(
                models, LruCache(config.query_cache_size), questions.threads
            ),
        ),
        citations=Citations(records, planning, engine),
        grounding=GroundingCheck(
            planning, engine, embedder, expensive, telemetry, config, models=models
        ),
        egress=Egress(settings, policies, expensive, telemetry),
        workspaces=WorkspaceSettings(
            records, settings, telemetry, config, redactor.supported_entities
        ),
        knowledge=knowledge,
        documents=Documents(
            records,
            DocumentWriter(
                BlockingIndex(engine, loop),
                embedder,
                model_id=model_id,
                analyzer=redactor,
                stage=telemetry.tracing.span,
                languages=detector,
                models=models,
            ),
            KeyedLocks(),
            expensive,
            telemetry,
            config,
        ),
        calibration=calibration,
        deletions=deletions,
        transfer=Transfer(
            records,
            settings,
            engine,
            embedder,
            redactor,
            deletions,
            telemetry,
            config,
            expensive,
            models,
        ),
        upkeep=Upkeep(deletions, records, telemetry, config),
        migrations=Migrations(
            records, settings, engine, models, expensive, background, evaluator, telemetry
        ),
        models=models,
    )


async def _optimize_index(index: Index, telemetry: Telemetry) -> None:
    """Index what was written since the last start, before the first turn: Edge's
    optimizer stops the whole process while it runs (`ingest.engines.edge.engine`)."""
    started = time.perf_counter()
    try:
        changed = await index.optimize()
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


def _open_redis(config: Config) -> SharedRedis | None:
    """The process's one Redis client (every call bounded by the Redis timeout), or None."""
    if not config.redis_url:
        return None
    from settings.stores.redis.store import redis_client

    return redis_client(config.redis_url, config.redis_timeout_s)


def _build_rate_limiter(
    redis: SharedRedis | None, telemetry: Telemetry, rate: float, burst: int, prefix: str
) -> RateLimiter:
    if redis is not None:
        from gateway.access.redis_limits import RedisLimiter

        return RedisLimiter(
            redis,
            rate,
            burst,
            on_outage=lambda: telemetry.count("rate_limit_unavailable"),
            prefix=prefix,
        )
    return InProcessLimiter(rate, burst)


def _build_failure_counter(
    redis: SharedRedis | None, config: Config, telemetry: Telemetry
) -> FailureCounter:
    if redis is not None:
        from gateway.access.redis_limits import RedisFailures

        return RedisFailures(
            redis,
            config.auth_failures_per_min,
            on_outage=lambda: telemetry.count("rate_limit_unavailable"),
        )
    return InProcessFailures(config.auth_failures_per_min)


async def build_store(
    config: Config, redis: SharedRedis | None = None
) -> tuple[SettingsStore, str]:
    """The settings store the config names: Redis (on `redis`, the caller's shared client,
    when given; else on a client of its own), or SQLite in the data directory."""
    if config.redis_url:
        from settings.stores.redis.store import RedisStore

        if redis is not None:
            return RedisStore.sharing(redis, config.redis_timeout_s), "redis"
        return RedisStore.connect(config.redis_url, config.redis_timeout_s), "redis"
    from settings.stores.sqlite.store import SqliteStore

    return await SqliteStore.open(config.data_dir / "kbgate.sqlite3"), "sqlite"


async def check_index_server(config: Config) -> None:
    """Refuse a configured Qdrant server too old for the adapter, before anything starts.

    Raises IncompatibleServerError. A server that does not answer yet is not refused
    here: readiness reports the index down until it answers, and checks it then.
    """
    if config.qdrant_url:
        index, _ = await build_index(config)
        await index.close()


async def build_index(config: Config) -> tuple[Index, str]:
    """The index the config names, and its engine's name: a Qdrant server or Qdrant Edge."""
    if config.qdrant_url:
        from ingest.engines.server.index import CollectionLayout, ServerIndex

        server = await ServerIndex.connect(
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
    from ingest.engines.edge.index import EdgeIndex

    return EdgeIndex(
        config.data_dir,
        indexing_threshold_kb=config.edge_indexing_threshold_kb,
        timeout_s=config.qdrant_timeout_s,
        search_threads=config.edge_search_threads,
        min_free_mb=config.min_free_disk_mb,
    ), "qdrant-edge"


def build_embedder(config: Config) -> Embedder:
    """The embedding model the config names, loaded (downloaded once into the model dir)."""
    from ingest.embedder import embedding

    return embedding.build_embedder(
        model_dir=config.model_dir,
        model_name=config.embedding_model,
        threads=config.embedding_threads,
        batch_size=config.embedding_batch_size,
        workers=config.embedding_workers,
        query_threads=config.embedding_query_threads or None,
    )
