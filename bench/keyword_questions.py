"""Build a golden set of keyword-style questions: one or two rare words of a document.

    uv run python -m bench.keyword_questions ../shared/datasets/scifact /tmp/kwset
    uv run kbgate eval --dataset /tmp/kwset --data-dir /tmp/kbgate-eval/kwset \\
        --offtopic bench/data/offtopic_questions.jsonl

What a user types to find a part number, a gene or a term of art: the natural-language
development sets hold none. From the first `--documents` documents of a BEIR corpus, each
of `--questions` documents drawn at random gives one question (alternately one word and
two) from its words found in at most three of those documents; every document holding all
of a question's words is judged relevant. Written as a BEIR folder (`corpus.jsonl`,
`queries.jsonl`, `qrels.tsv`) for `kbgate eval`. Seeded: the same arguments give the
same set.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

#: words of four characters or more, starting with a letter (hyphens and digits inside)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-]{3,}")
#: a rare word is in at most this many of the set's documents
RARE_IN = 3


def _words(document: dict[str, str]) -> set[str]:
    return set(_WORD.findall(f"{document.get('title', '')} {document['text']}"))


def build(source: Path, out: Path, *, documents: int, questions: int, seed: int) -> int:
    """Write the set; answers how many questions it holds."""
    rng = random.Random(seed)
    with (source / "corpus.jsonl").open(encoding="utf-8") as lines:
        corpus = [json.loads(line) for line, _ in zip(lines, range(documents), strict=False)]
    words = {document["_id"]: _words(document) for document in corpus}
    folded = {doc_id: {word.casefold() for word in held} for doc_id, held in words.items()}
    frequency = Counter(word for held in folded.values() for word in held)
    asked: list[dict[str, str]] = []
    judged: list[tuple[str, str]] = []
    for number, document in enumerate(rng.sample(corpus, min(questions, len(corpus)))):
        rare = sorted(words[document["_id"]], key=lambda w: (frequency[w.casefold()], w))
        rare = [word for word in rare if frequency[word.casefold()] <= RARE_IN][:6]
        if len(rare) < 2:
            continue
        chosen = rng.sample(rare, 1 if number % 2 else 2)
        question_id = f"kw{number}"
        asked.append({"_id": question_id, "text": " ".join(chosen)})
        wanted = {word.casefold() for word in chosen}
        judged += [(question_id, doc_id) for doc_id, held in folded.items() if wanted <= held]
    out.mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as written:
        written.writelines(json.dumps(document) + "\n" for document in corpus)
    with (out / "queries.jsonl").open("w", encoding="utf-8") as written:
        written.writelines(json.dumps(question) + "\n" for question in asked)
    with (out / "qrels.tsv").open("w", encoding="utf-8") as written:
        written.write("query-id\tcorpus-id\tscore\n")
        written.writelines(f"{question_id}\t{doc_id}\t1\n" for question_id, doc_id in judged)
    return len(asked)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("source", type=Path, help="a BEIR folder (corpus.jsonl)")
    parser.add_argument("out", type=Path)
    parser.add_argument("--documents", type=int, default=1500)
    parser.add_argument("--questions", type=int, default=120)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    count = build(
        args.source, args.out, documents=args.documents, questions=args.questions, seed=args.seed
    )
    print(f"{count} questions in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
