"""The gate run page's charts, read from the layers' stored details: clean accuracy and robustness by
tag and by perturbation type, candidate beside baseline with their intervals and the layer's bar."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from gate.charts import Cell, Chart, bars_chart
from gate.services.report import LayerView


def _cells(breakdown: dict[str, Any], *, rate: str) -> dict[str, Cell]:
    return {
        key: Cell(rate=getattr(cell, rate), ci_low=cell.ci_low, ci_high=cell.ci_high)
        for key, cell in breakdown.items()
    }


def _sides(details: Any, breakdown: str, *, rate: str) -> dict[str, dict[str, Cell]]:
    sides = {details.candidate.version: _cells(getattr(details.candidate, breakdown), rate=rate)}
    if details.baseline is not None:
        sides[details.baseline.version] = _cells(getattr(details.baseline, breakdown), rate=rate)
    return sides


def gate_run_charts(*, layers: list[LayerView]) -> list[Chart]:
    """One chart per breakdown a model layer stored; none for a layer without readable details."""
    charts: list[Chart] = []
    for view in layers:
        details, threshold = view.details, view.result.threshold
        if details is None or getattr(details, "candidate", None) is None:
            continue
        bar = _("bar %(value)s") % {"value": threshold} if threshold is not None else ""
        if view.layer.name == "clean_accuracy":
            charts.append(
                bars_chart(
                    id="clean-by-tag",
                    title=_("Clean accuracy by tag"),
                    sides=_sides(details, "by_tag", rate="accuracy"),
                    threshold=threshold,
                    threshold_label=bar,
                    y_name=_("accuracy"),
                )
            )
        elif view.layer.name == "robustness":
            for breakdown, chart_id, title in (
                ("by_type", "robustness-by-type", _("Robustness by perturbation type")),
                ("by_tag", "robustness-by-tag", _("Robustness by tag")),
            ):
                charts.append(
                    bars_chart(
                        id=chart_id,
                        title=title,
                        sides=_sides(details, breakdown, rate="rate"),
                        threshold=threshold,
                        threshold_label=bar,
                        y_name=_("still correct"),
                    )
                )
    return [chart for chart in charts if chart.has_data]
