"""The questions' integer model against the packaged one: fidelity and cost, side by side.

Both ONNX files come from one assembled model folder (`ingest.embedding.assemble_minilm`):
`model.onnx` as packaged (int8 weights, fp32 arithmetic; passages use it) and
`model_questions.onnx`, its re-quantization for onnxruntime's integer kernels (questions
use it). Each gets a single-thread session with the CPU arena off, as the gateway's
question session has. Over the golden set's questions this reports:

- fidelity: the cosine between a question's two vectors (mean-pooled, unit length);
- cost: CPU per question with one question per run, the two models alternated in blocks
  of 25 questions so the machine's drift hits both alike (medians over blocks);
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

from ingest.embedding import MAX_TOKENS, MINILM_QUESTION_FILE, assemble_minilm

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


def measure(folder: Path, questions: Sequence[str]) -> dict[str, Any]:
    packaged = _Model(folder, "model.onnx")
    integer = _Model(folder, MINILM_QUESTION_FILE)
    cosines = [float(packaged.embed([q])[0] @ integer.embed([q])[0]) for q in questions]
    blocks = [questions[i : i + BLOCK] for i in range(0, len(questions), BLOCK)]
    packaged_ms, integer_ms = [], []
    for block in blocks:
        packaged_ms.append(_cpu_ms_per_text(packaged, block, 1))
        integer_ms.append(_cpu_ms_per_text(integer, block, 1))
    batched = {
        str(size): round(
            statistics.median(_cpu_ms_per_text(integer, block, size) for block in blocks), 2
        )
        for size in BATCH_SIZES
    }
    packaged_median = statistics.median(packaged_ms)
    integer_median = statistics.median(integer_ms)
    return {
        "questions": len(questions),
        "cosine_integer_to_packaged": _quantiles(cosines),
        "cpu_ms_per_question": {
            "packaged": round(packaged_median, 2),
            "integer": round(integer_median, 2),
            "ratio": round(integer_median / packaged_median, 2),
        },
        "integer_cpu_ms_per_question_by_batch_size": batched,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--model-dir", type=Path, help="reuse an assembled model dir")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with (args.dataset / "queries.jsonl").open(encoding="utf-8") as lines:
        questions = [json.loads(line)["text"] for line in lines if line.strip()]
    with tempfile.TemporaryDirectory() as scratch:
        folder = assemble_minilm(args.model_dir or Path(scratch))
        report = measure(folder, questions)
    report["command"] = "uv run python -m bench.question_model"
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
