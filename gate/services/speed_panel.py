"""The canary page's speed panel: what a chat user feels of each arm in the traffic window — total
time (p50, p95), and for streamed answers time to first token (p50, p95) and tokens per second —
each as the ratio candidate ÷ baseline with its percentile-bootstrap interval, held against the
experiment's guardrail bar (described here: the canary analysis judges), and charts of them over the
window. Nothing here writes."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.core.cache import cache
from django.utils.translation import get_language
from django.utils.translation import gettext as _

from canary.selectors.experiments import TrafficWindow
from canary.selectors.latency import P50, P95, WATCHED, LatencySamples, latency_samples, latency_state
from engines.routing import BASELINE, CANDIDATE
from engines.stats.comparisons import ComparisonResult, quantile_ratio_compare
from gate.charts import Chart, LineSeries

SLICES = 12  # points over the window of the charts
SLICE_MIN = 5  # answers per arm a slice needs for its ratio


@dataclass(frozen=True, kw_only=True)
class SpeedRow:
    metric: str
    unit: str
    result: ComparisonResult


@dataclass(frozen=True, kw_only=True)
class SpeedPanel:
    streamed: bool
    answers: dict[str, int]  # per arm: answers without an error, not abandoned
    rows: list[SpeedRow]


def _samples(*, window: TrafficWindow, start: datetime, end: datetime) -> dict[str, LatencySamples]:
    return {
        arm: latency_samples(experiment=window.experiment, arm=arm, start=start, end=end)
        for arm in (BASELINE, CANDIDATE)
    }


def speed_panel(*, window: TrafficWindow, guardrails: dict[str, float]) -> SpeedPanel:
    samples = _samples(window=window, start=window.start, end=window.end)
    streamed = samples[BASELINE].streamed or samples[CANDIDATE].streamed
    rows = [
        SpeedRow(
            metric=watched.metric,
            unit=watched.unit,
            result=quantile_ratio_compare(
                candidate=watched.values(samples[CANDIDATE]),
                baseline=watched.values(samples[BASELINE]),
                statistic=watched.statistic,
                bar=guardrails[watched.bar],
                min_n=int(guardrails["min_requests"]),
                metric=watched.metric,
            ),
        )
        for watched in WATCHED
        if streamed or not watched.streamed_only
    ]
    return SpeedPanel(
        streamed=streamed, answers={arm: len(s.total_ms) for arm, s in samples.items()}, rows=rows
    )


# A readout is the same as long as the window's answers are: kept this long at most.
READOUT_CACHE_SECONDS = 600


def speed_readout(*, window: TrafficWindow, guardrails: dict[str, float]) -> tuple[SpeedPanel, list[Chart]]:
    """The panel and its charts, computed once per state of the window's answers (their count and
    the newest one's id) and guardrails: the bootstraps cost about half a second per metric at
    10 000 answers an arm, and the canary page refreshes every few seconds."""
    count, newest = latency_state(experiment=window.experiment, start=window.start, end=window.end)
    # The charts' titles are in the reader's language: one entry per language.
    state = [
        window.experiment.pk,
        window.start.isoformat(),
        count,
        newest,
        sorted(guardrails.items()),
        get_language(),
    ]
    key = "speed-readout:" + hashlib.sha256(json.dumps(state).encode()).hexdigest()
    cached = cache.get(key)
    if cached is not None:
        return cached
    panel = speed_panel(window=window, guardrails=guardrails)
    charts = speed_charts(window=window, guardrails=guardrails, streamed=panel.streamed)
    cache.set(key, (panel, charts), READOUT_CACHE_SECONDS)
    return panel, charts


def _slices(window: TrafficWindow) -> list[tuple[datetime, datetime]]:
    step = (window.end - window.start) / SLICES
    return [(window.start + step * i, window.start + step * (i + 1)) for i in range(SLICES)]


def speed_charts(*, window: TrafficWindow, guardrails: dict[str, float], streamed: bool) -> list[Chart]:
    """Per slice of the window (not cumulative: a regression shows where it began): the arms' p50 and
    p95 of the time to first token (of the total time where nothing streamed), and the p50's ratio
    candidate ÷ baseline with its bootstrap interval against the bar."""
    if window.end <= window.start:
        return []
    watched = WATCHED[2] if streamed else WATCHED[0]
    lines: dict[str, list[tuple[str, float | None]]] = {}
    ratio: list[tuple[str, float | None]] = []
    low: list[float | None] = []
    high: list[float | None] = []
    for start, end in _slices(window):
        stamp, samples = end.isoformat(), _samples(window=window, start=start, end=end)
        for arm in (CANDIDATE, BASELINE):
            values = watched.values(samples[arm])
            for statistic in (P50, P95):
                value = float(np.quantile(values, statistic.quantile)) if values else None
                lines.setdefault(f"{_(arm)} {statistic.name}", []).append((stamp, value))
        compared = quantile_ratio_compare(
            candidate=watched.values(samples[CANDIDATE]),
            baseline=watched.values(samples[BASELINE]),
            statistic=P50,
            bar=guardrails[watched.bar],
            min_n=SLICE_MIN,
            metric=watched.metric,
            resamples=500,
        )
        ratio.append((stamp, compared.difference))
        low.append(compared.ci_low)
        high.append(compared.ci_high)
    title = _("Time to first token per arm") if streamed else _("Answer time per arm")
    ratio_title = (
        _("Time to first token, candidate ÷ baseline (p50, 95 % bootstrap interval per slice)")
        if streamed
        else _("Answer time, candidate ÷ baseline (p50, 95 % bootstrap interval per slice)")
    )
    return [
        Chart(
            id="speed-per-arm",
            title=title + " " + _("(p50 and p95, per twelfth of the window)"),
            kind="lines",
            y_name="ms",
            lines=[LineSeries(name=name, points=points) for name, points in lines.items()],
        ),
        Chart(
            id="speed-ratio",
            title=ratio_title,
            kind="lines",
            y_name=_("candidate ÷ baseline"),
            lines=[LineSeries(name=_("ratio of p50"), points=ratio, low=low, high=high)],
            threshold=guardrails[watched.bar],
            threshold_label=_("bar %(value)s") % {"value": guardrails[watched.bar]},
        ),
    ]
