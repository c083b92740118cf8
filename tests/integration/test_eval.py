"""`kbgate eval` on a tiny BEIR folder made here: real ingest, real turn, real model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.retrieval.off_topic_line import LINE_HIGHEST, LINE_LOWEST
from gateway.safety.redaction import Redactor
from gateway.tools.evaluation.command import main
from gateway.tools.evaluation.dataset import CORPUS_PER_QUERY, load_beir, select, split_queries
from gateway.tools.evaluation.metrics import MEASURES, check_gate, score_run
from ingest.embedder.embedding import FastEmbedder

pytestmark = pytest.mark.slow

_DOCUMENTS = {
    "d1": ("Sourdough starters", "A sourdough starter is a culture of wild yeast and lactic "
           "acid bacteria. Bakers feed it flour and water daily to keep the yeast active."),
    "d2": ("Bread crust browning", "The Maillard reaction between sugars and amino acids "
           "browns the crust of bread at oven temperatures above 150 degrees."),
    "d3": ("Photosynthesis", "Plants convert light energy into chemical energy in "
           "chloroplasts. Chlorophyll absorbs red and blue light and reflects green."),
    "d4": ("Stomata", "Leaves exchange carbon dioxide and oxygen with the air through small "
           "pores called stomata, which close in drought."),
    "d5": ("Black holes", "A black hole forms when a massive star collapses. Nothing, not even "
           "light, escapes from inside its event horizon."),
    "d6": ("Neutron stars", "Neutron stars are the dense remnants of supernova explosions, made "
           "mostly of neutrons packed at nuclear density."),
    "d7": ("Python lists", "Python lists are mutable sequences. Appending to a list is "
           "amortised constant time, inserting at the front is linear."),
    "d8": ("Hash tables", "A hash table maps keys to values through a hash function; lookups "
           "take constant time on average."),
    "d9": ("Marathon training", "Runners preparing for a marathon build weekly mileage slowly "
           "and include one long run each week."),
    "d10": ("Muscle glycogen", "Endurance athletes deplete muscle glycogen during long races; "
            "carbohydrate loading raises the stores beforehand."),
    "d11": ("Volcanoes", "Volcanic eruptions release magma, ash and gases such as sulphur "
            "dioxide from deep inside the Earth."),
    "d12": ("Plate tectonics", "The Earth's lithosphere is divided into plates that move a few "
            "centimetres a year, causing earthquakes at their edges."),
    "d13": ("Coffee roasting", "Roasting coffee beans drives off water and develops aroma "
            "compounds; darker roasts taste more bitter."),
    "d14": ("Tea oxidation", "Black tea leaves are fully oxidised, green tea leaves are heated "
            "early to stop oxidation."),
    "d15": ("Vaccines", "Vaccines train the immune system with harmless antigens so that it "
            "responds quickly to the real pathogen."),
    "d16": ("Antibiotic resistance", "Bacteria become resistant to antibiotics through "
            "mutation and by sharing resistance genes on plasmids."),
}  # fmt: skip
_QUERIES = {
    "q1": "How do bakers keep wild yeast alive in a sourdough culture?",
    "q2": "Why do leaves close their pores when water is scarce?",
    "q3": "What remains after a supernova explosion?",
    "q4": "How fast is a lookup in a hash map?",
    "q5": "How do bacteria become resistant to antibiotics?",
}
# graded: 2 the answer, 1 related, 0 judged not relevant
_QRELS = [
    ("q1", "d1", 2), ("q1", "d2", 1), ("q2", "d4", 2), ("q2", "d14", 0), ("q3", "d6", 2),
    ("q3", "d5", 1), ("q4", "d8", 2), ("q5", "d16", 2), ("q5", "d15", 0),
]  # fmt: skip
_OFFTOPIC = ["Who won the chess world championship in 1972?", "How do I tune a guitar?"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BEIR folder: 16 documents with titles, 5 questions, graded judgments."""
    folder = tmp_path_factory.mktemp("beir")
    with (folder / "corpus.jsonl").open("w") as corpus:
        for doc_id, (title, text) in _DOCUMENTS.items():
            corpus.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w") as queries:
        for qid, text in _QUERIES.items():
            queries.write(json.dumps({"_id": qid, "text": text}) + "\n")
    rows = "".join(f"{q}\t{d}\t{s}\n" for q, d, s in _QRELS)
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return folder


@pytest.fixture(scope="module")
def offtopic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("offtopic") / "offtopic.jsonl"
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in _OFFTOPIC))
    return path


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    """Built once: the eval turns redaction off, but the services hold one."""
    return Redactor.build(ner_models=())


def _eval(
    embedder: FastEmbedder, redactor: Redactor, output: Path, *args: str
) -> tuple[int, dict[str, Any]]:
    status = main(
        [*args, "--output", str(output)], embedder=embedder, redactor=redactor, environ={}
    )
    report = json.loads(output.read_text()) if output.is_file() else {}
    return status, report


def test_metrics_per_channel(
    dataset: Path, offtopic: Path, embedder: FastEmbedder, redactor: Redactor, tmp_path: Path
) -> None:
    """Every document goes in through the real ingest path, every question through the real
    turn per channel; each channel reports nDCG@10, R@10, R@100 and RR@10, and the abstention
    rates of answerable and off-topic questions are measured with the default floors."""
    status, report = _eval(
        embedder, redactor, tmp_path / "report.json",
        "--dataset", str(dataset), "--offtopic", str(offtopic),
    )  # fmt: skip
    assert status == 0
    assert report["ingest"]["indexed"] == len(_DOCUMENTS)
    assert report["selection"] == {
        "key": "subset=all,limit=all", "subset": "all", "limit": None, "seed": 0,
        "queries": 5, "documents": 16,
    }  # fmt: skip
    channels = report["channels"]
    assert set(channels) == {"dense", "keyword", "rrf", "hybrid"}
    assert channels["dense"]["fusion"] == {"dense": 1.0, "keyword": 0.0}
    assert channels["keyword"]["fusion"] == {"dense": 0.0, "keyword": 1.0}
    assert channels["rrf"]["fusion"] == {"dense": 1.0, "keyword": 1.0}
    for figures in channels.values():
        assert all(0.0 <= figures[measure] <= 1.0 for measure in MEASURES)
        assert figures["errors"] == 0
    # the questions are easy: the meaning channel finds every answer in its top 10
    assert channels["dense"]["R@10"] == 1.0
    assert channels["hybrid"]["nDCG@10"] >= 0.8
    abstention = report["abstention"]
    assert abstention["answerable"] == 0.0
    assert 0.0 <= abstention["offtopic"] <= 1.0
    assert abstention["offtopic_questions"] == 2
    # no setting gives the KB a floor: its measured off-topic line is in force
    assert LINE_LOWEST <= abstention["score_threshold"] <= LINE_HIGHEST
    assert report["dataset"]["fingerprint"].startswith("sha256:")


def test_baseline_passes_then_fails_on_a_worsened_setting(
    dataset: Path, embedder: FastEmbedder, redactor: Redactor, tmp_path: Path
) -> None:
    """--write-baseline records the run under its subset key; the same settings pass the
    gate (exit 0), and a deliberately worse setting (keyword channel only, or a cosine floor
    nothing reaches) fails it with exit status 1. A kept --data-dir finds every document
    unchanged on the later runs."""
    data_dir, baseline = tmp_path / "store", tmp_path / "baseline.json"
    common = ["--dataset", str(dataset), "--data-dir", str(data_dir)]
    status, _ = _eval(
        embedder, redactor, tmp_path / "a.json", *common, "--write-baseline", str(baseline)
    )
    assert status == 0
    recorded = json.loads(baseline.read_text())
    assert recorded["tolerance"] == 0.01
    assert "subset=all,limit=all" in recorded["runs"]

    status, report = _eval(
        embedder, redactor, tmp_path / "b.json", *common, "--baseline", str(baseline)
    )
    assert status == 0
    assert report["gate"]["passed"] is True
    assert report["ingest"]["unchanged"] == len(_DOCUMENTS)
    assert report["ingest"]["indexed"] == 0

    for worse in ('{"fusion": {"dense": 0, "keyword": 1}}', '{"score_threshold": 1.0}'):
        status, report = _eval(
            embedder, redactor, tmp_path / "c.json",
            *common, "--baseline", str(baseline), "--kb-settings", worse,
        )  # fmt: skip
        assert status == 1, worse
        assert report["gate"]["passed"] is False
        assert any("hybrid/nDCG@10 dropped" in failure for failure in report["gate"]["failures"])


def test_several_sets_in_one_run_one_table_each_on_its_own_baseline(
    dataset: Path,
    *,
    offtopic: Path,
    embedder: FastEmbedder,
    redactor: Redactor,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Repeated --dataset evaluates every set in one run, each in its own store under
    --data-dir, and prints one table of them all; --write-baseline and --baseline with
    {dataset} record and gate each set on its own file, and a set whose baseline is missing
    fails the gate while the others pass."""
    other = tmp_path / "second-set"
    other.mkdir()
    for name in ("corpus.jsonl", "queries.jsonl"):
        (other / name).write_text((dataset / name).read_text())
    (other / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in _QRELS[:4])
    )
    data_dir, template = tmp_path / "stores", tmp_path / "baseline-{dataset}.json"
    common = ["--dataset", str(dataset), "--dataset", str(other), "--data-dir", str(data_dir),
              "--offtopic", str(offtopic)]  # fmt: skip
    status, report = _eval(
        embedder, redactor, tmp_path / "a.json", *common, "--write-baseline", str(template)
    )
    assert status == 0
    names = [one["dataset"]["name"] for one in report["sets"]]
    assert names == [dataset.name, "second-set"]
    assert report["sets"][1]["selection"]["queries"] == 2
    assert {path.name for path in data_dir.iterdir()} == set(names)
    table = capsys.readouterr().err.split("abstention with the floors in force\n")[-1]
    assert [line.split()[0] for line in table.splitlines()[1:]] == names
    for name in names:
        assert json.loads((tmp_path / f"baseline-{name}.json").read_text())["runs"]

    status, report = _eval(
        embedder, redactor, tmp_path / "b.json", *common, "--baseline", str(template)
    )
    assert status == 0
    assert [one["gate"]["passed"] for one in report["sets"]] == [True, True]
    assert report["sets"][0]["ingest"]["unchanged"] == len(_DOCUMENTS)

    (tmp_path / "baseline-second-set.json").unlink()
    only_first = tmp_path / f"baseline-{dataset.name}.json"
    status, report = _eval(
        embedder, redactor, tmp_path / "c.json", *common, "--baseline", str(only_first)
    )
    assert status == 1
    assert [one["gate"]["passed"] for one in report["sets"]] == [True, False]


def test_limit_subset_is_deterministic(
    dataset: Path, embedder: FastEmbedder, redactor: Redactor, tmp_path: Path
) -> None:
    """--limit N --seed S keeps N judged questions and a corpus of all their judged documents
    plus a seeded sample of others (4 x N in all); the same seed gives the same subset, run
    after run, and the report files it under its own baseline key."""
    beir = load_beir(dataset)
    first = select(beir, subset="all", limit=2, seed=7)
    again = select(beir, subset="all", limit=2, seed=7)
    assert first == again
    assert len(first.query_ids) == 2
    judged = {doc for qid in first.query_ids for doc in beir.qrels[qid]}
    assert judged <= set(first.document_ids)
    assert len(first.document_ids) == max(len(judged), CORPUS_PER_QUERY * 2)
    others = {select(beir, subset="all", limit=2, seed=seed).query_ids[0] for seed in range(8)}
    assert len(others) > 1, "the seed must choose the subset"

    runs = [
        _eval(
            embedder, redactor, tmp_path / f"{n}.json",
            "--dataset", str(dataset), "--limit", "2", "--seed", "7",
        )[1]
        for n in range(2)
    ]  # fmt: skip
    assert runs[0]["selection"]["key"] == "subset=all,limit=2,seed=7"
    assert runs[0]["selection"]["documents"] == len(first.document_ids)
    assert runs[0]["channels"] == {
        channel: {**figures, "seconds": runs[0]["channels"][channel]["seconds"]}
        for channel, figures in runs[1]["channels"].items()
    }


def test_tune_and_heldout_halves_split_the_questions(dataset: Path) -> None:
    """The tune and held-out halves are disjoint, cover every judged question, and do not
    depend on --seed."""
    beir = load_beir(dataset)
    every = beir.judged_queries()
    tune, heldout = split_queries(every, "tune"), split_queries(every, "heldout")
    assert not set(tune) & set(heldout)
    assert sorted(tune + heldout) == sorted(every)
    assert abs(len(tune) - len(heldout)) <= 1
    assert select(beir, subset="tune", limit=None, seed=1).query_ids == tune


def test_scores_come_from_ir_measures() -> None:
    """A perfect ranking scores 1 on every measure, an empty answer 0, and a question with
    no answer still counts in the mean (graded judgments, 0 is not relevant)."""
    qrels = {"a": {"x": 2, "y": 1, "z": 0}, "b": {"w": 1}}
    perfect = score_run({"a": ["x", "y"], "b": ["w"]}, qrels)
    assert perfect == dict.fromkeys(MEASURES, 1.0)
    half = score_run({"a": ["x", "y"], "b": []}, qrels)
    assert half == dict.fromkeys(MEASURES, 0.5)
    swapped = score_run({"a": ["y", "x"]}, qrels)
    assert swapped["RR@10"] == 1.0
    assert swapped["nDCG@10"] < 1.0


def _report(
    hybrid: float, dense: float, keyword: float, recall: float = 0.9, rrf: float = 0.0
) -> dict[str, Any]:
    def figures(ndcg: float) -> dict[str, float]:
        return {"nDCG@10": ndcg, "R@10": 0.5, "R@100": recall, "RR@10": 0.5}

    return {
        "selection": {"key": "subset=all,limit=all"},
        "dataset": {"fingerprint": "sha256:x"},
        "channels": {
            "hybrid": figures(hybrid),
            "dense": figures(dense),
            "keyword": figures(keyword),
            "rrf": figures(rrf),
        },
    }


def test_gate_rules() -> None:
    """The gate fails on a gated drop beyond the tolerance, on hybrid falling below a single
    channel or plain rank fusion beyond it, on a changed dataset and on a missing entry; a
    drop within the tolerance passes."""
    entry = _report(0.75, 0.70, 0.72)
    baseline = {
        "tolerance": 0.01,
        "gated": ["hybrid/nDCG@10", "hybrid/R@100"],
        "runs": {"subset=all,limit=all": {"fingerprint": "sha256:x", **entry}},
    }
    assert check_gate(_report(0.745, 0.70, 0.72), baseline).passed
    assert not check_gate(_report(0.73, 0.70, 0.72), baseline).passed
    assert not check_gate(_report(0.75, 0.70, 0.72, recall=0.85), baseline).passed
    assert not check_gate(_report(0.75, 0.70, 0.77), baseline).passed
    assert not check_gate(_report(0.75, 0.70, 0.72, rrf=0.77), baseline).passed
    assert check_gate(_report(0.75, 0.70, 0.72, rrf=0.755), baseline).passed
    changed = _report(0.75, 0.70, 0.72)
    changed["dataset"]["fingerprint"] = "sha256:y"
    assert not check_gate(changed, baseline).passed
    missing = _report(0.75, 0.70, 0.72)
    missing["selection"]["key"] = "subset=tune,limit=all"
    assert not check_gate(missing, baseline).passed
