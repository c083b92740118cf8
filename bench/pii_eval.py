"""Labelled evaluation of PII detection: per-entity precision and recall of the Redactor.

The set is synthetic and reproducible: Faker (seeded) fills sentence templates with
emails, phone numbers of several countries and formats, Luhn-valid card numbers,
checksummed IBANs, IPv4/IPv6 addresses, US SSNs, URLs with embedded credentials,
base58check wallet addresses and names, recording each value's span. Look-alike
sentences (checksum failures, invalid SSN groups, order numbers, versions, plain
URLs, ...) and sentences without PII measure false positives. A second part
(`bench.pii_ner_data`, its own seed) holds support and HR sentences with names, places and
organisations in several locales, and technical sentences full of product names that are
none of these.

    uv run python -m bench.pii_eval              # evaluate bench/data/pii_sentences.jsonl
    uv run python -m bench.pii_eval --generate   # (re)write the data set, then evaluate
    uv run python -m bench.pii_eval --no-ner     # pattern recognizers only

Matching is span-level by OVERLAP: a predicted span is a true positive when it
overlaps a gold span of the same entity type; a gold span is recalled when some
predicted span of its type overlaps it. Exact-boundary figures are reported beside.
Detection is what a turn serves: the Redactor's analysis of each sentence (every type),
then the policy of the default entity types plus LOCATION and ORGANIZATION.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
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


def write_data(rows: Sequence[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(row, ensure_ascii=False, sort_keys=True) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def read_data(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--generate", action="store_true", help="rewrite the data set first")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--no-ner", action="store_true", help="pattern recognizers only")
    args = parser.parse_args(argv)

    if args.generate or not args.data.exists():
        write_data(generate(SEED), args.data)
    rows = read_data(args.data)
    if rows != [json.loads(json.dumps(r)) for r in generate(SEED)]:
        print(f"note: {args.data} differs from what seed {SEED} generates now")
    redactor = Redactor.build(ner_models=()) if args.no_ner else Redactor.build()
    report = {
        "data": str(args.data.relative_to(HERE.parent))
        if args.data.is_relative_to(HERE.parent)
        else str(args.data),
        "seed": SEED,
        "sentences": len(rows),
        "sentences_by_kind": dict(Counter(r["kind"] for r in rows)),
        "entities_evaluated": list(EVALUATED),
        "ner_model": redactor.ner_model,
        "analyzer": redactor.analyzer_version,
        "score_floor": SCORE_FLOOR,
        **evaluate(redactor, rows),
    }
    held_out = evaluate(
        redactor, [{"id": i, **row} for i, row in enumerate(generate_ner(HELD_OUT_SEED))]
    )
    report["held_out_ner"] = {
        "seed": HELD_OUT_SEED,
        "per_entity": {
            name: scores
            for name, scores in held_out["per_entity"].items()
            if name in ("PERSON", "LOCATION", "ORGANIZATION")
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    _print(report)
    return 0


def _print(report: dict[str, Any]) -> None:
    print(
        f"{report['sentences']} sentences {report['sentences_by_kind']}, NER: {report['ner_model']}"
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


if __name__ == "__main__":
    raise SystemExit(main())
