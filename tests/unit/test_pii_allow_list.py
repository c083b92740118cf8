"""The PII allow-list's entries and the redaction policy applied to stored spans."""

from __future__ import annotations

import pytest

from gateway.safety.operators import Anonymizer
from gateway.safety.policy import RedactionPolicy
from ingest.payload import PiiAnalysis, PiiSpan
from settings.pii_allow_list import AllowListError, is_allow_list, parse_allow_list
from settings.resolve import resolve_pii_allow_list


@pytest.mark.parametrize(
    ("entries", "value", "kept"),
    [
        (["127.0.0.0/8"], "127.0.0.1", True),
        (["127.0.0.0/8"], "128.0.0.1", False),
        (["2001:db8::/32"], "2001:DB8::1", True),
        (["2001:db8::/32"], "127.0.0.1", False),  # another IP version never matches
        (["::1"], "0:0:0:0:0:0:0:1", True),  # an address, however it is written
        (["Support@Acme.com"], " support@acme.com ", True),  # exact, case and spaces folded
        (["support@acme.com"], "support@acme.co", False),
        ([r"re:.*@example\.(com|org)"], "Jo@Example.ORG", True),  # whole value, any case
        ([r"re:.*@example\.(com|org)"], "jo@example.org.evil", False),
        ([r"re:\d+"], "1" * 300, False),  # values longer than 256 skip patterns
        ([], "127.0.0.1", False),
    ],
)
def test_entries_keep_exactly_what_they_name(entries: list[str], value: str, kept: bool) -> None:
    """Exact values fold case and spaces; CIDR ranges and addresses compare as IPs;
    patterns must match the whole value."""
    assert parse_allow_list(entries).allows(value) is kept


@pytest.mark.parametrize(
    ("entries", "index"),
    [
        (["ok", "re:(unclosed"], 1),
        (["re:a*"], 0),  # matches the empty string: it would keep everything
        (["   "], 0),
        ([5], 0),
        (["x" * 201], 0),
        ([f"v{i}" for i in range(101)], 100),
    ],
)
def test_unusable_entries_are_refused_by_position(entries: list[object], index: int) -> None:
    """Each refusal names the first unusable entry; such a stored list is ignored whole."""
    with pytest.raises(AllowListError) as refused:
        parse_allow_list(entries)
    assert refused.value.index == index
    assert not is_allow_list(entries)
    resolved = resolve_pii_allow_list({"pii_allow_list": entries})
    assert resolved.value == ()
    assert resolved.malformed == ("workspace",)


TEXT = "Ann Lee wrote from 127.0.0.1 to ann.lee@example.com and 10.0.0.9."
SPANS = PiiAnalysis(
    analyzer="a",
    text=(
        PiiSpan(0, 7, "PERSON", 0.85),
        PiiSpan(19, 28, "IP_ADDRESS", 0.6),
        PiiSpan(32, 51, "EMAIL_ADDRESS", 1.0),
        PiiSpan(32, 39, "PERSON", 0.85),  # the model inside an address: the pattern wins
        PiiSpan(56, 64, "IP_ADDRESS", 0.6),
    ),
)


def test_the_policy_picks_types_keeps_allowed_values_and_lets_patterns_win() -> None:
    """Only the policy's types are replaced, allow-listed values stay, and a name the model
    found inside an address is covered by the address."""
    replace = Anonymizer().replace_all
    policy = RedactionPolicy(
        frozenset({"PERSON", "IP_ADDRESS", "EMAIL_ADDRESS"}),
        parse_allow_list(["127.0.0.0/8"]),
        operators=replace,
    )
    result = policy.apply(TEXT, SPANS.text)
    assert result.text == "<PERSON> wrote from 127.0.0.1 to <EMAIL_ADDRESS> and <IP_ADDRESS>."
    assert result.counts == {"EMAIL_ADDRESS": 1, "IP_ADDRESS": 1, "PERSON": 1}
    only_ips = RedactionPolicy(frozenset({"IP_ADDRESS"}), operators=replace)
    assert only_ips.apply(TEXT, SPANS.text).text == (
        "Ann Lee wrote from <IP_ADDRESS> to ann.lee@example.com and <IP_ADDRESS>."
    )


def test_an_analysis_fits_only_the_strings_it_was_made_from() -> None:
    """Spans past the end of the stored text or title mean the analysis is of another text."""
    assert SPANS.fits(TEXT, "")
    assert not SPANS.fits(TEXT[:40], "")
    titled = PiiAnalysis(analyzer="a", title=(PiiSpan(0, 9, "PERSON", 0.85),))
    assert titled.fits("", "Memo: Ann Lee")
    assert not titled.fits("", "Memo")
