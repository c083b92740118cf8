"""This checkout's retrieval turn against another checkout's, alternated in one run.

Each checkout (this one and `--other`, a worktree with its own `uv sync --dev` done)
ingests the SciFact corpus into a data dir of its own through its own bench
(`bench.turn_latency._prepare`, run by its own interpreter) and serves it with its own
`kbgate serve`. Both gateways run at once, each with two agents on the KB: one with PII
redaction on, one with it off (the workspace gate off). Then, round after round, every
(concurrency, redaction) pair runs as one batch on each gateway, the two batches back to
back and the order turned each round, so both see the same seconds of the shared
machine. A batch is `--batch` questions, each once, over `concurrency` keep-alive
connections (`bench.turn_latency._Caller`); the two gateways of a pair get the same
questions, and every batch of a round its own, so question embeddings are computed
(cold) while the questions last (SciFact's 300, then the titles of the documents not
ingested: 4,483 at `--limit 1000`; later rounds repeat them and say so).

Reported per gateway, pair and round: turns per second (questions over the batch's wall
time), median and p99 latency, the gateway's CPU time per turn (all its threads, from
/proc) and the mean server-side stage times (/metrics); then per pair the medians over
rounds and the ratios this/other.

With `--profile`, py-spy samples each gateway's threads during its eight-caller batches
(py-spy on PATH or `--py-spy`); the samples are attributed to turn stages by the frames
on their stacks (`STAGE_RULES`) and reported as CPU milliseconds per turn per stage.
Throughput figures of a profiled run carry the sampler's cost; take them from a run
without it.

    uv run python -m bench.turn_against --other /work/wt-old --data-dir /tmp/kbgate-against \
        --limit 1000 --concurrency 1 8 --rounds 5
    uv run python -m bench.turn_against --other /work/wt-old --data-dir /tmp/kbgate-against \
        --limit 1000 --concurrency 8 --rounds 3 --profile --py-spy /tmp/pyspy-venv/bin/py-spy
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.turn_latency import DATASET, KB, PLATFORM_KEY, _Caller, _cpu_seconds, _read_jsonl
from tests.support.redis_server import free_port

RESULTS = Path(__file__).parent / "results"
AGENT_OFF, AGENT_ON = "bench-agent", "bench-agent-redacting"
THIS = Path(__file__).resolve().parents[1]

#: Run by each checkout's own interpreter in its own tree: ingest (unchanged documents
#: are skipped) and print the retrieve key.
_PREPARE = """
import asyncio, sys
from pathlib import Path
import bench.turn_latency as b

async def prepare() -> None:
    data_dir, limit = Path(sys.argv[1]), int(sys.argv[2])
    env = {"KBGATE_PLATFORM_KEY": b.PLATFORM_KEY, "KBGATE_MODEL_CACHE_DIR": f"{data_dir}/models"}
    config = b.load_config(env, data_dir=data_dir)
    services = await b.build_services(config, b.Telemetry(b.build_logger("WARNING")))
    try:
        print(await b._prepare(services, data_dir, limit))
    finally:
        await services.close()

asyncio.run(prepare())
"""

#: Turn stages and the frames that mark them, searched from a stack's innermost frame
#: outwards: the first frame matching any rule names the sample's stage. A frame reads
#: "function (path:line)" in py-spy's raw output. Paths match both layouts (before and
#: after the gateway's packages were split).
STAGE_RULES: tuple[tuple[str, str], ...] = (
    (
        "embed",
        r"onnxruntime|fastembed|tokenizers|/embedding\.py|/embedder/|query_embedding|word_piece",
    ),
    ("redact", r"presidio|/safety/|/redaction\.py|spacy|_redacted \("),
    ("fence/evidence", r"/evidence\.py"),
    ("record", r"put_turn|sqlite|turn_records|_record \("),
    ("copies", r"/diversity\.py"),
    ("fuse", r"/fusion\.py|fused_and_capped|cap_per_knowledge_base"),
    (
        "legs/search",
        r"/legs\.py|/index_calls\.py|/answering\.py|search_plans|fetch_chosen|"
        r"newest_versions|/versions\.py",
    ),
    (
        "engine",
        r"/engines/|qdrant_edge|index_common|/ingest/index\.py|edge_shards|edge_host|/payload\.py",
    ),
    ("off-topic line", r"off_topic_line"),
    ("plan/settings", r"/plan\.py|plan_turn|/resolve\.py|settings/|with_lines|/workspace\.py"),
    ("telemetry", r"prometheus_client|/telemetry\.py|structlog|_count \("),
    ("upkeep", r"upkeep"),
    ("turn (other)", r"/turn\.py"),
    (
        "HTTP/framework",
        r"litestar|uvicorn|httptools|h11|msgspec|starlette|/http/|/routes/|/auth\.py|"
        r"ratelimit|/access/",
    ),
    ("event loop/threads", r"asyncio/|concurrent/futures|threading\.py|queue\.py"),
)


@dataclass(slots=True)
class Gateway:
    """One checkout's `kbgate serve` on its own data dir and port."""

    name: str
    tree: Path
    data_dir: Path
    key: str = ""
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError(f"{self.name} is not started")
        return self.process.pid

    def prepare(self, limit: int) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(  # noqa: S603 — the checkout's own interpreter, fixed arguments
            [str(self.tree / ".venv/bin/python"), "-c", _PREPARE, str(self.data_dir), str(limit)],
            cwd=self.tree,
            env={k: v for k, v in os.environ.items() if not k.startswith("KBGATE_")},
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{self.name}: prepare failed\n{done.stderr[-3000:]}")
        self.key = done.stdout.strip().splitlines()[-1]

    def start(self) -> None:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KBGATE_")},
            "KBGATE_DATA_DIR": str(self.data_dir),
            "KBGATE_PORT": str(self.port),
            "KBGATE_HOST": "127.0.0.1",
            "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
            "KBGATE_MODEL_CACHE_DIR": str(self.data_dir / "models"),
            "KBGATE_RATE_LIMIT_PER_S": "100000",
            "KBGATE_RATE_LIMIT_BURST": "100000",
            "KBGATE_RATE_LIMIT_WORKSPACE_PER_S": "100000",  # a checkout without it ignores it
            "KBGATE_RATE_LIMIT_WORKSPACE_BURST": "100000",
        }
        log = (self.data_dir.parent / f"{self.name}-gateway.log").open("ab")
        self.process = subprocess.Popen(  # noqa: S603 — the checkout's own console script
            [str(self.tree / ".venv/bin/kbgate"), "serve"],
            cwd=self.tree,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited early (see its log)")
            try:
                if httpx.get(f"{self.url}/health/live", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not live in time")

    def configure(self) -> None:
        """Two agents on the KB (redaction off / on), the workspace gate off; warmed up and,
        where the checkout has one, the KB's off-topic line measured."""
        auth = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(base_url=self.url, headers=auth, timeout=60) as client:
            for agent, redaction in ((AGENT_OFF, False), (AGENT_ON, True)):
                client.put(
                    f"/v1/agents/{agent}",
                    json={"knowledge_base_ids": [KB], "pii_redaction": redaction},
                ).raise_for_status()
            client.patch(
                "/v1/workspace/settings", json={"rag_pii_redaction": False}
            ).raise_for_status()
            for number in range(16):
                client.post(
                    "/v1/retrieve",
                    json={"agent_id": AGENT_ON, "question": f"warm-up {number} cells and proteins"},
                ).raise_for_status()
            if not any(self.tree.glob("gateway/**/off_topic_line.py")):
                return
            for _ in range(600):
                response = client.post(
                    "/v1/retrieve", json={"agent_id": AGENT_OFF, "question": "warm-up"}
                )
                response.raise_for_status()
                per_kb = response.json()["effective"]["per_knowledge_base"][KB]
                if per_kb["sources"]["score_threshold"] != "platform":
                    return
                time.sleep(0.1)
        raise RuntimeError(f"{self.name}: the off-topic line was not measured in a minute")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


_STAGE_SUM = re.compile(r'^kbgate_stage_seconds_sum\{stage="turn_(\w+)"\} (\S+)$', re.MULTILINE)


def _stage_totals(gateway: Gateway) -> dict[str, float]:
    caller = _Caller(gateway.url, PLATFORM_KEY)
    try:
        status, body = caller.request("GET", "/metrics")
        if status != 200:
            caller.close()
            caller = _Caller(gateway.url, gateway.key)
            status, body = caller.request("GET", "/metrics")
    finally:
        caller.close()
    return {stage: float(value) for stage, value in _STAGE_SUM.findall(body.decode())}


def _thread_cpu_seconds(pid: int) -> dict[str, float]:
    """User + system CPU time of a process's threads, summed by name without the digits
    that number a pool's threads ("edge-search-0" and "-1" count as "edge-search-")."""
    seconds: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip().rstrip("0123456789")
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        seconds[name] = seconds.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return seconds


def _batch(gateway: Gateway, agent: str, questions: list[str], concurrency: int) -> dict[str, Any]:
    """Every question once over `concurrency` keep-alive connections."""
    waiting = deque(questions)
    latencies: list[float] = []
    errors = 0
    callers = [_Caller(gateway.url, gateway.key) for _ in range(concurrency)]

    def call(caller: _Caller) -> None:
        nonlocal errors
        while True:
            try:
                question = waiting.popleft()
            except IndexError:
                return
            started = time.perf_counter()
            status, _ = caller.request(
                "POST", "/v1/retrieve", {"agent_id": agent, "question": question}
            )
            latencies.append((time.perf_counter() - started) * 1000)
            errors += status != 200

    stages_before = _stage_totals(gateway)
    cpu = _cpu_seconds(gateway.pid)
    threads = _thread_cpu_seconds(gateway.pid)
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(call, callers))
    elapsed = time.perf_counter() - started
    cpu = _cpu_seconds(gateway.pid) - cpu
    threads_after = _thread_cpu_seconds(gateway.pid)
    stages_after = _stage_totals(gateway)
    for caller in callers:
        caller.close()
    ordered = sorted(latencies)
    return {
        "turns_per_s": round(len(latencies) / elapsed, 1),
        "median_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2),
        "cpu_ms_per_turn": round(cpu * 1000 / len(latencies), 2),
        "thread_cpu_ms_per_turn": {
            name: round((seconds - threads.get(name, 0.0)) * 1000 / len(latencies), 2)
            for name, seconds in sorted(threads_after.items())
            if seconds > threads.get(name, 0.0)
        },
        "stage_mean_ms": {
            stage: round((value - stages_before.get(stage, 0.0)) * 1000 / len(latencies), 3)
            for stage, value in sorted(stages_after.items())
        },
        "errors": errors,
        "turns": len(latencies),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


class Sampler:
    """py-spy recording one gateway's threads (raw collapsed stacks) until stopped."""

    def __init__(self, py_spy: str, pid: int, output: Path) -> None:
        self.output = output
        command = [py_spy, "record", "--pid", str(pid), "--rate", "250", "--format", "raw"]
        self._process = subprocess.Popen(  # noqa: S603 — py-spy with fixed arguments
            [*command, "--nonblocking", "--output", str(output)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)  # attached before the batch starts

    @classmethod
    def start(cls, py_spy: str, gateway: Gateway, folder: Path | None, name: str) -> Sampler | None:
        """A sampler writing into `folder`, or None when there is none."""
        if folder is None:
            return None
        return cls(py_spy, gateway.pid, folder / f"{gateway.name}-{name}.txt")

    def stop(self) -> Path:
        self._process.send_signal(signal.SIGINT)
        self._process.wait(timeout=30)
        return self.output


def stage_of(stack: str) -> str:
    """The turn stage a sampled stack (outermost frame first, `;`-separated) belongs to."""
    frames = stack.split(";")
    for frame in reversed(frames):
        for stage, pattern in STAGE_RULES:
            if re.search(pattern, frame):
                return stage
    return "other"


def attribute(files: list[Path], cpu_ms_per_turn: float) -> dict[str, float]:
    """Milliseconds of CPU per turn per stage: the stages' shares of py-spy's samples
    (`stage_of`) times the gateway's CPU per turn over the sampled batches (/proc).

    py-spy counts a thread that is runnable but waiting for a core as busy, so its sample
    counts exceed CPU time on a loaded machine; their shares, scaled to the CPU time the
    kernel counted, are the estimate."""
    samples: Counter[str] = Counter()
    for path in files:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if stack:
                samples[stage_of(stack)] += int(count)
    total = sum(samples.values()) or 1
    ordered = sorted(samples.items(), key=lambda item: -item[1])
    return {stage: round(cpu_ms_per_turn * count / total, 2) for stage, count in ordered} | {
        "total": round(cpu_ms_per_turn, 2)
    }


@dataclass(slots=True)
class Measured:
    """Each gateway's batches by pair ("concurrency/redaction"), and its profiles."""

    runs: dict[str, dict[str, list[dict[str, Any]]]]
    profiles: dict[str, list[Path]] = field(default_factory=dict)
    profiled_turns: Counter[str] = field(default_factory=Counter)
    profiled_cpu_ms: Counter[str] = field(default_factory=Counter)

    def add(
        self, name: str, pair: tuple[int, str], result: dict[str, Any], profile: Path | None
    ) -> None:
        self.runs[name].setdefault(f"{pair[0]}/{pair[1]}", []).append(result)
        if profile is not None:
            self.profiles.setdefault(name, []).append(Path(result.pop("profile")))
            self.profiled_turns[name] += result["turns"]
            self.profiled_cpu_ms[name] += result["cpu_ms_per_turn"] * result["turns"]


def _measured_batch(
    gateway: Gateway, pair: tuple[int, str], batch: list[str], number: int
) -> dict[str, Any]:
    """One batch of one pair ("concurrency", "on"/"off") on one gateway."""
    concurrency, mode = pair
    result = _batch(gateway, AGENT_ON if mode == "on" else AGENT_OFF, batch, concurrency)
    result["round"] = number
    print(
        f"  round {number} c={concurrency} redaction {mode} {gateway.name}: "
        f"{result['turns_per_s']} turns/s, median {result['median_ms']} ms, "
        f"cpu {result['cpu_ms_per_turn']} ms/turn",
        file=sys.stderr,
    )
    return result


def _questions(limit: int) -> list[str]:
    """SciFact's 300 questions, then the titles of the corpus's documents not ingested
    (claims about studies, as the questions are): each asked once while they last."""
    asked = [q["text"] for q in _read_jsonl(DATASET / "queries.jsonl")]
    titles = [d["title"] for d in _read_jsonl(DATASET / "corpus.jsonl")[limit:] if d["title"]]
    return list(dict.fromkeys(asked + titles))


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--other", type=Path, required=True, help="the other checkout")
    parser.add_argument("--this", type=Path, default=THIS, help="this checkout (default: here)")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=48, help="questions per batch")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--redaction", nargs="+", choices=["on", "off"], default=["off", "on"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--repeat",
        action="store_true",
        help="every round asks the same questions, embedded in a warm-up round not reported",
    )
    parser.add_argument("--profile", action="store_true", help="py-spy the eight-caller batches")
    parser.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy")
    parser.add_argument("--output", type=Path, default=RESULTS / "turn_against.json")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    gateways = [
        Gateway("this", args.this.resolve(), args.data_dir / "this"),
        Gateway("other", args.other.resolve(), args.data_dir / "other"),
    ]
    for gateway in gateways:
        print(f"  preparing {gateway.name} ({gateway.tree})", file=sys.stderr)
        gateway.prepare(args.limit)
    pairs = [(c, mode) for c in args.concurrency for mode in args.redaction]
    try:
        for gateway in gateways:
            gateway.start()
            gateway.configure()
        measured = _rounds(args, gateways, pairs)
    finally:
        for gateway in gateways:
            gateway.stop()
    result: dict[str, Any] = {
        "command": "uv run python -m bench.turn_against " + " ".join(sys.argv[1:]),
        "this": _describe(args.this.resolve()),
        "other": _describe(args.other.resolve()),
        "cpu_count": os.cpu_count(),
        "summary": {
            f"{c}/{mode}": _pair_summary(measured.runs, f"{c}/{mode}") for c, mode in pairs
        },
        "runs": measured.runs,
    }
    if args.profile:
        result["profile_cpu_ms_per_turn"] = {
            name: attribute(
                files, measured.profiled_cpu_ms[name] / max(1, measured.profiled_turns[name])
            )
            for name, files in measured.profiles.items()
        }
    args.output.parent.mkdir(exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in result if k != "runs"}, indent=2))


def _rounds(
    args: argparse.Namespace, gateways: list[Gateway], pairs: list[tuple[int, str]]
) -> Measured:
    """Every round: each pair's batch on both gateways, back to back, the order turned."""
    questions = _questions(args.limit)
    scratch = args.data_dir / "profiles"  # py-spy's raw stacks, kept for another look
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    measured = Measured(runs={g.name: {} for g in gateways})
    offset = 0
    for number in range(-1 if args.repeat else 0, args.rounds):
        if args.repeat:
            offset = 0  # every round asks what the warm-up round (-1) asked
        for pair_number, pair in enumerate(pairs):
            batch = [questions[(offset + i) % len(questions)] for i in range(args.batch)]
            repeated = args.repeat or offset + args.batch > len(questions)
            offset += args.batch
            order = gateways if (number + pair_number) % 2 == 0 else gateways[::-1]
            for gateway in order:
                profile = scratch if args.profile and number >= 0 and pair[0] > 1 else None
                sampler = Sampler.start(args.py_spy, gateway, profile, f"{number}-{pair[0]}")
                result = _measured_batch(gateway, pair, batch, number)
                if sampler is not None:
                    result["profile"] = str(sampler.stop())
                result["repeated_questions"] = repeated
                if number >= 0:
                    measured.add(gateway.name, pair, result, profile)
    return measured


def _pair_summary(runs: dict[str, dict[str, list[dict[str, Any]]]], pair: str) -> dict[str, Any]:
    """Medians over rounds per gateway, and this gateway's over the other's."""
    this, other = runs["this"][pair], runs["other"][pair]
    figures: dict[str, dict[str, Any]] = {
        name: {
            "turns_per_s": _median([r["turns_per_s"] for r in rows]),
            "turns_per_s_range": [
                min(r["turns_per_s"] for r in rows),
                max(r["turns_per_s"] for r in rows),
            ],
            "median_ms": _median([r["median_ms"] for r in rows]),
            "cpu_ms_per_turn": _median([r["cpu_ms_per_turn"] for r in rows]),
            "thread_cpu_ms_per_turn": {
                thread: _median([r["thread_cpu_ms_per_turn"].get(thread, 0.0) for r in rows])
                for thread in sorted({t for r in rows for t in r["thread_cpu_ms_per_turn"]})
            },
        }
        for name, rows in (("this", this), ("other", other))
    }

    def ratio(key: str) -> float:
        return round(float(figures["this"][key]) / float(figures["other"][key]), 3)

    def per_round(key: str) -> list[float]:
        return [round(a[key] / b[key], 3) for a, b in zip(this, other, strict=True)]

    return {
        **figures,
        "this_to_other": {
            "turns_per_s": ratio("turns_per_s"),
            "median_ms": ratio("median_ms"),
            "cpu_ms_per_turn": ratio("cpu_ms_per_turn"),
            "turns_per_s_per_round": per_round("turns_per_s"),
            "cpu_ms_per_turn_per_round": per_round("cpu_ms_per_turn"),
        },
    }


def _describe(tree: Path) -> str:
    done = subprocess.run(  # noqa: S603 — git with fixed arguments
        ["git", "-C", str(tree), "log", "-1", "--format=%h %cs %s"],  # noqa: S607
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip()


if __name__ == "__main__":
    main()
