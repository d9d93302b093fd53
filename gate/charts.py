"""What the pages' charts draw, as plain data (pure, no Django): the browser draws them with the
vendored ECharts (`evalhub/static/evalhub/charts.js`), from one JSON document per page.

Two kinds: `bars` (categories, one series per version or arm with each bar's interval, and the bar a
layer judges against as a line) and `lines` (points in time per series, optionally with an interval
band, and the bar; `step` lines for the traffic share)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class BarSeries:
    name: str
    values: list[float | None]
    low: list[float | None]
    high: list[float | None]


@dataclass(frozen=True, kw_only=True)
class LineSeries:
    name: str
    # (ISO time, value) points; `low`/`high` the interval band at the same times, when there is one.
    points: list[tuple[str, float | None]]
    low: list[float | None] = field(default_factory=list)
    high: list[float | None] = field(default_factory=list)
    step: bool = False


@dataclass(frozen=True, kw_only=True)
class Chart:
    id: str
    title: str
    kind: str  # "bars" or "lines"
    y_name: str = ""
    categories: list[str] = field(default_factory=list)
    bars: list[BarSeries] = field(default_factory=list)
    lines: list[LineSeries] = field(default_factory=list)
    # The judged bar (a horizontal line) and its label; None when the chart has no bar.
    threshold: float | None = None
    threshold_label: str = ""
    # 0..1 rates get a 0..1 axis; other metrics scale to their data.
    rate_axis: bool = False

    @property
    def has_data(self) -> bool:
        if self.kind == "bars":
            return any(v is not None for series in self.bars for v in series.values)
        return any(v is not None for series in self.lines for _, v in series.points)


@dataclass(frozen=True, kw_only=True)
class Cell:
    """A rate with its interval, as the judges store them (by tag, type, weakness, ...)."""

    rate: float | None
    ci_low: float | None
    ci_high: float | None


def bars_chart(
    *,
    id: str,
    title: str,
    sides: dict[str, dict[str, Cell]],
    threshold: float | None = None,
    threshold_label: str = "",
    y_name: str = "",
) -> Chart:
    """Bars per category for each side (e.g. candidate and baseline by tag), categories in the
    first side's order, then any only the others have."""
    categories: list[str] = []
    for cells in sides.values():
        categories += [key for key in cells if key not in categories]

    def series(name: str, cells: dict[str, Cell]) -> BarSeries:
        picked = [cells.get(key) for key in categories]
        return BarSeries(
            name=name,
            values=[c.rate if c else None for c in picked],
            low=[c.ci_low if c else None for c in picked],
            high=[c.ci_high if c else None for c in picked],
        )

    return Chart(
        id=id,
        title=title,
        kind="bars",
        y_name=y_name,
        categories=categories,
        bars=[series(name, cells) for name, cells in sides.items()],
        threshold=threshold,
        threshold_label=threshold_label,
        rate_axis=True,
    )
