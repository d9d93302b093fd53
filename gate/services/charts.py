"""The gate run page's charts: each stored layer's own (`GateLayer.charts`), from its readable details."""

from __future__ import annotations

from gate.charts import Chart
from gate.services.report import LayerView


def gate_run_charts(*, layers: list[LayerView]) -> list[Chart]:
    """The charts of every layer with readable details, those without data left out."""
    charts: list[Chart] = []
    for view in layers:
        if view.details is not None:
            charts.extend(view.layer.charts(details=view.details, threshold=view.result.threshold))
    return [chart for chart in charts if chart.has_data]
