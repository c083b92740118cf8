"""Fusion on long documents: SciFact's abstracts joined eight to a document, each turn's
passages judged by the abstract they come from.

    uv run python -m bench.long_documents build /tmp/longdoc
    uv run python -m bench.fusion_study collect --dataset /tmp/longdoc \\
        --data-dir /tmp/kbgate-eval/longdoc --out /tmp/kbgate-eval/legs/longdoc.json
    uv run python -m bench.long_documents replay /tmp/kbgate-eval/legs/longdoc.json \\
        --groups /tmp/longdoc/groups.json

The development sets hold short documents (a SciFact abstract is two or three passages,
a dbpedia abstract or an MS MARCO passage one), where a whole-document keyword leg and a
passage keyword leg find much the same. In a KB of long documents only the passage leg
tells which of a document's passages answers. `build` writes such a set in the BEIR
layout (648 documents of about 20 passages, no titles, SciFact's questions, a document
relevant when it holds a relevant abstract) and `groups.json` (each document's abstracts).
`replay` runs the real fusion (`gateway.retrieval.fusion.fuse`) over the legs
`bench.fusion_study collect` stored, at a default turn's depth, for the default weights and
for one keyword leg alone; the passage that represents each document is mapped to the
abstract sharing the most words with it, and the abstracts scored against SciFact's
judgments (nDCG@10). Without `--groups` every document is its own unit (a short set).
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.fusion_replay import paired_bootstrap
from gateway.retrieval.fusion import RankedLeg, fuse
from gateway.retrieval.legs import DOCUMENT_KEYWORD_SHARE, LEG_DEPTH_PER_RESULT
from gateway.tools.evaluation.metrics import score_run
from ingest.index import LegKind
from ingest.payload import PassageRef
from settings.resolve import DEFAULT_KEYWORD_WEIGHT

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
ABSTRACTS_PER_DOCUMENT = 8
TOP_K = 8
TOP = 10

Weights = Mapping[LegKind, float]


@dataclass(frozen=True, slots=True)
class _Hit:
    point_id: str
    score: float
    ref: PassageRef


def build(out: Path, source: Path = SCIFACT, seed: int = 0) -> dict[str, int]:
    """Write the long-document set and its `groups.json` into `out`."""
    with (source / "corpus.jsonl").open(encoding="utf-8") as lines:
        corpus = [json.loads(line) for line in lines]
    random.Random(seed).shuffle(corpus)
    out.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[list[str]]] = {}
    home: dict[str, str] = {}
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as written:
        for start in range(0, len(corpus), ABSTRACTS_PER_DOCUMENT):
            document_id = f"L{start // ABSTRACTS_PER_DOCUMENT:04d}"
            members = corpus[start : start + ABSTRACTS_PER_DOCUMENT]
            text = "\n\n".join(str(member["text"]) for member in members)
            written.write(json.dumps({"_id": document_id, "title": "", "text": text}) + "\n")
            groups[document_id] = [[str(m["_id"]), str(m["text"])] for m in members]
            home.update({str(member["_id"]): document_id for member in members})
    (out / "groups.json").write_text(json.dumps(groups), encoding="utf-8")
    (out / "queries.jsonl").write_text(
        (source / "queries.jsonl").read_text(encoding="utf-8"), encoding="utf-8"
    )
    header, *rows = (source / "qrels.tsv").read_text(encoding="utf-8").splitlines()
    judged: dict[tuple[str, str], str] = {}
    for row in rows:
        question, abstract, grade = row.split("\t")
        judged.setdefault((question, home[abstract]), grade)
    qrels = [header, *(f"{q}\t{d}\t{grade}" for (q, d), grade in judged.items())]
    (out / "qrels.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    return {"documents": len(groups), "judgments": len(judged)}


class Units:
    """Which judged unit a passage belongs to: its abstract (long documents) or its
    document (a short set)."""

    def __init__(
        self, texts: Mapping[str, str], groups: Mapping[str, Sequence[Sequence[str]]] | None
    ) -> None:
        self._texts = texts
        self._words = {
            document: [(abstract, set(text.lower().split())) for abstract, text in members]
            for document, members in (groups or {}).items()
        }

    def of(self, point_id: str, document_id: str) -> str:
        members = self._words.get(document_id)
        if not members:
            return document_id
        words = set(self._texts[point_id].lower().split())
        return max(members, key=lambda member: len(words & member[1]))[0]


def ranking(row: Mapping[str, Any], weights: Weights, units: Units) -> list[str]:
    """The question's first `TOP` units as a default turn's fusion orders them."""
    depth = LEG_DEPTH_PER_RESULT * TOP_K
    legs = []
    for leg in row["legs"]:
        kind = LegKind(leg["kind"])
        if weights[kind] <= 0:
            continue
        hits = [
            _Hit(pid, score, _ref(document, index))
            for pid, document, index, score in leg["hits"][:depth]
        ]
        legs.append(RankedLeg(kb_id="kb", kind=kind, weight=weights[kind], hits=hits))
    found: list[str] = []
    for candidate in fuse(legs):
        unit = units.of(candidate.point_id, candidate.hit.ref.document_id)
        if unit not in found:
            found.append(unit)
        if len(found) == TOP:
            break
    return found


def _ref(document_id: str, passage_index: int) -> PassageRef:
    return PassageRef(
        knowledge_base_id="kb",
        document_id=document_id,
        document_version="v",
        passage_index=passage_index,
        indexed_at="",
    )


def variants() -> dict[str, Weights]:
    """The default weights, and the keyword weight on one keyword leg alone."""
    keyword = DEFAULT_KEYWORD_WEIGHT
    dense, passages, documents = LegKind.DENSE, LegKind.KEYWORD, LegKind.DOCUMENT_KEYWORD
    return {
        "default (both keyword legs)": {
            dense: 1.0,
            passages: keyword * (1 - DOCUMENT_KEYWORD_SHARE),
            documents: keyword * DOCUMENT_KEYWORD_SHARE,
        },
        "whole-document keyword leg only": {dense: 1.0, passages: 0.0, documents: keyword},
        "passage keyword leg only": {dense: 1.0, passages: keyword, documents: 0.0},
        "dense only": {dense: 1.0, passages: 0.0, documents: 0.0},
    }


def replay(legs_path: Path, groups_path: Path | None, qrels_path: Path) -> dict[str, Any]:
    """nDCG@10 of each variant, and each against the default (paired bootstrap)."""
    import numpy as np

    study = json.loads(legs_path.read_text(encoding="utf-8"))
    stored = np.load(legs_path.with_suffix(".dense.npz"))
    texts = dict(zip(map(str, stored["ids"]), map(str, stored["texts"]), strict=True))
    groups = json.loads(groups_path.read_text(encoding="utf-8")) if groups_path else None
    units = Units(texts, groups)
    qrels = _qrels(qrels_path) if groups else study["qrels"]
    judged = [row for row in study["questions"] if row["group"] == "q"]
    per_question: dict[str, dict[str, float]] = {}
    result: dict[str, Any] = {"set": legs_path.stem, "questions": len(judged), "variants": {}}
    for name, weights in variants().items():
        run = {row["id"]: ranking(row, weights, units) for row in judged}
        per_question[name] = {
            q: score_run({q: found}, qrels)["nDCG@10"] for q, found in run.items()
        }
        result["variants"][name] = {"nDCG@10": round(score_run(run, qrels)["nDCG@10"], 4)}
    default = per_question["default (both keyword legs)"]
    for name, scores in per_question.items():
        mean, low, high = paired_bootstrap(default, scores)
        result["variants"][name]["against the default"] = [round(x, 4) for x in (mean, low, high)]
    return result


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for row in path.read_text(encoding="utf-8").splitlines()[1:]:
        question, document, grade = row.split("\t")
        qrels.setdefault(question, {})[document] = int(grade)
    return qrels


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("build")
    make.add_argument("out", type=Path)
    make.add_argument("--source", type=Path, default=SCIFACT)
    again = sub.add_parser("replay")
    again.add_argument("legs", type=Path)
    again.add_argument("--groups", type=Path, help="the set's groups.json (long documents)")
    again.add_argument("--qrels", type=Path, default=SCIFACT / "qrels.tsv")
    args = parser.parse_args(argv)
    if args.command == "build":
        print(json.dumps(build(args.out, args.source)))
    else:
        print(json.dumps(replay(args.legs, args.groups, args.qrels), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
