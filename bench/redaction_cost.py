"""What PII redaction adds to a retrieval turn: a 10-passage turn with redaction on vs off.

One workspace with its gate off and two agents on the same KB: `on` keeps its own
gate on (so redaction runs), `off` turns it off too (both gates off: no redaction).
The KB holds 30 support-style documents with emails, phones, cards and IBANs, and
returns exactly 10 passages a turn (top_k 10, floors 0). Turns alternate on/off in
one process so drift hits both equally; figures are medians of many turns. Passages
are analysed when written, so a turn with redaction on applies the workspace's policy to
the stored spans and runs no recognizer.

Measured three ways: over HTTP (the app in-process, AsyncTestClient), the turn
function itself (with its own per-stage timings, incl. `redact`), and the Redactor
alone analysing and redacting the same 10 passage texts, as `/v1/redact` does and as
ingest analyses them (also with US phone formats only, to show what the per-region phone
passes cost).

`--operator mask|pseudonym` sets that operator (`pii_operators`) for every redacted type
(default: `replace`, `<TYPE>`).

    uv run python -m bench.redaction_cost [--turns 200] [--operator pseudonym]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from faker import Faker
from litestar.testing import AsyncTestClient

from gateway.access.auth import Principal, authenticate
from gateway.http.app import create_app
from gateway.retrieval import turn
from gateway.runtime.services import Services, build_services
from gateway.safety.redaction import Redactor
from gateway.telemetry import Telemetry, build_logger
from settings.config import load_config
from settings.resolve import DEFAULT_PII_ENTITIES

RESULTS = Path(__file__).parent / "results" / "redaction_cost.json"
PLATFORM_KEY = "bench-platform-key-000000"
SEED = 6
DOCUMENTS = 30
PASSAGES = 10
WORDS = 140
QUESTIONS = [
    "How do I contact billing about a disputed invoice?",
    "Which card is on file for the renewal?",
    "Where are refunds paid and how long do they take?",
    "Who is on call for the payments outage?",
]


def _documents(seed: int) -> dict[str, str]:
    """Support notes of about 900 characters, each with three PII values in it."""
    fake, german = Faker("en_US"), Faker("de_DE")
    fake.seed_instance(seed)
    german.seed_instance(seed)
    rng = random.Random(seed)
    docs: dict[str, str] = {}
    for i in range(DOCUMENTS):
        pii = [
            f"Billing questions go to {fake.company_email()}.",
            f"The on-call engineer answers on (415) 555-{rng.randint(100, 999):04d}.",
            f"The card on file is {fake.credit_card_number(card_type='visa16')}.",
            f"Refunds are paid to {german.iban()} within five days.",
            f"The customer contact is {fake.free_email()}.",
        ]
        rng.shuffle(pii)
        filler = [fake.paragraph(nb_sentences=4) for _ in range(4)]
        parts = [filler[0], pii[0], filler[1], pii[1], pii[2], filler[2], filler[3]]
        # One passage each: the chunker's limit is 160 words; the PII sits before the cut.
        docs[f"note-{i:02d}"] = " ".join(" ".join(parts).split()[:WORDS])
    return docs


async def _provision(client: AsyncTestClient, docs: dict[str, str], operator: str) -> str:  # type: ignore[type-arg]  # Litestar's client is generic over the app
    platform = {"Authorization": f"Bearer {PLATFORM_KEY}"}

    async def call(method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
        response = await client.request(method, path, json=body, headers=headers)
        if response.status_code >= 300:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text}")
        return response.json()

    await call("POST", "/v1/orgs", {"org_id": "bench"}, platform)
    await call("POST", "/v1/orgs/bench/workspaces", {"tenant_id": "support"}, platform)
    key = await call(
        "POST",
        "/v1/keys",
        {"org_id": "bench", "tenant_id": "support", "roles": ["admin", "ingest", "retrieve"]},
        platform,
    )
    auth = {"Authorization": f"Bearer {key['key']}"}
    operators = {} if operator == "replace" else dict.fromkeys(DEFAULT_PII_ENTITIES, operator)
    await call(
        "PATCH",
        "/v1/workspace/settings",
        {"rag_pii_redaction": False, "pii_operators": operators},
        auth,
    )
    await call(
        "PUT",
        "/v1/knowledge-bases/kb",
        {"top_k": PASSAGES, "score_threshold": 0.0, "keyword_floor": 0.0},
        auth,
    )
    for doc_id, text in docs.items():
        await call(
            "PUT",
            f"/v1/knowledge-bases/kb/documents/{doc_id}",
            {"text": text, "classification": "internal"},
            auth,
        )
    for agent, gate in (("on", True), ("off", False)):
        await call(
            "PUT",
            f"/v1/agents/{agent}",
            {"knowledge_base_ids": ["kb"], "pii_redaction": gate},
            auth,
        )
    return str(key["key"])


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median_ms": round(statistics.median(ordered), 3),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


async def _http(client: AsyncTestClient, key: str, turns: int) -> dict[str, list[float]]:  # type: ignore[type-arg]  # as above
    auth = {"Authorization": f"Bearer {key}"}
    times: dict[str, list[float]] = {"on": [], "off": []}
    for i in range(turns):
        question = QUESTIONS[i % len(QUESTIONS)]
        for agent in ("on", "off") if i % 2 else ("off", "on"):
            started = time.perf_counter()
            response = await client.post(
                "/v1/retrieve", json={"agent_id": agent, "question": question}, headers=auth
            )
            elapsed = (time.perf_counter() - started) * 1000
            body = response.json()
            if (
                "passages" not in body
                or len(body["passages"]) != PASSAGES
                or body["effective"]["redaction"] != (agent == "on")
            ):
                raise RuntimeError(f"unexpected turn for agent {agent}: {response.text[:300]}")
            times[agent].append(elapsed)
    return times


async def _in_process(
    services: Services, principal: Principal, turns: int
) -> tuple[dict[str, list[float]], list[float], list[dict[str, str]]]:
    totals: dict[str, list[float]] = {"on": [], "off": []}
    redact_stage: list[float] = []
    raw_texts: list[dict[str, str]] = []
    for i in range(turns):
        question = QUESTIONS[i % len(QUESTIONS)]
        for agent in ("on", "off") if i % 2 else ("off", "on"):
            started = time.perf_counter()
            result = await turn.retrieve(services.retrieval, principal, agent, question, [])
            totals[agent].append((time.perf_counter() - started) * 1000)
            if agent == "on":
                redact_stage.append(result.timings_ms["redact"])
            elif i < len(QUESTIONS):
                raw_texts.append(result.texts)
    return totals, redact_stage, raw_texts


def _redactor_alone(redactor: Redactor, raw: list[dict[str, str]], repeats: int) -> dict[str, Any]:
    times: list[float] = []
    counts: list[int] = []
    for i in range(repeats):
        texts = raw[i % len(raw)]
        started = time.perf_counter()
        found = [redactor.redact(text, DEFAULT_PII_ENTITIES) for text in texts.values()]
        times.append((time.perf_counter() - started) * 1000)
        counts.append(sum(sum(redaction.counts.values()) for redaction in found))
    chars = [sum(len(t) for t in texts.values()) for texts in raw]
    return {
        **_summary(times),
        "entities_replaced_per_turn_median": statistics.median(counts),
        "characters_per_turn_median": statistics.median(chars),
    }


async def run(turns: int, warmup: int, operator: str = "replace") -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kbgate-redaction-cost-") as tmp:
        # The arms alternate as fast as the gateway answers: no key's rate limit may cut in.
        config = load_config(
            {
                "KBGATE_RATE_LIMIT_PER_S": "100000",
                "KBGATE_RATE_LIMIT_BURST": "100000",
                "KBGATE_REDACTION_CACHE_SIZE": "0",
            },
            data_dir=Path(tmp),
            platform_key=PLATFORM_KEY,
        )
        services = await build_services(config, Telemetry(build_logger("WARNING")))
        try:
            async with AsyncTestClient(create_app(config, services)) as client:
                key = await _provision(client, _documents(SEED), operator)
                principal = await authenticate(
                    services.settings.api_key, PLATFORM_KEY, f"Bearer {key}"
                )
                await _http(client, key, warmup)
                http = await _http(client, key, turns)
                await _in_process(services, principal, warmup)
                totals, stage, raw = await _in_process(services, principal, turns)
                alone = await asyncio.to_thread(_redactor_alone, services.redactor, raw, turns)
                us_only = await asyncio.to_thread(
                    _redactor_alone, Redactor.build(phone_regions=("US",)), raw, turns
                )
        finally:
            await services.close()
    on, off = statistics.median(http["on"]), statistics.median(http["off"])
    turn_on, turn_off = statistics.median(totals["on"]), statistics.median(totals["off"])
    return {
        "passages_per_turn": PASSAGES,
        "turns_each": turns,
        "entities": list(DEFAULT_PII_ENTITIES),
        "operator": operator,
        "ner_model": services.redactor.ner_model,
        "http": {"redaction_on": _summary(http["on"]), "redaction_off": _summary(http["off"])},
        "http_added_median_ms": round(on - off, 3),
        "http_added_ratio": round(on / off - 1, 4),
        "turn": {"redaction_on": _summary(totals["on"]), "redaction_off": _summary(totals["off"])},
        "turn_added_median_ms": round(turn_on - turn_off, 3),
        "turn_added_ratio": round(turn_on / turn_off - 1, 4),
        "turn_redact_stage": _summary(stage),
        "redactor_alone_10_passages": alone,
        "redactor_alone_10_passages_us_phone_formats_only": us_only,
        "machine": {"cpus": os.cpu_count()},
        "versions": {name: version(name) for name in ("presidio-analyzer", "spacy")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200, help="turns per arm")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument(
        "--operator", choices=("replace", "mask", "pseudonym"), default="replace",
        help="the operator of every redacted type",
    )  # fmt: skip
    args = parser.parse_args()
    report = asyncio.run(run(args.turns, args.warmup, args.operator))
    results = RESULTS if args.operator == "replace" else RESULTS.with_stem(
        f"{RESULTS.stem}_{args.operator}"
    )  # fmt: skip
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
