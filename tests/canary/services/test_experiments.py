"""The share history: every lifecycle move that changes the candidate's share writes a typed row in the
transaction of its audit row, and the dashboard's traffic windows are read from those rows."""

import importlib
from datetime import timedelta

import pytest
from django.apps import apps

from canary.models import TrafficShareChange
from canary.selectors.history import share_windows
from canary.services.experiments import (
    experiment_create,
    experiment_pause,
    experiment_promote,
    experiment_ramp,
    experiment_resume,
    experiment_rollback,
    experiment_start,
)
from registry.actors import SYSTEM
from registry.errors import ApplicationError
from registry.models import AuditLog
from registry.services.versions import model_version_register
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db
BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
fill_from_audit = importlib.import_module(
    "canary.migrations.0013_traffic_share_change"
).share_changes_from_audit


@pytest.fixture
def experiment():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    return experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=5, actor=SYSTEM)


def history(experiment) -> list[tuple[str, float, str]]:
    return [
        (c.cause, c.percent, c.actor_name) for c in TrafficShareChange.objects.filter(experiment=experiment)
    ]


def test_each_move_records_the_share_it_leaves_and_the_windows_follow(experiment):
    experiment = experiment_start(experiment=experiment, actor=SYSTEM)
    experiment = experiment_ramp(experiment=experiment, actor=SYSTEM, traffic_percent=20)
    experiment = experiment_pause(experiment=experiment, actor=SYSTEM)
    experiment = experiment_resume(experiment=experiment, actor=SYSTEM)
    experiment = experiment_rollback(experiment=experiment, actor=SYSTEM, reason="errors")
    assert history(experiment) == [
        ("start", 5, "system"),
        ("ramp", 20, "system"),
        ("pause", 0, "system"),
        ("resume", 20, "system"),
        ("rollback", 0, "system"),
    ]
    changes = list(TrafficShareChange.objects.filter(experiment=experiment))
    windows = share_windows(experiment=experiment)
    assert [(w.opened_by, w.traffic_percent, w.current) for w in windows] == [
        ("start", 5, False),
        ("ramp", 20, False),
        ("resume", 20, False),
    ]
    # Each window runs from its change to the next (the last one to the experiment's end).
    assert [(w.window.start, w.window.end) for w in windows] == [
        (experiment.started_at, changes[1].at),
        (changes[1].at, changes[2].at),
        (changes[3].at, experiment.ended_at),
    ]


def test_a_move_that_fails_after_its_audit_row_leaves_neither_row(experiment):
    experiment = experiment_start(experiment=experiment, actor=SYSTEM)
    # The candidate is not approved: the registry refuses inside the promotion's transaction, after
    # the status move wrote its audit row and its share change.
    with pytest.raises(ApplicationError):
        experiment_promote(experiment=experiment, actor=SYSTEM, reason="looks fine")
    assert history(experiment) == [("start", 5, "system")]
    assert not AuditLog.objects.filter(action="experiment.promoted").exists()


def test_the_migration_fills_the_history_from_the_audit_rows(experiment):
    experiment = experiment_start(experiment=experiment, actor=SYSTEM)
    experiment = experiment_ramp(experiment=experiment, actor=SYSTEM, traffic_percent=12.5)
    experiment = experiment_pause(experiment=experiment, actor=SYSTEM)
    experiment = experiment_resume(experiment=experiment, actor=SYSTEM)
    recorded = list(TrafficShareChange.objects.all())
    TrafficShareChange.objects.all().delete()
    fill_from_audit(apps, None)
    filled = list(TrafficShareChange.objects.all())
    assert [(c.cause, c.buckets, c.actor_name) for c in filled] == [
        (c.cause, c.buckets, c.actor_name) for c in recorded
    ]
    # The audit row's own time, a moment after the service's (the start: the experiment's start time).
    assert filled[0].at == recorded[0].at == experiment.started_at
    assert all(
        timedelta(0) <= f.at - r.at < timedelta(seconds=5) for f, r in zip(filled, recorded, strict=True)
    )
