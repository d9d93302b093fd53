"""A gate run as it goes: per-layer units from the worker's heartbeats, ETA, and why a queued run waits."""

from datetime import timedelta

import pytest
from django.utils import timezone

from gate.layers.base import Progress
from gate.models import GateRun
from gate.services.gate_runs import gate_run_execute
from gate.services.progress import gate_run_live
from tests.gate.services.test_gate_runs import start, suite  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def test_progress_counts_per_layer_and_estimates_the_rest(monkeypatch):
    reports = []
    clock = iter([100.0, 110.0, 130.0])
    monkeypatch.setattr("gate.layers.base.time.monotonic", lambda: next(clock))
    progress = Progress(totals={"clean_accuracy": 40, "robustness": 60}, report=lambda *a: reports.append(a))
    progress.begin("clean_accuracy")
    progress.advance(40)  # 10 s for 40 units: 60 more take 15 s
    progress.begin("robustness")
    progress.advance(100)  # capped at the layer's total
    (first, detail), (last, final) = reports
    assert (first, detail["eta_seconds"], detail["current"]) == (40, 15.0, "clean_accuracy")
    assert detail["layers"]["robustness"] == {"done": 0, "total": 60}
    assert (last, final["layers"]["robustness"], final["eta_seconds"]) == (
        99,
        {"done": 60, "total": 60},
        None,
    )


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
    assert gate_run_live(run=second).waiting_reason == "1 run ahead on the gpu queue"
    assert gate_run_live(run=third).waiting_reason == "2 runs ahead on the gpu queue"
    GateRun.objects.filter(pk__in=[first.pk, second.pk]).update(status="succeeded")
    assert gate_run_live(run=third).runs_ahead == 0
