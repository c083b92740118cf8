"""Calibrate one KB on its golden set and measure it before and after: a SciFact subset.

A real `kbgate serve` (default configuration) on a data dir; one workspace with a KB
`scifact` holding the documents of a seeded subset of SciFact's judged questions (as
`kbgate eval --limit` selects them: their judged documents and a sample of others, about
four per question). The questions are split in halves (a seeded shuffle), and so are the
built-in off-topic questions; each half becomes a golden set file (JSON lines, grades from
the qrels). Then, with the commands a user runs:

    kbgate eval --url URL --kb scifact --key KEY --golden-set tune.jsonl --json --apply
    kbgate eval --url URL --kb scifact --key KEY --golden-set heldout.jsonl --json

the first evaluates the KB at the platform defaults on the tune half and applies its
recommendation; the second measures the applied settings on the held-out half. The
held-out half is also evaluated at the platform defaults first (no `--apply`), so the
table shows what calibration changed on questions it never saw. Writes
`bench/results/calibration.json` and prints a table.

    uv run python -m bench.calibration --limit 200 [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from gateway.tools.evaluation.dataset import document_key, load_beir, select, split_queries
from tests.support.gateway_process import GatewayProcess

RESULTS = Path(__file__).parent / "results"
OFF_TOPIC = Path(__file__).parent / "data" / "offtopic_questions.jsonl"
PLATFORM_KEY = "bench-platform-key-calibration-0123"
KB = "scifact"


def _ok(response: httpx.Response) -> Any:
    if response.status_code not in {200, 201}:
        raise RuntimeError(f"{response.status_code}: {response.text}")
    return response.json()


def _workspace(client: httpx.Client) -> dict[str, str]:
    platform = {"Authorization": f"Bearer {PLATFORM_KEY}"}
    client.post("/v1/orgs", json={"org_id": "bench"}, headers=platform)
    client.post("/v1/orgs/bench/workspaces", json={"tenant_id": "calibration"}, headers=platform)
    key = _ok(
        client.post(
            "/v1/keys",
            json={"org_id": "bench", "tenant_id": "calibration", "roles": ["admin", "ingest"]},
            headers=platform,
        )
    )["key"]
    return {"Authorization": f"Bearer {key}"}


def _ingest(url: str, headers: dict[str, str], documents: dict[str, tuple[str, str]]) -> float:
    started = time.perf_counter()

    def one(item: tuple[str, tuple[str, str]]) -> None:
        doc_id, (title, text) = item
        with httpx.Client(base_url=url, timeout=120.0) as client:
            _ok(
                client.put(
                    f"/v1/knowledge-bases/{KB}/documents/{doc_id}",
                    json={"title": title, "text": text, "classification": "internal"},
                    headers=headers,
                )
            )

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(one, documents.items()))
    return time.perf_counter() - started


def _golden_file(path: Path, rows: list[dict[str, Any]], off_topic: list[str]) -> None:
    lines = [json.dumps(row) for row in rows] + [json.dumps({"question": q}) for q in off_topic]
    path.write_text("\n".join(lines) + "\n")


def _eval(url: str, key: str, golden: Path, *extra: str) -> dict[str, Any]:
    kbgate = Path(sys.executable).with_name("kbgate")
    command = [str(kbgate), "eval", "--url", url, "--kb", KB, "--key", key]
    command += ["--golden-set", str(golden), "--json", *extra]
    done = subprocess.run(command, capture_output=True, text=True, check=True)  # noqa: S603 — our own console script
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _row(label: str, outcome: dict[str, Any]) -> str:
    settings, measured, grounding = outcome["settings"], outcome["measured"], outcome["grounding"]
    return (
        f"{label:<34} {settings['score_threshold']:<8} {settings['keyword_floor']:<8} "
        f"{settings['fusion']['dense']}:{settings['fusion']['keyword']:<6} "
        f"{settings['grounding_floor']:<6} {measured['answerable']:>7.1%} "
        f"{measured['off_topic']:>7.1%} {outcome['ndcg_10']:>8.4f} "
        f"{grounding['supported']:>7.1%} {grounding['other_domain']:>7.1%} "
        f"{grounding['mixed']:>7.1%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("/work/shared/datasets/scifact"))
    parser.add_argument("--limit", type=int, default=200, help="judged questions in the subset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", type=Path, help="keep the gateway's data here")
    parser.add_argument(
        "--model-dir", type=Path, default=Path(tempfile.gettempdir()) / "kbgate-bench-models"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "calibration.json")
    args = parser.parse_args()
    dataset = load_beir(args.dataset)
    selection = select(dataset, subset="all", limit=args.limit, seed=args.seed)
    halves = {part: split_queries(selection.query_ids, part) for part in ("tune", "heldout")}
    off_topic = [json.loads(line)["text"] for line in OFF_TOPIC.read_text().splitlines() if line]
    random.Random(args.seed).shuffle(off_topic)  # a reproducible split
    off_halves = {"tune": off_topic[::2], "heldout": off_topic[1::2]}
    env = {"KBGATE_PLATFORM_KEY": PLATFORM_KEY, "KBGATE_MODEL_CACHE_DIR": str(args.model_dir)}
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kbgate-calibration-") as scratch:
        data_dir = args.data_dir or Path(scratch) / "data"
        with GatewayProcess(data_dir, env) as gateway, gateway.client(timeout=120.0) as client:
            headers = _workspace(client)
            _ok(client.put(f"/v1/knowledge-bases/{KB}", json={}, headers=headers))
            documents = {
                document_key(doc): (dataset.corpus[doc].title, dataset.corpus[doc].text)
                for doc in selection.document_ids
                if dataset.corpus[doc].text.strip()
            }
            ingest_s = _ingest(gateway.url, headers, documents)
            files = {}
            for part, query_ids in halves.items():
                rows = [
                    {
                        "question": dataset.queries[qid],
                        "document_ids": [document_key(d) for d in dataset.qrels[qid]],
                        "grades": [max(1, min(3, g)) for g in dataset.qrels[qid].values()],
                    }
                    for qid in query_ids
                ]
                files[part] = Path(scratch) / f"{part}.jsonl"
                _golden_file(files[part], rows, off_halves[part])
            key = headers["Authorization"].removeprefix("Bearer ")
            heldout_before = _eval(gateway.url, key, files["heldout"])
            tune = _eval(gateway.url, key, files["tune"], "--apply")
            heldout = _eval(gateway.url, key, files["heldout"])
    result = {
        "command": "uv run python -m bench.calibration " + " ".join(sys.argv[1:]),
        "dataset": str(args.dataset),
        "documents": len(documents),
        "questions": {part: len(ids) for part, ids in halves.items()},
        "off_topic": {part: len(qs) for part, qs in off_halves.items()},
        "ingest_s": round(ingest_s, 1),
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "tune": tune,
        "heldout_before": heldout_before,
        "heldout": heldout,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{'':<34} {'dense':<8} {'keyword':<8} {'fusion':<8} {'ground':<6} {'ans abst':>8} "
        f"{'off abst':>8} {'nDCG@10':>8} {'sup flag':>8} {'oth flag':>8} {'mix flag':>8}"
    )
    print(_row("tune, platform defaults", tune["report"]["current"]))
    print(_row("tune, recommended (applied)", tune["report"]["recommendation"]))
    print(_row("held-out, platform defaults", heldout_before["report"]["current"]))
    print(_row("held-out, applied settings", heldout["report"]["current"]))
    print(
        json.dumps(
            {"channels_tune": tune["report"]["channels"], "seconds": tune["report"]["seconds"]}
        )
    )


if __name__ == "__main__":
    main()
