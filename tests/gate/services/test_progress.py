"""A gate run as it goes: per-layer units from the worker's heartbeats, ETA, and why a queued run waits."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from gate.layers.base import Progress
from gate.models import GateRun
from gate.services.gate_runs import gate_run_execute
from gate.services.progress import gate_run_live
from registry.selectors.workers import queue_workers_get
from tests.gate.services.test_gate_runs import start, suite  # noqa: F401 (fixtures)
from tests.registry.selectors.test_workers import queue

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache():
    cache.clear()
    yield
    cache.clear()


def workers_answer(reply):
    """The workers' answer to the broadcast, as the pages will read it (from the selector's cache)."""
    queue_workers_get(inspect=lambda: reply)


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_progress_counts_per_layer_and_estimates_the_rest(monkeypatch):
    reports, clock = [], Clock(100.0)
    monkeypatch.setattr("gate.layers.base.time.monotonic", clock)
    progress = Progress(totals={"clean_accuracy": 40, "robustness": 60}, report=lambda *a: reports.append(a))
    progress.begin("clean_accuracy")
    clock.now = 110.0
    progress.advance(40)  # 10 s for 40 units: 60 more take 15 s
    progress.begin("robustness")
    progress.advance(100)  # capped at the layer's total
    (_, begun), (first, detail), _, (last, final) = reports
    assert (begun["current"], begun["eta_seconds"]) == ("clean_accuracy", None)  # no pace yet: no ETA
    assert (first, detail["eta_seconds"], detail["current"]) == (40, 15.0, "clean_accuracy")
    assert detail["layers"]["robustness"] == {"done": 0, "total": 60}
    assert (last, final["layers"]["robustness"], final["eta_seconds"]) == (
        99,
        {"done": 60, "total": 60},
        None,
    )


def test_progress_reports_at_most_once_a_second_within_a_layer(monkeypatch):
    reports, clock = [], Clock(0.0)
    monkeypatch.setattr("gate.layers.base.time.monotonic", clock)
    progress = Progress(totals={"robustness": 100}, report=lambda *a: reports.append(a))
    progress.begin("robustness")
    for step in range(1, 21):  # 20 items in 2 s, one per 0.1 s
        clock.now = step / 10
        progress.advance(1)
    assert [percent for percent, _ in reports] == [0, 10, 20]  # on begin, then after 1 s and 2 s


def test_a_retry_counts_the_layers_an_earlier_attempt_finished(monkeypatch):
    reports, clock = [], Clock(0.0)
    monkeypatch.setattr("gate.layers.base.time.monotonic", clock)
    progress = Progress(
        totals={"clean_accuracy": 75, "robustness": 25},
        report=lambda *a: reports.append(a),
        finished={"clean_accuracy"},
    )
    progress.begin("robustness")
    clock.now = 5.0
    progress.advance(5)  # this attempt's pace: 5 units in 5 s, 20 more take 20 s
    assert [percent for percent, _ in reports] == [75, 80]  # starts at 75 %, not 0
    assert reports[-1][1]["eta_seconds"] == 20.0


def test_what_the_worker_does_is_in_its_report(monkeypatch):
    from gate.layers.base import Step

    reports = []
    progress = Progress(totals={"robustness": 10}, report=lambda *a: reports.append(a))
    progress.begin("robustness")
    progress.doing(step=Step.WAIT, version="family:v3", worker="gpu2@vm")
    assert reports[-1][1]["activity"] == {"step": "wait", "version": "family:v3", "worker": "gpu2@vm"}


def test_a_finished_run_shows_every_layer_done_with_its_units(versions, suite):  # noqa: F811
    candidate, _ = versions
    run = start(candidate, suite, batch_size=16, clean_accuracy_min=0.0)
    assert gate_run_live(run=run).layers[0].state == "waiting"
    run = gate_run_execute(gate_run_id=run.pk, worker="w1")
    run.refresh_from_db()
    # 60 items through the candidate and the baseline, as the worker reported them.
    assert run.progress_detail["layers"]["clean_accuracy"] == {"done": 120, "total": 120}
    (layer,) = gate_run_live(run=run).layers
    assert (layer.layer, layer.state, layer.done, layer.total, layer.verdict) == (
        "clean_accuracy",
        "done",
        120,
        120,
        "pass",
    )


def test_a_queued_run_says_how_many_runs_are_ahead_on_the_gpu_queue(versions, suite, sent_tasks):  # noqa: F811
    candidate, _ = versions
    first, second, third = (start(candidate, suite) for _ in range(3))
    GateRun.objects.filter(pk=first.pk).update(
        status="running",
        worker="vm:w1:task-1",
        started_at=timezone.now() - timedelta(seconds=30),
        heartbeat_at=timezone.now() - timedelta(seconds=5),
        progress_detail={
            "layers": {"clean_accuracy": {"done": 30, "total": 120}},
            "current": "clean_accuracy",
            "eta_seconds": 90.0,
        },
    )
    first.refresh_from_db()
    running = gate_run_live(run=first)
    assert running.layers[0].state == "running" and (running.layers[0].done, running.layers[0].total) == (
        30,
        120,
    )
    assert running.eta_seconds == pytest.approx(85.0, abs=1.0) and running.elapsed_seconds == pytest.approx(
        30, abs=1
    )
    assert (running.where, running.worker) == ("running", "w1")
    assert running.waiting_reason == "running on worker w1"
    assert gate_run_live(run=second).waiting_reason == "waiting in the gpu queue behind 1 run"
    assert gate_run_live(run=third).waiting_reason == "waiting in the gpu queue behind 2 runs"
    GateRun.objects.filter(pk__in=[first.pk, second.pk]).update(status="succeeded")
    assert gate_run_live(run=third).runs_ahead == 0


def test_a_queued_run_on_a_queue_no_worker_consumes_says_so(versions, suite, sent_tasks):  # noqa: F811
    candidate, _ = versions
    start(candidate, suite)
    second = start(candidate, suite)
    workers_answer({"cpu@vm": [queue("cpu")]})  # the gpu worker is gone; the cpu one answers
    live = gate_run_live(run=second)
    assert (live.where, live.queue_workers, live.runs_ahead) == ("no_worker", [], 1)
    assert live.waiting_reason.startswith("no worker is consuming the gpu queue")


def test_a_queued_run_behind_a_live_worker_waits_behind_it(versions, suite, sent_tasks):  # noqa: F811
    candidate, _ = versions
    first, second = start(candidate, suite), start(candidate, suite)
    workers_answer({"gpu@vm": [queue("gpu")]})
    live = gate_run_live(run=second)
    assert (live.where, live.queue_workers, live.waiting_reason) == (
        "behind",
        ["gpu@vm"],
        "waiting in the gpu queue behind 1 run",
    )
    first.delete()
    assert gate_run_live(run=second).where == "next"


def test_a_busy_worker_that_misses_the_broadcast_is_still_alive(versions, suite, sent_tasks):  # noqa: F811
    candidate, _ = versions
    first, second = start(candidate, suite), start(candidate, suite)
    GateRun.objects.filter(pk=first.pk).update(
        status="running", worker="vm:gpu@vm:t1", heartbeat_at=timezone.now()
    )
    workers_answer(None)  # nobody answered in time: the gpu worker is busy on a loaded machine
    live = gate_run_live(run=second)
    assert (live.where, live.queue_workers) == ("behind", ["gpu@vm"])


def test_a_running_run_whose_worker_went_silent_says_so(versions, suite, settings, sent_tasks):  # noqa: F811
    candidate, _ = versions
    run = start(candidate, suite)
    silent_since = timezone.now() - timedelta(seconds=settings.EVALHUB_GATE_RUN_STALE_SECONDS + 60)
    GateRun.objects.filter(pk=run.pk).update(
        status="running", worker="vm:gpu@vm:t1", heartbeat_at=silent_since
    )
    run.refresh_from_db()
    live = gate_run_live(run=run)
    assert (live.where, live.worker) == ("silent", "gpu@vm")
    assert live.waiting_reason.startswith("no report from worker gpu@vm for 36")
