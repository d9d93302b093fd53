"""A proxied turn keeps its fields through the stream's JSON, and entries from before the dataclass
(with their `source` key) still drain to the same row; a Redis restarted between answers loses no
turn event and stores none twice; threads that record at once share one Redis client."""

import json
import shutil
import threading
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from canary.models import TurnEvent
from canary.services import telemetry
from canary.services.experiments import experiment_create
from canary.services.telemetry import ProxiedTurn, turn_events_record, turn_stream_drain, turn_stream_pending
from evalhub.devstack import RedisServer, port_free
from registry.actors import SYSTEM
from registry.services.versions import model_version_register

TURN = ProxiedTurn(
    experiment_id=7,
    event_id="px-1-a",
    session_id="s",
    user_id="u",
    arm="candidate",
    turn_index=1,
    role="assistant",
    text="answer",
    occurred_at=datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC),
    version_id=3,
    latency_ms=12.5,
    fallback=True,
)


def test_a_turn_comes_back_from_its_json_and_becomes_a_proxy_row():
    assert ProxiedTurn.from_json(TURN.to_json()) == TURN
    row = TURN.row()
    assert (row.source, row.experiment_id, row.version_id, row.occurred_at) == (
        TurnEvent.Source.PROXY,
        7,
        3,
        TURN.occurred_at,
    )


def test_an_entry_written_before_the_dataclass_still_reads():
    old = json.loads(TURN.to_json()) | {"source": "proxy"}
    assert ProxiedTurn.from_json(json.dumps(old).encode()) == TURN


# The stream against a redis-server of the test's own, stopped and started again as a deploy or a
# crash of Redis would (its append-only file kept, as in docker-compose.yml).
@pytest.fixture
def own_redis(tmp_path, settings):
    if shutil.which("redis-server") is None:
        pytest.skip("needs redis-server on PATH")
    server = RedisServer(port=port_free(), scratch=tmp_path)
    server.start()
    settings.EVALHUB_TELEMETRY_REDIS_URL = f"redis://127.0.0.1:{server.port}/0"
    settings.EVALHUB_TELEMETRY_STREAM = "test:turns"
    yield server
    server.stop()


@pytest.fixture
def experiment(db, small_bow):
    versions = {
        arm: model_version_register(
            family="fam",
            label=arm,
            backend_kind="builtin",
            backend_config={"path": str(small_bow)},
            actor=SYSTEM,
        )
        for arm in ("baseline", "candidate")
    }
    return experiment_create(name="exp", actor=SYSTEM, **versions)


def turns(experiment, tag: str, n: int) -> list[ProxiedTurn]:
    return [
        replace(
            TURN, experiment_id=experiment.pk, event_id=f"px-{tag}{i}-a", user_id=f"{tag}{i}", version_id=None
        )
        for i in range(n)
    ]


def stored_ids() -> Counter:
    return Counter(TurnEvent.objects.values_list("event_id", flat=True))


@pytest.mark.django_db
def test_a_redis_restart_between_answers_loses_no_event_and_stores_none_twice(own_redis, experiment):
    before, during, after = (turns(experiment, tag, 5) for tag in "abc")
    turn_events_record(events=before)  # into the stream
    own_redis.stop()
    turn_events_record(events=during)  # Redis down: straight into PostgreSQL
    assert set(stored_ids()) == {e.event_id for e in during}
    own_redis.start()
    turn_events_record(events=after)  # the same client, reconnected
    turn_events_record(events=during)  # a retry of events already stored
    assert turn_stream_drain(claim_idle_ms=0) == 15
    assert turn_stream_pending() == 0
    stored = stored_ids()
    assert set(stored) == {e.event_id for e in before + during + after}
    assert set(stored.values()) == {1}


def first_request(barrier: threading.Barrier, clients: list, events: list[ProxiedTurn]) -> None:
    barrier.wait()
    clients.append(telemetry._redis())
    turn_events_record(events=events)


@pytest.mark.django_db
def test_threads_that_record_their_first_events_at_once_share_one_client_and_lose_none(own_redis, experiment):
    # Each thread making its own client dropped all but one, and a dropped client closes its
    # connection pool under the pipeline of the thread that made it (its events then lost). A race:
    # three rounds of 32 threads let it show (the old code failed about one run of this test in three).
    threads, clients = 32, []
    for round_ in range(3):
        telemetry._clients.clear()  # a web process's first requests
        barrier = threading.Barrier(threads)

        workers = [
            threading.Thread(
                target=first_request, args=(barrier, clients, turns(experiment, f"r{round_}t{i}-", 2))
            )
            for i in range(threads)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=30)
        assert len({id(client) for client in clients[-threads:]}) == 1
    assert turn_stream_pending() == 3 * 2 * threads and not TurnEvent.objects.exists()
