"""Settings resolution: precedence, clamping, malformed values, fallbacks."""

from __future__ import annotations

import math
from typing import Any

import pytest

from settings.config import Bounds, Defaults
from settings.resolve import (
    DEFAULT_PII_ENTITIES,
    KNOWN_PII_ENTITIES,
    FusionWeights,
    Resolved,
    resolve_fusion,
    resolve_grounding_floor,
    resolve_kb_cap,
    resolve_keyword_floor,
    resolve_pii_entities,
    resolve_pii_operators,
    resolve_redaction,
    resolve_score_threshold,
    resolve_strict_isolation,
    resolve_top_k,
)

B = Bounds()
D = Defaults()
MALFORMED_COUNTS: list[Any] = [-1, 0, 2.5, "5", True, None, [3], {"v": 3}, math.nan]
MALFORMED_UNIT: list[Any] = [-0.1, 1.5, math.nan, math.inf, "0.5", True, [0.5]]


def test_top_k_kb_beats_agent_beats_platform() -> None:
    """The KB's override wins over the agent's, which wins over the platform default."""
    assert resolve_top_k({"top_k": 4}, {"top_k": 7}, B, D).value == 4
    assert resolve_top_k({"top_k": 4}, {"top_k": 7}, B, D).source == "knowledge_base"
    assert resolve_top_k({}, {"top_k": 7}, B, D).value == 7
    assert resolve_top_k({}, {"top_k": 7}, B, D).source == "agent"
    assert resolve_top_k({}, {}, B, D).value == D.top_k
    assert resolve_top_k(None, None, B, D).source == "platform"


@pytest.mark.parametrize(("stored", "expected"), [(1, 1), (50, 50), (51, 50), (1000, 50)])
def test_top_k_is_clamped_to_bounds(stored: int, expected: int) -> None:
    """A value of the right type beyond the bounds is clamped, and says so."""
    resolved = resolve_top_k({"top_k": stored}, None, B, D)
    assert resolved.value == expected
    assert resolved.clamped is (stored != expected)


def test_top_k_bounds_are_configurable() -> None:
    """Narrower platform bounds clamp the default and overrides alike."""
    narrow = Bounds(top_k_min=2, top_k_max=5)
    assert resolve_top_k({"top_k": 9}, None, narrow, D).value == 5
    assert resolve_top_k(None, {"top_k": 1}, narrow, D).value == 2


@pytest.mark.parametrize("bad", MALFORMED_COUNTS)
def test_malformed_top_k_falls_through_level_by_level(bad: Any) -> None:
    """A malformed stored top_k is ignored and recorded; the next level is used."""
    from_agent = resolve_top_k({"top_k": bad}, {"top_k": 6}, B, D)
    assert (from_agent.value, from_agent.source) == (6, "agent")
    both_bad = resolve_top_k({"top_k": bad}, {"top_k": bad}, B, D)
    assert (both_bad.value, both_bad.source) == (D.top_k, "platform")
    if bad is not None:
        assert from_agent.malformed == ("knowledge_base",)
        assert both_bad.malformed == ("knowledge_base", "agent")


def test_score_threshold_precedence_and_bounds() -> None:
    """Same precedence for the threshold; narrower bounds clamp it."""
    kb_and_agent = resolve_score_threshold({"score_threshold": 0.2}, {"score_threshold": 0.9}, B, D)
    assert kb_and_agent.value == 0.2
    assert resolve_score_threshold({}, {"score_threshold": 0.9}, B, D).source == "agent"
    assert resolve_score_threshold({}, {}, B, D).value == D.score_threshold
    narrow = Bounds(score_threshold_min=0.1, score_threshold_max=0.6)
    resolved = resolve_score_threshold({"score_threshold": 0.9}, None, narrow, D)
    assert (resolved.value, resolved.clamped) == (0.6, True)
    assert resolve_score_threshold({"score_threshold": 0}, None, B, D).value == 0.0


@pytest.mark.parametrize("bad", MALFORMED_UNIT)
def test_malformed_threshold_is_ignored(bad: Any) -> None:
    """NaN, infinities, strings, bools and out-of-type values fall to the next level."""
    resolved = resolve_score_threshold({"score_threshold": bad}, {"score_threshold": 0.4}, B, D)
    assert (resolved.value, resolved.source) == (0.4, "agent")


@pytest.mark.parametrize(
    ("stored", "expected", "clamped"),
    [
        (None, 3, False),
        (1, 1, False),
        (10, 10, False),
        (0, 1, True),
        (11, 10, True),
        (99, 10, True),
    ],
)
def test_kb_cap_defaults_and_clamps(stored: int | None, expected: int, clamped: bool) -> None:
    """Default 3; stored values clamped to 1..10."""
    settings = {} if stored is None else {"max_knowledge_bases_per_agent": stored}
    resolved = resolve_kb_cap(settings, B, D)
    assert (resolved.value, resolved.clamped) == (expected, clamped)


@pytest.mark.parametrize("corrupt", [-2, "4", 2.5, True, [1], math.inf])
def test_kb_cap_is_three_when_corrupt(corrupt: Any) -> None:
    """A corrupt stored cap gives the default 3."""
    assert resolve_kb_cap({"max_knowledge_bases_per_agent": corrupt}, B, D).value == 3


def test_kb_cap_is_three_when_settings_cannot_be_read() -> None:
    """Unreadable settings (store down, nothing cached) give the default 3."""
    assert resolve_kb_cap(None, B, D).value == 3


@pytest.mark.parametrize(
    ("created_at", "expected"),
    [
        ("2026-05-24T23:59:59+00:00", False),
        ("2026-05-25T00:00:00+00:00", True),
        ("2026-05-25T01:00:00+02:00", False),
        ("2025-01-01T00:00:00", False),
        ("2027-01-01T00:00:00Z", True),
        ("not a date", True),
    ],
)
def test_strict_isolation_default_by_creation_date(created_at: str, expected: bool) -> None:
    """Unset: on for workspaces created on/after 2026-05-25 UTC, off before; unreadable: on."""
    resolved = resolve_strict_isolation({}, created_at)
    assert (resolved.value, resolved.source) == (expected, "created_at")


@pytest.mark.parametrize("toggle", [True, False])
def test_strict_isolation_stored_toggle_wins(toggle: bool) -> None:
    """An explicit toggle beats the creation-date default either way."""
    for created in ("2020-01-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"):
        resolved = resolve_strict_isolation({"strict_rag_isolation": toggle}, created)
        assert (resolved.value, resolved.source) == (toggle, "workspace")


def test_strict_isolation_ignores_a_corrupt_toggle() -> None:
    """A non-boolean stored toggle is ignored: the date rule applies."""
    resolved = resolve_strict_isolation({"strict_rag_isolation": "no"}, "2027-01-01T00:00:00+00:00")
    assert resolved.value is True
    assert resolved.malformed == ("workspace",)


@pytest.mark.parametrize(
    ("workspace", "agent", "expected"),
    [
        (None, None, True),
        (True, None, True),
        (None, True, True),
        (False, None, True),
        (None, False, True),
        (False, True, True),
        (True, False, True),
        (True, True, True),
        (False, False, False),
        ("off", False, True),
        (0, False, True),
    ],
)
def test_redaction_needs_both_gates_off(workspace: Any, agent: Any, expected: bool) -> None:
    """Redaction is off only when both settings are explicitly False."""
    ws = {} if workspace is None else {"rag_pii_redaction": workspace}
    ag = {} if agent is None else {"pii_redaction": agent}
    assert resolve_redaction(ws, ag).value is expected


def test_keyword_and_grounding_floors() -> None:
    """KB floors override the platform's; malformed ones are ignored. The keyword floor is
    a share (0..1): a raw BM25 floor stored by an earlier release (15) is ignored too."""
    assert resolve_keyword_floor({"keyword_floor": 0.25}, D).value == 0.25
    assert resolve_keyword_floor({"keyword_floor": -1}, D).value == D.keyword_floor
    assert resolve_keyword_floor({"keyword_floor": 15}, D).value == D.keyword_floor
    assert resolve_grounding_floor({"grounding_floor": 0.55}, D).value == 0.55
    assert resolve_grounding_floor({"grounding_floor": 7}, D).value == D.grounding_floor
    assert resolve_grounding_floor(None, D).source == "platform"


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        (None, FusionWeights(1.0, 0.4)),
        ({"dense": 2, "keyword": 1}, FusionWeights(2.0, 1.0)),
        ({"dense": 0, "keyword": 1}, FusionWeights(0.0, 1.0)),
        ({"keyword": 0.5}, FusionWeights(1.0, 0.5)),
        ({"dense": 2}, FusionWeights(2.0, 0.4)),
        ({"dense": 0, "keyword": 0}, FusionWeights(1.0, 0.4)),
        ({"dense": -1, "keyword": 1}, FusionWeights(1.0, 0.4)),
        ({"dense": 1, "bm25": 1}, FusionWeights(1.0, 0.4)),
        ([1, 1], FusionWeights(1.0, 0.4)),
    ],
)
def test_fusion_weights(stored: Any, expected: FusionWeights) -> None:
    """Weights default to dense 1, keyword 0.4 (each, when left out); invalid weight maps
    are ignored whole."""
    settings = {} if stored is None else {"fusion": stored}
    assert resolve_fusion(settings).value == expected


def test_pii_entities_default_when_unset_or_unreadable() -> None:
    """No workspace, no setting, or a null setting: the platform's default set."""
    for workspace in (None, {}, {"pii_entities": None}):
        found = resolve_pii_entities(workspace)
        assert found.value == DEFAULT_PII_ENTITIES
        assert found.source == "platform"
        assert found.malformed == ()


def test_pii_entities_default_set_is_known_and_sorted() -> None:
    """The default set names only known types, sorted, and leaves plain URLs alone."""
    assert set(DEFAULT_PII_ENTITIES) <= KNOWN_PII_ENTITIES
    assert list(DEFAULT_PII_ENTITIES) == sorted(set(DEFAULT_PII_ENTITIES))
    assert "URL" not in DEFAULT_PII_ENTITIES
    assert "URL_WITH_CREDENTIALS" in DEFAULT_PII_ENTITIES


def test_pii_entities_workspace_list_wins_sorted_and_deduplicated() -> None:
    """A well-formed workspace list is used as is, sorted, duplicates dropped."""
    found = resolve_pii_entities({"pii_entities": ["US_SSN", "EMAIL_ADDRESS", "US_SSN", "URL"]})
    assert found.value == ("EMAIL_ADDRESS", "URL", "US_SSN")
    assert found.source == "workspace"


@pytest.mark.parametrize(
    "stored",
    [
        [],
        "EMAIL_ADDRESS",
        ["EMAIL_ADDRESS", "NOT_A_TYPE"],
        ["email_address"],
        [1, 2],
        ["EMAIL_ADDRESS", None],
        {"EMAIL_ADDRESS": True},
        True,
    ],
)
def test_pii_entities_malformed_falls_back_to_default(stored: Any) -> None:
    """Not a list, empty, an unknown or non-string name: ignored whole, counted as malformed."""
    found = resolve_pii_entities({"pii_entities": stored})
    assert found.value == DEFAULT_PII_ENTITIES
    assert found.source == "platform"
    assert found.malformed == ("workspace",)


def test_pii_operators_workspace_mapping_wins_sorted() -> None:
    """The workspace's mapping is in force, sorted by type; unset or unreadable settings
    leave it empty (every type `replace`d)."""
    found = resolve_pii_operators({"pii_operators": {"PERSON": "pseudonym", "CRYPTO": "mask"}})
    assert found.value == {"CRYPTO": "mask", "PERSON": "pseudonym"}
    assert list(found.value) == ["CRYPTO", "PERSON"]
    assert found.source == "workspace"
    for workspace in (None, {}, {"pii_operators": None}):
        unset = resolve_pii_operators(workspace)
        assert unset == Resolved({}, "platform")


@pytest.mark.parametrize(
    "stored",
    [
        {"PERSON": "keep"},
        {"PERSON": "pseudonym", "SHOE_SIZE": "mask"},
        {"PERSON": None},
        "mask",
        ["PERSON", "mask"],
        7,
    ],
)
def test_pii_operators_malformed_is_ignored_whole(stored: Any) -> None:
    """A mapping with an unknown type or operator, or not a mapping, is ignored whole and
    named malformed: every type is `replace`d, no value is shown more than asked."""
    found = resolve_pii_operators({"pii_operators": stored})
    assert found.value == {}
    assert found.source == "platform"
    assert found.malformed == ("workspace",)
