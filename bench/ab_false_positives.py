"""Gate layer 3 under the documented workflow: A/A false-pass rates and a power table, each with and
without CUPED.

A/A (gate.judges.aa_simulation: users with 1–3 contracts, review hours with a per-user random effect,
hours per contract as a ratio metric, 70 % of users with a pre-period history): --runs experiments of
--users users per arm, one-sided test at alpha 0.05, direction "decrease", min_effect 0. Each rate comes
with its binomial standard error sqrt(p(1 − p)/runs):
  * fixed horizon, one look at the registered horizon (target ≈ alpha);
  * fixed horizon judged at --looks cumulative looks with the horizon registered at the start (before it
    the layer is insufficient data; target ≈ alpha, the same as one look);
  * sequential (always-valid, tau fixed in advance) at the same looks (target ≤ alpha);
  * for contrast, the fixed-horizon test peeked at every look with no registered horizon (inflated).

Re-runs (issue 18): --reruns gate runs as the experiment grows from a registered horizon of --horizon
users per arm to twice that, the approval reading the latest run (one pass is enough): with the look
stored at the horizon (every later run returns it) against judging the grown window afresh, beside the
single look at the horizon; each rate with its binomial standard error and alpha's 95 % binomial range.

Power: the candidate saves --effect of the hours (0.1: 10 %, 0.2 h per contract) in --power-runs
experiments at the horizon the layer would register for a true 10 % with power 0.8 (the per-user sd
measured on a large simulated pre-period sample, as `gate.services.horizons` measures it in SQL).

    python bench/ab_false_positives.py [--runs 1000] [--power-runs 1000] [--seed 0] [--users 300]
                                       [--looks 10] [--tau 0.2] [--effect 0.1]
                                       [--rerun-runs 2000] [--horizon 200] [--reruns 11]

Pure Python, no database.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate.judges.aa_simulation import (  # noqa: E402
    DEFAULT_TAU,
    aa_false_positive_rates,
    planning_sd,
    power_rates,
    rerun_false_pass_rates,
)
from gate.judges.business_value import fixed_horizon_units  # noqa: E402

AA_ROWS = {
    "fixed_single_look": "fixed horizon, one look at the horizon",
    "fixed_looks": "fixed horizon, {looks} looks, horizon registered",
    "sequential_looks": "sequential, {looks} looks",
    "fixed_free_peeking": "fixed horizon, {looks} looks, no horizon (free peeking)",
}


def error(rate: float, runs: int) -> float:
    return math.sqrt(rate * (1 - rate) / runs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=1000, help="A/A experiments")
    parser.add_argument("--power-runs", type=int, default=1000, help="experiments with a true effect")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--users", type=int, default=300, help="users per arm in the A/A runs")
    parser.add_argument("--looks", type=int, default=10)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--tau", type=float, default=DEFAULT_TAU, help="hours per contract")
    parser.add_argument("--effect", type=float, default=0.1, help="the candidate's true saving, a share")
    parser.add_argument("--rerun-runs", type=int, default=2000, help="A/A experiments of the re-run workflow")
    parser.add_argument("--horizon", type=int, default=200, help="registered users per arm (re-runs)")
    parser.add_argument("--reruns", type=int, default=11, help="gate runs from the horizon to twice it")
    args = parser.parse_args()
    reruns_print(args)

    started = time.perf_counter()
    rates = aa_false_positive_rates(
        runs=args.runs,
        seed=args.seed,
        users_per_arm=args.users,
        looks=args.looks,
        alpha=args.alpha,
        tau=args.tau,
    )
    print(
        f"A/A false-pass rates: {args.runs} runs, seed {args.seed}, {args.users} users per arm, "
        f"alpha {args.alpha:g}, tau {args.tau:g} ({time.perf_counter() - started:.0f} s)"
    )
    print(f"  {'':<56} {'without CUPED':>16} {'with CUPED':>16}")
    for name, label in AA_ROWS.items():
        plain, cuped = rates[name], rates[f"{name}_cuped"]
        print(
            f"  {label.format(looks=args.looks):<56} {plain:>7.4f} ± {error(plain, args.runs):.4f}"
            f" {cuped:>7.4f} ± {error(cuped, args.runs):.4f}"
        )
    print(f"  CUPED variance reduction at the horizon: {rates['cuped_variance_reduction']:.3f} (mean)")

    started = time.perf_counter()
    sd = planning_sd(seed=args.seed + 1)
    mde = 2.0 * args.effect  # hours per contract: the metric averages 2 h
    horizon = fixed_horizon_units(sd=sd, min_effect=0.0, mde=mde, alpha=args.alpha, power=0.8)
    power = power_rates(
        runs=args.power_runs,
        seed=args.seed,
        users_per_arm=horizon,
        effect=1 - args.effect,
        looks=args.looks,
        alpha=args.alpha,
        tau=args.tau,
    )
    print(
        f"power at a true {args.effect:.0%} saving ({mde:g} h per contract): {args.power_runs} runs, horizon "
        f"{horizon} users per arm (per-user sd {sd:.3f} h, sized for power 0.8) "
        f"({time.perf_counter() - started:.0f} s)"
    )
    print(f"  {'':<56} {'without CUPED':>16} {'with CUPED':>16}")
    for name, label in (
        ("fixed_single_look", "fixed horizon, at the horizon"),
        ("sequential_looks", f"sequential, any of {args.looks} looks up to the horizon"),
    ):
        plain, cuped = power[name], power[f"{name}_cuped"]
        print(
            f"  {label:<56} {plain:>7.4f} ± {error(plain, args.power_runs):.4f}"
            f" {cuped:>7.4f} ± {error(cuped, args.power_runs):.4f}"
        )
    print(f"  CUPED variance reduction at the horizon: {power['cuped_variance_reduction']:.3f} (mean)")


RERUN_ROWS = {
    "single_look": "one look at the horizon",
    "rerun_stored_look": "{reruns} runs from H to 2H, the look stored at H",
    "rerun_grown_window": "{reruns} runs from H to 2H, the grown window each time",
}


def reruns_print(args: argparse.Namespace) -> None:
    from scipy.stats import binom

    rates = rerun_false_pass_rates(
        runs=args.rerun_runs, seed=args.seed, horizon=args.horizon, reruns=args.reruns, alpha=args.alpha
    )
    low, high = (count / args.rerun_runs for count in binom.interval(0.95, args.rerun_runs, args.alpha))
    print(
        f"A/A over re-runs: {args.rerun_runs} runs, seed {args.seed}, horizon {args.horizon} users per arm, "
        f"alpha {args.alpha:g} (its 95 % binomial range over {args.rerun_runs} runs: {low:.4f} to {high:.4f})"
    )
    print(f"  {'':<56} {'without CUPED':>16} {'with CUPED':>16}")
    for name, label in RERUN_ROWS.items():
        plain, cuped = rates[name], rates[f"{name}_cuped"]
        print(
            f"  {label.format(reruns=args.reruns):<56} {plain:>7.4f} ± {error(plain, args.rerun_runs):.4f}"
            f" {cuped:>7.4f} ± {error(cuped, args.rerun_runs):.4f}"
        )


if __name__ == "__main__":
    main()
