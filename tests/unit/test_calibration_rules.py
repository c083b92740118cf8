"""The pure parts of calibration: ranking measures, golden set files, and the choice of
floors, fusion weights and grounding floor from measurements."""

from __future__ import annotations

import random

import ir_measures
import pytest

from gateway.calibration.golden_file import GoldenFileError, golden_set_body
from gateway.calibration.metrics import ndcg_at, recall_at
from gateway.calibration.recommend import (
    GroundingScores,
    abstention,
    cautions,
    choose_floors,
    choose_fusion,
    choose_grounding_floor,
    curves,
    floor_axes,
)
from gateway.calibration.report import FusionFigures, Weights
from settings.config import Bounds

AXES = floor_axes(Bounds())
HYBRID = Weights(dense=1.0, keyword=1.0)
CURRENT = {"score_threshold": 0.35, "keyword_floor": 0.9}


def test_ndcg_and_recall_equal_ir_measures_on_random_runs() -> None:
    """nDCG@10, R@10 and R@100 of 200 seeded random rankings with graded judgments equal
    ir-measures' (trec_eval's) to 6 places, unjudged and repeated documents included."""
    rng = random.Random(7)
    measures = [ir_measures.parse_measure(m) for m in ("nDCG@10", "R@10", "R@100")]
    for number in range(200):
        pool = [f"d{n}" for n in range(40)]
        grades = {doc: rng.choice([1, 2, 3]) for doc in rng.sample(pool, rng.randint(1, 6))}
        ranking = [rng.choice(pool) for _ in range(rng.randint(0, 120))]
        distinct = list(dict.fromkeys(ranking))
        scores = {doc: float(len(distinct) - rank) for rank, doc in enumerate(distinct)}
        qid = f"q{number}"
        found = ir_measures.calc_aggregate(measures, {qid: grades}, {qid: scores or {"none": 0.0}})
        assert ndcg_at(ranking, grades, 10) == pytest.approx(found[measures[0]], abs=1e-6)
        assert recall_at(ranking, grades, 10) == pytest.approx(found[measures[1]], abs=1e-6)
        assert recall_at(ranking, grades, 100) == pytest.approx(found[measures[2]], abs=1e-6)


def test_a_golden_set_file_reads_as_json_lines_or_csv() -> None:
    """JSON lines and CSV give the same body: questions with ids (and grades) and, from
    lines without ids, off-topic questions."""
    lines = (
        '{"question": "Q1?", "document_ids": ["a", "b/c"], "grades": [1, 3]}\n'
        "\n"
        '{"question": "Off?"}\n'
        '{"question": "Q2?", "document_ids": ["d"]}\n'
    )
    table = "question,document_ids,grades\nQ1?,a;b/c,1;3\nOff?,,\nQ2?,d,\n"
    expected = {
        "questions": [
            {"question": "Q1?", "document_ids": ["a", "b/c"], "grades": [1, 3]},
            {"question": "Q2?", "document_ids": ["d"]},
        ],
        "off_topic": ["Off?"],
    }
    assert golden_set_body(lines) == expected
    assert golden_set_body("\ufeff" + table) == expected
    for broken in (
        "",
        "{not json\n",
        "[1]\n",
        "question,ids\nQ?,a\n",
        "question,document_ids,grades\nQ,a,x\n",
    ):
        with pytest.raises(GoldenFileError):
            golden_set_body(broken)


def test_floors_keep_answerable_questions_and_cut_off_topic_ones() -> None:
    """Dense critical floors 0.6-0.8 for answerable questions and 0.2-0.3 for off-topic ones
    (no keyword hits): the dense floor lands between them, the keyword floor stays; the
    prediction abstains on every off-topic question and no answerable one."""
    answerable = [{"score_threshold": v, "keyword_floor": None} for v in (0.6, 0.7, 0.8)]
    off_topic = [{"score_threshold": v, "keyword_floor": None} for v in (0.2, 0.3)]
    chosen = choose_floors(answerable, off_topic, AXES, HYBRID, CURRENT)
    assert 0.3 < chosen.floors["score_threshold"] <= 0.6
    assert chosen.floors["keyword_floor"] == 0.0
    assert (chosen.answerable, chosen.off_topic) == (0.0, 1.0)
    assert abstention(off_topic, chosen.floors, HYBRID, AXES) == 1.0
    assert abstention(answerable, CURRENT, HYBRID, AXES) == 0.0


def test_floors_weigh_both_channels_and_the_five_percent_allowance() -> None:
    """A question abstains only when both channels do; one answerable question in twenty may
    abstain (5%) when that cuts more off-topic ones, never two."""
    answerable = [{"score_threshold": 0.5 + n / 100, "keyword_floor": 0.8} for n in range(19)]
    answerable.append({"score_threshold": 0.25, "keyword_floor": 0.2})
    off_topic = [{"score_threshold": 0.3, "keyword_floor": 0.3} for _ in range(10)]
    chosen = choose_floors(answerable, off_topic, AXES, HYBRID, CURRENT)
    assert chosen.answerable == 0.05
    assert chosen.off_topic == 1.0
    assert abstention(answerable, chosen.floors, HYBRID, AXES) == 0.05
    keyword_only = Weights(dense=0.0, keyword=1.0)
    alone = choose_floors(answerable, off_topic, AXES, keyword_only, CURRENT)
    assert alone.floors["score_threshold"] == CURRENT["score_threshold"]
    assert 0.3 < alone.floors["keyword_floor"] <= 0.8
    lines = curves(answerable, off_topic, AXES, HYBRID, chosen.floors)
    assert set(lines) == {"score_threshold", "keyword_floor"}
    assert lines["score_threshold"][0].answerable == 0.0


def test_fusion_weights_change_only_past_the_margin() -> None:
    """Other weights are recommended only when their nDCG@10 beats the current by 0.01."""

    def figures(dense: float, ndcg: float) -> FusionFigures:
        return FusionFigures(
            weights=Weights(dense=dense, keyword=1.0), ndcg_10=ndcg, recall_10=1, recall_100=1
        )

    current = figures(1.0, 0.70)
    assert choose_fusion(current, [figures(0.5, 0.705)]) is None
    assert choose_fusion(current, [figures(0.5, 0.72), figures(0.25, 0.71)]) == Weights(
        dense=0.5, keyword=1.0
    )


def test_grounding_floor_separates_supported_from_unsupported_answers() -> None:
    """The floor lies in the gap between the weakest supported answer and the strongest
    unsupported one (the middle of the best run); without answers of both kinds the
    current floor stays."""
    scores = GroundingScores(supported=[0.5, 0.55, 0.6], other_domain=[0.1, 0.2], mixed=[0.3])
    floor = choose_grounding_floor(scores, 0.7)
    assert 0.3 < floor <= 0.5
    assert floor == pytest.approx(0.4, abs=0.011)
    assert choose_grounding_floor(GroundingScores([0.5], [], []), 0.7) == 0.7


def test_cautions_name_what_the_floors_give_up_beyond_the_golden_set() -> None:
    """A keyword floor of 0.9 or more is named (keyword hits then hardly ever answer alone),
    and so is a golden set of fewer than 50 off-topic questions; neither otherwise."""
    assert cautions({"score_threshold": 0.3, "keyword_floor": 0.5}, off_topic_questions=50) == []
    high = cautions({"score_threshold": 0.3, "keyword_floor": 1.0}, off_topic_questions=50)
    assert len(high) == 1
    assert high[0].startswith("keyword_floor 1: a keyword hit will hardly ever answer")
    few = cautions({"score_threshold": 0.3, "keyword_floor": 0.9}, off_topic_questions=12)
    assert len(few) == 2
    assert few[1].startswith("12 off-topic questions")
