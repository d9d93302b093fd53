"""Gate layer 3 false-positive rates under A/A tests: fixed horizon vs peeking vs the sequential option.

Simulates --runs A/A experiments (gate.judges.aa_simulation: users with 1–3 contracts, review hours with
a per-user random effect, hours per contract as a ratio metric) and prints, for a one-sided test at
alpha 0.05 with direction "decrease" and min_effect 0, each rate with its binomial standard error
sqrt(p(1 − p)/runs):
  * fixed horizon, one look at the end (target ≈ alpha), and its two-sided rejection rate;
  * fixed horizon peeked at 10 cumulative looks, any pass counted (inflated);
  * sequential (always-valid, tau fixed in advance) peeked at the same looks (target ≤ alpha).

    python bench/ab_false_positives.py [--runs 2000] [--seed 0] [--users 300] [--looks 10] [--tau 0.2]

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

from gate.judges.aa_simulation import DEFAULT_TAU, aa_false_positive_rates  # noqa: E402

LABELS = {
    "fixed_single_look": "fixed horizon, single look (one-sided)",
    "two_sided_single_look": "fixed horizon, single look, two-sided p < alpha",
    "fixed_peeking": "fixed horizon, any of {looks} peeks",
    "sequential_peeking": "sequential, any of {looks} peeks",
    "sequential_single_look": "sequential, single look",
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--users", type=int, default=300, help="users per arm")
    parser.add_argument("--looks", type=int, default=10)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--tau", type=float, default=DEFAULT_TAU, help="hours per contract")
    args = parser.parse_args()

    started = time.perf_counter()
    rates = aa_false_positive_rates(
        runs=args.runs,
        seed=args.seed,
        users_per_arm=args.users,
        looks=args.looks,
        alpha=args.alpha,
        tau=args.tau,
    )
    elapsed = time.perf_counter() - started
    print(
        f"A/A false-positive rates: {args.runs} runs, seed {args.seed}, {args.users} users per arm, "
        f"alpha {args.alpha:g}, tau {args.tau:g}"
    )
    for name, label in LABELS.items():
        rate = rates[name]
        error = math.sqrt(rate * (1 - rate) / args.runs)
        print(f"  {label.format(looks=args.looks):<50} {rate:.4f} ± {error:.4f}")
    print(f"wall time {elapsed:.2f} s")


if __name__ == "__main__":
    main()
