"""Streams through the canary proxy under load and each fault, on the production stack (gunicorn
gthread, PostgreSQL, the proxy's telemetry through a Redis stream on a redis-server of its own, two
reference model servers streaming token by token): a smaller run of bench/stream_load.py. No turn
event is lost or stored twice in any phase; a Redis restarted mid-stream costs nothing; the
clients that went away are recorded as abandoned; the streams the killed candidate was answering
are raised by the official SDK and recorded as failed answers, and the requests after it fall back.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.slow, pytest.mark.e2e]
ARGS = (
    "--clients 12 --seconds 4 --direct-clients 4 --fault-clients 8 --fault-seconds 3 --token-delay-ms 60 "
    "--port-base 0 --redis-port 0 --database bench_load_test_stream"
)


@pytest.fixture(scope="module")
def table() -> dict[str, list[str]]:
    if not settings.POSTGRES_UP or shutil.which("redis-server") is None:
        pytest.skip("needs PostgreSQL on 127.0.0.1 and redis-server on PATH")
    result = subprocess.run(
        [sys.executable, "bench/stream_load.py", *ARGS.split()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (result.stdout[-4000:], result.stderr[-4000:])
    rows = {}
    for line in result.stdout.splitlines():
        cells = line.split()
        if cells and cells[0] in ("load", "redis", "disconnect", "kill"):
            rows[cells[0]] = cells
    return rows


@pytest.mark.parametrize("phase", ["load", "redis", "disconnect", "kill"])
def test_no_turn_event_is_lost_or_stored_twice(table, phase):
    _, clients, streams, stored_expected, lost, duplicated, *_ = table[phase]
    stored, expected = map(int, stored_expected.split("/"))
    assert int(streams) >= int(clients) and expected == 2 * int(streams)
    assert (stored, int(lost), int(duplicated)) == (expected, 0, 0)


def test_the_redis_restart_sent_the_proxy_to_postgresql_and_back(table):
    outcome = " ".join(table["redis"][9:])
    done, direct = map(int, re.fullmatch(r"(\d+) done, (\d+) answers stored directly", outcome).groups())
    assert done == int(table["redis"][2]) and direct > 0


def test_clients_that_went_away_are_abandoned_answers_cut_short(table):
    outcome = " ".join(table["disconnect"][9:])
    marked, left = map(int, re.match(r"(\d+)/(\d+) abandoned", outcome).groups())
    assert marked == left == int(table["disconnect"][2])


def test_the_killed_candidate_s_streams_fail_and_later_requests_fall_back(table):
    outcome = " ".join(table["kill"][9:])
    raised, failed, fell_back = map(
        int, re.fullmatch(r"(\d+) raised = (\d+) failed, (\d+) fell back", outcome).groups()
    )
    assert raised == failed > 0 and fell_back > 0
