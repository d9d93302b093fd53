"""Cancelling a gate run: who may, what it leaves (status, verdict, audit row, the candidate's status),
and a worker in the middle of an attack stopping without storing more."""

import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.test import APIClient

from gate.layers.base import ClaimLost
from gate.models import GateRun, SampleResult
from gate.services.gate_runs import GateRunsCode, gate_run_cancel, gate_run_execute, gate_run_start
from registry.actors import SYSTEM
from registry.errors import ApplicationError
from registry.models import AuditLog
from registry.services.tokens import api_token_create, user_role_grant
from tests.gate.layers.test_robustness_adversarial import ATTACK, suite  # noqa: F401 (fixture)
from tests.pages import page_text

pytestmark = pytest.mark.django_db


def user_with(role: str, name: str):
    user = get_user_model().objects.create_user(username=name)
    user_role_grant(user=user, role=role)
    return user


def refused(**kwargs) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        gate_run_cancel(**kwargs)
    return caught.value


def test_the_starter_cancels_a_queued_run_which_no_worker_then_starts(versions, suite):  # noqa: F811
    candidate, _ = versions
    starter, other = user_with("ci", "starter"), user_with("ci", "other-ci")
    run = gate_run_start(candidate=candidate, suite=suite, actor=starter, policy_overrides=ATTACK)
    candidate.refresh_from_db()
    assert candidate.status == "evaluating"
    not_yours = refused(gate_run_id=run.pk, actor=other)
    assert (not_yours.status_code, not_yours.reason.code) == (403, GateRunsCode.CANCEL_NOT_YOURS)
    assert refused(gate_run_id=run.pk, actor=user_with("viewer", "viewer")).status_code == 403
    gate_run_cancel(gate_run_id=run.pk, actor=starter, why="wrong suite")
    run.refresh_from_db()
    assert (run.status, run.verdict, run.is_finished) == ("cancelled", "error", True)
    assert run.verdict_reasons[0]["code"] == GateRunsCode.CANCELLED
    assert run.verdict_reasons[0]["params"] == {"actor": "starter", "why": "wrong suite"}
    row = AuditLog.objects.get(action="gate_run.cancel")
    assert (row.actor, row.before, row.after, row.reason) == (
        starter,
        {"status": "queued"},
        {"status": "cancelled"},
        "wrong suite",
    )
    candidate.refresh_from_db()
    assert candidate.status == "registered"  # no run of it is active any more
    assert gate_run_execute(gate_run_id=run.pk, worker="w") is None  # the queued message finds nothing
    twice = refused(gate_run_id=run.pk, actor=starter)
    assert (twice.status_code, twice.reason.code) == (409, GateRunsCode.NOT_ACTIVE)


def test_a_release_manager_cancels_through_the_api_and_the_page(versions, suite, client):  # noqa: F811
    candidate, _ = versions
    manager = user_with("release_manager", "manager")
    runs = [
        gate_run_start(candidate=candidate, suite=suite, actor=SYSTEM, policy_overrides=ATTACK) for _ in "ab"
    ]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=manager)[1]}")
    response = api.post(f"/api/v1/gate-runs/{runs[0].pk}/cancel/", {"reason": "stop"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    again = api.post(f"/api/v1/gate-runs/{runs[0].pk}/cancel/", {}, format="json")
    assert again.status_code == 409 and again.json()["error"]["reason"] == GateRunsCode.NOT_ACTIVE
    bad = api.post(f"/api/v1/gate-runs/{runs[1].pk}/cancel/", {"reason": ["a"], "x": 1}, format="json")
    assert bad.status_code == 400 and set(bad.json()["error"]["fields"]) == {"reason", "x"}
    client.force_login(manager)
    page = page_text(client.get(f"/gate-runs/{runs[1].pk}/"))
    assert "Cancel this run" in page
    done = client.post(f"/gate-runs/{runs[1].pk}/cancel/", {"reason": "from the page"}, follow=True)
    assert f"Gate run #{runs[1].pk} cancelled." in page_text(done)
    assert "Cancel this run" not in page_text(done)
    assert GateRun.objects.filter(status="cancelled").count() == 2


@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs concurrent PostgreSQL sessions")
@pytest.mark.django_db(transaction=True)
def test_a_running_attack_stops_soon_after_it_is_cancelled(versions, suite, monkeypatch):  # noqa: F811
    from engines.perturbation import word_attack

    attack = word_attack.word_attack_run

    def slow_chunk(**kwargs):
        time.sleep(1)
        return attack(**kwargs)

    monkeypatch.setattr(word_attack, "word_attack_run", slow_chunk)
    candidate, _ = versions
    run = gate_run_start(candidate=candidate, suite=suite, actor=SYSTEM, policy_overrides=ATTACK)
    stopped = []

    def work():  # as the Celery task does: a lost claim ends the task quietly
        try:
            gate_run_execute(gate_run_id=run.pk, worker="vm:gpu@vm:t1")
        except ClaimLost as exc:
            stopped.append(str(exc))
        finally:
            connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    while not GateRun.objects.filter(pk=run.pk, status="running").exists():
        time.sleep(0.05)
    time.sleep(1.5)  # inside the first chunks of the attack
    gate_run_cancel(gate_run_id=run.pk, actor=SYSTEM, why="test")
    cancelled_at = time.monotonic()
    worker.join(timeout=30)
    assert not worker.is_alive() and time.monotonic() - cancelled_at < 5
    assert stopped == [f"gate run {run.pk} is no longer held by vm:gpu@vm:t1"]
    run.refresh_from_db()
    assert (run.status, run.verdict) == ("cancelled", "error")
    assert not SampleResult.objects.filter(
        layer_result__gate_run=run
    ).exists()  # it stored no verdict's samples
    assert not run.layers.exclude(verdict="pending").exists()
