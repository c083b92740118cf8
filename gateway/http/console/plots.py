"""An evaluation's curves and bars as geometry for inline SVG, drawn server-side.

The console's policy allows no inline script or style, so plots are plain `<svg>`
elements whose coordinates are worked out here and written by `_plots.html` (colours are
SVG presentation attributes). Everything drawn is a number from the report: no text from
the workspace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gateway.calibration.report import CurvePoint, EvaluationReport, GroundingFlags

WIDTH, HEIGHT = 420, 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 12, 14, 40
_COLOURS = ("#2451b8", "#b3261e", "#1f7a4d", "#9a5b00")


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    colour: str
    #: "x,y x,y ..." in the plot's pixels
    points: str


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    value: str
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True, slots=True)
class Tick:
    at: float
    label: str


@dataclass(slots=True)
class Plot:
    """One chart: lines (a curve per series) or bars, axes with ticks, and a marker."""

    key: str
    title: str
    x_label: str
    y_label: str
    width: int = WIDTH
    height: int = HEIGHT
    series: list[Series] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    #: a vertical line at the recommended value, and its caption
    marker: Tick | None = None

    @property
    def left(self) -> int:
        return _LEFT

    @property
    def right(self) -> int:
        return self.width - _RIGHT

    @property
    def top(self) -> int:
        return _TOP

    @property
    def bottom(self) -> int:
        return self.height - _BOTTOM


def _x(plot: Plot, value: float, low: float, high: float) -> float:
    span = (high - low) or 1.0
    return round(plot.left + (value - low) / span * (plot.right - plot.left), 1)


def _y(plot: Plot, share: float) -> float:
    return round(plot.bottom - share * (plot.bottom - plot.top), 1)


def _share_ticks(plot: Plot) -> list[Tick]:
    return [Tick(_y(plot, share / 4), f"{share * 25}%") for share in range(5)]


def _value_ticks(plot: Plot, low: float, high: float) -> list[Tick]:
    steps = 4
    return [
        Tick(
            _x(plot, low + (high - low) * n / steps, low, high),
            _number(low + (high - low) * n / steps),
        )
        for n in range(steps + 1)
    ]


def _number(value: float) -> str:
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"


def abstention_plot(setting: str, curve: Sequence[CurvePoint], chosen: float) -> Plot:
    """The share of answerable and off-topic questions abstaining against one floor."""
    plot = Plot(
        key=setting,
        title=f"Abstention against {setting}",
        x_label=setting,
        y_label="questions abstaining",
    )
    if not curve:
        return plot
    low, high = curve[0].floor, curve[-1].floor
    for label, colour, values in (
        ("answerable", _COLOURS[0], [point.answerable for point in curve]),
        ("off-topic", _COLOURS[1], [point.off_topic for point in curve]),
    ):
        points = " ".join(
            f"{_x(plot, point.floor, low, high)},{_y(plot, value)}"
            for point, value in zip(curve, values, strict=True)
        )
        plot.series.append(Series(label, colour, points))
    plot.x_ticks = _value_ticks(plot, low, high)
    plot.y_ticks = _share_ticks(plot)
    if low <= chosen <= high:
        plot.marker = Tick(_x(plot, chosen, low, high), f"recommended {_number(chosen)}")
    return plot


def grounding_plot(curve: Sequence[GroundingFlags], chosen: float) -> Plot:
    """The share of each kind of answer the grounding check flags against its floor."""
    plot = Plot(
        key="grounding_floor",
        title="Grounding check: answers flagged against grounding_floor",
        x_label="grounding_floor",
        y_label="answers flagged",
    )
    if not curve:
        return plot
    low, high = curve[0].floor, curve[-1].floor
    for n, (label, attribute) in enumerate(
        (("supported", "supported"), ("other domain", "other_domain"), ("mixed", "mixed"))
    ):
        points = " ".join(
            f"{_x(plot, point.floor, low, high)},{_y(plot, getattr(point, attribute))}"
            for point in curve
        )
        plot.series.append(Series(label, _COLOURS[n], points))
    plot.x_ticks = _value_ticks(plot, low, high)
    plot.y_ticks = _share_ticks(plot)
    plot.marker = Tick(_x(plot, chosen, low, high), f"recommended {_number(chosen)}")
    return plot


def ndcg_plot(report: EvaluationReport) -> Plot:
    """nDCG@10 of each channel and of each pair of fusion weights tried."""
    plot = Plot(key="ndcg", title="nDCG@10 per channel", x_label="", y_label="nDCG@10")
    values = [(name, figures.ndcg_10) for name, figures in report.channels.items()]
    values += [
        (f"{tried.weights.dense:g}:{tried.weights.keyword:g}", tried.ndcg_10)
        for tried in report.fusion
    ]
    slot = (plot.right - plot.left) / max(1, len(values))
    for n, (label, value) in enumerate(values):
        top = _y(plot, value)
        plot.bars.append(
            Bar(
                label=label,
                value=f"{value:.3f}",
                x=round(plot.left + n * slot + slot * 0.15, 1),
                y=top,
                width=round(slot * 0.7, 1),
                height=round(plot.bottom - top, 1),
            )
        )
    plot.y_ticks = [Tick(_y(plot, share / 4), f"{share / 4:.2f}") for share in range(5)]
    return plot


def report_plots(report: EvaluationReport) -> list[Plot]:
    """Every plot of a finished evaluation, in the order the page shows them."""
    recommended = report.recommendation.settings
    plots = [
        abstention_plot(setting, curve, float(getattr(recommended, setting, -1.0)))
        for setting, curve in report.curves.items()
    ]
    plots.append(ndcg_plot(report))
    plots.append(grounding_plot(report.grounding_curve, recommended.grounding_floor))
    return plots
