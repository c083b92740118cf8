"""Soak: sustained retrieval at a fixed rate from several tenants while documents churn.

One command, loopback only, bounded by `--duration`:

1. Starts a real `kbgate serve` on a temp data dir (platform key through
   KBGATE_PLATFORM_KEY; the model folder assembled in `--model-dir`, reused across runs).
2. Provisions `--tenants` workspaces over two organizations. Every workspace has the
   same KB ids (`main` in its org's collection, `common` in the shared collection), the
   same agent id and the same document ids on the same topics, so only scoping keeps
   them apart; every document carries its workspace's canary token.
3. For `--duration` seconds, sends `POST /v1/retrieve` open-loop at `--rate` per second
   (round-robin over the tenants; questions on the shared topics, 80% made distinct so the
   question-embedding cache does not answer them) while a background task
   ingests a new tenant-unique document or deletes one every `--churn-s` seconds.
4. Checks every response: a passage carrying another workspace's canary, or another
   workspace's churn document id, is a cross-tenant result. There must be none.

Records per `--window` seconds: requests, errors, p50/p99/max latency, churn operations
and the gateway's RSS; RSS (and peak) at start and end. Writes `bench/results/soak.json`
and `bench/results/soak.png`; exits 1 if any cross-tenant result was seen.

    uv run python -m bench.soak [--duration 300] [--rate 20] [--tenants 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.gateway_process import GatewayProcess
from tests.support.varied_corpus import rss_kib

RESULTS = Path(__file__).parent / "results"
PLATFORM_KEY = "bench-platform-key-soak-0001"
ORGS = ("soak-a", "soak-b")
CANARY = re.compile(r"kbcanary(\d+)q\d+")
CHURN_ID = re.compile(r"churn-t(\d+)-\d+")
MAX_IN_FLIGHT = 256
REPEATED_SHARE = 0.2
TOPICS = (
    ("harbour ferry", "The harbour ferry leaves for the island at {n} o'clock every morning, "
     "weather permitting; tickets are sold on board and cost {m} euros."),
    ("annual leave", "Employees accrue {n} days of paid annual leave a year; unused days "
     "carry over until the end of March, at most {m} of them."),
    ("expense claims", "Expense claims above {m} euros need a receipt and the approval of a "
     "manager; they are reimbursed within {n} working days."),
    ("server maintenance", "The database servers are patched on the {n}th of every month; "
     "the maintenance window lasts {m} minutes and starts at midnight."),
    ("parental leave", "Parents may take {n} weeks of parental leave, paid at {m} percent of "
     "salary for the first half and unpaid afterwards."),
    ("office access", "Badges open the office from {n} in the morning; visitors sign in at "
     "reception and are escorted, with at most {m} guests per host."),
    ("security incidents", "Report a suspected security incident within {n} hours to the "
     "security team; the on-call engineer answers within {m} minutes."),
    ("travel booking", "Book business travel at least {n} days ahead through the travel "
     "portal; hotel nights are refunded up to {m} euros."),
)  # fmt: skip
QUESTIONS = (
    "When does the harbour ferry leave for the island?",
    "How many days of annual leave do employees get?",
    "Do expense claims need a receipt?",
    "When are the database servers patched?",
    "How long is parental leave?",
    "What time does the office open for badges?",
    "How quickly must a security incident be reported?",
    "How far ahead should business travel be booked?",
    "What do ferry tickets cost?",
    "Who approves expense claims?",
)


@dataclass
class Tenant:
    index: int
    org: str
    tenant_id: str
    headers: dict[str, str]
    churn_live: list[str] = field(default_factory=list)
    churned: int = 0


@dataclass
class Window:
    started_s: float
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    churn_ok: int = 0
    churn_errors: int = 0
    cross_tenant: int = 0
    abstained: int = 0
    rss_mib: float = 0.0


@dataclass
class Soak:
    windows: list[Window]
    window_s: float
    began: float
    checked: int = 0
    passages_checked: int = 0
    own_canary_passages: int = 0  # the positive control: the check sees real canaries
    cross_tenant: int = 0
    skipped_overload: int = 0
    findings: list[dict[str, Any]] = field(default_factory=list)

    def window(self) -> Window:
        position = int((time.monotonic() - self.began) // self.window_s)
        while len(self.windows) <= position:
            self.windows.append(Window(started_s=len(self.windows) * self.window_s))
        return self.windows[position]


def _canary(tenant: int, doc: int) -> str:
    return f"kbcanary{tenant}q{doc}"


def _document(tenant: int, doc: int, rng: random.Random) -> str:
    topic, template = TOPICS[doc % len(TOPICS)]
    body = template.format(n=rng.randrange(2, 28), m=rng.randrange(5, 500))
    return f"{body} Reference {_canary(tenant, doc)} on {topic}."


async def _provision(client: httpx.AsyncClient, tenants: int) -> list[Tenant]:
    platform = {"Authorization": f"Bearer {PLATFORM_KEY}"}
    for org in ORGS:
        (await client.post("/v1/orgs", json={"org_id": org}, headers=platform)).raise_for_status()
    made: list[Tenant] = []
    for index in range(tenants):
        org, tenant_id = ORGS[index % len(ORGS)], f"t{index}"
        (
            await client.post(
                f"/v1/orgs/{org}/workspaces", json={"tenant_id": tenant_id}, headers=platform
            )
        ).raise_for_status()
        key = (
            await client.post(
                "/v1/keys",
                json={
                    "org_id": org,
                    "tenant_id": tenant_id,
                    "roles": ["admin", "ingest", "retrieve"],
                },
                headers=platform,
            )
        ).json()["key"]
        headers = {"Authorization": f"Bearer {key}"}
        for kb, storage in (("main", "org"), ("common", "shared")):
            (
                await client.put(
                    f"/v1/knowledge-bases/{kb}",
                    json={"storage": storage, "score_threshold": 0.2},
                    headers=headers,
                )
            ).raise_for_status()
        (
            await client.put(
                "/v1/agents/bot", json={"knowledge_base_ids": ["main", "common"]}, headers=headers
            )
        ).raise_for_status()
        made.append(Tenant(index, org, tenant_id, headers))
    return made


async def _ingest_corpus(client: httpx.AsyncClient, tenants: list[Tenant], docs: int) -> int:
    rng = random.Random(7)
    count = 0
    for tenant in tenants:
        for doc in range(docs):
            kb = "main" if doc % 2 == 0 else "common"
            answer = await client.put(
                f"/v1/knowledge-bases/{kb}/documents/doc-{doc}",
                json={
                    "title": TOPICS[doc % len(TOPICS)][0],
                    "text": _document(tenant.index, doc, rng),
                    "classification": "internal",
                },
                headers=tenant.headers,
            )
            answer.raise_for_status()
            count += 1
    return count


def _check(soak: Soak, tenant: Tenant, body: dict[str, Any], window: Window) -> None:
    """Count passages carrying another workspace's canary or churn document id."""
    soak.checked += 1
    if body.get("abstained"):
        window.abstained += 1
    for passage in body.get("passages", []):
        soak.passages_checked += 1
        owners = {int(t) for t in CANARY.findall(passage.get("text", ""))}
        if tenant.index in owners:
            soak.own_canary_passages += 1
        foreign = owners - {tenant.index}
        churn = CHURN_ID.fullmatch(str(passage.get("document_id", "")))
        if churn and int(churn.group(1)) != tenant.index:
            foreign.add(int(churn.group(1)))
        if foreign:
            soak.cross_tenant += 1
            window.cross_tenant += 1
            soak.findings.append({"caller": tenant.tenant_id, "foreign_tenants": sorted(foreign)})
    # the fenced context must not carry a foreign canary either
    in_context = {int(t) for t in CANARY.findall(body.get("context", ""))} - {tenant.index}
    if in_context:
        soak.cross_tenant += 1
        window.cross_tenant += 1
        soak.findings.append({"caller": tenant.tenant_id, "context_tenants": sorted(in_context)})


def _check_bites(tenants: list[Tenant]) -> bool:
    """The check flags a planted foreign canary and a foreign churn id (and nothing else)."""
    probe = Soak(windows=[], window_s=1.0, began=time.monotonic())
    caller, other = tenants[0], tenants[1]
    bodies = [
        {"passages": [{"text": f"x {_canary(other.index, 3)}", "document_id": "doc-3"}]},
        {"passages": [{"text": "x", "document_id": f"churn-t{other.index}-1"}]},
        {"passages": [{"text": f"x {_canary(caller.index, 3)}", "document_id": "doc-3"}]},
    ]
    for body in bodies:
        _check(probe, caller, body, probe.window())
    return probe.cross_tenant == 2 and probe.own_canary_passages == 1


async def _one_turn(client: httpx.AsyncClient, soak: Soak, tenant: Tenant, question: str) -> None:
    started = time.perf_counter()
    window = soak.window()
    try:
        answer = await client.post(
            "/v1/retrieve", json={"agent_id": "bot", "question": question}, headers=tenant.headers
        )
    except httpx.HTTPError as error:
        window.errors += 1
        window.statuses[type(error).__name__] = window.statuses.get(type(error).__name__, 0) + 1
        return
    window.latencies_ms.append((time.perf_counter() - started) * 1000)
    window.statuses[str(answer.status_code)] = window.statuses.get(str(answer.status_code), 0) + 1
    if answer.status_code != 200:
        window.errors += 1
        return
    _check(soak, tenant, answer.json(), window)


def _question(rng: random.Random) -> str:
    """Mostly distinct questions (the gateway caches question embeddings per workspace, and a
    soak of ten repeated questions would measure the cache): REPEATED_SHARE are verbatim."""
    question = rng.choice(QUESTIONS)
    if rng.random() < REPEATED_SHARE:
        return question
    return f"{question} (request {rng.randrange(10**6)}, {rng.choice(TOPICS)[0]})"


async def _load(
    client: httpx.AsyncClient, soak: Soak, tenants: list[Tenant], rate: float, until: float
) -> None:
    """Open loop: request i is sent at began + i / rate whatever the answers' pace."""
    rng = random.Random(11)
    in_flight: set[asyncio.Task[None]] = set()
    sent = 0
    while True:
        due = soak.began + sent / rate
        if due >= until:
            break
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        tenant = tenants[sent % len(tenants)]
        sent += 1
        if len(in_flight) >= MAX_IN_FLIGHT:
            soak.skipped_overload += 1
            continue
        task = asyncio.create_task(_one_turn(client, soak, tenant, _question(rng)))
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
    if in_flight:
        await asyncio.wait(in_flight)


async def _churn(
    client: httpx.AsyncClient, soak: Soak, tenants: list[Tenant], every_s: float, until: float
) -> None:
    """Ingest a tenant-unique document, or delete one, every `every_s` seconds."""
    rng = random.Random(13)
    while time.monotonic() < until:
        await asyncio.sleep(every_s)
        tenant = rng.choice(tenants)
        window = soak.window()
        try:
            if tenant.churn_live and (len(tenant.churn_live) > 6 or rng.random() < 0.4):
                doc_id = tenant.churn_live.pop(0)
                answer = await client.delete(
                    f"/v1/knowledge-bases/main/documents/{doc_id}", headers=tenant.headers
                )
            else:
                tenant.churned += 1
                number = 1000 + tenant.churned
                doc_id = f"churn-t{tenant.index}-{tenant.churned}"
                answer = await client.put(
                    f"/v1/knowledge-bases/main/documents/{doc_id}",
                    json={
                        "title": TOPICS[number % len(TOPICS)][0],
                        "text": _document(tenant.index, number, rng),
                        "classification": "internal",
                    },
                    headers=tenant.headers,
                )
                tenant.churn_live.append(doc_id)
        except httpx.HTTPError:
            window.churn_errors += 1
            continue
        if answer.status_code == 200:
            window.churn_ok += 1
        else:
            window.churn_errors += 1


async def _sample_rss(soak: Soak, pid: int, until: float) -> None:
    while time.monotonic() < until:
        soak.window().rss_mib = round(rss_kib(pid)["VmRSS"] / 1024, 1)
        await asyncio.sleep(1.0)


def _percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 1)


async def _run(args: argparse.Namespace, gateway: GatewayProcess) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60.0, limits=limits) as client:
        tenants = await _provision(client, args.tenants)
        documents = await _ingest_corpus(client, tenants, args.docs_per_tenant)
        warm = [
            client.post("/v1/retrieve", json={"agent_id": "bot", "question": q}, headers=t.headers)
            for t in tenants
            for q in QUESTIONS[:3]
        ]
        await asyncio.gather(*warm)
        start = rss_kib(gateway.pid)
        began = time.monotonic()
        until = began + args.duration
        soak = Soak(windows=[], window_s=args.window, began=began)
        await asyncio.gather(
            _load(client, soak, tenants, args.rate, until),
            _churn(client, soak, tenants, args.churn_s, until),
            _sample_rss(soak, gateway.pid, until),
        )
        elapsed = time.monotonic() - began
        end = rss_kib(gateway.pid)
    all_latencies = [ms for w in soak.windows for ms in w.latencies_ms]
    requests = sum(len(w.latencies_ms) for w in soak.windows) + sum(
        w.statuses.get(k, 0) for w in soak.windows for k in w.statuses if not k.isdigit()
    )
    errors = sum(w.errors for w in soak.windows)
    return {
        "duration_s": round(elapsed, 1),
        "target_rate_per_s": args.rate,
        "achieved_rate_per_s": round(requests / elapsed, 2),
        "tenants": args.tenants,
        "organizations": len(ORGS),
        "documents_at_start": documents,
        "requests": requests,
        "errors": errors,
        "error_rate": round(errors / max(requests, 1), 5),
        "skipped_overload": soak.skipped_overload,
        "responses_checked": soak.checked,
        "passages_checked": soak.passages_checked,
        "passages_with_own_canary": soak.own_canary_passages,
        "check_bites": _check_bites(tenants),
        "cross_tenant_results": soak.cross_tenant,
        "cross_tenant_findings": soak.findings[:20],
        "churn_operations": sum(w.churn_ok for w in soak.windows),
        "churn_errors": sum(w.churn_errors for w in soak.windows),
        "p50_ms": _percentile(all_latencies, 0.5),
        "p99_ms": _percentile(all_latencies, 0.99),
        "rss_start_mib": round(start["VmRSS"] / 1024, 1),
        "rss_end_mib": round(end["VmRSS"] / 1024, 1),
        "rss_growth_mib": round((end["VmRSS"] - start["VmRSS"]) / 1024, 1),
        "peak_rss_start_mib": round(start["VmHWM"] / 1024, 1),
        "peak_rss_end_mib": round(end["VmHWM"] / 1024, 1),
        "windows": [
            {
                "start_s": w.started_s,
                "requests": len(w.latencies_ms),
                "errors": w.errors,
                "statuses": w.statuses,
                "abstained": w.abstained,
                "p50_ms": _percentile(w.latencies_ms, 0.5),
                "p99_ms": _percentile(w.latencies_ms, 0.99),
                "max_ms": round(max(w.latencies_ms), 1) if w.latencies_ms else None,
                "mean_ms": round(statistics.fmean(w.latencies_ms), 1) if w.latencies_ms else None,
                "churn_ok": w.churn_ok,
                "churn_errors": w.churn_errors,
                "cross_tenant": w.cross_tenant,
                "rss_mib": w.rss_mib,
            }
            for w in soak.windows
            if w.started_s < args.duration
        ],
    }


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    windows = [w for w in result["windows"] if w["requests"]]
    starts = [w["start_s"] for w in windows]
    figure, axis = plt.subplots(figsize=(7, 4.2))
    axis.plot(starts, [w["p50_ms"] for w in windows], marker="o", label="p50")
    axis.plot(starts, [w["p99_ms"] for w in windows], marker="x", linestyle="--", label="p99")
    axis.set_xlabel(f"window start (s), {result['windows_s']} s windows")
    axis.set_ylabel("POST /v1/retrieve latency (ms)")
    rss = axis.twinx()
    rss.plot(starts, [w["rss_mib"] for w in windows], color="grey", linestyle=":", label="RSS")
    rss.set_ylabel("gateway RSS (MiB)")
    rss.set_ylim(bottom=0, top=max(w["rss_mib"] for w in windows) * 1.3)
    axis.set_title(
        f"Soak: {result['target_rate_per_s']}/s from {result['tenants']} tenants with churn; "
        f"{result['requests']} requests, {result['errors']} errors, "
        f"{result['cross_tenant_results']} cross-tenant"
    )
    axis.title.set_fontsize(8)
    lines = axis.get_legend_handles_labels()
    more = rss.get_legend_handles_labels()
    axis.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of load")
    parser.add_argument("--rate", type=float, default=20.0, help="turns per second, all tenants")
    parser.add_argument("--tenants", type=int, default=3)
    parser.add_argument("--docs-per-tenant", type=int, default=16)
    parser.add_argument("--churn-s", type=float, default=1.0, help="seconds between churn ops")
    parser.add_argument("--window", type=float, default=30.0, help="seconds per reported window")
    parser.add_argument(
        "--model-dir", type=Path, default=Path(tempfile.gettempdir()) / "kbgate-bench-models"
    )
    parser.add_argument("--output", type=Path, default=RESULTS / "soak.json")
    args = parser.parse_args(argv)
    if args.tenants < 2 or args.rate <= 0 or args.duration <= 0:
        parser.error("need at least 2 tenants, a positive rate and a positive duration")
    env = {
        "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
        "KBGATE_MODEL_CACHE_DIR": str(args.model_dir),
        # the gateway is measured, not the per-key budget
        "KBGATE_RATE_LIMIT_PER_S": "1000",
        "KBGATE_RATE_LIMIT_BURST": "1000",
    }
    with tempfile.TemporaryDirectory(prefix="kbgate-soak-") as temp:
        gateway = GatewayProcess(Path(temp) / "data", env)
        with gateway:
            result = asyncio.run(_run(args, gateway))
    result["windows_s"] = args.window
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    _plot(result, args.output.with_suffix(".png"))
    summary = {k: v for k, v in result.items() if k != "windows"}
    summary["windows"] = [
        {k: w[k] for k in ("start_s", "requests", "errors", "p50_ms", "p99_ms", "rss_mib")}
        for w in result["windows"]
    ]
    sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    return 1 if result["cross_tenant_results"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
