"""The canary analysis watches several metrics at once: errors, fallbacks, latency, turns per session,
probes. Each tested at alpha alone, a healthy candidate fails one of them far more often than alpha;
Holm's step-down adjustment across the metrics tested (`guardrails_holm`) holds that family-wise
false-rollback rate to alpha. Shown by a seeded A/A simulation of the analysis's own comparisons with
every guardrail at 0 (any worsening counts: the case where significance alone decides)."""

import math

import numpy as np
import pytest

from engines.reasons import Term, reason
from engines.stats.comparisons import (
    FAIL,
    MARGINAL,
    PASS,
    ComparisonCode,
    ComparisonResult,
    analysis_combine,
    error_rate_compare,
    guardrails_holm,
    latency_compare,
    mean_compare,
    probes_compare,
    rate_compare,
)
from engines.stats.sufficient import MeanStats, Proportion

ALPHA, ANALYSES = 0.05, 2000
RAW = reason("test.raw")


def result(
    metric: str, p_value: float | None, *, exceeds: bool | None, verdict: str, partial: str = MARGINAL
):
    return ComparisonResult(
        metric=metric, verdict=verdict, reasons=(RAW,), candidate_estimate=None, baseline_estimate=None,
        difference=None, difference_kind="absolute", p_value=p_value, candidate_n=1, baseline_n=1,
        threshold=0.0, alpha=ALPHA, min_n=1, test="t", exceeds=exceeds, partial=partial,
    )  # fmt: skip


def test_holm_keeps_what_survives_and_says_what_it_changed():
    adjusted = guardrails_holm(
        [
            result("error_rate", 0.01, exceeds=True, verdict=FAIL),  # 3 x 0.01 = 0.03: still fails
            result("latency", 0.04, exceeds=True, verdict=FAIL),  # max(0.03, 2 x 0.03, 1 x 0.04) = 0.06
            result("turns", 0.03, exceeds=False, verdict=MARGINAL),  # significant alone, within: 0.06 -> pass
            result(
                "probes", None, exceeds=None, verdict="insufficient_data"
            ),  # not tested: not in the family
        ]
    )
    assert [r.verdict for r in adjusted] == [FAIL, MARGINAL, PASS, "insufficient_data"]
    assert [r.adjusted_p_value for r in adjusted[:3]] == pytest.approx([0.03, 0.06, 0.06])
    assert adjusted[3].adjusted_p_value is None
    assert adjusted[0].reasons == (RAW,)
    holm = adjusted[1].reasons[-1]
    assert (holm.code, holm.params["m"], holm.params["op"], holm.params["alpha"]) == (
        ComparisonCode.HOLM,
        3,
        ">=",
        ALPHA,
    )
    assert holm.params["p"] == pytest.approx(0.06)
    assert (holm.params["before"], holm.params["after"]) == (Term(FAIL), Term(MARGINAL))
    probes = guardrails_holm([result("probes", 0.04, exceeds=True, verdict=FAIL, partial=PASS)] * 2)
    assert [r.verdict for r in probes] == [PASS, PASS]  # the paired test: worse but not significant passes


def analysis(rng: np.random.Generator) -> list[ComparisonResult]:
    """One analysis of a healthy candidate: both arms drawn from the same distributions."""
    n, sessions = 2000, 300
    errors = rng.binomial(n, 0.02, size=2)
    latencies = rng.lognormal(mean=5.0, sigma=0.5, size=(2, 400))
    turns = [1 + rng.poisson(0.4, size=sessions) for _ in range(2)]
    correct = rng.random((2, 40)) < 0.8  # 40 probes, each answered right with the same chance by both
    return [
        error_rate_compare(
            candidate=Proportion(successes=int(errors[0]), n=n),
            baseline=Proportion(successes=int(errors[1]), n=n),
            max_increase=0.0,
            min_n=200,
        ),
        rate_compare(  # a healthy candidate is never failed over (the baseline never is)
            metric="fallback_rate",
            candidate=Proportion(successes=0, n=n),
            baseline=Proportion(successes=0, n=n),
            max_increase=0.0,
            min_n=200,
        ),
        latency_compare(candidate=list(latencies[0]), baseline=list(latencies[1]), max_ratio=1.0, min_n=200),
        mean_compare(
            candidate=MeanStats.of(turns[0].tolist()),
            baseline=MeanStats.of(turns[1].tolist()),
            max_increase_ratio=0.0,
            min_n=100,
        ),
        probes_compare(
            only_candidate_correct=int((correct[0] & ~correct[1]).sum()),
            only_baseline_correct=int((~correct[0] & correct[1]).sum()),
            both_correct=int((correct[0] & correct[1]).sum()),
            neither_correct=int((~correct[0] & ~correct[1]).sum()),
            min_pairs=20,
        ),
    ]


def wilson(k: int, n: int) -> tuple[float, float]:
    z = 1.959963984540054
    centre, half = (k + z * z / 2) / (n + z * z), z * math.sqrt(k * (n - k) / n + z * z / 4) / (n + z * z)
    return centre - half, centre + half


def test_an_aa_simulation_rolls_a_healthy_candidate_back_at_most_alpha_of_the_time_with_holm():
    rng = np.random.default_rng(20261202)
    alone = holm = 0
    for _ in range(ANALYSES):
        results = analysis(rng)
        alone += analysis_combine(results)[0] == FAIL
        holm += analysis_combine(guardrails_holm(results))[0] == FAIL
    low_alone, _ = wilson(alone, ANALYSES)
    low_holm, high_holm = wilson(holm, ANALYSES)
    print(
        f"A/A, {ANALYSES} analyses, 5 metrics, guardrails at 0, alpha {ALPHA}: rolled back "
        f"{alone / ANALYSES:.4f} with each metric at alpha, {holm / ANALYSES:.4f} "
        f"[{low_holm:.4f}, {high_holm:.4f}] with Holm"
    )
    assert low_alone > ALPHA  # without the adjustment the family's rate is well above alpha
    assert holm / ANALYSES <= ALPHA and low_holm < ALPHA
