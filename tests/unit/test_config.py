"""Process configuration from KBGATE_* variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from settings.config import ConfigError, FusionMethod, load_config


def test_defaults_need_no_environment() -> None:
    """With no variables set, the embedded defaults apply (no Qdrant server, no Redis)."""
    config = load_config({})
    assert config.qdrant_url is None
    assert config.redis_url is None
    assert config.bounds.top_k_min == 1
    assert config.bounds.top_k_max == 50
    assert config.bounds.max_variations == 4
    assert (config.bounds.kb_cap_min, config.bounds.kb_cap_max) == (1, 10)
    assert config.defaults.grounding_floor == 0.7
    assert config.settings_staleness_s == 30.0
    assert config.fusion_method is FusionMethod.SCORE
    assert config.embedding_query_threads == 1


def test_variables_are_read_and_typed() -> None:
    """Each variable lands in its field with its type."""
    config = load_config(
        {
            "KBGATE_DATA_DIR": "/srv/kbgate",
            "KBGATE_PORT": "9000",
            "KBGATE_QDRANT_URL": "http://localhost:6333",
            "KBGATE_REDIS_URL": "redis://localhost:6379/0",
            "KBGATE_TOP_K_MAX": "20",
            "KBGATE_GROUNDING_FLOOR": "0.65",
            "KBGATE_FUSION_METHOD": "RRF",
            "KBGATE_EMBEDDING_QUERY_THREADS": "2",
            "KBGATE_EDGE_SEARCH_THREADS": "4",
        }
    )
    assert config.data_dir == Path("/srv/kbgate")
    assert config.port == 9000
    assert config.qdrant_url == "http://localhost:6333"
    assert config.redis_url == "redis://localhost:6379/0"
    assert config.bounds.top_k_max == 20
    assert config.defaults.grounding_floor == 0.65
    assert config.fusion_method is FusionMethod.RRF
    assert config.embedding_query_threads == 2
    assert config.edge_search_threads == 4


def test_overrides_beat_the_environment() -> None:
    """CLI flags (keyword overrides) win over variables; None overrides are ignored."""
    config = load_config({"KBGATE_PORT": "9000"}, port=9100, host=None)
    assert config.port == 9100
    assert config.host == "127.0.0.1"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("KBGATE_PORT", "eighty"),
        ("KBGATE_PORT", "70000"),
        ("KBGATE_QDRANT_URL", "localhost:6333"),
        ("KBGATE_GROUNDING_FLOOR", "nan"),
        ("KBGATE_GROUNDING_FLOOR", "1.5"),
        ("KBGATE_TOP_K_MAX", "0"),
        ("KBGATE_DEFAULT_TOP_K", "99"),
        ("KBGATE_PLATFORM_KEY", "short"),
        ("KBGATE_LOG_LEVEL", "LOUD"),
        ("KBGATE_EMBEDDING_BATCH_SIZE", "1000"),
        ("KBGATE_EMBEDDING_QUERY_THREADS", "-1"),
        ("KBGATE_FUSION_METHOD", "borda"),
        ("KBGATE_EDGE_INDEXING_THRESHOLD_KB", "-1"),
        ("KBGATE_EDGE_INDEXING_THRESHOLD_KB", "lots"),
        ("KBGATE_EDGE_SEARCH_THREADS", "0"),
        ("KBGATE_EDGE_SEARCH_THREADS", "all"),
    ],
)
def test_invalid_values_fail_naming_the_variable(variable: str, value: str) -> None:
    """A malformed or out-of-range value stops start-up with the variable's name."""
    with pytest.raises(ConfigError, match=variable):
        load_config({variable: value})


def test_config_is_frozen() -> None:
    """The config cannot be changed after start."""
    config = load_config({})
    with pytest.raises(AttributeError):
        config.port = 1  # type: ignore[misc]  # the point: frozen Structs refuse assignment


def test_fairness_and_metrics_variables_are_read_and_bounded() -> None:
    """The expensive-work pool, its per-workspace limit, the grounding size budget and the
    metrics key are read from their variables; without them the defaults apply."""
    defaults = load_config({})
    assert defaults.expensive_threads is None
    assert defaults.expensive_per_workspace == 2
    assert (defaults.grounding_max_chars, defaults.grounding_max_sentences) == (20_000, 200)
    assert defaults.metrics_key is None
    config = load_config(
        {
            "KBGATE_EXPENSIVE_THREADS": "3",
            "KBGATE_EXPENSIVE_PER_WORKSPACE": "1",
            "KBGATE_GROUNDING_MAX_CHARS": "5000",
            "KBGATE_GROUNDING_MAX_SENTENCES": "50",
            "KBGATE_METRICS_KEY": "scrape-secret-0123456789",
        }
    )
    assert config.expensive_threads == 3
    assert config.expensive_per_workspace == 1
    assert (config.grounding_max_chars, config.grounding_max_sentences) == (5000, 50)
    assert config.metrics_key == "scrape-secret-0123456789"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("KBGATE_EXPENSIVE_THREADS", "0"),
        ("KBGATE_EXPENSIVE_THREADS", "many"),
        ("KBGATE_EXPENSIVE_PER_WORKSPACE", "0"),
        ("KBGATE_GROUNDING_MAX_CHARS", "0"),
        ("KBGATE_GROUNDING_MAX_SENTENCES", "0"),
        ("KBGATE_GROUNDING_MAX_SENTENCES", "100000"),
        ("KBGATE_METRICS_KEY", "short"),
    ],
)
def test_invalid_fairness_and_metrics_values_fail_naming_the_variable(
    variable: str, value: str
) -> None:
    """A malformed or out-of-range fairness or metrics value stops start-up, naming it."""
    with pytest.raises(ConfigError, match=variable):
        load_config({variable: value})


def test_deployment_variables_are_read_and_bounded() -> None:
    """The Qdrant collection layout and the shutdown bound are read; a write consistency
    above the replication factor, no shard, and a negative bound are refused by name."""
    default = load_config({})
    assert (default.qdrant_shards, default.qdrant_replication_factor) == (1, 1)
    assert (default.qdrant_write_consistency, default.shutdown_timeout_s) == (1, 10.0)
    config = load_config(
        {
            "KBGATE_QDRANT_SHARDS": "3",
            "KBGATE_QDRANT_REPLICATION_FACTOR": "2",
            "KBGATE_QDRANT_WRITE_CONSISTENCY": "2",
            "KBGATE_SHUTDOWN_TIMEOUT_S": "2.5",
        }
    )
    assert (config.qdrant_shards, config.qdrant_replication_factor) == (3, 2)
    assert (config.qdrant_write_consistency, config.shutdown_timeout_s) == (2, 2.5)
    for environ, variable in (
        ({"KBGATE_QDRANT_WRITE_CONSISTENCY": "2"}, "KBGATE_QDRANT_WRITE_CONSISTENCY"),
        ({"KBGATE_QDRANT_SHARDS": "0"}, "KBGATE_QDRANT_SHARDS"),
        ({"KBGATE_SHUTDOWN_TIMEOUT_S": "-1"}, "KBGATE_SHUTDOWN_TIMEOUT_S"),
    ):
        with pytest.raises(ConfigError, match=variable):
            load_config(environ)
