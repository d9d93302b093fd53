"""Simulations of gate layer 3 under the documented workflow: A/A false-pass rates (nothing differs, so
every pass is false) and power at a true effect, each with and without CUPED.

Each run is one experiment. Per run and arm, `users_per_arm` users each review 1–3 contracts (uniform);
a user's hours per contract have a per-user random effect u ~ lognormal(−σ²/2, σ = 0.5) (mean 1: some
reviewers are slower), and each contract takes Gamma(shape 2, scale u) hours, so the user's total is
Gamma(2·k, u) for k contracts. The metric is hours per contract, Σx/Σy over users (2 h on average), a ratio
whose outcomes cluster in users: the delta method is exercised. Before their first exposure 70 % of users
have a history: 1–3 contracts in the pre-window, at the same speed u (the other 30 % are new and enter
CUPED with px = py = 0, as the layer treats them). The judge runs with direction "decrease" and min_effect
0, the usual "did the candidate help at all" question. A power run scales the candidate's hours by
`effect` (0.9: 10 % less, 0.2 h per contract).

Looks are `looks` equally spaced cumulative sample sizes (users arriving over time); the last is
`users_per_arm`. The documented workflow:
- fixed horizon: the horizon registered at the start is `users_per_arm`; the layer is judged at every
  look, and before the horizon it is insufficient data, so only the last look can pass;
- sequential (`sequential_tau`): the always-valid interval, judged at every look, any pass counted.
For contrast, `fixed_free_peeking` judges the fixed-horizon test at every look with no horizon, as the
layer did before horizons were registered (Armitage, McPherson & Rowe 1969: inflated well above alpha).

τ defaults to 0.2 h per contract, 10 % of the 2 h mean: the smallest improvement worth shipping a model
for in this scenario, fixed before any data (choosing it from the data voids the guarantee; any τ fixed in
advance keeps it, τ only moves where the power goes). The normal-mixture boundary is closest to the
fixed-horizon one at about V ≈ τ² / (2·log(1/α') + log(1 + 2·log(1/α'))) (Howard et al. 2021; V is the
variance of the difference): for α' = 0.1 and τ = 0.2, V ≈ 0.0063, about where a 0.2 h effect gets 80 %
power at a fixed horizon; at 300 users per arm V ≈ 0.018, so the sequential test is conservative there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import partial

import numpy as np

from engines.reasons import gettext_noop, reason, wordings_register
from engines.stats.sufficient import RATIO_CUPED_SUMS, RatioCupedStats
from gate.judges.business_value import DECREASE, BusinessValueResult, FixedHorizon, business_value_judge
from gate.judges.verdict import PASS


class AaSimulationCode(StrEnum):
    LAST_LOOK = "aa_simulation.last_look"


wordings_register({AaSimulationCode.LAST_LOOK: gettext_noop("registered at the start: the last look")})

DEFAULT_TAU = 0.2  # hours per contract: the minimum effect worth detecting, fixed in advance
USER_EFFECT_SIGMA = 0.5
HOURS_SHAPE, HOURS_SCALE = 2.0, 1.0
MAX_CONTRACTS = 3
HISTORY_SHARE = 0.7  # users with outcomes in the pre-window
SCENARIOS = ("fixed_single_look", "fixed_looks", "fixed_free_peeking", "sequential_looks")
RATES = (
    *(f"{name}{suffix}" for name in SCENARIOS for suffix in ("", "_cuped")),
    "two_sided_single_look",
    "sequential_single_look",
)


def _simulate(*, rng: np.random.Generator, runs: int, users: int, effect: float = 1.0) -> np.ndarray:
    """Cumulative per-user sums, shape (15, runs, 2 arms, users): the RATIO_CUPED_SUMS of (x, y, px, py)
    in that order, then the count of users with a history, over the first users of each arm in arrival
    order. The candidate (arm 1) has its hours scaled by `effect`; the pre-period is untreated."""
    size = (runs, 2, users)
    contracts = rng.integers(1, MAX_CONTRACTS + 1, size=size).astype(float)
    speed = rng.lognormal(-(USER_EFFECT_SIGMA**2) / 2, USER_EFFECT_SIGMA, size=size)
    scale = HOURS_SCALE * speed * np.array([1.0, effect])[None, :, None]
    hours = rng.gamma(HOURS_SHAPE * contracts, scale)
    has_history = rng.random(size) < HISTORY_SHARE
    pre_contracts = rng.integers(1, MAX_CONTRACTS + 1, size=size) * has_history
    # Gamma needs a positive shape: users without history get 0 hours whatever is drawn.
    pre_hours = rng.gamma(HOURS_SHAPE * np.maximum(pre_contracts, 1), HOURS_SCALE * speed) * has_history
    x, y, px, py = hours, contracts, pre_hours, pre_contracts.astype(float)
    rows = [x, y, px, py, x * x, y * y, px * px, py * py, x * y, x * px, x * py, y * px, y * py, px * py]
    return np.cumsum(np.stack([*rows, has_history.astype(float)]), axis=-1)


def _arm(sums: np.ndarray, n: int) -> RatioCupedStats:
    values = dict(zip(RATIO_CUPED_SUMS, (float(v) for v in sums[:-1]), strict=True))
    return RatioCupedStats(n=n, pre_units=round(float(sums[-1])), **values)


def _look_sizes(users: int, looks: int) -> list[int]:
    return [round(users * (look + 1) / looks) for look in range(looks)]


def _check(*, runs: int, users_per_arm: int, looks: int) -> None:
    if runs < 1 or users_per_arm < 2 * looks or looks < 1:
        raise ValueError(
            f"need runs >= 1, looks >= 1 and users_per_arm >= 2·looks, got runs={runs}, looks={looks}, "
            f"users_per_arm={users_per_arm}"
        )


def _runs(
    *, cumulative: np.ndarray, users: int, looks: int, alpha: float, tau: float
) -> list[dict[str, BusinessValueResult | bool]]:
    """Per run, what each scenario gave: "<scenario>[_cuped]" → passed at the last look or at any."""
    sizes = _look_sizes(users, looks)
    horizon = FixedHorizon(units_per_arm=users, basis=reason(AaSimulationCode.LAST_LOOK))
    out = []
    for run in range(cumulative.shape[1]):
        passed: dict[str, BusinessValueResult | bool] = dict.fromkeys(
            (f"{name}{suffix}" for name in SCENARIOS for suffix in ("", "_cuped")), False
        )
        for size in sizes:
            arms = [_arm(cumulative[:, run, arm, size - 1], size) for arm in (0, 1)]
            for suffix, (control, treatment) in (
                ("", (arms[0].post, arms[1].post)),
                ("_cuped", (arms[0], arms[1])),
            ):
                # Every look is judged: the sample-size guard is not what is studied here.
                judge: Callable[..., BusinessValueResult] = partial(
                    business_value_judge,
                    baseline=control,
                    candidate=treatment,
                    direction=DECREASE,
                    alpha=alpha,
                    min_units=2,
                )
                fixed = judge(horizon=horizon)
                free = judge()
                sequential = judge(sequential_tau=tau)
                passed[f"fixed_looks{suffix}"] = bool(passed[f"fixed_looks{suffix}"]) or fixed.verdict == PASS
                passed[f"fixed_free_peeking{suffix}"] = (
                    bool(passed[f"fixed_free_peeking{suffix}"]) or free.verdict == PASS
                )
                passed[f"sequential_looks{suffix}"] = (
                    bool(passed[f"sequential_looks{suffix}"]) or sequential.verdict == PASS
                )
                if size == users:
                    passed[f"fixed_single_look{suffix}"] = fixed.verdict == PASS
                    passed[f"last{suffix}"] = fixed
                    passed[f"sequential_last{suffix}"] = sequential
        out.append(passed)
    return out


def aa_false_positive_rates(
    *,
    runs: int,
    seed: int,
    users_per_arm: int = 300,
    looks: int = 10,
    alpha: float = 0.05,
    tau: float | None = None,
) -> dict[str, float]:
    """Simulate `runs` A/A experiments and return the layer's false-pass rates (module docstring) in
    RATES, with and without CUPED, and the mean variance reduction CUPED gave at the last look.

    Also returns runs, seed, users_per_arm, looks, alpha and tau."""
    _check(runs=runs, users_per_arm=users_per_arm, looks=looks)
    tau = DEFAULT_TAU if tau is None else tau
    cumulative = _simulate(rng=np.random.default_rng(seed), runs=runs, users=users_per_arm)
    results = _runs(cumulative=cumulative, users=users_per_arm, looks=looks, alpha=alpha, tau=tau)
    rates = {
        name: sum(bool(result[name]) for result in results) / runs
        for name in RATES
        if name not in ("two_sided_single_look", "sequential_single_look")
    }
    lasts = [result["last"] for result in results]
    p_values = [last.effect.p_value for last in lasts if isinstance(last, BusinessValueResult)]
    rates["two_sided_single_look"] = sum(p is not None and p < alpha for p in p_values) / runs
    sequential = [result["sequential_last"] for result in results]
    rates["sequential_single_look"] = (
        sum(isinstance(s, BusinessValueResult) and s.verdict == PASS for s in sequential) / runs
    )
    return {
        "runs": runs,
        "seed": seed,
        "users_per_arm": users_per_arm,
        "looks": looks,
        "alpha": alpha,
        "tau": tau,
        **rates,
        "cuped_variance_reduction": _mean_reduction(results),
    }


def _mean_reduction(results: list[dict[str, BusinessValueResult | bool]]) -> float:
    reductions = []
    for result in results:
        last = result["last_cuped"]
        assert isinstance(last, BusinessValueResult) and last.cuped is not None
        if last.cuped.variance_reduction is not None:
            reductions.append(last.cuped.variance_reduction)
    return float(np.mean(reductions))


def rerun_false_pass_rates(
    *, runs: int, seed: int, horizon: int = 200, reruns: int = 11, alpha: float = 0.05
) -> dict[str, float]:
    """A/A false-pass rates when the gate is run `reruns` times as the experiment grows from the
    registered `horizon` H to 2H units per arm (the approval reads the latest run, so one passing run is
    enough), with and without CUPED:

    - `rerun_stored_look`: the layer since issue 18: the first run at or after H judges the first H units
      per arm, and when that look decides it is stored; every later run returns it (`gate.layers.
      business_value.business_value_assess`, here on sufficient statistics instead of the database);
    - `rerun_grown_window`: the layer before it: every run judges the grown window afresh, the horizon
      only a floor (peeking: above alpha);
    - `single_look`: the fixed-horizon test once at H, for comparison.

    The layer at H and the simulation take the same first H units of each arm (users arriving in order)."""
    if runs < 1 or reruns < 2 or horizon < 2:
        raise ValueError(f"need runs >= 1, reruns >= 2 and horizon >= 2, got {runs}, {reruns}, {horizon}")
    cumulative = _simulate(rng=np.random.default_rng(seed), runs=runs, users=2 * horizon)
    sizes = [horizon + round(horizon * k / (reruns - 1)) for k in range(reruns)]
    fixed = FixedHorizon(units_per_arm=horizon, basis="registered at the start")
    counts = dict.fromkeys(
        (
            f"{name}{suffix}"
            for name in ("rerun_stored_look", "rerun_grown_window", "single_look")
            for suffix in ("", "_cuped")
        ),
        0,
    )
    for run in range(runs):
        for suffix in ("", "_cuped"):
            passes = _rerun_passes(
                cumulative=cumulative, run=run, cuped=bool(suffix), sizes=sizes, horizon=fixed, alpha=alpha
            )
            counts[f"rerun_stored_look{suffix}"] += passes.stored_look
            counts[f"single_look{suffix}"] += passes.single_look
            counts[f"rerun_grown_window{suffix}"] += passes.grown_window
    return {
        "runs": runs,
        "seed": seed,
        "horizon": horizon,
        "reruns": reruns,
        "alpha": alpha,
        **{name: count / runs for name, count in counts.items()},
    }


@dataclass(frozen=True, kw_only=True)
class _RerunPasses:
    """Whether one run passed (with or without CUPED), per way the gate's reruns are judged."""

    stored_look: bool
    single_look: bool
    grown_window: bool


def _rerun_passes(
    *,
    cumulative: np.ndarray,
    run: int,
    cuped: bool,
    sizes: list[int],
    horizon: FixedHorizon,
    alpha: float,
) -> _RerunPasses:
    """One run judged at each of `sizes` units per arm, as `rerun_false_pass_rates` describes."""
    assert horizon.units_per_arm is not None

    def judged(size: int) -> BusinessValueResult:
        arms = [_arm(cumulative[:, run, arm, size - 1], size) for arm in (0, 1)]
        control, treatment = (arms[0], arms[1]) if cuped else (arms[0].post, arms[1].post)
        return business_value_judge(
            baseline=control,
            candidate=treatment,
            direction=DECREASE,
            alpha=alpha,
            min_units=2,
            horizon=horizon,
        )

    stored: BusinessValueResult | None = None  # the plan's look
    latest_passes = []
    for size in sizes:
        if stored is None:
            look = judged(horizon.units_per_arm)  # the first H units per arm, whenever the run comes
            stored = look if look.verdict in (PASS, "fail") else None
        latest_passes.append(judged(size).verdict == PASS)
    assert stored is not None
    return _RerunPasses(
        stored_look=stored.verdict == PASS,
        single_look=judged(horizon.units_per_arm).verdict == PASS,
        grown_window=any(latest_passes),
    )


def planning_sd(*, seed: int, users: int = 100_000) -> float:
    """The per-user standard deviation of the linearised metric in this population (what the layer
    measures over the pre-window before a start to size the horizon), from one large simulated arm."""
    cumulative = _simulate(rng=np.random.default_rng(seed), runs=1, users=users)
    ratio = _arm(cumulative[:, 0, 0, -1], users).post
    assert ratio.ratio_variance is not None
    return float(np.sqrt(ratio.ratio_variance * users))


def power_rates(
    *,
    runs: int,
    seed: int,
    users_per_arm: int,
    effect: float = 0.9,
    looks: int = 10,
    alpha: float = 0.05,
    tau: float | None = None,
) -> dict[str, float]:
    """Pass rates when the candidate's hours are `effect` times the baseline's (0.9: a true 10 % saving),
    at a horizon of `users_per_arm` (size it with `fixed_horizon_units` and `planning_sd`): the
    fixed-horizon test at the horizon, the sequential test at any of `looks`, each with and without CUPED,
    and the mean variance reduction."""
    _check(runs=runs, users_per_arm=users_per_arm, looks=looks)
    tau = DEFAULT_TAU if tau is None else tau
    cumulative = _simulate(rng=np.random.default_rng(seed), runs=runs, users=users_per_arm, effect=effect)
    results = _runs(cumulative=cumulative, users=users_per_arm, looks=looks, alpha=alpha, tau=tau)
    names = [
        f"{name}{suffix}" for name in ("fixed_single_look", "sequential_looks") for suffix in ("", "_cuped")
    ]
    return {
        "runs": runs,
        "seed": seed,
        "users_per_arm": users_per_arm,
        "effect": effect,
        "looks": looks,
        "alpha": alpha,
        "tau": tau,
        **{name: sum(bool(result[name]) for result in results) / runs for name in names},
        "cuped_variance_reduction": _mean_reduction(results),
    }


def follow_up_rerun_rates(
    *,
    runs: int,
    seed: int,
    candidate_rate: float,
    baseline_rate: float,
    horizon: int = 2000,
    reruns: int = 11,
    max_rate: float = 0.18,
    margin: float = 0.01,
    confidence: float = 0.95,
    tau: float = 0.02,
) -> dict[str, float]:
    """Layer 2 at the boundary of its null: pass rates over `reruns` gate runs as each arm grows from the
    registered `horizon` of answered questions to twice it (answers independent, each followed up with its
    arm's rate; the observed rate judged, as with `follow_up_correction: none`):

    - `rerun_stored_look`: the layer since issue 18: the first H answers per arm judged once and stored;
    - `rerun_grown_window`: every run judging the grown window afresh (the layer before: peeking);
    - `sequential_looks`: the always-valid option (`follow_up_sequential_tau`), judged at every run from
      H/10 to 2H, any pass counted.

    With the candidate at the bar (`candidate_rate` = `max_rate`), or worse than the baseline by exactly
    the margin, every pass is false: each rate should be at most the one-sided (1 − confidence)/2."""
    if runs < 1 or reruns < 2 or horizon < 10:
        raise ValueError(f"need runs >= 1, reruns >= 2 and horizon >= 10, got {runs}, {reruns}, {horizon}")
    rng = np.random.default_rng(seed)
    size = (runs, 2 * horizon)
    follow_ups = (
        np.cumsum(rng.random(size) < baseline_rate, axis=1),
        np.cumsum(rng.random(size) < candidate_rate, axis=1),
    )
    sizes = [horizon + round(horizon * k / (reruns - 1)) for k in range(reruns)]
    looks = [round(2 * horizon * k / (2 * reruns)) for k in range(1, 2 * reruns + 1)]
    judged = partial(
        _follow_up_verdict, follow_ups=follow_ups, max_rate=max_rate, margin=margin, confidence=confidence
    )
    passed = {"rerun_stored_look": 0, "rerun_grown_window": 0, "sequential_looks": 0}
    for run in range(runs):
        # The look stored at H, returned by every later run.
        passed["rerun_stored_look"] += judged(run=run, n=horizon) == PASS
        passed["rerun_grown_window"] += any(judged(run=run, n=n) == PASS for n in sizes)
        passed["sequential_looks"] += any(judged(run=run, n=n, sequential_tau=tau) == PASS for n in looks)
    return {
        "runs": runs,
        "seed": seed,
        "horizon": horizon,
        "alpha": round((1 - confidence) / 2, 12),
        **{name: count / runs for name, count in passed.items()},
    }


def _follow_up_verdict(
    *,
    follow_ups: tuple[np.ndarray, np.ndarray],
    run: int,
    n: int,
    max_rate: float,
    margin: float,
    confidence: float,
    sequential_tau: float | None = None,
) -> str:
    """Layer 2's verdict on one run's first `n` answers per arm (`follow_ups`: cumulative follow-ups of
    the baseline, then the candidate), the observed rate judged."""
    from gate.judges.follow_up_rate import FollowUpCounts, follow_up_rate_judge

    arms = [FollowUpCounts(answered=n, follow_ups=int(counts[run, n - 1])) for counts in follow_ups]
    return follow_up_rate_judge(
        candidate=arms[1],
        baseline=arms[0],
        max_rate=max_rate,
        margin=margin,
        min_answered=2,
        confidence=confidence,
        sequential_tau=sequential_tau,
    ).verdict


def cuped_reduction(*, seed: int, users: int = 100_000) -> float:
    """The variance reduction CUPED gives in this population, measured as `gate.services.horizons`
    measures it on a family's history: one large simulated arm with its pre-period, θ pooled."""
    from engines.stats.effects import ratio_cuped_adjust

    cumulative = _simulate(rng=np.random.default_rng(seed), runs=1, users=users)
    arm = _arm(cumulative[:, 0, 0, -1], users)
    reduction = ratio_cuped_adjust(control=arm, treatment=arm).variance_reduction
    assert reduction is not None
    return reduction
