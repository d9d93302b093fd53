from collections import Counter

import pytest
from scipy.stats import chisquare

from engines.routing import BASELINE, BUCKETS, CANDIDATE, arm_assign, bucket_of, share_to_buckets


def test_buckets_are_uniform_over_a_million_ids():
    counts = Counter(bucket_of(salt="exp-1", unit_id=f"user-{i}") for i in range(1_000_000))
    assert set(counts) == set(range(BUCKETS))
    assert chisquare(list(counts.values())).pvalue > 0.001


def test_pinned_bucket():
    # blake2b(b"salt\x1fuser-42", digest_size=8) = 8550e2be59a176c3; as an integer, modulo 10 000.
    assert bucket_of(salt="salt", unit_id="user-42") == 0x8550E2BE59A176C3 % 10_000 == 5507


def test_assignment_is_sticky_and_salted():
    first = [arm_assign(salt="a", unit_id=f"u{i}", candidate_buckets=5000).arm for i in range(2000)]
    again = [arm_assign(salt="a", unit_id=f"u{i}", candidate_buckets=5000).arm for i in range(2000)]
    other = [arm_assign(salt="b", unit_id=f"u{i}", candidate_buckets=5000).arm for i in range(2000)]
    assert first == again != other
    assert 900 < first.count(CANDIDATE) < 1100


def test_raising_the_share_keeps_everyone_on_the_candidate():
    ids = [f"u{i}" for i in range(20_000)]
    previous: set[str] = set()
    for percent in (0.01, 1, 5, 25, 50, 100):
        buckets = share_to_buckets(percent)
        on = {u for u in ids if arm_assign(salt="s", unit_id=u, candidate_buckets=buckets).arm == CANDIDATE}
        assert previous <= on
        assert abs(len(on) / len(ids) - percent / 100) < 0.01
        previous = on
    assert len(previous) == len(ids)


def test_one_percent_share_gives_one_percent_of_users():
    buckets = share_to_buckets(1)
    on = sum(
        arm_assign(salt="x", unit_id=str(i), candidate_buckets=buckets).arm == CANDIDATE
        for i in range(100_000)
    )
    assert 900 <= on <= 1100


def test_forced_arm_wins_and_is_marked():
    assignment = arm_assign(salt="s", unit_id="u", candidate_buckets=0, forced_arm=CANDIDATE)
    assert (assignment.arm, assignment.forced) == (CANDIDATE, True)
    assert arm_assign(salt="s", unit_id="u", candidate_buckets=0).arm == BASELINE
    with pytest.raises(ValueError):
        arm_assign(salt="s", unit_id="u", candidate_buckets=0, forced_arm="v5")


@pytest.mark.parametrize(("percent", "buckets"), [(0, 0), (0.01, 1), (1, 100), (12.34, 1234), (100, 10_000)])
def test_share_to_buckets(percent, buckets):
    assert share_to_buckets(percent) == buckets


@pytest.mark.parametrize("percent", [-1, 100.5, 0.005, 1.234])
def test_shares_outside_the_grid_are_refused(percent):
    with pytest.raises(ValueError):
        share_to_buckets(percent)
