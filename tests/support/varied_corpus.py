"""Deterministic documents of widely varied length and shape, and the RSS of a process.

For memory tests and benches: no download, the same corpus for the same seed.
Lengths are spread geometrically between `min_words` and `max_words` (so short and
long documents are equally represented on a log scale) and shuffled; sentences run
from 3 to 40 words, and some documents carry one sentence longer than a passage
window, so passages — and the batches the embedder pads — take many different
token lengths. Words mix common English, long technical words that split into many
word pieces, and numbers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.workspace_http import workspace_headers

_COMMON = (
    "the of and to in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when "
    "what more will if no out so said up about into than them can only other new some "
    "could time these two may then do first any my now such like our over man me even "
    "most made after also did many before must through back years where much your way "
    "well down should because each just those people how too little state good very make "
    "world still own see men work long get here between both life being under never day "
    "same another know while last might us great old year off come since against go came "
    "right used take three harbour ferry island morning ticket weather leave policy"
)
_TECHNICAL = (
    "immunohistochemistry electroencephalography phosphatidylinositol "
    "methylenetetrahydrofolate spectrophotometrically interdisciplinarity "
    "counterrevolutionaries deinstitutionalization pseudohypoparathyroidism "
    "thyroparathyroidectomized hepaticocholangiogastrostomy internationalization "
    "oversimplification uncharacteristically electrocardiographically "
    "psychophysiological neuroendocrinological radioimmunoassay glycosyltransferase "
    "mitochondrial transcriptomic phosphorylation cyclooxygenase"
)


@dataclass(frozen=True, slots=True)
class Document:
    doc_id: str
    title: str
    text: str
    words: int


def word_counts(count: int, min_words: int, max_words: int) -> list[int]:
    """`count` lengths spread geometrically from min_words to max_words (both included)."""
    if count == 1:
        return [max_words]
    ratio = max_words / min_words
    return [round(min_words * ratio ** (i / (count - 1))) for i in range(count)]


@dataclass(frozen=True, slots=True)
class _Words:
    common: list[str]
    technical: list[str]

    def pick(self, rng: random.Random) -> str:
        roll = rng.random()
        if roll < 0.08:
            return rng.choice(self.technical)
        if roll < 0.12:
            return str(rng.randrange(0, 10 ** rng.randrange(1, 9)))
        return rng.choice(self.common)


def _text(rng: random.Random, vocabulary: _Words, words: int) -> str:
    sentences: list[str] = []
    left = words
    run_on = words > 300 and rng.random() < 0.3  # one sentence longer than a passage window
    while left > 0:
        size = min(left, rng.randrange(200, 400) if run_on else rng.randrange(3, 41))
        run_on = False
        body = [vocabulary.pick(rng) for _ in range(size)]
        body[0] = body[0].capitalize()
        sentences.append(" ".join(body) + rng.choice(".!?" if size > 1 else "."))
        left -= size
    paragraphs, current = [], []
    for sentence in sentences:
        current.append(sentence)
        if rng.random() < 0.15:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return "\n\n".join(paragraphs)


def varied_corpus(
    count: int, *, seed: int, min_words: int = 5, max_words: int = 3000, prefix: str = "doc"
) -> list[Document]:
    """`count` documents, ids `{prefix}-{n}`, lengths from min_words to max_words, shuffled.

    The same `count` and `prefix` with another `seed` gives the same ids and lengths with
    other words: a second pass that replaces every document with new text of its length.
    """
    lengths = word_counts(count, min_words, max_words)
    random.Random(count).shuffle(lengths)  # order independent of the seed
    rng = random.Random(seed)
    vocabulary = _Words(_COMMON.split(), _TECHNICAL.split())
    return [
        Document(
            f"{prefix}-{n}", f"Document {n} ({words} words)", _text(rng, vocabulary, words), words
        )
        for n, words in enumerate(lengths)
    ]


def rss_kib(pid: int) -> dict[str, int]:
    """VmRSS (resident now) and VmHWM (peak resident) of a process, in KiB, from /proc."""
    found: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in {"VmRSS", "VmHWM"}:
            found[name] = int(value.split()[0])
    return found


def provision_varied_kb(client: httpx.Client, platform_key: str) -> dict[str, str]:
    """Org `mem`, workspace `mem-ws`, an admin+ingest key and the KB `varied`: the
    headers to ingest with."""
    headers = workspace_headers(client, platform_key, "mem", "mem-ws", ("admin", "ingest"))
    client.put("/v1/knowledge-bases/varied", json={}, headers=headers).raise_for_status()
    return headers
