"""Canary assignment: which arm serves a unit (a user, or a session without a user). Pure, no Django.

bucket = the first 8 bytes of blake2b(salt, unit id) modulo 10 000; the unit is on the candidate
when its bucket is below the share in buckets (1 % = 100 buckets, 0.01 % = 1). So:
- sticky: the same (salt, unit) always gives the same bucket, in any process, after any restart;
- monotonic: raising the share only adds buckets, so everyone already on the candidate stays;
- independent across experiments: each experiment has its own salt.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

BUCKETS = 10_000
BASELINE, CANDIDATE = "baseline", "candidate"
ARMS = (BASELINE, CANDIDATE)


def share_to_buckets(percent: float) -> int:
    """A traffic share in percent (0..100, steps of 0.01) as a number of buckets."""
    if not 0 <= percent <= 100:
        raise ValueError(f"share {percent} % is outside 0..100")
    buckets = round(percent * BUCKETS / 100)
    if abs(buckets - percent * BUCKETS / 100) > 1e-6:
        raise ValueError(f"share {percent} % is not a multiple of {100 / BUCKETS} %")
    return buckets


def bucket_of(*, salt: str, unit_id: str) -> int:
    digest = hashlib.blake2b(f"{salt}\x1f{unit_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % BUCKETS


@dataclass(frozen=True)
class Assignment:
    arm: str
    bucket: int
    forced: bool = False  # a QA override chose the arm


def arm_assign(
    *, salt: str, unit_id: str, candidate_buckets: int, forced_arm: str | None = None
) -> Assignment:
    """The arm for `unit_id`; `forced_arm` (an allow-listed QA override) wins."""
    bucket = bucket_of(salt=salt, unit_id=unit_id)
    if forced_arm is not None:
        if forced_arm not in ARMS:
            raise ValueError(f"arm must be one of {ARMS}, not {forced_arm!r}")
        return Assignment(arm=forced_arm, bucket=bucket, forced=True)
    return Assignment(arm=CANDIDATE if bucket < candidate_buckets else BASELINE, bucket=bucket)
