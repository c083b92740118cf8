"""One evaluation run: an embedded gateway provisioned for the golden set, the corpus
ingested through the real ingest path, every question through the real turn per channel,
and the abstention rates with the floors in force."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from gateway.access.auth import Principal
from gateway.errors import ConflictError, InvalidInputError
from gateway.tools.evaluation.dataset import (
    BeirDataset,
    EvalError,
    Selection,
    Subset,
    document_key,
    json_lines,
    load_beir,
    select,
)
from gateway.tools.evaluation.metrics import ir_measures_library, score_run
from ingest.chunking import ChunkingParams
from ingest.payload import Classification
from settings.config import Config, FusionMethod, load_config
from settings.records import Role

if TYPE_CHECKING:
    from gateway.admin.knowledge import Documents, Knowledge
    from gateway.admin.workspace import WorkspaceSettings
    from gateway.retrieval.plan import Planning
    from gateway.retrieval.turn import Retrieval
    from gateway.safety.redaction import Redactor
    from ingest.embedder.embedding import Embedder, Embedding
    from ingest.index import Index, SparseVector

Progress = Callable[[str], None]

#: The channels, each a per-KB fusion setting (None: the hybrid under test).
CHANNELS: dict[str, dict[str, float] | None] = {
    "dense": {"dense": 1.0, "keyword": 0.0},
    "keyword": {"dense": 0.0, "keyword": 1.0},
    "rrf": {"dense": 1.0, "keyword": 1.0},
    "hybrid": None,
}
#: Channels fused by plain Reciprocal Rank Fusion (k = 60) whatever the platform's method:
#: the reference a fusion has to beat.
RANK_FUSED = frozenset({"rrf"})
#: Documents each ranking run asks for (recall@100 needs 100).
RANKING_DEPTH = 100
#: Passages per leg in ranking runs: deep enough that a single channel's leg still holds
#: 100 distinct documents when documents have several passages.
EVAL_LEG_LIMIT = 300
PROGRESS_QUERIES = 50
PROGRESS_DOCUMENTS = 500
INGEST_CONCURRENCY = 4

_ORG = "eval"
_TENANT = "eval-workspace"
_AGENT = "eval-agent"


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

    def embed_documents(
        self, texts: Sequence[str], *, lane: str = "", inline: bool = False
    ) -> list[Embedding]:
        return self._inner.embed_documents(texts, lane=lane, inline=inline)

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


async def provision(workspaces: WorkspaceSettings, index: Index) -> Principal:
    """The eval's org and workspace (kept when they exist), redaction off at both gates.

    Redaction rewrites passage text but never which documents are returned; it is off so a
    run spends its time on retrieval.
    """
    from gateway.admin.provisioning import create_org, create_workspace
    from gateway.admin.workspace import change_settings

    principal = _principal()
    with suppress(ConflictError):  # both exist in a kept --data-dir
        await create_org(workspaces.store, index, _ORG)
    with suppress(ConflictError):
        await create_workspace(workspaces.store, _ORG, _TENANT, None)
    await change_settings(workspaces, principal, {"rag_pii_redaction": False})
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
    """What every step of a run shares: the use cases it runs, the index (optimized after
    ingest), the caller, the KB under test."""

    knowledge: Knowledge
    documents: Documents
    planning: Planning
    retrieval: Retrieval
    index: Index
    principal: Principal
    kb_id: str
    progress: Progress
    #: kbgate document id -> the dataset's, where they differ
    beir_ids: Mapping[str, str] = field(default_factory=dict)


async def ingest_corpus(
    session: EvalSession, dataset: BeirDataset, document_ids: Sequence[str]
) -> IngestSummary:
    """Put every selected document through `knowledge.put_document` (unchanged ones are cheap)."""
    from gateway.admin.knowledge import put_document

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
                    session.documents,
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
    *,
    fusion_method: FusionMethod | None = None,
) -> ChannelRun:
    """Set the KB's settings, then ask every question through the real turn, one at a time
    (fused by `fusion_method` instead of the platform's, when given)."""
    from gateway.admin.knowledge import put_knowledge_base
    from gateway.retrieval.plan import settle_lines
    from gateway.retrieval.turn import retrieve

    retrieval, principal = session.retrieval, session.principal
    if fusion_method is not None:
        config = msgspec.structs.replace(retrieval.config, fusion_method=fusion_method)
        retrieval = dataclasses.replace(retrieval, config=config)
    await put_knowledge_base(
        session.knowledge, principal, session.kb_id, name=session.kb_id, storage="org",
        settings=dict(kb_settings),
    )  # fmt: skip
    # the KB's off-topic line in force from the first counted turn, as on a gateway
    # serving a while (a no-op where the settings give `score_threshold`)
    await settle_lines(session.planning, principal, _AGENT)
    ranking: dict[str, list[str]] = {}
    abstained = errors = 0
    effective: dict[str, Any] = {}
    started = time.perf_counter()
    for number, (qid, question) in enumerate(questions.items(), start=1):
        try:
            result = await retrieve(retrieval, principal, _AGENT, question, [])
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
    from gateway.admin.knowledge import put_agent, put_knowledge_base
    from gateway.runtime.data_dir import DataDirInUseError, hold_data_dir
    from gateway.runtime.services import build_embedder, build_services
    from gateway.telemetry import Telemetry, build_logger

    ir_measures_library()  # fail before the long part, not after
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
        embedder = await asyncio.to_thread(build_embedder, config)
        stack.callback(_close_embedder, embedder)
    services = await build_services(
        config,
        Telemetry(build_logger("WARNING", sys.stderr)),
        embedder=_QueryMemo(embedder),
        redactor=redactor,
    )
    stack.push_async_callback(services.close)
    principal = await provision(services.workspaces, services.index)
    kb_id = _kb_id(dataset, selection, config)
    knowledge = services.knowledge
    # The KB exists before documents go in; each run of questions sets its settings.
    await put_knowledge_base(knowledge, principal, kb_id, name=kb_id, storage="org", settings={})
    await put_agent(knowledge, principal, _AGENT, [kb_id], {"pii_redaction": False})
    session = EvalSession(
        knowledge,
        services.documents,
        services.planning,
        services.retrieval,
        services.index,
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
    changed = await session.index.optimize()
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
    offtopic_file = own_offtopic(options.dataset) or options.offtopic
    offtopic = _offtopic_questions(offtopic_file) if offtopic_file else {}
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
            method = FusionMethod.RRF if channel in RANK_FUSED else None
            answers = await run_questions(
                session, settings, questions, channel, fusion_method=method
            )
            figures: dict[str, Any] = dict(score_run(answers.ranking, dataset.qrels))
            figures["fusion"] = answers.kb_effective(session.kb_id).get("fusion")
            figures["seconds"] = round(answers.seconds, 1)
            figures["errors"] = answers.errors
            channels[channel] = figures
        abstention = await _abstention(
            session, options.kb_settings, questions, offtopic, dataset.qrels
        )
        if offtopic_file:
            abstention["offtopic_file"] = str(offtopic_file)
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


async def evaluate_all(
    options: Sequence[EvalOptions],
    *,
    environ: Mapping[str, str],
    embedder: Embedder | None = None,
    redactor: Redactor | None = None,
    progress: Progress,
) -> list[dict[str, Any]]:
    """`evaluate` each golden set in turn, with one embedder (loaded once) for all."""
    async with AsyncExitStack() as stack:
        if embedder is None and len(options) > 1:
            from gateway.runtime.services import build_embedder

            models = options[0].data_dir or Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="kbgate-eval-"))
            )
            embedder = await asyncio.to_thread(build_embedder, eval_config(environ, models))
            stack.callback(_close_embedder, embedder)
        return [
            await evaluate(
                one,
                environ=environ,
                embedder=embedder,
                redactor=redactor,
                progress=progress,
            )
            for one in options
        ]


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
        "joint_line": plan.get("joint_line"),
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


#: A golden set's own off-topic questions, beside its corpus (used instead of `--offtopic`).
OWN_OFFTOPIC = "offtopic.jsonl"


def own_offtopic(dataset: Path) -> Path | None:
    """The set's own off-topic questions file, if its folder holds one."""
    path = dataset / OWN_OFFTOPIC
    return path if path.is_file() else None


def _offtopic_questions(path: Path) -> dict[str, str]:
    """Questions from another domain: JSON lines with `text` (and optionally `_id`)."""
    if not path.is_file():
        raise EvalError(f"no off-topic questions file at {path}")
    questions: dict[str, str] = {}
    for number, row in json_lines(path, path.read_text("utf-8")):
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
