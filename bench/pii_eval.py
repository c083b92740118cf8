"""Labelled evaluation of PII detection: per-type precision, recall and false redactions.

One command evaluates four sets (`--sets` picks some):

- `pii-technical`: Debian changelog passages (`<datasets>/pii-technical/`, never copied here;
  `--datasets` defaults to the first of `../shared/datasets`, `/work/shared/datasets` that exists);
- `pii-docs`: package documentation passages (`bench/data/pii-docs/`);
- `pii-prose`: real prose, names in running text, dialogue and speech prefixes
  (`bench/data/pii-prose/`);
- `generated`: the seeded synthetic sentences (`bench/data/pii_sentences.jsonl`, below).

The three real sets are hand-labelled rows `{"text", "entities": [{"start", "end", "type"}]}`;
each one's README gives its labelling rules.

Definitions (the same for every set):

- What is measured is what a turn serves: `Redactor.detect(text, DEFAULT_PII_ENTITIES)`, the
  default policy (`settings.resolve`), one passage at a time.
- Precision and recall per type by span OVERLAP: a predicted span is a true positive when it
  overlaps a gold span of the same type; a gold span is recalled when some predicted span of
  its type overlaps it. Exact-boundary figures (start and end equal) are reported beside.
  Gold types outside the default policy (URL, LOCATION, ORGANIZATION) are counted, not scored.
- A FALSE REDACTION is a predicted span (of the default policy's types) that overlaps no gold
  span of any type: text the turn blanks out that holds no labelled entity at all. Reported as
  a count and per 1,000 passages, per set and per predicted type. (A PERSON span over a gold
  URL lowers PERSON precision but is not a false redaction.)
- Per set: passages and the median detection time per passage (ms, `detect` only).
- Subgroups of gold spans, recall only: pii-prose PERSON spans with or without an
  all-capitals word (two letters or more; the set's house style for surnames and speech
  prefixes, see its README); pii-technical PERSON spans on signature lines (` -- Name <...>`),
  in `[ Name ]` headers, or in running text (by the shape of the line); pii-docs PERSON spans
  by passage category (changelog, readme, credits).

The generated set: Faker (seeded) fills sentence templates with
emails, phone numbers of several countries and formats, Luhn-valid card numbers,
checksummed IBANs, IPv4/IPv6 addresses, US SSNs, URLs with embedded credentials,
base58check wallet addresses and names, recording each value's span. Look-alike
sentences (checksum failures, invalid SSN groups, order numbers, versions, plain
URLs, ...) and sentences without PII measure false positives. A second part
(`bench.pii_ner_data`, its own seed) holds support and HR sentences with names, places and
organisations in several locales, and technical sentences full of product names that are
none of these. Besides the default-policy scoring above, it keeps its own evaluation
(`generated_detail` in the results): detection with the default entity types plus LOCATION
and ORGANIZATION, recall by variant, and a held-out NER set of another seed.

    uv run python -m bench.pii_eval                       # all four sets
    uv run python -m bench.pii_eval --sets pii-prose pii-docs
    uv run python -m bench.pii_eval --generate   # (re)write the generated set, then evaluate
    uv run python -m bench.pii_eval --no-ner     # pattern recognizers only

Prints a table per set and a Markdown table (set x type) for docs/benchmarks.md; writes
everything to `bench/results/pii_eval.json`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faker import Faker

from bench.pii_ner_data import generate_ner
from gateway.safety.redaction import SCORE_FLOOR, Detection, Redactor
from settings.resolve import DEFAULT_PII_ENTITIES

#: what is evaluated: the default policy, and the NER types it leaves out
EVALUATED = tuple(sorted({*DEFAULT_PII_ENTITIES, "LOCATION", "ORGANIZATION"}))

SEED = 20260601
#: a second NER set, never looked at while the NER rules were chosen: reported beside
HELD_OUT_SEED = 20261202
HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "pii_sentences.jsonl"
RESULTS = HERE / "results" / "pii_eval.json"

PER_ENTITY = 45  # single-entity sentences per entity type
MULTI = 70  # sentences with two or three entities
LOOKALIKES = 90
CLEAN = 60

_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


@dataclass(frozen=True, slots=True)
class Value:
    """A generated value: its text, entity type and how it was generated."""

    text: str
    entity: str
    variant: str


# ---- generators -----------------------------------------------------------------------


class Generators:
    """Seeded value generators, one per entity type, each with several variants."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.locales = {
            name: _faker(name, seed + i)
            for i, name in enumerate(
                ["en_US", "en_GB", "de_DE", "fr_FR", "nl_NL", "es_ES", "it_IT", "pl_PL"]
            )
        }
        self.us = self.locales["en_US"]

    def pick(self, options: Sequence[str]) -> str:
        return options[self.rng.randrange(len(options))]

    def email(self) -> Value:
        variant = self.pick(["faker_email", "free_email", "company_email", "dotted_subdomain"])
        if variant == "faker_email":
            text = self.us.email()
        elif variant == "free_email":
            text = self.us.free_email()
        elif variant == "company_email":
            text = self.us.company_email()
        else:
            first, last = self.us.first_name().lower(), self.us.last_name().lower()
            text = f"{first}.{last}@{self.pick(['mail', 'corp', 'eu'])}.{self.us.domain_name()}"
        return Value(text, "EMAIL_ADDRESS", variant)

    def phone(self) -> Value:
        variant = self.pick(
            ["faker_en_US", "faker_en_GB", "faker_de_DE", "faker_fr_FR", "nanp_formatted"]
        )
        if variant.startswith("faker_"):
            return Value(self.locales[variant[6:]].phone_number(), "PHONE_NUMBER", variant)
        area = f"{self.rng.randint(2, 9)}{self.rng.randint(0, 8)}{self.rng.randint(0, 9)}"
        exchange = f"{self.rng.randint(2, 9)}{self.rng.randint(0, 9)}{self.rng.randint(2, 9)}"
        line = f"{self.rng.randint(0, 9999):04d}"
        shape = self.pick(["({a}) {e}-{l}", "{a}-{e}-{l}", "{a}.{e}.{l}", "+1 {a} {e} {l}"])
        return Value(shape.format(a=area, e=exchange, l=line), "PHONE_NUMBER", variant)

    def card(self) -> Value:
        kind = self.pick(
            [
                *("visa16", "visa13", "visa19", "mastercard", "amex", "discover"),
                *("jcb16", "jcb15", "diners", "maestro"),
            ]
        )
        digits = self.us.credit_card_number(card_type=kind)
        if len(digits) == 16 and self.rng.random() < 0.5:
            sep = self.pick([" ", "-"])
            digits = sep.join(digits[i : i + 4] for i in range(0, 16, 4))
            kind += "_grouped"
        return Value(digits, "CREDIT_CARD", kind)

    def iban(self) -> Value:
        locale = self.pick(["en_GB", "de_DE", "fr_FR", "nl_NL", "es_ES", "it_IT", "pl_PL"])
        text = self.locales[locale].iban()
        variant = f"{locale}_compact"
        if self.rng.random() < 0.5:
            text = " ".join(text[i : i + 4] for i in range(0, len(text), 4))
            variant = f"{locale}_grouped"
        return Value(text, "IBAN_CODE", variant)

    def ip(self) -> Value:
        variant = self.pick(["ipv4_public", "ipv4_private", "ipv6"])
        text = {
            "ipv4_public": self.us.ipv4_public,
            "ipv4_private": self.us.ipv4_private,
            "ipv6": self.us.ipv6,
        }[variant]()
        return Value(text, "IP_ADDRESS", variant)

    def ssn(self) -> Value:
        text = self.us.ssn()
        variant = "dashed"
        if self.rng.random() < 0.25:
            text, variant = text.replace("-", " "), "spaced"
        return Value(text, "US_SSN", variant)

    def credentials_url(self) -> Value:
        scheme = self.pick(["https", "http", "postgres", "mysql", "redis", "amqp", "mongodb"])
        user = self.us.user_name()
        if scheme == "redis" and self.rng.random() < 0.5:
            user = ""
        password = self.us.password(length=self.rng.randint(8, 16), special_chars=False)
        host = self.pick([self.us.domain_name(), self.us.hostname(), self.us.ipv4_private()])
        port = self.pick(["", f":{self.rng.randint(1024, 65535)}"])
        path = self.pick(["", "/", f"/{self.us.word()}", f"/{self.us.word()}?sslmode=require"])
        return Value(
            f"{scheme}://{user}:{password}@{host}{port}{path}", "URL_WITH_CREDENTIALS", scheme
        )

    def wallet(self) -> Value:
        version, variant = (0, "p2pkh") if self.rng.random() < 0.6 else (5, "p2sh")
        payload = bytes([version]) + self.rng.randbytes(20)
        return Value(_base58check(payload), "CRYPTO", variant)

    def person(self) -> Value:
        return Value(self.us.name(), "PERSON", "faker_name")


def _faker(locale: str, seed: int) -> Faker:
    fake = Faker(locale)
    fake.seed_instance(seed)
    return fake


def _base58check(payload: bytes) -> str:
    data = payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4]
    number = int.from_bytes(data, "big")
    encoded = ""
    while number:
        number, remainder = divmod(number, 58)
        encoded = _BASE58[remainder] + encoded
    leading = len(data) - len(data.lstrip(b"\0"))
    return "1" * leading + encoded


# ---- templates ------------------------------------------------------------------------

TEMPLATES: dict[str, list[str]] = {
    "EMAIL_ADDRESS": [
        "Please send the signed contract to {} before Friday.",
        "{p} asked us to copy {} on every reply.",
        "Questions about the rollout go to {}.",
        "The account owner's address is {} according to the CRM.",
    ],
    "PHONE_NUMBER": [
        "Call the on-call engineer at {} if the pager stays silent.",
        "{p} can be reached on {} during office hours.",
        "The hotline number {} is staffed around the clock.",
        "For returns, phone {} and quote the order number.",
    ],
    "CREDIT_CARD": [
        "The renewal was charged to card {} yesterday.",
        "{p} paid with {} and asked for a receipt.",
        "Card number {} was flagged by the fraud team.",
        "Update the billing profile: the new card is {}.",
    ],
    "IBAN_CODE": [
        "Wire the deposit to {} by the end of the month.",
        "{p}'s salary account is {}.",
        "Refunds are paid into IBAN {} within five days.",
        "The supplier changed its bank details to {} last week.",
    ],
    "IP_ADDRESS": [
        "The failed logins all came from {} overnight.",
        "Whitelist {} on the staging firewall.",
        "{p}'s laptop was last seen at {}.",
        "The database replica listens on {} inside the VPC.",
    ],
    "US_SSN": [
        "The applicant's SSN is {} as printed on the form.",
        "{p} gave {} as the social security number.",
        "Verify SSN {} against the payroll record.",
        "Employee record: social security {} on file.",
    ],
    "URL_WITH_CREDENTIALS": [
        "The legacy job still connects with {} every night.",
        "Someone pasted {} into the wiki page.",
        "Set DATABASE_URL to {} in the staging environment.",
        "{p} shared the connection string {} in the ticket.",
    ],
    "CRYPTO": [
        "Send the bounty to wallet {} once the fix ships.",
        "The ransom note demanded payment to {}.",
        "{p}'s bitcoin address is {}.",
        "Donations are accepted at {} for the conference.",
    ],
}
MULTI_TEMPLATES = [
    "Contact {} or {} about the invoice.",
    "{p} listed {} and {} on the onboarding form.",
    "Ticket notes: {}; {}; {}.",
    "Escalate to {} and include {} in the summary.",
]
LOOKALIKE_KINDS = (
    *("luhn_fail", "iban_bad_check", "ssn_invalid", "wallet_bad_check", "order_number"),
    *("version", "date_time", "plain_url", "local_mail", "git_remote"),
    *("invoice_10_digits", "price", "uuid", "hash", "not_an_ip"),
)
CLEAN_SENTENCES = [
    "The quarterly review covers churn, backlog and the hiring plan.",
    "Restart the indexer after changing the chunk size.",
    "Green tea contains catechins and a moderate amount of caffeine.",
    "The migration moved 42 tables in under 3 minutes.",
    "Version 2 of the API drops the legacy pagination parameters.",
]


def _fill(template: str, values: Sequence[Value], person: Value) -> dict[str, Any]:
    """Substitute `{}` slots (and `{p}`, a name) in order, recording each span."""
    text = ""
    spans: list[dict[str, Any]] = []
    queue = list(values)
    rest = template
    while rest:
        slot = min((i for i in (rest.find("{}"), rest.find("{p}")) if i >= 0), default=-1)
        if slot < 0:
            text += rest
            break
        text += rest[:slot]
        is_person = rest.startswith("{p}", slot)
        value = person if is_person else queue.pop(0)
        spans.append(
            {
                "start": len(text),
                "end": len(text) + len(value.text),
                "type": value.entity,
                "variant": value.variant,
            }
        )
        text += value.text
        rest = rest[slot + (3 if is_person else 2) :]
    return {"text": text, "spans": spans}


def generate(seed: int = SEED) -> list[dict[str, Any]]:
    """The labelled sentences; the same seed gives the same list."""
    gen = Generators(seed)
    makers: dict[str, Callable[[], Value]] = {
        "EMAIL_ADDRESS": gen.email,
        "PHONE_NUMBER": gen.phone,
        "CREDIT_CARD": gen.card,
        "IBAN_CODE": gen.iban,
        "IP_ADDRESS": gen.ip,
        "US_SSN": gen.ssn,
        "URL_WITH_CREDENTIALS": gen.credentials_url,
        "CRYPTO": gen.wallet,
    }
    rows: list[dict[str, Any]] = []
    for entity, make in makers.items():
        for _ in range(PER_ENTITY):
            rows.append(
                {"kind": "pii", **_fill(gen.pick(TEMPLATES[entity]), [make()], gen.person())}
            )
    entities = list(makers)
    for _ in range(MULTI):
        template = gen.pick(MULTI_TEMPLATES)
        values = [makers[gen.pick(entities)]() for _ in range(template.count("{}"))]
        rows.append({"kind": "pii", **_fill(template, values, gen.person())})
    for i in range(LOOKALIKES):
        rows.append(
            {
                "kind": "lookalike",
                "text": _lookalike(gen, LOOKALIKE_KINDS[i % len(LOOKALIKE_KINDS)]),
                "spans": [],
            }
        )
    for i in range(CLEAN):
        text = CLEAN_SENTENCES[i] if i < len(CLEAN_SENTENCES) else gen.us.sentence(nb_words=14)
        rows.append({"kind": "clean", "text": text, "spans": []})
    rows.extend(generate_ner(seed + 1))
    return [{"id": i, **row} for i, row in enumerate(rows)]


def _lookalike(gen: Generators, kind: str) -> str:
    """A sentence shaped like PII that is not: checksum failures, ids, versions, ..."""
    rng, us = gen.rng, gen.us

    def luhn_fail() -> str:
        digits = us.credit_card_number(card_type="visa16")
        broken = digits[:-1] + str((int(digits[-1]) + rng.randint(1, 9)) % 10)
        return f"Reference {broken} is a shipment id, not a card."

    def iban_bad_check() -> str:
        iban = gen.locales[gen.pick(["de_DE", "en_GB", "fr_FR"])].iban()
        check = (int(iban[2:4]) + rng.randint(1, 50)) % 97 + 2
        return f"The form had {iban[:2]}{check:02d}{iban[4:]} which the bank rejected."

    def ssn_invalid() -> str:
        shape = gen.pick(["000-{b}-{c}", "666-{b}-{c}", "{a}-00-{c}", "{a}-{b}-0000"])
        a, b, c = rng.randint(100, 665), rng.randint(10, 99), rng.randint(1000, 9999)
        return f"Case file {shape.format(a=a, b=b, c=c)} was archived."

    def wallet_bad_check() -> str:
        good = gen.wallet().text
        bad = good[:-1] + ("2" if good[-1] != "2" else "3")
        return f"The test vector {bad} must fail validation."

    def price() -> str:
        amount = f"{rng.randint(1, 9)},{rng.randint(100, 999)}.{rng.randint(10, 99)}"
        return f"The plan costs ${amount} a year."

    makers: dict[str, Callable[[], str]] = {
        "luhn_fail": luhn_fail,
        "iban_bad_check": iban_bad_check,
        "ssn_invalid": ssn_invalid,
        "wallet_bad_check": wallet_bad_check,
        "order_number": lambda: (
            f"Order ORD-{rng.randint(2019, 2026)}-{rng.randint(0, 999999):06d} shipped."
        ),
        "version": lambda: (
            f"Upgrade to v{rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 99)} today."
        ),
        "date_time": lambda: (  # not Faker's date(): its range ends today, not reproducible
            f"The window opens {rng.randint(2000, 2029)}-{rng.randint(1, 12):02d}-"
            f"{rng.randint(1, 28):02d} at {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} UTC."
        ),
        "plain_url": lambda: f"Read {us.url()}{us.uri_path()} before the meeting.",
        "local_mail": lambda: f"Cron mails go to {us.user_name()}@localhost on the build box.",
        "git_remote": lambda: (
            f"Clone ssh://git@{us.domain_name()}/{us.word()}/{us.word()}.git first."
        ),
        "invoice_10_digits": lambda: f"Invoice {rng.randint(10**9, 10**10 - 1)} is overdue.",
        "price": price,
        "uuid": lambda: f"Request id {us.uuid4()} timed out.",
        "hash": lambda: f"Commit {us.sha1()} fixed the leak.",
        "not_an_ip": lambda: (
            f"Address {rng.randint(256, 999)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.1 "
            "is invalid."
        ),
    }
    return makers[kind]()


# ---- evaluation -----------------------------------------------------------------------


def _overlaps(a_start: int, a_end: int, b_start: int, b_end: int) -> bool:
    return a_start < b_end and b_start < a_end


def evaluate(redactor: Redactor, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-entity precision/recall (overlap and exact) and false positives on look-alikes."""
    entities = list(EVALUATED)
    gold_n: Counter[str] = Counter()
    pred_n: Counter[str] = Counter()
    pred_tp: Counter[str] = Counter()
    gold_hit: Counter[str] = Counter()
    pred_exact: Counter[str] = Counter()
    by_variant: dict[str, Counter[str]] = defaultdict(Counter)
    covered_fully: Counter[str] = Counter()
    false_positive_kinds: Counter[str] = Counter()
    misses: dict[str, list[str]] = defaultdict(list)
    spurious: dict[str, list[str]] = defaultdict(list)
    latencies: list[float] = []
    for row in rows:
        text, gold = row["text"], row["spans"]
        started = time.perf_counter()
        predicted: list[Detection] = redactor.detect(text, entities)
        latencies.append((time.perf_counter() - started) * 1000)
        for p in predicted:
            pred_n[p.entity_type] += 1
            same = [g for g in gold if g["type"] == p.entity_type]
            if any(_overlaps(p.start, p.end, g["start"], g["end"]) for g in same):
                pred_tp[p.entity_type] += 1
            else:
                false_positive_kinds[row["kind"]] += 1
                if len(spurious[p.entity_type]) < 5:
                    spurious[p.entity_type].append(text[p.start : p.end])
            if any((p.start, p.end) == (g["start"], g["end"]) for g in same):
                pred_exact[p.entity_type] += 1
        for g in gold:
            gold_n[g["type"]] += 1
            same_type = [p for p in predicted if p.entity_type == g["type"]]
            hit = any(_overlaps(p.start, p.end, g["start"], g["end"]) for p in same_type)
            gold_hit[g["type"]] += hit
            key = f"{g['type']}/{g['variant']}"
            by_variant[key]["gold"] += 1
            by_variant[key]["recalled"] += hit
            covered = {i for p in predicted for i in range(p.start, p.end)}
            covered_fully[g["type"]] += all(i in covered for i in range(g["start"], g["end"]))
            if not hit and len(misses[g["type"]]) < 5:
                misses[g["type"]].append(text[g["start"] : g["end"]])
    per_entity = {
        entity: _scores(
            gold_n[entity], pred_n[entity], pred_tp[entity], gold_hit[entity], pred_exact[entity]
        )
        for entity in sorted(set(gold_n) | set(pred_n))
    }
    supported = [e for e in per_entity if e in redactor.supported_entities]
    micro = _scores(
        sum(gold_n[e] for e in supported),
        sum(pred_n[e] for e in supported),
        sum(pred_tp[e] for e in supported),
        sum(gold_hit[e] for e in supported),
        sum(pred_exact[e] for e in supported),
    )
    return {
        "matching": "span overlap, same entity type (exact-boundary figures beside)",
        "per_entity": per_entity,
        "micro_supported": micro,
        # Redaction's own measure: gold characters all replaced, by a placeholder of any type.
        "gold_fully_redacted_supported": round(
            sum(covered_fully[e] for e in supported) / sum(gold_n[e] for e in supported), 4
        ),
        "false_positives_by_sentence_kind": dict(false_positive_kinds),
        "recall_by_variant": {
            key: {"gold": c["gold"], "recall": round(c["recalled"] / c["gold"], 4)}
            for key, c in sorted(by_variant.items())
        },
        "examples_missed": dict(misses),
        "examples_spurious": dict(spurious),
        "median_ms_per_sentence": round(statistics.median(latencies), 3),
    }


def _scores(gold: int, predicted: int, tp: int, recalled: int, exact: int) -> dict[str, Any]:
    precision = tp / predicted if predicted else None
    recall = recalled / gold if gold else None
    f1 = (
        2 * precision * recall / (precision + recall)
        if precision is not None and recall is not None and precision + recall
        else None
    )
    return {
        "gold": gold,
        "predicted": predicted,
        "precision": _round(precision),
        "recall": _round(recall),
        "f1": _round(f1),
        "exact_precision": _round(exact / predicted if predicted else None),
        "exact_recall": _round(exact / gold if gold else None),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


# ---- the default policy on every set ------------------------------------------------------

#: the policy a turn serves when the workspace sets none
POLICY: tuple[str, ...] = DEFAULT_PII_ENTITIES
REAL_SETS = ("pii-technical", "pii-docs", "pii-prose")
SETS = (*REAL_SETS, "generated")
DATASET_DIRS = (Path("../shared/datasets"), Path("/work/shared/datasets"))
PER_THOUSAND = 1000

DEFINITIONS = (
    "detection: Redactor.detect(text, DEFAULT_PII_ENTITIES), the default policy a turn serves",
    "P/R: span overlap with a gold span of the same type (exact-boundary P/R beside)",
    "false redaction (FR): a predicted span overlapping NO gold span of any type; "
    "FR/1k = per 1,000 passages",
)


@dataclass(frozen=True, slots=True)
class Span:
    """[start, end) of a passage, its entity type and (gold only) a subgroup for recall."""

    start: int
    end: int
    type: str
    group: str | None = None


@dataclass(frozen=True, slots=True)
class Passage:
    """A labelled passage; `kind` (a source category) splits the false redactions."""

    text: str
    gold: tuple[Span, ...]
    kind: str | None = None


def score_set(
    passages: Sequence[Passage],
    predicted: Sequence[Sequence[Span]],
    policy: Sequence[str] = POLICY,
) -> dict[str, Any]:
    """Per-type precision/recall (overlap and exact) and false redactions of one set.

    `predicted[i]` are the spans detected in `passages[i]`. Types of the policy are scored;
    gold spans of other types only count for false redactions (overlapping them is not one).
    """
    if len(passages) != len(predicted):
        raise ValueError("one list of predicted spans per passage")
    policy_types = set(policy)
    gold_n: Counter[str] = Counter()
    gold_hit: Counter[str] = Counter()
    gold_exact: Counter[str] = Counter()
    pred_n: Counter[str] = Counter()
    pred_tp: Counter[str] = Counter()
    pred_exact: Counter[str] = Counter()
    false_redactions: Counter[str] = Counter()
    false_by_kind: Counter[str] = Counter()
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    outside: Counter[str] = Counter()
    missed: dict[str, list[str]] = defaultdict(list)
    spurious: dict[str, list[str]] = defaultdict(list)
    for passage, found in zip(passages, predicted, strict=True):
        text, gold = passage.text, passage.gold
        for p in found:
            pred_n[p.type] += 1
            same = [g for g in gold if g.type == p.type]
            pred_tp[p.type] += any(_overlaps(p.start, p.end, g.start, g.end) for g in same)
            pred_exact[p.type] += any((p.start, p.end) == (g.start, g.end) for g in same)
            if not any(_overlaps(p.start, p.end, g.start, g.end) for g in gold):
                false_redactions[p.type] += 1
                if passage.kind is not None:
                    false_by_kind[passage.kind] += 1
                if len(spurious[p.type]) < 8:
                    spurious[p.type].append(text[p.start : p.end])
        for g in gold:
            if g.type not in policy_types:
                outside[g.type] += 1
                continue
            same_type = [p for p in found if p.type == g.type]
            hit = any(_overlaps(p.start, p.end, g.start, g.end) for p in same_type)
            gold_n[g.type] += 1
            gold_hit[g.type] += hit
            gold_exact[g.type] += any((p.start, p.end) == (g.start, g.end) for p in same_type)
            if g.group is not None:
                key = f"{g.type}/{g.group}"
                groups[key]["gold"] += 1
                groups[key]["recalled"] += hit
            if not hit and len(missed[g.type]) < 8:
                missed[g.type].append(text[g.start : g.end])
    n = len(passages)
    of_kind = Counter(p.kind for p in passages if p.kind is not None)

    def row(types: Sequence[str]) -> dict[str, Any]:
        wrong = sum(false_redactions[t] for t in types)
        return {
            **_scores(
                sum(gold_n[t] for t in types),
                sum(pred_n[t] for t in types),
                sum(pred_tp[t] for t in types),
                sum(gold_hit[t] for t in types),
                sum(pred_exact[t] for t in types),
            ),
            # _scores' exact recall counts exact predictions; here: exactly matched gold spans
            "exact_recall": _round(
                sum(gold_exact[t] for t in types) / sum(gold_n[t] for t in types)
                if sum(gold_n[t] for t in types)
                else None
            ),
            "false_redactions": wrong,
            "false_redactions_per_1k": per_thousand(wrong, n),
        }

    types = sorted(t for t in policy_types if gold_n[t] or pred_n[t])
    return {
        "passages": n,
        "per_type": {t: row([t]) for t in types},
        "all_policy_types": row(sorted(policy_types)),
        "gold_outside_policy": dict(sorted(outside.items())),
        "false_redactions_by_kind": {
            kind: {"count": count, "per_1k_of_kind": per_thousand(count, of_kind[kind])}
            for kind, count in sorted(false_by_kind.items())
        },
        "recall_by_group": {
            key: {"gold": c["gold"], "recall": _round(c["recalled"] / c["gold"])}
            for key, c in sorted(groups.items())
        },
        "examples_false_redaction": dict(spurious),
        "examples_missed": dict(missed),
    }


def per_thousand(count: int, passages: int) -> float | None:
    """`count` events over `passages` passages, per 1,000 passages."""
    return round(count * PER_THOUSAND / passages, 2) if passages else None


def detect_all(
    redactor: Redactor, passages: Sequence[Passage], policy: Sequence[str] = POLICY
) -> tuple[list[list[Span]], float]:
    """What `detect` finds in each passage under `policy`, and the median ms per passage."""
    found: list[list[Span]] = []
    latencies: list[float] = []
    for passage in passages:
        started = time.perf_counter()
        detections = redactor.detect(passage.text, policy)
        latencies.append((time.perf_counter() - started) * 1000)
        found.append([Span(d.start, d.end, d.entity_type) for d in detections])
    return found, round(statistics.median(latencies), 3) if latencies else 0.0


# ---- loading the sets -------------------------------------------------------------------


def default_datasets() -> Path:
    """The first of the shared dataset folders that exists (the first when none does)."""
    return next((d for d in DATASET_DIRS if d.is_dir()), DATASET_DIRS[0])


def set_path(name: str, datasets: Path) -> Path:
    if name == "pii-technical":
        return datasets / "pii-technical" / "pii-technical.jsonl"
    return HERE / "data" / name / f"{name}.jsonl"


def load_labelled(path: Path, name: str) -> list[Passage]:
    """A real set's rows, with the subgroups and kinds its README asks to report apart."""
    rows = read_data(path)
    kinds: list[str | None] = [None] * len(rows)
    if name == "pii-docs":
        kinds = [r["category"] for r in _sources(path.with_name("pii-docs-sources.tsv"))]
    elif name == "pii-prose":
        kinds = [r["source_work"] for r in _sources(path.with_name("pii-prose-sources.tsv"))]
    if len(kinds) != len(rows):
        raise ValueError(f"{path}: the sources file does not have one row per passage")
    passages = []
    for row, kind in zip(rows, kinds, strict=True):
        text = row["text"]
        gold = tuple(
            Span(e["start"], e["end"], e["type"], _group(name, text, e, kind))
            for e in row["entities"]
        )
        passages.append(Passage(text, gold, kind))
    return passages


def _sources(path: Path) -> list[dict[str, str]]:
    header, *lines = path.read_text(encoding="utf-8").splitlines()
    names = header.split("\t")
    return [dict(zip(names, line.split("\t"), strict=True)) for line in lines if line]


def _group(name: str, text: str, entity: dict[str, Any], kind: str | None) -> str | None:
    if entity["type"] != "PERSON":
        return None
    if name == "pii-prose":
        span = text[entity["start"] : entity["end"]]
        return "all_caps_word" if has_all_caps_word(span) else "mixed_case"
    if name == "pii-technical":
        return changelog_position(text, entity["start"], entity["end"])
    if name == "pii-docs":
        return kind
    return None


def has_all_caps_word(span: str) -> bool:
    """Whether `span` holds a word of two or more letters, all capitals (`MACIAS`, `OLI`)."""
    return any(len(word) >= 2 and word.isupper() for word in re.findall(r"[^\W\d_]+", span))


def changelog_position(text: str, start: int, end: int) -> str:
    """Where a name sits in a Debian changelog, by the shape of its line: `signature`
    (` -- Name <email>  date`), `header` (`[ Name ]`) or `running` text."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line = text[line_start : len(text) if line_end < 0 else line_end].strip()
    if text[line_start:start].lstrip().startswith("--"):
        return "signature"
    if line.startswith("[") and line.endswith("]"):
        return "header"
    return "running"


def generated_passages(rows: Sequence[dict[str, Any]]) -> list[Passage]:
    """The generated sentences as passages; the sentence kind splits false redactions."""
    return [
        Passage(
            row["text"],
            tuple(Span(s["start"], s["end"], s["type"]) for s in row["spans"]),
            row["kind"],
        )
        for row in rows
    ]


# ---- the command -------------------------------------------------------------------------


def write_data(rows: Sequence[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(row, ensure_ascii=False, sort_keys=True) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def read_data(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument(
        "--datasets",
        type=Path,
        default=None,
        help="shared datasets folder (default: the first of "
        + ", ".join(str(d) for d in DATASET_DIRS)
        + " that exists)",
    )
    parser.add_argument("--generate", action="store_true", help="rewrite the generated set first")
    parser.add_argument("--data", type=Path, default=DATA, help="the generated set")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--no-ner", action="store_true", help="pattern recognizers only")
    args = parser.parse_args(argv)
    datasets: Path = args.datasets or default_datasets()
    chosen = [name for name in SETS if name in args.sets]

    if args.generate or ("generated" in chosen and not args.data.exists()):
        write_data(generate(SEED), args.data)
    loaded: dict[str, tuple[Path, list[Passage]]] = {}
    rows: list[dict[str, Any]] = []
    for name in chosen:
        if name == "generated":
            rows = read_data(args.data)
            if rows != [json.loads(json.dumps(r)) for r in generate(SEED)]:
                print(f"note: {args.data} differs from what seed {SEED} generates now")
            loaded[name] = (args.data, generated_passages(rows))
        else:
            path = set_path(name, datasets)
            if not path.exists():
                parser.error(f"{name}: {path} not found (see --datasets)")
            loaded[name] = (path, load_labelled(path, name))

    redactor = Redactor.build(ner_models=()) if args.no_ner else Redactor.build()
    report: dict[str, Any] = {
        "definitions": list(DEFINITIONS),
        "policy": list(POLICY),
        "policy_types_supported": sorted(redactor.supported_entities & set(POLICY)),
        "ner_model": redactor.ner_model,
        "analyzer": redactor.analyzer_version,
        "score_floor": SCORE_FLOOR,
        "sets": {},
    }
    for name, (path, passages) in loaded.items():
        found, median_ms = detect_all(redactor, passages)
        report["sets"][name] = {
            "data": _shown(path),
            "median_ms_per_passage": median_ms,
            **score_set(passages, found),
        }
    if "generated" in loaded:
        report["generated_detail"] = generated_detail(redactor, args.data, rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    _print(report)
    return 0


def generated_detail(
    redactor: Redactor, path: Path, rows: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The generated set's own evaluation (default types plus LOCATION and ORGANIZATION)
    and the held-out NER figures."""
    detail = {
        "data": _shown(path),
        "seed": SEED,
        "sentences": len(rows),
        "sentences_by_kind": dict(Counter(r["kind"] for r in rows)),
        "entities_evaluated": list(EVALUATED),
        **evaluate(redactor, rows),
    }
    held_out = evaluate(
        redactor, [{"id": i, **row} for i, row in enumerate(generate_ner(HELD_OUT_SEED))]
    )
    detail["held_out_ner"] = {
        "seed": HELD_OUT_SEED,
        "per_entity": {
            name: scores
            for name, scores in held_out["per_entity"].items()
            if name in ("PERSON", "LOCATION", "ORGANIZATION")
        },
    }
    return detail


def _shown(path: Path) -> str:
    resolved = path.resolve()
    root = HERE.parent
    return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(resolved)


def _print(report: dict[str, Any]) -> None:
    print(f"PII detection, default policy {', '.join(report['policy'])}")
    print(f"NER: {report['ner_model']}")
    for line in report["definitions"]:
        print(f"  {line}")
    for name, s in report["sets"].items():
        print(
            f"\n== {name} ({s['data']}): {s['passages']} passages, "
            f"median detection {s['median_ms_per_passage']} ms per passage"
        )
        print(
            f"{'type':22} {'gold':>5} {'pred':>5} {'P':>6} {'R':>6} {'exP':>6} {'exR':>6} "
            f"{'FR':>5} {'FR/1k':>7}"
        )
        for entity, t in [*s["per_type"].items(), ("all (policy types)", s["all_policy_types"])]:
            print(
                f"{entity:22} {t['gold']:5d} {t['predicted']:5d} {_fmt(t['precision']):>6} "
                f"{_fmt(t['recall']):>6} {_fmt(t['exact_precision']):>6} "
                f"{_fmt(t['exact_recall']):>6} {t['false_redactions']:5d} "
                f"{_fmt_rate(t['false_redactions_per_1k']):>7}"
            )
        if s["gold_outside_policy"]:
            print(f"gold outside the policy (not scored): {s['gold_outside_policy']}")
        for key, g in s["recall_by_group"].items():
            print(f"recall {key:28} gold {g['gold']:5d}  R {_fmt(g['recall'])}")
        if s["false_redactions_by_kind"]:
            by_kind = ", ".join(
                f"{kind} {k['count']} ({_fmt_rate(k['per_1k_of_kind'])}/1k)"
                for kind, k in s["false_redactions_by_kind"].items()
            )
            print(f"false redactions by passage kind: {by_kind}")
    if "generated_detail" in report:
        _print_detail(report["generated_detail"])
    print("\n" + markdown_table(report))


def markdown_table(report: dict[str, Any]) -> str:
    """Set x type: gold, predicted, P, R, false redactions per 1,000 passages."""
    lines = [
        "| set | type | gold | predicted | P | R | false redactions /1k passages |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in report["sets"].items():
        rows = [*s["per_type"].items(), ("**all**", s["all_policy_types"])]
        for entity, t in rows:
            lines.append(
                f"| {name} ({s['passages']}) | {entity} | {t['gold']:,} | {t['predicted']:,} | "
                f"{_fmt(t['precision'])} | {_fmt(t['recall'])} | "
                f"{_fmt_rate(t['false_redactions_per_1k'])} |"
            )
    return "\n".join(lines)


def _print_detail(report: dict[str, Any]) -> None:
    print(
        f"\n== generated, own evaluation ({', '.join(report['entities_evaluated'])}): "
        f"{report['sentences']} sentences {report['sentences_by_kind']}"
    )
    print(f"{'entity':22} {'gold':>5} {'pred':>5} {'prec':>7} {'recall':>7} {'f1':>7}")
    for entity, s in report["per_entity"].items():
        print(
            f"{entity:22} {s['gold']:5d} {s['predicted']:5d} {_fmt(s['precision']):>7} "
            f"{_fmt(s['recall']):>7} {_fmt(s['f1']):>7}"
        )
    m = report["micro_supported"]
    print(
        f"{'micro (supported)':22} {m['gold']:5d} {m['predicted']:5d} {_fmt(m['precision']):>7} "
        f"{_fmt(m['recall']):>7} {_fmt(m['f1']):>7}"
    )
    print(f"false positives by sentence kind: {report['false_positives_by_sentence_kind']}")
    print(f"gold spans fully redacted (supported types): {report['gold_fully_redacted_supported']}")
    print(f"median detection time per sentence: {report['median_ms_per_sentence']} ms")
    held_out = report["held_out_ner"]
    for entity, s in held_out["per_entity"].items():
        print(
            f"held-out NER set (seed {held_out['seed']}) {entity:13} gold {s['gold']:4d} "
            f"prec {_fmt(s['precision'])} recall {_fmt(s['recall'])}"
        )


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _fmt_rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    raise SystemExit(main())
