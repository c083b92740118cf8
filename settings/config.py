"""Process configuration, read from `KBGATE_*` environment variables once, at start.

`load_config(environ)` is called by the CLI or a test and the result passed in;
nothing here runs at import time. A bad value fails start-up with a message that
names the variable.
"""

from __future__ import annotations

import enum
import ipaddress
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec

ENV_PREFIX = "KBGATE_"


class FusionMethod(enum.StrEnum):
    """How a turn fuses its legs (`gateway.retrieval.fusion`)."""

    SCORE = "score"
    RRF = "rrf"


T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration variable is missing, malformed or out of range."""


class Bounds(msgspec.Struct, frozen=True):
    """Platform bounds: stored settings beyond them are clamped when used."""

    top_k_min: int = 1
    top_k_max: int = 50
    score_threshold_min: float = 0.0
    score_threshold_max: float = 1.0
    max_variations: int = 4
    kb_cap_min: int = 1
    kb_cap_max: int = 10


class Defaults(msgspec.Struct, frozen=True):
    """Platform defaults: used when neither the KB nor the agent sets a value."""

    top_k: int = 8
    # A KB answers when its best passage reaches `score_threshold` (a cosine) or a keyword
    # hit holding the question's words reaches `keyword_floor` of the question's
    # attainable BM25 score (a share that means the same in a KB of any size, for a
    # question of any length: `ingest.keyword_scale`; `gateway.retrieval.answering`).
    # Measured with `kbgate eval` on three golden sets together
    # (docs/decisions/fusion-and-floors.md). `score_threshold` serves where a KB has no
    # off-topic line (`off_topic_line` off, or its index unreachable when measured).
    score_threshold: float = 0.44
    keyword_floor: float = 0.3
    kb_cap: int = 3
    grounding_floor: float = 0.7
    # Where neither the KB nor the agent sets `score_threshold`, a KB's turns use its own
    # measured off-topic line instead of `score_threshold` (`gateway.retrieval.off_topic_line`).
    off_topic_line: bool = True


class Config(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the process needs to know about its surroundings."""

    data_dir: Path = Path("./kbgate-data")
    host: str = "127.0.0.1"
    port: int = 8080
    qdrant_url: str | None = None
    qdrant_api_key: str | None = None
    qdrant_timeout_s: float = 5.0
    #: Collections kbgate creates on a Qdrant server: shards, copies of each shard, and
    #: how many copies must acknowledge a write. One node: 1, 1, 1.
    qdrant_shards: int = 1
    qdrant_replication_factor: int = 1
    qdrant_write_consistency: int = 1
    #: Qdrant Edge indexes a segment once its vectors pass this size (KB); None: Edge's
    #: default (10,000 KB, about 6,500 passages); 0: never. See `ingest.engines.edge.index`.
    edge_indexing_threshold_kb: int | None = None
    #: Threads in each Qdrant Edge shard's search pool; None: one per core. See
    #: `ingest.engines.edge.index`.
    edge_search_threads: int | None = None
    #: Free disk (MiB) the embedded engine's writes and index builds leave on the data
    #: dir's disk: a write that would start below it is refused (503). See
    #: `ingest.engines.edge.disk`.
    min_free_disk_mb: int = 512
    redis_url: str | None = None
    redis_timeout_s: float = 2.0
    platform_key: str | None = None
    #: the platform key being rotated out: accepted beside `platform_key` until unset
    platform_key_previous: str | None = None
    #: A bearer token for GET /metrics alone; None: only the platform key reads /metrics.
    metrics_key: str | None = None
    embedding_model: str | None = None
    #: onnxruntime threads of one passage run; None: one
    #: (`ingest.embedder.embedding.PASSAGE_THREADS`).
    embedding_threads: int | None = None
    #: Passage runs side by side; None: as many as fill the cores with `embedding_threads`.
    embedding_workers: int | None = None
    #: Questions get their own single-thread session: see `ingest.embedder.embedding.QUERY_THREADS`.
    #: The bundled model's questions always do (its integer re-quantization); for a named
    #: model, 0 shares the passages' session (no second copy of the model in memory).
    embedding_query_threads: int = 1
    #: One passage per model run: see `ingest.embedder.embedding.DEFAULT_BATCH_SIZE`.
    embedding_batch_size: int = 1
    embed_timeout_s: float = 30.0
    # Bounded caches, 0 turns one off.
    query_cache_size: int = 1024
    redaction_cache_size: int = 4096
    leg_limit: int = 100
    passages_per_document: int = 1
    #: How legs fuse (`gateway.retrieval.fusion`): "score" (normalised scores) or "rrf" (ranks).
    fusion_method: FusionMethod = FusionMethod.SCORE
    model_cache_dir: Path | None = None
    bounds: Bounds = msgspec.field(default_factory=Bounds)
    defaults: Defaults = msgspec.field(default_factory=Defaults)
    settings_staleness_s: float = 30.0
    turn_ttl_s: int = 3600
    #: The longest a workspace's `turn_retention_s` may keep turn records (it is clamped).
    turn_ttl_max_s: int = 86_400
    #: Settings changes older than this many days are purged; 0 keeps them all.
    settings_history_days: int = 0
    #: How often the retention sweep purges expired turn records and old settings changes.
    retention_sweep_s: float = 300.0
    max_question_chars: int = 2000
    max_document_bytes: int = 5 * 1024 * 1024
    max_body_bytes: int = 8 * 1024 * 1024
    #: The largest workspace archive `POST .../import` takes (it is spooled to a temp file).
    max_import_bytes: int = 1024 * 1024 * 1024
    #: The secret this deployment signs its workspace archives with (HMAC-SHA256): an
    #: import trusts the PII analyses of an archive signed with it (or with
    #: `archive_key_previous`) and analyses every other archive's passages again.
    #: None: no archive is signed, none trusted (`gateway.admin.archive`).
    archive_key: str | None = None
    #: the archive key being rotated out: archives it signed are still trusted
    archive_key_previous: str | None = None
    rate_limit_per_s: float = 50.0
    rate_limit_burst: int = 100
    #: one budget shared by all keys of a workspace, beside each key's own
    rate_limit_workspace_per_s: float = 200.0
    rate_limit_workspace_burst: int = 400
    #: failed authentications (unknown, expired or malformed keys; console sign-ins) per
    #: client address per minute before that address gets 429s
    auth_failures_per_min: int = 20
    #: The proxies (IP addresses or CIDR ranges, normalised) whose `X-Forwarded-For` and
    #: `X-Forwarded-Proto` are believed; empty (the default): none, the peer is the client.
    trusted_proxies: tuple[str, ...] = ()
    log_level: str = "INFO"
    #: An OpenTelemetry collector's OTLP/HTTP traces endpoint (`http://host:4318/v1/traces`):
    #: turns and ingests are traced there (counts and timings only); None: no tracing.
    #: Needs the `otel` extra (`gateway.tracing`).
    otlp_endpoint: str | None = None
    #: Threads of the pool that runs expensive work (grounding checks, call-time
    #: redaction, ingest embedding), apart from the shared pool of stores and cheap calls;
    #: None: one per core. `gateway.access.expensive`.
    expensive_threads: int | None = None
    #: Expensive requests one workspace may have running (or queued) at once; past it, 429.
    expensive_per_workspace: int = 2
    #: The size budget of one grounding check.
    grounding_max_chars: int = 20_000
    grounding_max_sentences: int = 200
    #: On SIGTERM, how long requests in flight may run on while new ones get 503.
    shutdown_timeout_s: float = 10.0

    @property
    def model_dir(self) -> Path:
        """Where assembled embedding models are cached."""
        return self.model_cache_dir or self.data_dir / "models"


def _parse_int(raw: str) -> int:
    return int(raw.strip())


def _parse_float(raw: str) -> float:
    value = float(raw.strip())
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


def _parse_str(raw: str) -> str:
    value = raw.strip()
    if not value:
        raise ValueError("must not be empty")
    return value


def _parse_path(raw: str) -> Path:
    return Path(_parse_str(raw)).expanduser()


def _parse_url(raw: str) -> str:
    value = _parse_str(raw)
    if "://" not in value:
        raise ValueError("must be a URL with a scheme, e.g. http://localhost:6333")
    return value


def _parse_level(raw: str) -> str:
    level = raw.strip().upper()
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR")
    return level


def _parse_switch(raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "on", "true", "yes"}:
        return True
    if value in {"0", "off", "false", "no"}:
        return False
    raise ValueError("must be on or off")


def _parse_networks(raw: str) -> tuple[str, ...]:
    """Comma-separated IP addresses or CIDR ranges, each normalised (`10.0.0.0/8`)."""
    networks: list[str] = []
    for item in raw.split(","):
        text = item.strip()
        if not text:
            continue
        try:
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise ValueError(f"{text!r} is not an IP address or CIDR range") from None
        networks.append(str(network))
    return tuple(networks)


def _parse_fusion_method(raw: str) -> FusionMethod:
    try:
        return FusionMethod(raw.strip().lower())
    except ValueError:
        raise ValueError("must be one of " + ", ".join(FusionMethod)) from None


# variable suffix -> (field path, parser)
_VARIABLES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "DATA_DIR": ("data_dir", _parse_path),
    "HOST": ("host", _parse_str),
    "PORT": ("port", _parse_int),
    "QDRANT_URL": ("qdrant_url", _parse_url),
    "QDRANT_API_KEY": ("qdrant_api_key", _parse_str),
    "QDRANT_TIMEOUT_S": ("qdrant_timeout_s", _parse_float),
    "QDRANT_SHARDS": ("qdrant_shards", _parse_int),
    "QDRANT_REPLICATION_FACTOR": ("qdrant_replication_factor", _parse_int),
    "QDRANT_WRITE_CONSISTENCY": ("qdrant_write_consistency", _parse_int),
    "EDGE_INDEXING_THRESHOLD_KB": ("edge_indexing_threshold_kb", _parse_int),
    "EDGE_SEARCH_THREADS": ("edge_search_threads", _parse_int),
    "MIN_FREE_DISK_MB": ("min_free_disk_mb", _parse_int),
    "REDIS_URL": ("redis_url", _parse_url),
    "REDIS_TIMEOUT_S": ("redis_timeout_s", _parse_float),
    "PLATFORM_KEY": ("platform_key", _parse_str),
    "PLATFORM_KEY_PREVIOUS": ("platform_key_previous", _parse_str),
    "METRICS_KEY": ("metrics_key", _parse_str),
    "EMBEDDING_MODEL": ("embedding_model", _parse_str),
    "EMBEDDING_THREADS": ("embedding_threads", _parse_int),
    "EMBEDDING_WORKERS": ("embedding_workers", _parse_int),
    "EMBEDDING_QUERY_THREADS": ("embedding_query_threads", _parse_int),
    "EMBEDDING_BATCH_SIZE": ("embedding_batch_size", _parse_int),
    "EMBED_TIMEOUT_S": ("embed_timeout_s", _parse_float),
    "QUERY_CACHE_SIZE": ("query_cache_size", _parse_int),
    "REDACTION_CACHE_SIZE": ("redaction_cache_size", _parse_int),
    "LEG_LIMIT": ("leg_limit", _parse_int),
    "PASSAGES_PER_DOCUMENT": ("passages_per_document", _parse_int),
    "FUSION_METHOD": ("fusion_method", _parse_fusion_method),
    "MODEL_CACHE_DIR": ("model_cache_dir", _parse_path),
    "SETTINGS_STALENESS_S": ("settings_staleness_s", _parse_float),
    "TURN_TTL_S": ("turn_ttl_s", _parse_int),
    "TURN_TTL_MAX_S": ("turn_ttl_max_s", _parse_int),
    "SETTINGS_HISTORY_DAYS": ("settings_history_days", _parse_int),
    "RETENTION_SWEEP_S": ("retention_sweep_s", _parse_float),
    "MAX_QUESTION_CHARS": ("max_question_chars", _parse_int),
    "MAX_DOCUMENT_BYTES": ("max_document_bytes", _parse_int),
    "MAX_BODY_BYTES": ("max_body_bytes", _parse_int),
    "MAX_IMPORT_BYTES": ("max_import_bytes", _parse_int),
    "ARCHIVE_KEY": ("archive_key", _parse_str),
    "ARCHIVE_KEY_PREVIOUS": ("archive_key_previous", _parse_str),
    "RATE_LIMIT_PER_S": ("rate_limit_per_s", _parse_float),
    "RATE_LIMIT_BURST": ("rate_limit_burst", _parse_int),
    "RATE_LIMIT_WORKSPACE_PER_S": ("rate_limit_workspace_per_s", _parse_float),
    "RATE_LIMIT_WORKSPACE_BURST": ("rate_limit_workspace_burst", _parse_int),
    "AUTH_FAILURES_PER_MIN": ("auth_failures_per_min", _parse_int),
    "TRUSTED_PROXIES": ("trusted_proxies", _parse_networks),
    "LOG_LEVEL": ("log_level", _parse_level),
    "OTLP_ENDPOINT": ("otlp_endpoint", _parse_url),
    "EXPENSIVE_THREADS": ("expensive_threads", _parse_int),
    "EXPENSIVE_PER_WORKSPACE": ("expensive_per_workspace", _parse_int),
    "GROUNDING_MAX_CHARS": ("grounding_max_chars", _parse_int),
    "GROUNDING_MAX_SENTENCES": ("grounding_max_sentences", _parse_int),
    "SHUTDOWN_TIMEOUT_S": ("shutdown_timeout_s", _parse_float),
    "TOP_K_MIN": ("bounds.top_k_min", _parse_int),
    "TOP_K_MAX": ("bounds.top_k_max", _parse_int),
    "SCORE_THRESHOLD_MIN": ("bounds.score_threshold_min", _parse_float),
    "SCORE_THRESHOLD_MAX": ("bounds.score_threshold_max", _parse_float),
    "MAX_VARIATIONS": ("bounds.max_variations", _parse_int),
    "KB_CAP_MIN": ("bounds.kb_cap_min", _parse_int),
    "KB_CAP_MAX": ("bounds.kb_cap_max", _parse_int),
    "DEFAULT_TOP_K": ("defaults.top_k", _parse_int),
    "DEFAULT_SCORE_THRESHOLD": ("defaults.score_threshold", _parse_float),
    "DEFAULT_KEYWORD_FLOOR": ("defaults.keyword_floor", _parse_float),
    "DEFAULT_KB_CAP": ("defaults.kb_cap", _parse_int),
    "GROUNDING_FLOOR": ("defaults.grounding_floor", _parse_float),
    "OFF_TOPIC_LINE": ("defaults.off_topic_line", _parse_switch),
}

# (check, variable suffix to blame, message)
_RULES: tuple[tuple[Callable[[Config], bool], str, str], ...] = (
    (lambda c: 0 < c.port < 65536, "PORT", "must be a TCP port, 1..65535"),
    (lambda c: c.qdrant_timeout_s > 0, "QDRANT_TIMEOUT_S", "must be positive"),
    (lambda c: c.redis_timeout_s > 0, "REDIS_TIMEOUT_S", "must be positive"),
    (lambda c: 1 <= c.qdrant_shards <= 1000, "QDRANT_SHARDS", "must be 1..1000"),
    (
        lambda c: 1 <= c.qdrant_replication_factor <= 100,
        "QDRANT_REPLICATION_FACTOR",
        "must be 1..100",
    ),
    (
        lambda c: 1 <= c.qdrant_write_consistency <= c.qdrant_replication_factor,
        "QDRANT_WRITE_CONSISTENCY",
        "must be 1..KBGATE_QDRANT_REPLICATION_FACTOR",
    ),
    (lambda c: 0 <= c.shutdown_timeout_s <= 3600, "SHUTDOWN_TIMEOUT_S", "must be 0..3600"),
    (
        lambda c: c.edge_indexing_threshold_kb is None or c.edge_indexing_threshold_kb >= 0,
        "EDGE_INDEXING_THRESHOLD_KB",
        "must be 0 (never index) or more",
    ),
    (
        lambda c: c.edge_search_threads is None or 1 <= c.edge_search_threads <= 256,
        "EDGE_SEARCH_THREADS",
        "must be 1..256",
    ),
    (lambda c: c.min_free_disk_mb >= 0, "MIN_FREE_DISK_MB", "must be 0 (no reserve) or more"),
    (
        lambda c: c.embedding_threads is None or c.embedding_threads >= 1,
        "EMBEDDING_THREADS",
        "must be at least 1",
    ),
    (
        lambda c: c.embedding_workers is None or 1 <= c.embedding_workers <= 64,
        "EMBEDDING_WORKERS",
        "must be 1..64",
    ),
    (lambda c: c.embedding_query_threads >= 0, "EMBEDDING_QUERY_THREADS", "must be 0 or more"),
    (lambda c: 1 <= c.embedding_batch_size <= 256, "EMBEDDING_BATCH_SIZE", "must be 1..256"),
    (lambda c: c.embed_timeout_s > 0, "EMBED_TIMEOUT_S", "must be positive"),
    (lambda c: 0 <= c.query_cache_size <= 1_000_000, "QUERY_CACHE_SIZE", "must be 0..1000000"),
    (
        lambda c: 0 <= c.redaction_cache_size <= 1_000_000,
        "REDACTION_CACHE_SIZE",
        "must be 0..1000000",
    ),
    (lambda c: 1 <= c.leg_limit <= 1000, "LEG_LIMIT", "must be 1..1000"),
    (lambda c: 1 <= c.passages_per_document <= 10, "PASSAGES_PER_DOCUMENT", "must be 1..10"),
    (lambda c: c.settings_staleness_s > 0, "SETTINGS_STALENESS_S", "must be positive"),
    (lambda c: c.turn_ttl_s > 0, "TURN_TTL_S", "must be positive"),
    (
        lambda c: c.turn_ttl_max_s >= c.turn_ttl_s,
        "TURN_TTL_MAX_S",
        "must be at least KBGATE_TURN_TTL_S",
    ),
    (lambda c: c.settings_history_days >= 0, "SETTINGS_HISTORY_DAYS", "must be 0 or more"),
    (lambda c: c.retention_sweep_s > 0, "RETENTION_SWEEP_S", "must be positive"),
    (lambda c: c.max_question_chars > 0, "MAX_QUESTION_CHARS", "must be positive"),
    (lambda c: c.max_document_bytes > 0, "MAX_DOCUMENT_BYTES", "must be positive"),
    (lambda c: c.max_body_bytes >= 1024, "MAX_BODY_BYTES", "must be at least 1024"),
    (lambda c: c.max_import_bytes >= 1024, "MAX_IMPORT_BYTES", "must be at least 1024"),
    (lambda c: c.rate_limit_per_s > 0, "RATE_LIMIT_PER_S", "must be positive"),
    (lambda c: c.rate_limit_burst >= 1, "RATE_LIMIT_BURST", "must be at least 1"),
    (
        lambda c: c.archive_key is None or len(c.archive_key) >= 16,
        "ARCHIVE_KEY",
        "must be at least 16 characters",
    ),
    (
        lambda c: (
            c.archive_key_previous is None
            or (c.archive_key is not None and len(c.archive_key_previous) >= 16)
        ),
        "ARCHIVE_KEY_PREVIOUS",
        "needs KBGATE_ARCHIVE_KEY set, and at least 16 characters",
    ),
    (
        lambda c: c.metrics_key is None or len(c.metrics_key) >= 16,
        "METRICS_KEY",
        "must be at least 16 characters",
    ),
    (
        lambda c: c.expensive_threads is None or 1 <= c.expensive_threads <= 64,
        "EXPENSIVE_THREADS",
        "must be 1..64",
    ),
    (
        lambda c: 1 <= c.expensive_per_workspace <= 64,
        "EXPENSIVE_PER_WORKSPACE",
        "must be 1..64",
    ),
    (
        lambda c: 1 <= c.grounding_max_chars <= 1_000_000,
        "GROUNDING_MAX_CHARS",
        "must be 1..1000000",
    ),
    (
        lambda c: 1 <= c.grounding_max_sentences <= 10_000,
        "GROUNDING_MAX_SENTENCES",
        "must be 1..10000",
    ),
    (
        lambda c: c.rate_limit_workspace_per_s > 0,
        "RATE_LIMIT_WORKSPACE_PER_S",
        "must be positive",
    ),
    (
        lambda c: c.rate_limit_workspace_burst >= 1,
        "RATE_LIMIT_WORKSPACE_BURST",
        "must be at least 1",
    ),
    (lambda c: c.auth_failures_per_min >= 1, "AUTH_FAILURES_PER_MIN", "must be at least 1"),
    (
        lambda c: (
            c.platform_key_previous is None
            or (c.platform_key is not None and len(c.platform_key_previous) >= 16)
        ),
        "PLATFORM_KEY_PREVIOUS",
        "needs KBGATE_PLATFORM_KEY set, and at least 16 characters",
    ),
    (
        lambda c: c.platform_key is None or len(c.platform_key) >= 16,
        "PLATFORM_KEY",
        "must be at least 16 characters",
    ),
    (
        lambda c: 1 <= c.bounds.top_k_min <= c.bounds.top_k_max,
        "TOP_K_MAX",
        "must be >= KBGATE_TOP_K_MIN >= 1",
    ),
    (
        lambda c: 0.0 <= c.bounds.score_threshold_min <= c.bounds.score_threshold_max <= 1.0,
        "SCORE_THRESHOLD_MAX",
        "bounds must satisfy 0 <= min <= max <= 1",
    ),
    (lambda c: 0 <= c.bounds.max_variations <= 16, "MAX_VARIATIONS", "must be 0..16"),
    (
        lambda c: 1 <= c.bounds.kb_cap_min <= c.bounds.kb_cap_max,
        "KB_CAP_MAX",
        "must be >= KBGATE_KB_CAP_MIN >= 1",
    ),
    (
        lambda c: c.bounds.top_k_min <= c.defaults.top_k <= c.bounds.top_k_max,
        "DEFAULT_TOP_K",
        "must lie within the top_k bounds",
    ),
    (
        lambda c: (
            c.bounds.score_threshold_min
            <= c.defaults.score_threshold
            <= c.bounds.score_threshold_max
        ),
        "DEFAULT_SCORE_THRESHOLD",
        "must lie within the score threshold bounds",
    ),
    (lambda c: 0 <= c.defaults.keyword_floor <= 1, "DEFAULT_KEYWORD_FLOOR", "must be 0..1"),
    (
        lambda c: c.bounds.kb_cap_min <= c.defaults.kb_cap <= c.bounds.kb_cap_max,
        "DEFAULT_KB_CAP",
        "must lie within the KB cap bounds",
    ),
    (lambda c: 0.0 <= c.defaults.grounding_floor <= 1.0, "GROUNDING_FLOOR", "must be 0..1"),
)


def load_config(environ: Mapping[str, str], **overrides: Any) -> Config:
    """Build the Config from `KBGATE_*` variables; keyword overrides (CLI flags) win."""
    values: dict[str, Any] = {}
    for suffix, (path, parse) in _VARIABLES.items():
        name = ENV_PREFIX + suffix
        raw = environ.get(name)
        if raw is None or raw == "":
            continue
        try:
            values[path] = parse(raw)
        except ValueError as error:
            raise ConfigError(f"{name}: {error}") from None
    values.update({key: value for key, value in overrides.items() if value is not None})
    config = _assemble(values)
    for check, suffix, message in _RULES:
        if not check(config):
            raise ConfigError(f"{ENV_PREFIX}{suffix}: {message}")
    return config


def _assemble(values: Mapping[str, Any]) -> Config:
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {"bounds": {}, "defaults": {}}
    for path, value in values.items():
        group, _, name = path.rpartition(".")
        if group:
            nested[group][name] = value
        else:
            top[path] = value
    return Config(bounds=Bounds(**nested["bounds"]), defaults=Defaults(**nested["defaults"]), **top)
