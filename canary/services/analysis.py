"""Canary analysis: the candidate against the baseline on the experiment's user traffic so far.

Per metric (guardrails and minimum samples from the experiment):
- error rate (answers with an error, fallbacks included): two-proportion test;
- fallback rate (candidate answers the baseline had to give): two-proportion test;
- latency of answers (the last 10 000 per arm): Mann-Whitney U on the medians' ratio, and the p95's
  ratio with a percentile-bootstrap interval;
- where the traffic streams: time to first token (p50 and p95) and tokens per second (median), each
  as a ratio candidate ÷ baseline with a percentile-bootstrap interval (`canary.selectors.latency`);
- user turns per session: Welch's t-test on sufficient statistics;
- stress probes (the latest probe run): exact McNemar on the paired results.
Each metric fails when it is worse than its guardrail and its test is significant at alpha after Holm's
adjustment across the metrics tested together (`guardrails_holm`), so a healthy candidate is rolled
back with probability at most alpha in all, not alpha per metric watched.
Probe traffic never counts as user traffic. Insufficient data never passes. Counts and sums are
aggregated in SQL, so the cost does not grow with the number of events held in Python.

Acting on the verdict: `fail` rolls the experiment back at once (share 0, audit row, webhook);
`pass` moves to the next ramp step only when the plan allows it (`ramp_auto`), otherwise the
experiment waits for a release manager.
"""

from __future__ import annotations

from enum import StrEnum

from django.db import connection
from django.db.models import Count, Q

from canary.models import CanaryAnalysis, Experiment, TurnEvent
from canary.selectors.experiments import probe_run_latest
from canary.selectors.latency import WATCHED, LatencySamples, latency_samples
from canary.services.experiments import (
    GUARDRAIL_DEFAULTS,
    LIFECYCLE_ROLES,
    experiment_ramp,
    experiment_rollback,
)
from canary.services.shadow_analysis import shadow_analyze
from engines.reasons import Reason, Term, gettext_noop, reason_render, wordings_register
from engines.reasons import reason as reason_of
from engines.routing import BASELINE, CANDIDATE
from engines.stats.comparisons import (
    FAIL,
    ComparisonResult,
    analysis_combine,
    error_rate_compare,
    guardrails_holm,
    latency_compare,
    mean_compare,
    probes_compare,
    quantile_ratio_compare,
    rate_compare,
)
from engines.stats.sufficient import MeanStats, Proportion
from registry.actors import Actor, SystemActor, actor_require_role
from registry.errors import ENGLISH, ApplicationError

# Turns per session may grow by this much (relative) before it counts against the candidate.
MAX_TURNS_INCREASE = 0.2
ANALYSIS = SystemActor("canary-analysis")


class AnalysisCode(StrEnum):
    RAMP_WAITS = "analysis.ramp_waits"


wordings_register({AnalysisCode.RAMP_WAITS: gettext_noop("the next ramp step waits: {why}")})


def _user_answers(experiment: Experiment):
    return TurnEvent.objects.filter(experiment=experiment, role=TurnEvent.Role.ASSISTANT).exclude(
        source=TurnEvent.Source.PROBE
    )


def _counts(experiment: Experiment) -> dict[str, dict[str, int]]:
    rows = (
        _user_answers(experiment)
        .values("arm")
        .annotate(
            n=Count("id"),
            errors=Count("id", filter=~Q(error="")),
            fallbacks=Count("id", filter=Q(fallback=True)),
        )
    )
    counts = {arm: {"n": 0, "errors": 0, "fallbacks": 0} for arm in (BASELINE, CANDIDATE)}
    for row in rows:
        counts[row.pop("arm")] = row
    return counts


def _turns_per_session(experiment: Experiment) -> dict[str, MeanStats]:
    """Per arm: sessions, and the sum and sum of squares of their user turns, in one SQL query."""
    table = TurnEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT arm, COUNT(*), SUM(turns), SUM(turns * turns) FROM (
                SELECT arm, session_id, COUNT(*) AS turns FROM {table}
                WHERE experiment_id = %s AND role = %s AND source <> %s
                GROUP BY arm, session_id
            ) AS sessions GROUP BY arm
            """,
            [experiment.pk, TurnEvent.Role.USER, TurnEvent.Source.PROBE],
        )
        rows = cursor.fetchall()
    stats = {arm: MeanStats(n=0, total=0.0, total_squares=0.0) for arm in (BASELINE, CANDIDATE)}
    for arm, n, total, squares in rows:
        stats[arm] = MeanStats(n=int(n), total=float(total), total_squares=float(squares))
    return stats


def _probe_result(experiment: Experiment, min_probes: int):
    run = probe_run_latest(experiment=experiment)
    cell = (run.report.get("all") if run else None) or {}
    return probes_compare(
        only_candidate_correct=cell.get("only_candidate_correct", 0),
        only_baseline_correct=cell.get("only_baseline_correct", 0),
        both_correct=cell.get("both_correct", 0),
        neither_correct=cell.get("neither_correct", 0),
        min_pairs=min_probes,
    )


def _speed_results(
    *, samples: dict[str, LatencySamples], guardrails: dict[str, float], min_n: int
) -> list[ComparisonResult]:
    """The p95 of the total time, and, once either arm has streamed, time to first token and tokens
    per second (an experiment whose clients never stream is not held back by metrics it cannot have).
    The median's ratio is `latency_compare`'s."""
    candidate, baseline = samples[CANDIDATE], samples[BASELINE]
    streamed = candidate.streamed or baseline.streamed
    return [
        quantile_ratio_compare(
            candidate=watched.values(candidate),
            baseline=watched.values(baseline),
            statistic=watched.statistic,
            bar=guardrails[watched.bar],
            min_n=min_n,
            metric=watched.metric,
        )
        for watched in WATCHED
        if watched.metric != "latency" and (streamed or not watched.streamed_only)
    ]


def _guardrail_results(*, experiment: Experiment) -> list[ComparisonResult]:
    """Every guardrail metric compared, Holm-adjusted as one family."""
    guardrails = {**GUARDRAIL_DEFAULTS, **experiment.guardrails}
    min_requests, min_sessions = int(guardrails["min_requests"]), int(guardrails["min_sessions"])
    counts = _counts(experiment)
    turns = _turns_per_session(experiment)
    samples = {arm: latency_samples(experiment=experiment, arm=arm) for arm in (BASELINE, CANDIDATE)}
    return guardrails_holm(
        [
            error_rate_compare(
                candidate=Proportion(successes=counts[CANDIDATE]["errors"], n=counts[CANDIDATE]["n"]),
                baseline=Proportion(successes=counts[BASELINE]["errors"], n=counts[BASELINE]["n"]),
                max_increase=guardrails["max_error_rate_increase"],
                min_n=min_requests,
            ),
            rate_compare(
                metric="fallback_rate",
                candidate=Proportion(successes=counts[CANDIDATE]["fallbacks"], n=counts[CANDIDATE]["n"]),
                baseline=Proportion(successes=counts[BASELINE]["fallbacks"], n=counts[BASELINE]["n"]),
                max_increase=guardrails["max_fallback_rate"],
                min_n=min_requests,
            ),
            latency_compare(
                candidate=samples[CANDIDATE].total_ms,
                baseline=samples[BASELINE].total_ms,
                max_ratio=guardrails["max_latency_ratio"],
                min_n=min_requests,
            ),
            *_speed_results(samples=samples, guardrails=guardrails, min_n=min_requests),
            mean_compare(
                candidate=turns[CANDIDATE],
                baseline=turns[BASELINE],
                max_increase_ratio=MAX_TURNS_INCREASE,
                min_n=min_sessions,
            ),
            _probe_result(experiment, int(guardrails["min_probes"])),
        ]
    )


def experiment_analyze(
    *, experiment: Experiment, act: bool = True, actor: Actor = ANALYSIS
) -> CanaryAnalysis:
    """Compare the arms now; with `act`, roll back on fail and ramp on pass where the plan allows.
    A person may ask for it (a release manager); what it does is done as the canary analysis."""
    actor_require_role(actor, LIFECYCLE_ROLES, action="analyse an experiment now")
    if experiment.in_shadow:  # no user on the candidate: the shadow window is judged
        return shadow_analyze(experiment=experiment, act=act, actor=ANALYSIS)
    results = _guardrail_results(experiment=experiment)
    verdict, reasons = analysis_combine(results)
    action = ""
    if act and experiment.status in Experiment.ACTIVE:
        if verdict == "fail":
            experiment_rollback(
                experiment=experiment, actor=ANALYSIS, reason=f"canary analysis failed: {_failing(reasons)}"
            )
            action = "rolled_back"
        elif verdict == "pass" and experiment.status == Experiment.Status.RUNNING:
            if experiment.ramp_auto and experiment.ramp_step + 1 < len(experiment.ramp):
                try:
                    ramped = experiment_ramp(
                        experiment=experiment, actor=ANALYSIS, reason="canary analysis passed"
                    )
                    action = "promoted" if ramped.status == Experiment.Status.PROMOTED else "ramped"
                except ApplicationError as exc:  # not approved, or above the ungated share
                    action = "waiting_for_release_manager"
                    reasons = (*reasons, reason_of(AnalysisCode.RAMP_WAITS, why=exc.reason))
            else:
                action = "waiting_for_release_manager"
    return CanaryAnalysis.objects.create(
        experiment=experiment,
        verdict=verdict,
        reasons=[item.to_json() for item in reasons],
        metrics=[r.to_dict() for r in results],
        action=action,
    )


def _failing(reasons: tuple[Reason, ...]) -> str:
    """The failing metrics' reasons, in English: the rollback's reason is stored as text, as a
    person's would be."""
    failing = [
        item for item in reasons if item.params.get("verdict") == Term(FAIL) and "metric" in item.params
    ]
    return "; ".join(reason_render(item, words=ENGLISH) for item in failing or reasons)


def experiments_analyze() -> list[CanaryAnalysis]:
    """The periodic job: every running experiment."""
    return [
        experiment_analyze(experiment=experiment)
        for experiment in Experiment.objects.filter(status=Experiment.Status.RUNNING).select_related(
            "baseline", "candidate"
        )
    ]
