"""The golden set: a BEIR folder (corpus.jsonl, queries.jsonl, qrels.tsv) loaded and
checked, its fixed tune/held-out halves, and the seeded `--limit` subsets."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ingest.payload import is_valid_id

Subset = Literal["all", "tune", "heldout"]
#: A --limit corpus: the judged documents of the chosen questions plus others, this many
#: documents per question in all.
CORPUS_PER_QUERY = 4
#: The tune/held-out split never changes with --seed.
SPLIT_SEED = "kbgate-eval-split-v1"


class EvalError(Exception):
    """Bad input or setup: said on stderr, exit status 2."""


@dataclass(frozen=True, slots=True)
class CorpusDocument:
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class BeirDataset:
    """A BEIR folder: corpus, queries, graded judgments, and a content fingerprint."""

    name: str
    corpus: dict[str, CorpusDocument]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    fingerprint: str

    def judged_queries(self) -> list[str]:
        """Questions with at least one relevant document, in a stable order."""
        return sorted(
            (
                qid
                for qid, judged in self.qrels.items()
                if qid in self.queries and any(score > 0 for score in judged.values())
            ),
            key=_natural,
        )


def _natural(value: str) -> tuple[int, int, str]:
    """Numeric ids in numeric order, then the rest in text order."""
    return (0, int(value), "") if value.isdigit() else (1, 0, value)


def load_beir(directory: Path) -> BeirDataset:
    """Read corpus.jsonl, queries.jsonl and qrels.tsv (or qrels/test.tsv) from `directory`."""
    corpus_path = directory / "corpus.jsonl"
    queries_path = directory / "queries.jsonl"
    qrels_path = directory / "qrels.tsv"
    if not qrels_path.is_file() and (directory / "qrels" / "test.tsv").is_file():
        qrels_path = directory / "qrels" / "test.tsv"
    for path in (corpus_path, queries_path, qrels_path):
        if not path.is_file():
            raise EvalError(f"not a BEIR folder: {path} is missing")
    digest = hashlib.sha256()
    corpus: dict[str, CorpusDocument] = {}
    for row in _jsonl(corpus_path, digest):
        corpus[str(row["_id"])] = CorpusDocument(
            title=str(row.get("title") or ""), text=str(row.get("text") or "")
        )
    queries = {str(row["_id"]): str(row.get("text") or "") for row in _jsonl(queries_path, digest)}
    qrels: dict[str, dict[str, int]] = {}
    raw = qrels_path.read_bytes()
    digest.update(raw)
    for number, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
        parts = line.split("\t") if "\t" in line else line.split()
        if not parts or not line.strip():
            continue
        if number == 1 and not parts[-1].strip().lstrip("-").isdigit():
            continue  # the header
        if len(parts) not in (3, 4):
            raise EvalError(f"{qrels_path}:{number}: expected query-id, corpus-id, score")
        qid, doc_id, score = parts[0], parts[-2], parts[-1]
        try:
            qrels.setdefault(qid.strip(), {})[doc_id.strip()] = int(score)
        except ValueError:
            raise EvalError(
                f"{qrels_path}:{number}: score {score!r} is not a whole number"
            ) from None
    return BeirDataset(
        name=directory.resolve().name,
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        fingerprint="sha256:" + digest.hexdigest(),
    )


def _jsonl(path: Path, digest: Any) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    digest.update(raw)
    rows = []
    for number, row in json_lines(path, raw.decode("utf-8")):
        if not isinstance(row, dict) or "_id" not in row:
            raise EvalError(f"{path}:{number}: expected an object with an _id")
        rows.append(row)
    return rows


def json_lines(path: Path, text: str) -> list[tuple[int, Any]]:
    """(line number, value) of every non-blank line; EvalError naming the line if not JSON."""
    values = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            values.append((number, json.loads(line)))
        except ValueError as error:
            raise EvalError(f"{path}:{number}: not JSON ({error})") from None
    return values


@dataclass(frozen=True, slots=True)
class Selection:
    """The questions asked and the documents ingested, and the key a baseline files them under."""

    subset: Subset
    limit: int | None
    seed: int
    query_ids: list[str]
    document_ids: list[str]

    @property
    def key(self) -> str:
        if self.limit is None:
            return f"subset={self.subset},limit=all"
        return f"subset={self.subset},limit={self.limit},seed={self.seed}"


def split_queries(query_ids: Sequence[str], part: Subset) -> list[str]:
    """A fixed half of the questions: `tune` or `heldout` (or all of them), in stable order."""
    ordered = sorted(query_ids, key=_natural)
    if part == "all":
        return ordered
    shuffled = list(ordered)
    random.Random(SPLIT_SEED).shuffle(shuffled)  # noqa: S311 — a reproducible split, no secret
    tune = set(shuffled[: len(shuffled) // 2])
    return [qid for qid in ordered if (qid in tune) == (part == "tune")]


def select(dataset: BeirDataset, *, subset: Subset, limit: int | None, seed: int) -> Selection:
    """The questions and corpus of one run (see the module docstring)."""
    query_ids = split_queries(dataset.judged_queries(), subset)
    if limit is None:
        return Selection(subset, None, seed, query_ids, sorted(dataset.corpus, key=_natural))
    if limit < 1:
        raise EvalError("--limit must be at least 1")
    rng = random.Random(f"kbgate-eval:{seed}")  # noqa: S311 — a reproducible sample, no secret
    chosen = sorted(rng.sample(query_ids, min(limit, len(query_ids))), key=_natural)
    judged = {doc for qid in chosen for doc in dataset.qrels[qid] if doc in dataset.corpus}
    others = sorted((doc for doc in dataset.corpus if doc not in judged), key=_natural)
    extra = max(0, CORPUS_PER_QUERY * len(chosen) - len(judged))
    sample = rng.sample(others, min(extra, len(others)))
    documents = sorted(judged | set(sample), key=_natural)
    return Selection(subset, limit, seed, chosen, documents)


def document_key(beir_id: str) -> str:
    """A kbgate document id for a BEIR id (ids kbgate would refuse are hashed)."""
    if is_valid_id(beir_id) and not beir_id.startswith("beir-"):
        return beir_id
    return "beir-" + hashlib.sha256(beir_id.encode("utf-8")).hexdigest()[:40]
