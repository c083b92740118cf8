"""Labelled sentences with names, places and organisations, for `bench.pii_eval`.

Support, HR and account-management sentences (seeded templates, filled by Faker in several
locales) with PERSON, LOCATION and ORGANIZATION spans recorded, plus technical sentences
full of capitalised product and project names that are none of these: they measure what
a named-entity recognizer takes for a name, a place or an organisation when it is not.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from faker import Faker

NER_SENTENCES = 520
TECHNICAL = 80

#: name locales, weighted towards English: support content names people from everywhere
_NAME_LOCALES = (
    *("en_US",) * 4,
    *("en_GB",) * 2,
    *("de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "pl_PL", "en_IN", "pt_BR"),
)
_COMPANY_LOCALES = ("en_US", "en_US", "en_GB", "de_DE", "fr_FR", "nl_NL")
_PLACE_LOCALES = ("en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "nl_NL")

# {P}: a full name, {F}: a first name, {L}: a place, {O}: an organisation.
TEMPLATES = (
    "{P} from {O} called about the delayed shipment to {L}.",
    "Please forward the signed contract to {P} at the {L} office.",
    "{O} renewed its support plan through {P} last week.",
    "Our account manager, {P}, is based in {L}.",
    "{P} asked whether {O} could move the kickoff to Tuesday.",
    "The onboarding for {P} starts on Monday in {L}.",
    "Escalated by {P} on behalf of {O}.",
    "HR note: {P} transferred from the {L} team to the finance group.",
    "Invoice disputes from {O} go to {P}.",
    "{P} and {P} will attend the quarterly review in {L}.",
    "Travel approved for {P}: {L} to {L}, returning Friday.",
    "The reference check for {P} was done by {P} of {O}.",
    "{O} opened a new warehouse near {L} last quarter.",
    "Customer {P} reported the outage from {L} at noon.",
    "According to {P}, the {O} integration went live yesterday.",
    "Send the signed NDA to {P} ({O}) by Thursday.",
    "{P} will cover the {L} desk while {P} is on leave.",
    "Performance review: {P} exceeded every target set for the {L} region.",
    "The meeting with {O} in {L} was rescheduled by {P}.",
    "Hi {F}, thanks for reaching out about your {O} account.",
    "Dear {P}, your ticket about the billing address has been resolved.",
    "{P} relocated to {L} and now reports to {P}.",
    "The candidate, {P}, previously worked at {O} in {L}.",
    "A refund was issued to {P} after the chargeback from {O}.",
    "Please add {P} to the distribution list for the {L} launch.",
    "{F} from the support team will call you back within a day.",
    "The lease for the {L} office is signed by {P} for {O}.",
    "Exit interview with {P} is booked for Wednesday afternoon.",
    "{O} asked us to route all questions through {P}.",
    "Shipping to {L} is paused until {O} confirms the new customs forms.",
    "{P} approved the expense report for the trip to {L}.",
    "Welcome aboard, {F}! Your manager {P} will meet you in {L}.",
    "Complaint from {P}: the technician from {O} never arrived.",
    "The partnership between {O} and {O} was announced in {L}.",
    "{P} is the emergency contact listed for {P}.",
)

TECHNICAL_SENTENCES = (
    "Restart Redis after upgrading the Kubernetes node pool.",
    "The Python SDK now supports async clients and retries.",
    "Set the Qdrant collection to use on-disk payload storage.",
    "Grafana dashboards read from the Prometheus data source.",
    "Upgrade PostgreSQL before running the Alembic migration.",
    "The Terraform module provisions an S3 bucket and an IAM role.",
    "Use Docker Compose to start Kafka and Zookeeper locally.",
    "The React frontend calls the GraphQL gateway over HTTPS.",
    "Nginx terminates TLS and proxies to Gunicorn workers.",
    "Enable the Elasticsearch snapshot repository on the cluster.",
    "The Rust crate exposes a C API through cbindgen.",
    "Jenkins runs the pytest suite on every merge request.",
    "Airflow schedules the nightly Spark job at two o'clock.",
    "The Helm chart pins the RabbitMQ image to a digest.",
    "Vault issues short-lived credentials to the CI runners.",
    "Linux kernel 6.8 changed the default scheduler behaviour.",
    "The ONNX runtime loads the MiniLM encoder at start.",
    "Celery workers pull tasks from the Redis broker.",
    "Sentry groups the stack traces by their top frame.",
    "The OpenAPI document is generated from the msgspec structs.",
)
_TECH_WORDS = (
    *("Redis", "Kafka", "Kubernetes", "Docker", "Terraform", "Ansible", "Grafana"),
    *("Prometheus", "PostgreSQL", "SQLite", "Qdrant", "Litestar", "Jenkins", "Airflow"),
    *("Spark", "Celery", "Nginx", "Envoy", "Istio", "Helm", "Vault", "Consul", "Nomad"),
    *("Elasticsearch", "Kibana", "Logstash", "RabbitMQ", "Zookeeper", "Cassandra"),
)
_TECH_TEMPLATES = (
    "Migrate the {} cluster before upgrading {}.",
    "The {} exporter feeds metrics into {}.",
    "{} and {} both need the new certificate bundle.",
    "Pin {} to the last release that supports {}.",
    "After the {} outage we moved the queue to {}.",
)


def generate_ner(seed: int) -> list[dict[str, Any]]:
    """The NER sentences and the technical ones; the same seed gives the same list."""
    rng = random.Random(seed)
    fakers = {
        name: _faker(name, seed + i)
        for i, name in enumerate(sorted({*_NAME_LOCALES, *_COMPANY_LOCALES, *_PLACE_LOCALES}))
    }

    def pick(options: Sequence[str]) -> str:
        return options[rng.randrange(len(options))]

    makers: dict[str, Callable[[], tuple[str, str, str]]] = {
        "P": lambda: _person(fakers[pick(_NAME_LOCALES)], rng),
        "F": lambda: ("PERSON", fakers[pick(_NAME_LOCALES)].first_name(), "first_name"),
        "L": lambda: _place(fakers, pick(_PLACE_LOCALES), rng),
        "O": lambda: ("ORGANIZATION", fakers[pick(_COMPANY_LOCALES)].company(), "company"),
    }
    rows = [{"kind": "ner", **_fill(pick(TEMPLATES), makers)} for _ in range(NER_SENTENCES)]
    for i in range(TECHNICAL):
        if i < len(TECHNICAL_SENTENCES):
            text = TECHNICAL_SENTENCES[i]
        else:
            first, second = rng.sample(_TECH_WORDS, 2)
            text = pick(_TECH_TEMPLATES).format(first, second)
        rows.append({"kind": "technical", "text": text, "spans": []})
    return rows


def _person(fake: Faker, rng: random.Random) -> tuple[str, str, str]:
    if rng.random() < 0.85:
        return "PERSON", f"{fake.first_name()} {fake.last_name()}", "first_last"
    return "PERSON", fake.name(), "faker_name"


def _place(fakers: dict[str, Faker], locale: str, rng: random.Random) -> tuple[str, str, str]:
    """A city of `locale`, or (in English) a country or a US state."""
    roll = rng.random()
    if roll < 0.6:
        return "LOCATION", fakers[locale].city(), "city"
    if roll < 0.85:
        return "LOCATION", fakers["en_US"].country(), "country"
    return "LOCATION", fakers["en_US"].state(), "us_state"


def _fill(template: str, makers: dict[str, Callable[[], tuple[str, str, str]]]) -> dict[str, Any]:
    """Substitute each `{X}` slot in order, recording each value's span."""
    text = ""
    spans: list[dict[str, Any]] = []
    rest = template
    while rest:
        slot = rest.find("{")
        if slot < 0:
            text += rest
            break
        text += rest[:slot]
        entity, value, variant = makers[rest[slot + 1]]()
        spans.append(
            {"start": len(text), "end": len(text) + len(value), "type": entity, "variant": variant}
        )
        text += value
        rest = rest[slot + 3 :]
    return {"text": text, "spans": spans}


def _faker(locale: str, seed: int) -> Faker:
    fake = Faker(locale)
    fake.seed_instance(seed)
    return fake
