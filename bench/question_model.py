"""The questions' integer model against the packaged one: fidelity and cost, side by side.

Both ONNX files come from one assembled model folder (`ingest.embedder.embedding.assemble_minilm`):
`model.onnx` as packaged (int8 weights, fp32 arithmetic; passages use it) and
`model_questions.onnx`, its re-quantization for onnxruntime's integer kernels (questions
use it). Each gets a single-thread session with the CPU arena off, as the gateway's
question session has. Over the golden set's questions, and over the passages of its first
documents (chunked as ingest chunks them: what the integer model would cost passages),
this reports:

- fidelity: the cosine between a text's two vectors (mean-pooled, unit length);
- cost: CPU per text with one text per run, the two models alternated in blocks of 25
  texts so the machine's drift hits both alike (medians over blocks);
- batching: CPU per question on the integer model in batches of 1, 4 and 8 (padding).

    uv run python -m bench.question_model [--dataset ../shared/datasets/scifact]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.beir_corpus import load_corpus
from ingest.chunking import chunk_text
from ingest.embedder.embedding import MAX_TOKENS, MINILM_QUESTION_FILE, assemble_minilm

RESULTS = Path(__file__).parent / "results" / "question_model.json"
BLOCK = 25
BATCH_SIZES = (1, 4, 8)


def _session(path: Path) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = False
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class _Model:
    """One ONNX session with the folder's tokenizer: texts in, unit vectors out."""

    def __init__(self, folder: Path, file_name: str) -> None:
        from tokenizers import Tokenizer

        self._session = _session(folder / file_name)
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        encoded = self._tokenizer.encode_batch(list(texts))
        ids = np.array([item.ids for item in encoded], dtype=np.int64)
        mask = np.array([item.attention_mask for item in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        tokens = self._session.run(None, feeds)[0]
        pooled = (tokens * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        unit: npt.NDArray[np.float32] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return unit


def _cpu_ms_per_text(model: _Model, texts: Sequence[str], batch_size: int) -> float:
    started = time.process_time()
    for start in range(0, len(texts), batch_size):
        model.embed(texts[start : start + batch_size])
    return (time.process_time() - started) * 1000 / len(texts)


def _quantiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "min": round(ordered[0], 4),
        "p5": round(ordered[len(ordered) // 20], 4),
        "median": round(statistics.median(ordered), 4),
    }


def _side_by_side(packaged: _Model, integer: _Model, texts: Sequence[str]) -> dict[str, Any]:
    """Fidelity and CPU per text, one text per run, the two models alternated in blocks."""
    cosines = [float(packaged.embed([text])[0] @ integer.embed([text])[0]) for text in texts]
    blocks = [texts[i : i + BLOCK] for i in range(0, len(texts), BLOCK)]
    packaged_ms, integer_ms = [], []
    for block in blocks:
        packaged_ms.append(_cpu_ms_per_text(packaged, block, 1))
        integer_ms.append(_cpu_ms_per_text(integer, block, 1))
    packaged_median = statistics.median(packaged_ms)
    integer_median = statistics.median(integer_ms)
    return {
        "texts": len(texts),
        "cosine_integer_to_packaged": _quantiles(cosines),
        "cpu_ms_per_text": {
            "packaged": round(packaged_median, 2),
            "integer": round(integer_median, 2),
            "ratio": round(integer_median / packaged_median, 2),
        },
    }


def measure(folder: Path, questions: Sequence[str], passages: Sequence[str]) -> dict[str, Any]:
    packaged = _Model(folder, "model.onnx")
    integer = _Model(folder, MINILM_QUESTION_FILE)
    blocks = [questions[i : i + BLOCK] for i in range(0, len(questions), BLOCK)]
    batched = {
        str(size): round(
            statistics.median(_cpu_ms_per_text(integer, block, size) for block in blocks), 2
        )
        for size in BATCH_SIZES
    }
    return {
        "questions": _side_by_side(packaged, integer, questions),
        "passages": _side_by_side(packaged, integer, passages),
        "integer_cpu_ms_per_question_by_batch_size": batched,
    }


def _passages(corpus: Path, count: int) -> list[str]:
    """The first `count` passages of the corpus's documents, as ingest chunks them (each
    document gives at least one, so `count` documents are enough)."""
    documents = load_corpus(corpus, count)
    return [passage for document in documents for passage in chunk_text(document.text)][:count]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--model-dir", type=Path, help="reuse an assembled model dir")
    parser.add_argument("--passages", type=int, default=300)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with (args.dataset / "queries.jsonl").open(encoding="utf-8") as lines:
        questions = [json.loads(line)["text"] for line in lines if line.strip()]
    with tempfile.TemporaryDirectory() as scratch:
        folder = assemble_minilm(args.model_dir or Path(scratch))
        passages = _passages(args.dataset / "corpus.jsonl", args.passages)
        report = measure(folder, questions, passages)
    report["command"] = "uv run python -m bench.question_model"
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
