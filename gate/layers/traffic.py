"""What the traffic layers (follow-up rate, business value) share: the window they read, what they
record about it, and the parts of their attribution that look at probes and each arm's path."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from canary.models import Experiment
from canary.selectors.attribution import answer_paths_by_arm, answer_paths_sql, probe_findings
from canary.selectors.experiments import TrafficWindow, probe_run_latest
from gate.judges.plan import Unblinding
from gate.judges.traffic import TrafficInputs
from gate.models import GateRun
from gate.reporting import AttributionLevel, Table

EXAMPLES = 10


def traffic_inputs(window: TrafficWindow) -> TrafficInputs:
    experiment = window.experiment
    return TrafficInputs(
        experiment=experiment.name,
        experiment_status=experiment.status,
        baseline=experiment.baseline.ref,
        candidate=experiment.candidate.ref,
        traffic_percent=experiment.traffic_percent,
        window_traffic_percent=window.traffic_percent,
        window_start=window.start.isoformat(),
        window_end=window.end.isoformat(),
    )


def plan_counted_since(*, window: TrafficWindow, plan: dict[str, Any]) -> datetime:
    """Units first exposed before this never count for a plan's look: the later of the plan's
    registration (`counted_from`) and the window's start (a ramp or a resume starts a new window, and the
    units it finds already exposed are not new)."""
    counted = plan.get("counted_from")
    counted_from = datetime.fromisoformat(counted) if isinstance(counted, str) else window.start
    return max(window.start, counted_from)


def unblinding_of(experiment: Experiment) -> Unblinding | None:
    """Who unblinded the experiment's traffic layers before their looks, if anyone did."""
    if experiment.unblinded_at is None:
        return None
    return Unblinding(
        by=experiment.unblinded_by_name or "?",
        at=experiment.unblinded_at.isoformat(timespec="seconds"),
        reason=experiment.unblind_reason,
    )


# What an attribution shows of the judged metric before its look: no per-arm figures of it.
BLIND_LEVEL = AttributionLevel(
    summary="blind until the one look at the registered horizon: no per-arm figures of the metric"
)


def no_experiment_reason(run: GateRun) -> str:
    return (
        f"no canary experiment compares {run.candidate.ref} with "
        f"{run.baseline.ref if run.baseline else 'a baseline'}: start one "
        "(POST /api/v1/canary/experiments/) and let it collect traffic"
    )


def probe_table(window: TrafficWindow) -> tuple[str, Table | None]:
    """The latest probe run's findings per weakness: a summary and the table (None: no run yet)."""
    run = probe_run_latest(experiment=window.experiment)
    if run is None:
        return "no probe run yet", None
    findings = probe_findings(run=run)
    rows = [
        [f.weakness, f.pairs, f.candidate_rate, f.baseline_rate, f.mcnemar_p, f.finding] for f in findings
    ]
    summary = "; ".join(
        f"{f.weakness}: candidate {f.candidate_rate:.2f} vs baseline {f.baseline_rate:.2f} ({f.finding})"
        for f in findings
        if f.weakness != "all"
    )
    table = Table(
        title=f"stress probes by weakness (probe run {run.pk})",
        columns=["weakness", "pairs", "candidate", "baseline", "McNemar p", "finding"],
        rows=rows,
    )
    return summary or "no weakness separates the arms", table


def system_level(window: TrafficWindow) -> AttributionLevel:
    """Errors, fallbacks and latency on each arm's path in the window."""
    paths = answer_paths_by_arm(window=window)
    return AttributionLevel(
        summary=", ".join(
            f"{p.arm}: {p.errors} errors, {p.fallbacks} fallbacks of {p.answers} answers, "
            f"p50 {p.latency_p50_ms or 0:.0f} ms"
            for p in paths
        ),
        reproduce=answer_paths_sql(window=window),
        tables=[
            Table(
                title="answers per arm",
                columns=["arm", "answers", "errors", "fallbacks", "latency p50 ms", "latency p95 ms"],
                rows=[
                    [p.arm, p.answers, p.errors, p.fallbacks, p.latency_p50_ms, p.latency_p95_ms]
                    for p in paths
                ],
            )
        ],
    )
