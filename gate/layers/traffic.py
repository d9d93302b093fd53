"""What the traffic layers (follow-up rate, business value) share: the window they read, what they
record about it, and the parts of their attribution that look at probes and each arm's path."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from canary.models import Experiment
from canary.selectors.attribution import answer_paths_by_arm, answer_paths_sql, probe_findings
from canary.selectors.experiments import TrafficWindow, probe_run_latest
from engines.reasons import Reason, Term, gettext_noop, reason, sentences, wordings_register
from gate.judges.plan import Unblinding
from gate.judges.traffic import TrafficInputs
from gate.models import GateRun
from gate.reporting import AttributionLevel, Table

EXAMPLES = 10


class TrafficCode(StrEnum):
    """What both traffic layers say about their experiment, probes and paths (attribution included)."""

    BLIND = "traffic.blind"
    STARTED_WITHOUT_PLAN = "traffic.started_without_plan"
    NO_EXPERIMENT = "traffic.no_experiment"
    NO_EXPERIMENT_NO_BASELINE = "traffic.no_experiment_no_baseline"
    NO_PROBE_RUN = "traffic.no_probe_run"
    PROBE_FINDING = "traffic.probe_finding"
    NO_WEAKNESS_SEPARATES = "traffic.no_weakness_separates"
    PROBES_TITLE = "traffic.probes_title"
    ARM_PATH = "traffic.arm_path"
    ANSWERS_PER_ARM_TITLE = "traffic.answers_per_arm_title"


wordings_register(
    {
        TrafficCode.BLIND: gettext_noop(
            "blind until the one look at the registered horizon: no per-arm figures of the metric"
        ),
        TrafficCode.STARTED_WITHOUT_PLAN: gettext_noop(
            "experiment {experiment} started without one; register a plan to count from now on"
        ),
        TrafficCode.NO_EXPERIMENT: gettext_noop(
            "no canary experiment compares {candidate} with {baseline}: start one "
            "(POST /api/v1/canary/experiments/) and let it collect traffic"
        ),
        TrafficCode.NO_EXPERIMENT_NO_BASELINE: gettext_noop(
            "no canary experiment compares {candidate} with a baseline: start one "
            "(POST /api/v1/canary/experiments/) and let it collect traffic"
        ),
        TrafficCode.NO_PROBE_RUN: gettext_noop("no probe run yet"),
        TrafficCode.PROBE_FINDING: gettext_noop(
            "{weakness}: candidate {candidate:.2f} vs baseline {baseline:.2f} ({finding})"
        ),
        TrafficCode.NO_WEAKNESS_SEPARATES: gettext_noop("no weakness separates the arms"),
        TrafficCode.PROBES_TITLE: gettext_noop("stress probes by weakness (probe run {pk})"),
        TrafficCode.ARM_PATH: gettext_noop(
            "{arm}: {errors} errors, {fallbacks} fallbacks of {answers} answers, p50 {p50:.0f} ms"
        ),
        TrafficCode.ANSWERS_PER_ARM_TITLE: gettext_noop("answers per arm"),
    }
)


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
BLIND_LEVEL = AttributionLevel(summary=reason(TrafficCode.BLIND))


def no_experiment_reason(run: GateRun) -> Reason:
    if run.baseline is None:
        return reason(TrafficCode.NO_EXPERIMENT_NO_BASELINE, candidate=run.candidate.ref)
    return reason(TrafficCode.NO_EXPERIMENT, candidate=run.candidate.ref, baseline=run.baseline.ref)


def probe_table(window: TrafficWindow) -> tuple[Reason, Table | None]:
    """The latest probe run's findings per weakness: a summary and the table (None: no run yet)."""
    run = probe_run_latest(experiment=window.experiment)
    if run is None:
        return reason(TrafficCode.NO_PROBE_RUN), None
    findings = probe_findings(run=run)
    rows = [
        [f.weakness, f.pairs, f.candidate_rate, f.baseline_rate, f.mcnemar_p, f.finding] for f in findings
    ]
    summary = [
        reason(
            TrafficCode.PROBE_FINDING,
            weakness=f.weakness,
            candidate=f.candidate_rate,
            baseline=f.baseline_rate,
            finding=Term(f.finding),
        )
        for f in findings
        if f.weakness != "all"
    ]
    table = Table(
        title=reason(TrafficCode.PROBES_TITLE, pk=run.pk),
        columns=["weakness", "pairs", "candidate", "baseline", "McNemar p", "finding"],
        rows=rows,
    )
    if not summary:
        return reason(TrafficCode.NO_WEAKNESS_SEPARATES), table
    return sentences(summary), table


def system_level(window: TrafficWindow) -> AttributionLevel:
    """Errors, fallbacks and latency on each arm's path in the window."""
    paths = answer_paths_by_arm(window=window)
    return AttributionLevel(
        summary=sentences(
            [
                reason(
                    TrafficCode.ARM_PATH,
                    arm=Term(p.arm),
                    errors=p.errors,
                    fallbacks=p.fallbacks,
                    answers=p.answers,
                    p50=p.latency_p50_ms or 0,
                )
                for p in paths
            ],
        ),
        reproduce=answer_paths_sql(window=window),
        tables=[
            Table(
                title=reason(TrafficCode.ANSWERS_PER_ARM_TITLE),
                columns=["arm", "answers", "errors", "fallbacks", "latency p50 ms", "latency p95 ms"],
                rows=[
                    [p.arm, p.answers, p.errors, p.fallbacks, p.latency_p50_ms, p.latency_p95_ms]
                    for p in paths
                ],
            )
        ],
    )
