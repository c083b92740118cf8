"""From measurements to recommended KB settings: floors, fusion weights, grounding floor.

The one module that knows which KB settings are floors (`floor_axes`): each is a KB
setting that a turn applies to one channel's legs, the channel's fusion weights, and the
range of values the setting takes. Measurements never read raw scores against these
values: each question's critical floor (the highest value of the setting at which its
channel still returns a passage) is found by running the turn with the value written
into the KB's settings (`gateway.calibration.measure`), so whatever scale a floor is on,
the values recommended here are on the same one.

A turn abstains when every channel it runs abstains, and a channel abstains when its
floor is above the question's critical floor. The recommended floors keep the answerable
questions' abstention within `ANSWERABLE_ABSTENTION_MAX` while abstaining on the most
off-topic questions (ties: the lower floors). Fusion weights are recommended when their
hybrid nDCG@10 beats the KB's current weights by `FUSION_MARGIN`. The grounding floor is
the one that best separates supported from unsupported answers (Youden's J). `cautions`
names, in plain words, what a recommendation gives up beyond its golden set.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gateway.calibration.report import (
    ANSWERABLE_ABSTENTION_MAX,
    CurvePoint,
    FusionFigures,
    GroundingFlags,
    Weights,
)
from settings.config import Bounds

#: a question's critical floor per floor setting (None: that channel never answers it)
Criticals = Mapping[str, float | None]

#: hybrid nDCG@10 other fusion weights must gain before they are recommended
FUSION_MARGIN = 0.01
#: the channel weights an evaluation tries besides the KB's own
FUSION_CANDIDATES: tuple[Weights, ...] = (
    Weights(dense=1.0, keyword=0.25),
    Weights(dense=1.0, keyword=0.5),
    Weights(dense=1.0, keyword=1.0),
    Weights(dense=0.5, keyword=1.0),
    Weights(dense=0.25, keyword=1.0),
)
#: a recommended `keyword_floor` at or above which a keyword hit hardly ever answers alone
KEYWORD_FLOOR_CAUTION = 0.9
#: off-topic questions under which floors are placed with little margin
FEW_OFF_TOPIC = 50
#: candidate values per floor beyond which candidates are thinned out evenly
_MAX_CANDIDATES = 120
_CURVE_POINTS = 41
_GROUNDING_STEP = 0.01


@dataclass(frozen=True, slots=True)
class FloorAxis:
    """A KB setting that floors one channel's legs."""

    setting: str
    #: fusion weights that leave only this channel running
    channel: Weights
    #: the fusion weight that switches the channel on
    weight: str
    lower: float
    #: None: no upper bound
    upper: float | None
    decimals: int


def floor_axes(bounds: Bounds) -> tuple[FloorAxis, ...]:
    """The floors a turn applies: the dense leg's and the keyword legs'."""
    return (
        FloorAxis(
            setting="score_threshold",
            channel=Weights(dense=1.0, keyword=0.0),
            weight="dense",
            lower=bounds.score_threshold_min,
            upper=bounds.score_threshold_max,
            decimals=4,
        ),
        FloorAxis(
            setting="keyword_floor",
            channel=Weights(dense=0.0, keyword=1.0),
            weight="keyword",
            lower=0.0,
            upper=1.0,  # a share of the question's attainable BM25 score
            decimals=3,
        ),
    )


def lowest_floors(axes: Sequence[FloorAxis]) -> dict[str, float]:
    """KB settings with every floor at its lowest: nothing is cut."""
    return {axis.setting: axis.lower for axis in axes}


def _weight(weights: Weights, name: str) -> float:
    return float(getattr(weights, name))


# ---- abstention as the measurements predict it ---------------------------------------


def _abstains(
    criticals: Sequence[Criticals], axis: FloorAxis, values: Sequence[float]
) -> np.ndarray:
    """questions x values: whether the axis's channel abstains at each value."""
    found = np.array(
        [np.nan if c.get(axis.setting) is None else c[axis.setting] for c in criticals],
        dtype=float,
    )
    grid = np.asarray(values, dtype=float)
    below = found[:, None] < grid[None, :]
    return np.where(np.isnan(found)[:, None], True, below)


def _joint_rates(
    criticals: Sequence[Criticals], grids: Sequence[tuple[FloorAxis, Sequence[float]]]
) -> np.ndarray:
    """The share of questions abstaining at every combination of the grids' values (one
    array dimension per grid): a question abstains when every channel does."""
    if not criticals:
        return np.zeros([len(values) for _, values in grids])
    parts = [_abstains(criticals, axis, values).astype(float) for axis, values in grids]
    letters = string.ascii_lowercase[: len(parts)]
    spec = ",".join(f"z{letter}" for letter in letters) + "->" + letters
    return np.asarray(np.einsum(spec, *parts) / len(criticals))


def abstention(
    criticals: Sequence[Criticals],
    floors: Mapping[str, float],
    weights: Weights,
    axes: Sequence[FloorAxis],
) -> float:
    """The share of questions whose turn abstains with these floors and weights."""
    running = [axis for axis in axes if _weight(weights, axis.weight) > 0]
    if not criticals:
        return 0.0
    if not running:
        return 1.0
    rates = _joint_rates(criticals, [(axis, [floors[axis.setting]]) for axis in running])
    return round(float(rates.reshape(-1)[0]), 4)


# ---- floors ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FloorChoice:
    floors: dict[str, float]
    answerable: float
    off_topic: float


def _candidates(axis: FloorAxis, criticals: Sequence[Criticals]) -> list[float]:
    """The lowest value, a value between each two neighbouring critical floors, and one
    above the highest: every distinct outcome the axis can have on these questions."""
    seen = sorted(set(_seen(axis, criticals)))
    values = [axis.lower]
    values += [_between(low, high) for low, high in itertools.pairwise(seen)]
    if seen:
        above = seen[-1] + max(abs(seen[-1]) * 0.01, 10.0**-axis.decimals)
        values.append(round(above, axis.decimals))
    if axis.upper is not None:
        values = [min(max(v, axis.lower), axis.upper) for v in values]
    values = sorted(set(values))
    if len(values) > _MAX_CANDIDATES:
        step = (len(values) - 1) / (_MAX_CANDIDATES - 1)
        values = [values[round(i * step)] for i in range(_MAX_CANDIDATES)]
    return values


def _seen(axis: FloorAxis, criticals: Sequence[Criticals]) -> list[float]:
    """The questions' critical floors on this axis (those its channel answers at all)."""
    return [value for c in criticals if (value := c.get(axis.setting)) is not None]


def _between(low: float, high: float) -> float:
    """The shortest decimal strictly above `low` and at most `high`, near their middle:
    a floor there cuts a question whose critical floor is `low`, not one at `high`."""
    middle = (low + high) / 2
    for places in range(1, 9):
        rounded = round(middle, places)
        if low < rounded <= high:
            return rounded
    return middle


def choose_floors(
    answerable: Sequence[Criticals],
    off_topic: Sequence[Criticals],
    axes: Sequence[FloorAxis],
    weights: Weights,
    current: Mapping[str, float],
) -> FloorChoice:
    """The floors that keep answerable abstention within the target while abstaining on
    the most off-topic questions; floors of channels the weights switch off stay as they
    are. When no floors meet the target, those with the least answerable abstention."""
    running = [axis for axis in axes if _weight(weights, axis.weight) > 0]
    floors = {axis.setting: current[axis.setting] for axis in axes}
    if not running:
        return FloorChoice(floors, 1.0, 1.0)
    everyone = [*answerable, *off_topic]
    grids = [(axis, _candidates(axis, everyone)) for axis in running]
    kept = _joint_rates(answerable, grids)
    cut = _joint_rates(off_topic, grids)
    ranks = sum(np.indices(kept.shape)[n] / max(1, kept.shape[n] - 1) for n in range(kept.ndim))
    feasible = kept <= ANSWERABLE_ABSTENTION_MAX + 1e-9
    if feasible.any():
        order = np.lexsort((ranks[feasible], kept[feasible], -cut[feasible]))
        best = tuple(index[order[0]] for index in np.nonzero(feasible))
    else:
        order = np.lexsort((ranks.reshape(-1), -cut.reshape(-1), kept.reshape(-1)))
        best = np.unravel_index(order[0], kept.shape)
    for (axis, values), position in zip(grids, best, strict=True):
        floors[axis.setting] = float(values[int(position)])
    return FloorChoice(floors, round(float(kept[best]), 4), round(float(cut[best]), 4))


def curves(
    answerable: Sequence[Criticals],
    off_topic: Sequence[Criticals],
    axes: Sequence[FloorAxis],
    weights: Weights,
    floors: Mapping[str, float],
) -> dict[str, list[CurvePoint]]:
    """Per running floor: abstention of both sets against it, the others at `floors`."""
    found: dict[str, list[CurvePoint]] = {}
    running = [axis for axis in axes if _weight(weights, axis.weight) > 0]
    everyone = [*answerable, *off_topic]
    for axis in running:
        values = _curve_values(axis, everyone, floors[axis.setting])
        grids = [(other, [floors[other.setting]]) for other in running if other is not axis]
        kept = _joint_rates(answerable, [(axis, values), *grids]).reshape(len(values), -1)
        cut = _joint_rates(off_topic, [(axis, values), *grids]).reshape(len(values), -1)
        found[axis.setting] = [
            CurvePoint(
                floor=round(value, axis.decimals),
                answerable=round(float(kept[n, 0]), 4),
                off_topic=round(float(cut[n, 0]), 4),
            )
            for n, value in enumerate(values)
        ]
    return found


def _curve_values(axis: FloorAxis, criticals: Sequence[Criticals], chosen: float) -> list[float]:
    seen = _seen(axis, criticals)
    top = axis.upper if axis.upper is not None else max([*seen, chosen, 1.0]) * 1.1
    step = (top - axis.lower) / (_CURVE_POINTS - 1)
    return [axis.lower + n * step for n in range(_CURVE_POINTS)]


# ---- fusion ----------------------------------------------------------------------------


def choose_fusion(current: FusionFigures, tried: Sequence[FusionFigures]) -> Weights | None:
    """The best weights by hybrid nDCG@10 when they beat the current by the margin."""
    best = max(tried, key=lambda figures: figures.ndcg_10, default=None)
    if best is None or best.ndcg_10 < current.ndcg_10 + FUSION_MARGIN:
        return None
    return best.weights


# ---- grounding floor -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroundingScores:
    """The grounding check's scores of supported, other-domain and mixed answers."""

    supported: list[float]
    other_domain: list[float]
    mixed: list[float]


def grounding_flags(scores: GroundingScores, floor: float) -> GroundingFlags:
    """The share of each kind of answer below `floor` (flagged)."""
    return GroundingFlags(
        floor=round(floor, 4),
        supported=_below(scores.supported, floor),
        other_domain=_below(scores.other_domain, floor),
        mixed=_below(scores.mixed, floor),
    )


def _below(values: Sequence[float], floor: float) -> float:
    return round(sum(value < floor for value in values) / len(values), 4) if values else 0.0


def choose_grounding_floor(scores: GroundingScores, current: float) -> float:
    """The floor maximising the share of supported answers passing minus the share of
    unsupported ones passing (Youden's J), on a 0.01 grid: the middle of the best run of
    floors. The current floor when either kind of answer is missing."""
    unsupported = [*scores.other_domain, *scores.mixed]
    if not scores.supported or not unsupported:
        return current
    steps = round(1 / _GROUNDING_STEP)
    grid = [n * _GROUNDING_STEP for n in range(steps + 1)]
    separation = [
        (1 - _below(scores.supported, floor)) - (1 - _below(unsupported, floor)) for floor in grid
    ]
    best = max(separation)
    top = [n for n, value in enumerate(separation) if value >= best - 1e-9]
    run = [n for n in top if top[0] <= n <= top[0] + _run_length(top)]
    return round(grid[run[len(run) // 2]], 2)


def _run_length(indices: Sequence[int]) -> int:
    """How far the first run of consecutive indices reaches past its start."""
    length = 0
    while length + 1 < len(indices) and indices[length + 1] == indices[0] + length + 1:
        length += 1
    return length


def grounding_curve(scores: GroundingScores) -> list[GroundingFlags]:
    return [grounding_flags(scores, n / 50) for n in range(51)]


# ---- cautions ----------------------------------------------------------------------------


def cautions(recommended: Mapping[str, float], *, off_topic_questions: int) -> list[str]:
    """What the recommended floors give up on questions the golden set does not hold."""
    found = []
    if recommended["keyword_floor"] >= KEYWORD_FLOOR_CAUTION:
        found.append(
            f"keyword_floor {recommended['keyword_floor']:g}: a keyword hit will hardly ever "
            "answer by itself, so questions by identifier, code or rare name abstain unless "
            "their passages are also close by meaning; if users ask such questions, add some "
            "to the golden set"
        )
    if off_topic_questions < FEW_OFF_TOPIC:
        found.append(
            f"{off_topic_questions} off-topic questions: the floors sit right above the "
            "highest of them, and other off-topic questions may pass; give the golden set "
            f"{FEW_OFF_TOPIC} or more"
        )
    return found
