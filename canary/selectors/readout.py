"""The canary analysis as an experiment readout, laid out as GrowthBook and Eppo lay theirs out: per
guardrail metric the change of the candidate against the baseline with its interval first, then
the arms' values, the bar and the verdict. It is read from the stored analysis, so the evidence that
rolled an experiment back (or ramped it) is what the page shows after it, not a new, empty window."""

from __future__ import annotations

from dataclasses import dataclass

from canary.models import CanaryAnalysis, Experiment

RELATIVE, POINTS = "relative", "points"


@dataclass(frozen=True, kw_only=True)
class Plot:
    """Where a row's marks sit on its own axis, symmetric around "no change" (0 % to 100 % of the
    width, 50 % being no change), and the change at either end of the axis."""

    low: float
    high: float
    change: float
    bar: float | None
    span: float


@dataclass(frozen=True, kw_only=True)
class ReadoutRow:
    metric: str
    verdict: str
    # relative: candidate ÷ baseline − 1 (ratios and relative differences); points: candidate − baseline
    # of a rate (0.01 = one point).
    kind: str
    change: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float | None
    bar: float | None  # the worst change allowed, in the change's terms
    higher_is_worse: bool
    baseline: float | None
    candidate: float | None
    baseline_n: int
    candidate_n: int
    test: str
    p_value: float | None  # after Holm, where it was tested

    @property
    def plot(self) -> Plot | None:
        if self.change is None or self.ci_low is None or self.ci_high is None:
            return None
        marks = [self.ci_low, self.ci_high, self.change] + ([self.bar] if self.bar is not None else [])
        span = max(abs(mark) for mark in marks) * 1.1 or 1.0

        def at(value: float) -> float:
            return round(50 + 50 * value / span, 2)

        return Plot(
            low=at(self.ci_low),
            high=at(self.ci_high),
            change=at(self.change),
            bar=at(self.bar) if self.bar is not None else None,
            span=span,
        )


@dataclass(frozen=True, kw_only=True)
class Readout:
    analysis: CanaryAnalysis | None
    rows: list[ReadoutRow]


def _row(metric: dict) -> ReadoutRow:
    kind = metric.get("difference_kind")
    difference, low, high = metric.get("difference"), metric.get("ci_low"), metric.get("ci_high")
    threshold = metric.get("threshold")
    shift = 1.0 if kind == "ratio" else 0.0  # a ratio's change is ratio − 1

    def moved(value: float | None) -> float | None:
        return None if value is None else value - shift

    return ReadoutRow(
        metric=metric["metric"],
        verdict=metric["verdict"],
        kind=POINTS if kind == "absolute" else RELATIVE,
        change=moved(difference),
        ci_low=moved(low),
        ci_high=moved(high),
        confidence=metric.get("confidence"),
        # The probes' threshold is not a bar on the change (any significant loss fails).
        bar=moved(threshold) if metric["metric"] != "probes" else None,
        higher_is_worse=metric.get("higher_is_worse", True),
        baseline=metric.get("baseline_estimate"),
        candidate=metric.get("candidate_estimate"),
        baseline_n=metric.get("baseline_n", 0),
        candidate_n=metric.get("candidate_n", 0),
        test=metric.get("test", ""),
        p_value=metric.get("adjusted_p_value", metric.get("p_value")),
    )


def readout_get(*, experiment: Experiment) -> Readout:
    """The latest analysis of the experiment as a readout (none yet: no rows)."""
    analysis = experiment.analyses.order_by("-created_at", "-pk").first()
    if analysis is None:
        return Readout(analysis=None, rows=[])
    return Readout(analysis=analysis, rows=[_row(metric) for metric in analysis.metrics])
