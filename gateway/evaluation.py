"""`kbgate eval`: score retrieval on a BEIR golden set, per channel, and gate releases on it.

DESIGN.md section 10 and issue 9. Nothing here calls a language model: documents go
through the real ingest path (`gateway.knowledge.put_document` on an embedded Qdrant
Edge store), every question through the real turn (`gateway.turn.retrieve` with a
Principal), and the ranked documents are scored with ir-measures against the graded
judgments (nDCG@10, R@10, R@100, RR@10).

Channels are per-KB fusion weights: dense-only `{dense: 1, keyword: 0}`, keyword-only
`{dense: 0, keyword: 1}` and hybrid (the platform default, or `--kb-settings`). The
ranking runs ask for 100 documents (the eval's config raises the `top_k` bound and the
leg depth) with both floors at 0, so the floors do not cut the ranking; abstention is
measured apart, with the floors in force (platform defaults unless `--kb-settings` sets
them): the share of answerable questions that abstain, and of off-topic ones
(`--offtopic FILE`) that do.

Subsets: `--queries-subset tune|heldout` is a fixed half of the judged questions (split by
a seeded shuffle that never changes, so tuning never sees the held-out half);
`--limit N --seed S` then keeps N of them and a corpus of every document judged for them
plus a seeded sample of the others (about 4 x N documents in all): deterministic, small
enough for CI.

The gate: a baseline file holds, per subset key, the figures of a release and a tolerance.
`--baseline FILE` exits 1 when a gated figure (hybrid nDCG@10, hybrid R@100) drops by
more than the tolerance, or when hybrid nDCG@10 falls below the better single channel
by more than the tolerance. `--write-baseline FILE` records the run under its key.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gateway.auth import Principal
from gateway.errors import ConflictError, InvalidInputError
from ingest.chunking import ChunkingParams
from ingest.payload import Classification, is_valid_id
from settings.config import Config, ConfigError, load_config
from settings.records import Role

if TYPE_CHECKING:
    from gateway.redaction import Redactor
    from gateway.services import Services
    from ingest.embedding import Embedder, Embedding
    from ingest.index import SparseVector

Subset = Literal["all", "tune", "heldout"]
Progress = Callable[[str], None]

#: The channels, each a per-KB fusion setting (None: the hybrid under test).
CHANNELS: dict[str, dict[str, float] | None] = {
    "dense": {"dense": 1.0, "keyword": 0.0},
    "keyword": {"dense": 0.0, "keyword": 1.0},
    "hybrid": None,
}
#: ir-measures names, reported under these keys.
MEASURES = ("nDCG@10", "R@10", "R@100", "RR@10")
#: Documents each ranking run asks for (recall@100 needs 100).
RANKING_DEPTH = 100
#: Passages per leg in ranking runs: deep enough that a single channel's leg still holds
#: 100 distinct documents when documents have several passages.
EVAL_LEG_LIMIT = 300
#: A --limit corpus: the judged documents of the chosen questions plus others, this many
#: documents per question in all.
CORPUS_PER_QUERY = 4
#: The tune/held-out split never changes with --seed.
SPLIT_SEED = "kbgate-eval-split-v1"
DEFAULT_TOLERANCE = 0.01
GATED = ("hybrid/nDCG@10", "hybrid/R@100")
PROGRESS_QUERIES = 50
PROGRESS_DOCUMENTS = 500
INGEST_CONCURRENCY = 4

_ORG = "eval"
_TENANT = "eval-workspace"
_AGENT = "eval-agent"
_EMPTY_RUN_DOC = "__no_document__"


class EvalError(Exception):
    """Bad input or setup: said on stderr, exit status 2."""


# ---- the dataset ---------------------------------------------------------------------


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
    for number, row in _json_lines(path, raw.decode("utf-8")):
        if not isinstance(row, dict) or "_id" not in row:
            raise EvalError(f"{path}:{number}: expected an object with an _id")
        rows.append(row)
    return rows


def _json_lines(path: Path, text: str) -> list[tuple[int, Any]]:
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


# ---- metrics and the gate --------------------------------------------------------------


def score_run(
    run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, float]:
    """Mean of each measure over every question of `run` (an empty answer scores 0)."""
    ir_measures = _ir_measures()
    measures = [ir_measures.parse_measure(name) for name in MEASURES]
    judged = {qid: dict(qrels[qid]) for qid in run}
    ranked: dict[str, dict[str, float]] = {}
    for qid, documents in run.items():
        # Scores from rank, strictly decreasing: trec_eval would reorder ties by id.
        scores = {doc: float(len(documents) - rank) for rank, doc in enumerate(documents)}
        ranked[qid] = scores or {_EMPTY_RUN_DOC: 0.0}
    totals = ir_measures.calc_aggregate(measures, judged, ranked)
    return {str(measure): round(float(totals[measure]), 4) for measure in measures}


def _ir_measures() -> Any:
    """The metrics library, imported when a run starts (not at import time)."""
    try:
        import ir_measures
    except ImportError:
        raise EvalError("kbgate eval needs the ir-measures package") from None
    return ir_measures


@dataclass(frozen=True, slots=True)
class GateResult:
    key: str
    tolerance: float
    failures: list[str]
    checked: list[str]

    @property
    def passed(self) -> bool:
        return not self.failures


def check_gate(report: Mapping[str, Any], baseline: Mapping[str, Any]) -> GateResult:
    """Compare a report with the baseline entry under the same subset key."""
    key = str(report["selection"]["key"])
    tolerance = float(baseline.get("tolerance", DEFAULT_TOLERANCE))
    gated = [str(name) for name in baseline.get("gated", GATED)]
    channels = report["channels"]
    failures: list[str] = []
    checked: list[str] = []
    entry = baseline.get("runs", {}).get(key)
    if entry is None:
        failures.append(f"the baseline has no entry for {key}: record one with --write-baseline")
        return GateResult(key, tolerance, failures, checked)
    if entry.get("fingerprint") != report["dataset"]["fingerprint"]:
        failures.append(
            f"the dataset differs from the baseline's ({report['dataset']['fingerprint']} vs "
            f"{entry.get('fingerprint')}): re-record the baseline"
        )
    for name in gated:
        channel, _, measure = name.partition("/")
        got = float(channels[channel][measure])
        want = float(entry["channels"][channel][measure])
        checked.append(f"{name}: {got:.4f} vs baseline {want:.4f}")
        if got < want - tolerance:
            failures.append(f"{name} dropped to {got:.4f} from {want:.4f} (tolerance {tolerance})")
    hybrid = float(channels["hybrid"]["nDCG@10"])
    best = max(float(channels[c]["nDCG@10"]) for c in ("dense", "keyword"))
    checked.append(f"hybrid nDCG@10 {hybrid:.4f} vs best single channel {best:.4f}")
    if hybrid < best - tolerance:
        failures.append(
            f"hybrid nDCG@10 {hybrid:.4f} is below the better single channel {best:.4f} "
            f"(tolerance {tolerance})"
        )
    return GateResult(key, tolerance, failures, checked)


def updated_baseline(
    baseline: Mapping[str, Any] | None, report: Mapping[str, Any]
) -> dict[str, Any]:
    """The baseline with this report's figures recorded under its subset key."""
    document: dict[str, Any] = dict(baseline or {})
    document.setdefault(
        "about",
        "kbgate eval release gate: a run fails when a gated figure drops by more than "
        "`tolerance` (absolute) below the entry of its subset key, or when hybrid nDCG@10 "
        "falls more than `tolerance` below the better single channel.",
    )
    document.setdefault("tolerance", DEFAULT_TOLERANCE)
    document.setdefault("gated", list(GATED))
    runs = dict(document.get("runs", {}))
    runs[report["selection"]["key"]] = {
        "dataset": report["dataset"]["name"],
        "fingerprint": report["dataset"]["fingerprint"],
        "queries": report["selection"]["queries"],
        "documents": report["selection"]["documents"],
        "channels": {
            channel: {measure: figures[measure] for measure in MEASURES}
            for channel, figures in report["channels"].items()
        },
        "abstention": report["abstention"],
        "settings": report["settings"],
    }
    document["runs"] = dict(sorted(runs.items()))
    return document


# ---- the run ---------------------------------------------------------------------------


@dataclass(slots=True)
class EvalOptions:
    dataset: Path
    kb_settings: dict[str, Any] = field(default_factory=dict)
    subset: Subset = "all"
    limit: int | None = None
    seed: int = 0
    data_dir: Path | None = None
    offtopic: Path | None = None


class _QueryMemo:
    """The real embedder, each distinct question embedded once per run (channels repeat them)."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self._queries: dict[str, Embedding] = {}

    @property
    def dense_dim(self) -> int:
        return self._inner.dense_dim

    def embed_documents(self, texts: Sequence[str]) -> list[Embedding]:
        return self._inner.embed_documents(texts)

    def embed_document_keywords(self, texts: Sequence[str]) -> list[SparseVector]:
        return self._inner.embed_document_keywords(texts)

    def embed_queries(self, texts: Sequence[str]) -> list[Embedding]:
        missing = list(dict.fromkeys(text for text in texts if text not in self._queries))
        if missing:
            self._queries.update(zip(missing, self._inner.embed_queries(missing), strict=True))
        return [self._queries[text] for text in texts]


def eval_config(environ: Mapping[str, str], data_dir: Path) -> Config:
    """The platform config from KBGATE_* (model, defaults), on `data_dir`, with raised bounds.

    Engines are always embedded here (a Qdrant or Redis URL in the environment is ignored),
    and the `top_k` bound and leg depth are raised so a run can rank 100 documents.
    """
    kept = {
        name: value
        for name, value in environ.items()
        if name.startswith("KBGATE_")
        and name
        not in {
            "KBGATE_QDRANT_URL",
            "KBGATE_QDRANT_API_KEY",
            "KBGATE_REDIS_URL",
            "KBGATE_DATA_DIR",
            "KBGATE_TOP_K_MAX",
        }
    }
    base = load_config(kept, data_dir=data_dir)
    return load_config(
        kept,
        data_dir=data_dir,
        leg_limit=max(base.leg_limit, EVAL_LEG_LIMIT),
        **{"bounds.top_k_max": max(base.bounds.top_k_max, RANKING_DEPTH)},
    )


def _principal() -> Principal:
    return Principal(
        key_id="eval",
        roles=frozenset({Role.ADMIN, Role.INGEST, Role.RETRIEVE}),
        org_id=_ORG,
        tenant_id=_TENANT,
        clearance=Classification.RESTRICTED,  # document management needs it
    )


async def provision(services: Services) -> Principal:
    """The eval's org and workspace (kept when they exist), redaction off at both gates.

    Redaction rewrites passage text but never which documents are returned; it is off so a
    run spends its time on retrieval.
    """
    from gateway.provisioning import create_org, create_workspace
    from gateway.workspace import change_settings

    principal = _principal()
    with suppress(ConflictError):  # both exist in a kept --data-dir
        await create_org(services, _ORG)
    with suppress(ConflictError):
        await create_workspace(services, _ORG, _TENANT, None)
    await change_settings(services, principal, {"rag_pii_redaction": False})
    return principal


@dataclass(slots=True)
class IngestSummary:
    indexed: int = 0
    unchanged: int = 0
    skipped: int = 0
    passages: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "indexed": self.indexed,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
            "passages": self.passages,
            "seconds": round(self.seconds, 1),
        }


@dataclass(frozen=True, slots=True)
class EvalSession:
    """What every step of a run shares: the services, the caller, the KB under test."""

    services: Services
    principal: Principal
    kb_id: str
    progress: Progress
    #: kbgate document id -> the dataset's, where they differ
    beir_ids: Mapping[str, str] = field(default_factory=dict)


async def ingest_corpus(
    session: EvalSession, dataset: BeirDataset, document_ids: Sequence[str]
) -> IngestSummary:
    """Put every selected document through `knowledge.put_document` (unchanged ones are cheap)."""
    from gateway.knowledge import put_document

    summary = IngestSummary()
    started = time.perf_counter()
    slots = asyncio.Semaphore(INGEST_CONCURRENCY)
    done = 0

    async def one(beir_id: str) -> None:
        nonlocal done
        document = dataset.corpus[beir_id]
        text = document.text if document.text.strip() else document.title
        async with slots:
            if not text.strip():
                summary.skipped += 1
            else:
                status, passages, _ = await put_document(
                    session.services,
                    session.principal,
                    session.kb_id,
                    document_key(beir_id),
                    text=text,
                    classification=Classification.INTERNAL.value,
                    title=document.title,
                    source="",
                )
                summary.passages += passages
                if status == "indexed":
                    summary.indexed += 1
                else:
                    summary.unchanged += 1
            done += 1
            if done % PROGRESS_DOCUMENTS == 0 or done == len(document_ids):
                session.progress(
                    f"ingest: {done}/{len(document_ids)} documents ({summary.indexed} indexed, "
                    f"{summary.unchanged} unchanged) {time.perf_counter() - started:.0f} s"
                )

    await asyncio.gather(*(one(beir_id) for beir_id in document_ids))
    summary.seconds = time.perf_counter() - started
    return summary


@dataclass(slots=True)
class ChannelRun:
    ranking: dict[str, list[str]]
    abstained: int
    errors: int
    seconds: float
    effective: dict[str, Any]

    def kb_effective(self, kb_id: str) -> dict[str, Any]:
        """What the turn reported it used for the KB (fusion, floors, top_k)."""
        value = self.effective.get("per_knowledge_base", {}).get(kb_id, {})
        return value if isinstance(value, dict) else {}


async def run_questions(
    session: EvalSession,
    kb_settings: Mapping[str, Any],
    questions: Mapping[str, str],
    label: str,
) -> ChannelRun:
    """Set the KB's settings, then ask every question through the real turn, one at a time."""
    from gateway.knowledge import put_knowledge_base
    from gateway.turn import retrieve

    services, principal = session.services, session.principal
    await put_knowledge_base(
        services, principal, session.kb_id, name=session.kb_id, storage="org",
        settings=dict(kb_settings),
    )  # fmt: skip
    ranking: dict[str, list[str]] = {}
    abstained = errors = 0
    effective: dict[str, Any] = {}
    started = time.perf_counter()
    for number, (qid, question) in enumerate(questions.items(), start=1):
        try:
            result = await retrieve(services, principal, _AGENT, question, [])
        except InvalidInputError:
            errors += 1  # e.g. an empty or over-long question: counted, scored as no answer
            ranking[qid] = []
            continue
        effective = effective or result.effective
        abstained += int(result.abstained)
        ordered = dict.fromkeys(c.hit.payload.document_id for c in result.candidates)
        ranking[qid] = [session.beir_ids.get(doc, doc) for doc in ordered]
        if number % PROGRESS_QUERIES == 0 or number == len(questions):
            session.progress(
                f"{label}: {number}/{len(questions)} questions "
                f"{time.perf_counter() - started:.0f} s"
            )
    return ChannelRun(ranking, abstained, errors, time.perf_counter() - started, effective)


@dataclass(frozen=True, slots=True)
class PreparedRun:
    """A run's dataset, selection and config, with its corpus ingested into `session`."""

    dataset: BeirDataset
    selection: Selection
    config: Config
    session: EvalSession
    ingested: IngestSummary

    def questions(self) -> dict[str, str]:
        return {qid: self.dataset.queries[qid] for qid in self.selection.query_ids}


async def prepare(
    options: EvalOptions,
    stack: AsyncExitStack,
    *,
    environ: Mapping[str, str],
    embedder: Embedder | None = None,
    redactor: Redactor | None = None,
    progress: Progress,
) -> PreparedRun:
    """Load and select the dataset, open the store (closed with `stack`), and ingest."""
    from gateway.data_dir import DataDirInUseError, hold_data_dir
    from gateway.knowledge import put_agent, put_knowledge_base
    from gateway.services import _build_embedder, build_services
    from gateway.telemetry import Telemetry, build_logger

    _ir_measures()  # fail before the long part, not after
    dataset = load_beir(options.dataset)
    selection = select(dataset, subset=options.subset, limit=options.limit, seed=options.seed)
    if not selection.query_ids:
        raise EvalError(f"no judged questions in {options.dataset} for subset {options.subset}")
    data_dir = options.data_dir or Path(
        stack.enter_context(tempfile.TemporaryDirectory(prefix="kbgate-eval-"))
    )
    config = eval_config(environ, data_dir)
    if options.data_dir is not None:
        try:
            held = hold_data_dir(config, "eval")
        except DataDirInUseError as error:
            raise EvalError(str(error)) from None
        if held is not None:
            stack.callback(held.release)
    if embedder is None:
        embedder = await asyncio.to_thread(_build_embedder, config)
        stack.callback(_close_embedder, embedder)
    services = await build_services(
        config,
        Telemetry(build_logger("WARNING", sys.stderr)),
        embedder=_QueryMemo(embedder),
        redactor=redactor,
    )
    stack.push_async_callback(services.close)
    principal = await provision(services)
    kb_id = _kb_id(dataset, selection, config)
    # The KB exists before documents go in; each run of questions sets its settings.
    await put_knowledge_base(services, principal, kb_id, name=kb_id, storage="org", settings={})
    await put_agent(services, principal, _AGENT, [kb_id], {"pii_redaction": False})
    session = EvalSession(
        services,
        principal,
        kb_id,
        progress,
        beir_ids={
            document_key(beir_id): beir_id
            for beir_id in selection.document_ids
            if document_key(beir_id) != beir_id
        },
    )
    progress(
        f"eval: {dataset.name}, {len(selection.query_ids)} questions, "
        f"{len(selection.document_ids)} documents, data dir {data_dir}"
    )
    ingested = await ingest_corpus(session, dataset, selection.document_ids)
    await _optimize(session)
    return PreparedRun(dataset, selection, config, session, ingested)


async def _optimize(session: EvalSession) -> None:
    """Index what the ingest wrote, as a gateway started on this store would (`serve`)."""
    started = time.perf_counter()
    changed = await asyncio.to_thread(session.services.index.optimize)
    if changed:
        session.progress(f"index: optimized in {time.perf_counter() - started:.0f} s")


def ranking_settings(kb_settings: Mapping[str, Any], channel: str) -> dict[str, Any]:
    """KB settings of a ranking run: 100 documents, no floors, the channel's fusion."""
    settings = {
        "top_k": RANKING_DEPTH,
        "score_threshold": 0.0,
        "keyword_floor": 0.0,
        **kb_settings,
    }
    fusion = CHANNELS[channel]
    if fusion is not None:
        settings["fusion"] = fusion
    return settings


async def evaluate(
    options: EvalOptions,
    *,
    environ: Mapping[str, str],
    embedder: Embedder | None = None,
    redactor: Redactor | None = None,
    progress: Progress,
) -> dict[str, Any]:
    """Ingest, ask every question per channel, score, and measure abstention: the report."""
    offtopic = _offtopic_questions(options.offtopic) if options.offtopic else {}
    started = time.perf_counter()
    async with AsyncExitStack() as stack:
        run = await prepare(
            options,
            stack,
            environ=environ,
            embedder=embedder,
            redactor=redactor,
            progress=progress,
        )
        session, dataset, selection = run.session, run.dataset, run.selection
        questions = run.questions()
        channels: dict[str, dict[str, Any]] = {}
        for channel in CHANNELS:
            settings = ranking_settings(options.kb_settings, channel)
            answers = await run_questions(session, settings, questions, channel)
            figures: dict[str, Any] = dict(score_run(answers.ranking, dataset.qrels))
            figures["fusion"] = answers.kb_effective(session.kb_id).get("fusion")
            figures["seconds"] = round(answers.seconds, 1)
            figures["errors"] = answers.errors
            channels[channel] = figures
        abstention = await _abstention(
            session, options.kb_settings, questions, offtopic, dataset.qrels
        )
    return {
        "dataset": {
            "name": dataset.name,
            "path": str(options.dataset),
            "fingerprint": dataset.fingerprint,
            "documents": len(dataset.corpus),
            "queries": len(dataset.queries),
        },
        "selection": {
            "key": selection.key,
            "subset": selection.subset,
            "limit": selection.limit,
            "seed": selection.seed,
            "queries": len(selection.query_ids),
            "documents": len(selection.document_ids),
        },
        "settings": _settings_report(run.config, options.kb_settings),
        "channels": channels,
        "abstention": abstention,
        "ingest": run.ingested.as_dict(),
        "seconds": round(time.perf_counter() - started, 1),
    }


async def _abstention(
    session: EvalSession,
    kb_settings: Mapping[str, Any],
    questions: Mapping[str, str],
    offtopic: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
) -> dict[str, Any]:
    """The share of questions that abstain with the floors in force (no eval overrides).

    Also the hybrid nDCG@10 of that run: what a caller gets with the floors and `top_k`
    in force, beside the unfloored ranking of the channels.
    """
    answerable = await run_questions(session, kb_settings, questions, "abstention")
    plan = answerable.kb_effective(session.kb_id)
    report: dict[str, Any] = {
        "score_threshold": plan.get("score_threshold"),
        "keyword_floor": plan.get("keyword_floor"),
        "top_k": plan.get("top_k"),
        "answerable": round(answerable.abstained / len(questions), 4),
        "answerable_questions": len(questions),
        "nDCG@10": score_run(answerable.ranking, qrels)["nDCG@10"],
    }
    if offtopic:
        off = await run_questions(session, kb_settings, offtopic, "off-topic")
        report["offtopic"] = round(off.abstained / len(offtopic), 4)
        report["offtopic_questions"] = len(offtopic)
    return report


def _offtopic_questions(path: Path) -> dict[str, str]:
    """Questions from another domain: JSON lines with `text` (and optionally `_id`)."""
    if not path.is_file():
        raise EvalError(f"no off-topic questions file at {path}")
    questions: dict[str, str] = {}
    for number, row in _json_lines(path, path.read_text("utf-8")):
        text = row.get("text") if isinstance(row, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise EvalError(f"{path}:{number}: expected an object with a text")
        questions[str(row.get("_id", f"offtopic-{number}"))] = text
    return questions


def _kb_id(dataset: BeirDataset, selection: Selection, config: Config) -> str:
    """One KB per corpus selection, so a kept --data-dir holds each run's corpus apart
    (BM25 IDF is computed over the KB)."""
    shape = json.dumps(
        [dataset.fingerprint, selection.document_ids, config.embedding_model],
        separators=(",", ":"),
    )
    return "eval-" + hashlib.sha256(shape.encode("utf-8")).hexdigest()[:16]


def _settings_report(config: Config, kb_settings: Mapping[str, Any]) -> dict[str, Any]:
    chunking = ChunkingParams()
    return {
        "kb_settings": dict(kb_settings),
        "ranking_depth": RANKING_DEPTH,
        "leg_limit": config.leg_limit,
        "passages_per_document": config.passages_per_document,
        "fusion_method": str(config.fusion_method),
        "defaults": {
            "score_threshold": config.defaults.score_threshold,
            "keyword_floor": config.defaults.keyword_floor,
            "top_k": config.defaults.top_k,
        },
        "chunking": {"max_words": chunking.max_words, "overlap_words": chunking.overlap_words},
        "embedding_model": config.embedding_model
        or "all-MiniLM-L6-v2 (int8, default; questions on its integer re-quantization)",
    }


def _close_embedder(embedder: Embedder) -> None:
    close = getattr(embedder, "close", None)
    if callable(close):
        close()


# ---- the command -----------------------------------------------------------------------

_EPILOG = """\
Channels: dense-only, keyword-only and hybrid, set through the KB's fusion weights.
Ranking runs ask for 100 documents with both floors at 0; abstention is measured with
the floors in force (platform defaults unless --kb-settings sets them).

exit status: 0 done (and the gate passed), 1 the gate failed, 2 bad arguments or setup.

examples:
  kbgate eval --dataset ../shared/datasets/scifact --limit 50 --seed 0 \\
      --offtopic bench/data/offtopic_questions.jsonl --baseline bench/baseline-scifact.json
  kbgate eval --dataset ../shared/datasets/scifact --data-dir /tmp/scifact-eval \\
      --queries-subset heldout --output scifact-heldout.json
"""


def add_eval_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `eval` on the `kbgate` command's subparsers (it sets `run`)."""
    parser = subparsers.add_parser(
        "eval",
        help="score retrieval on a BEIR golden set per channel; gate on a baseline",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    parser.set_defaults(run=run_command)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset", required=True, type=Path, metavar="DIR",
        help="a BEIR folder: corpus.jsonl, queries.jsonl, qrels.tsv",
    )  # fmt: skip
    parser.add_argument(
        "--kb-settings", metavar="JSON_OR_FILE", default=None,
        help="KB settings of the run under test (a JSON object, or a file holding one), "
        'e.g. \'{"fusion": {"dense": 1, "keyword": 0.5}}\'',
    )  # fmt: skip
    parser.add_argument("--baseline", type=Path, metavar="FILE", help="gate on this baseline")
    parser.add_argument(
        "--write-baseline", type=Path, metavar="FILE",
        help="record this run's figures in FILE under its subset key",
    )  # fmt: skip
    parser.add_argument("--limit", type=int, metavar="N", help="a seeded subset of N questions")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="seed of --limit")
    parser.add_argument(
        "--queries-subset", choices=("all", "tune", "heldout"), default="all",
        help="a fixed half of the judged questions (default: all)",
    )  # fmt: skip
    parser.add_argument(
        "--data-dir", type=Path, metavar="DIR",
        help="keep the store here and reuse it (unchanged documents are not re-embedded); "
        "default: a temporary directory",
    )  # fmt: skip
    parser.add_argument(
        "--offtopic", type=Path, metavar="FILE",
        help="JSON lines of off-topic questions ({\"text\": ...}) for the abstention rate",
    )  # fmt: skip
    parser.add_argument("--output", type=Path, metavar="FILE", help="write the JSON report here")


def main(
    argv: Sequence[str] | None = None,
    *,
    embedder: Embedder | None = None,
    redactor: Redactor | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """`kbgate eval` as a function (tests pass a loaded model and redactor)."""
    parser = argparse.ArgumentParser(prog="kbgate eval", epilog=_EPILOG)
    _add_arguments(parser)
    args = parser.parse_args(argv)
    return run_command(args, embedder=embedder, redactor=redactor, environ=environ)


def run_command(
    args: argparse.Namespace,
    *,
    embedder: Embedder | None = None,
    redactor: Redactor | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run, report, and gate; the exit status."""
    try:
        options = EvalOptions(
            dataset=args.dataset,
            kb_settings=_parse_kb_settings(args.kb_settings),
            subset=args.queries_subset,
            limit=args.limit,
            seed=args.seed,
            data_dir=args.data_dir,
            offtopic=args.offtopic,
        )
        baseline = _read_json(args.baseline) if args.baseline else None
        report = asyncio.run(
            evaluate(
                options,
                environ=os.environ if environ is None else environ,
                embedder=embedder,
                redactor=redactor,
                progress=_stderr,
            )
        )
    except (EvalError, ConfigError) as error:
        _stderr(f"kbgate eval: {error}")
        return 2
    status = 0
    if baseline is not None:
        gate = check_gate(report, baseline)
        report["gate"] = {
            "baseline": str(args.baseline),
            "key": gate.key,
            "tolerance": gate.tolerance,
            "checked": gate.checked,
            "failures": gate.failures,
            "passed": gate.passed,
        }
        for line in gate.checked:
            _stderr(f"gate: {line}")
        for line in gate.failures:
            _stderr(f"gate FAILED: {line}")
        status = 0 if gate.passed else 1
    if args.write_baseline:
        existing = _read_json(args.write_baseline) if args.write_baseline.is_file() else None
        _write_json(args.write_baseline, updated_baseline(existing, report))
        _stderr(f"kbgate eval: recorded {report['selection']['key']} in {args.write_baseline}")
    text = json.dumps(report, indent=2)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)  # noqa: T201 — the command's output is the report
    _stderr(_summary(report))
    return status


def _parse_kb_settings(raw: str | None) -> dict[str, Any]:
    if raw is None:
        return {}
    text = raw
    if not raw.lstrip().startswith("{"):
        path = Path(raw)
        if not path.is_file():
            raise EvalError(f"--kb-settings: neither a JSON object nor a file: {raw!r}")
        text = path.read_text("utf-8")
    try:
        value = json.loads(text)
    except ValueError as error:
        raise EvalError(f"--kb-settings: not JSON ({error})") from None
    if not isinstance(value, dict):
        raise EvalError("--kb-settings: expected a JSON object")
    return value


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as error:
        raise EvalError(f"cannot read {path}: {error}") from None
    if not isinstance(value, dict):
        raise EvalError(f"{path}: expected a JSON object")
    return value


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def _summary(report: Mapping[str, Any]) -> str:
    lines = [f"kbgate eval: {report['dataset']['name']} {report['selection']['key']}"]
    for channel, figures in report["channels"].items():
        cells = "  ".join(f"{m} {figures[m]:.4f}" for m in MEASURES)
        lines.append(f"  {channel:<8} {cells}")
    abstention = report["abstention"]
    off = abstention.get("offtopic")
    lines.append(
        f"  abstained: answerable {abstention['answerable']:.1%}"
        + (f", off-topic {off:.1%}" if off is not None else "")
        + f" (score_threshold {abstention['score_threshold']}, "
        f"keyword_floor {abstention['keyword_floor']}; hybrid nDCG@10 with these floors and "
        f"top_k {abstention['top_k']}: {abstention['nDCG@10']:.4f})"
    )
    lines.append(f"  {report['seconds']:.0f} s")
    return "\n".join(lines)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)  # noqa: T201 — progress goes to stderr


if __name__ == "__main__":
    raise SystemExit(main())
