"""A BEIR corpus's documents, as the ingest benchmarks read them (kept light to import:
the benchmarks measure their own process's memory)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class CorpusDoc:
    doc_id: str
    title: str
    text: str


def load_corpus(path: Path, limit: int | None) -> list[CorpusDoc]:
    """The first `limit` documents of a BEIR corpus.jsonl (all when None)."""
    docs: list[CorpusDoc] = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if limit is not None and len(docs) >= limit:
                break
            row = json.loads(line)
            if str(row.get("text", "")).strip():
                docs.append(CorpusDoc(str(row["_id"]), str(row.get("title", "")), row["text"]))
    return docs
