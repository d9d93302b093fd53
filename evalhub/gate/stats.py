from __future__ import annotations

import math
from statistics import NormalDist


def z_for(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(*, successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when there is no data."""
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} outside [0, n={n}]")
    z = z_for(confidence)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar_exact(*, only_first: int, only_second: int) -> float:
    """Two-sided exact McNemar p-value for paired binary outcomes.

    `only_first`: pairs where only the first system was right; `only_second`: only the second.
    Under the null both kinds of discordant pair are equally likely (binomial, p = 1/2)."""
    if only_first < 0 or only_second < 0:
        raise ValueError("counts must be non-negative")
    n = only_first + only_second
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_first, only_second) + 1))
    return min(1.0, 2 * tail / 2**n)
