"""The dashboard's share chart is drawn from the experiment's share changes (not its audit rows), down
to 0 where a pause or a rollback put everyone on the baseline and up to 100 at a promotion."""

import pytest
from django.utils import timezone

from canary.models import TrafficShareChange
from canary.services.experiments import (
    experiment_pause,
    experiment_ramp,
    experiment_resume,
    experiment_rollback,
    experiment_start,
)
from gate.services.dashboard import experiment_dashboard
from registry.actors import SYSTEM
from tests.canary.services.test_experiments import experiment  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def test_the_share_chart_steps_through_the_recorded_changes(experiment):  # noqa: F811
    experiment = experiment_start(experiment=experiment, actor=SYSTEM)
    experiment = experiment_ramp(experiment=experiment, actor=SYSTEM, traffic_percent=20)
    experiment = experiment_pause(experiment=experiment, actor=SYSTEM)
    experiment = experiment_resume(experiment=experiment, actor=SYSTEM)
    start, ramp, pause, resume = TrafficShareChange.objects.filter(experiment=experiment)
    now = timezone.now()
    dashboard = experiment_dashboard(experiment=experiment, now=now)
    [chart] = [chart for chart in dashboard.charts if chart.id == "traffic-share"]
    [series] = chart.lines
    assert series.step and series.points == [
        (experiment.started_at.isoformat(), 5),
        (ramp.at.isoformat(), 20),
        (pause.at.isoformat(), 0),
        (resume.at.isoformat(), 20),
        (now.isoformat(), 20),
    ]
    assert start.at == experiment.started_at


def test_a_rollback_drops_the_share_to_0_where_it_happened_and_holds_it_to_the_end(experiment):  # noqa: F811
    experiment = experiment_start(experiment=experiment, actor=SYSTEM)
    experiment = experiment_rollback(experiment=experiment, actor=SYSTEM, reason="latency")
    rollback = TrafficShareChange.objects.get(experiment=experiment, cause="rollback")
    dashboard = experiment_dashboard(experiment=experiment, now=timezone.now())
    [chart] = [chart for chart in dashboard.charts if chart.id == "traffic-share"]
    assert chart.lines[0].points[-2:] == [(rollback.at.isoformat(), 0), (experiment.ended_at.isoformat(), 0)]
