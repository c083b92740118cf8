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
        ("KBGATE_QUERY_BATCH_LANES", "0"),
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
