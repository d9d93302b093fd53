"""The registered plan binds the test: a run overriding one of its settings is refused at its start
(400, each key named), a policy changed after the start makes the layer answer `error`, and changing
the plan is a new registration by a release manager, with a reason, counting units from then on."""

from datetime import timedelta

import pytest
from django.utils import timezone

from canary.models import Experiment, OutcomeEvent
from canary.services.experiments import experiment_create
from engines.reasons import reason
from gate.judges.plan import PlanCode, moment
from gate.layers.registry import layer_get
from gate.models import GateRun
from gate.services.gate_runs import gate_run_execute, gate_run_start
from gate.services.horizons import experiment_start_registered
from gate.services.policies import gate_policy_save
from registry.actors import SYSTEM
from registry.errors import ApplicationError
from registry.models import AuditLog
from registry.roles import RELEASE_MANAGER
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_register
from tests.canary.traffic import experiment_backdate
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
POLICY = {
    "required_layers": ["business_value"],
    "business_metric": "review_hours",
    "business_min_effect": 0.2,
    "business_mde": 0.6,
    "business_planning_sd": 0.5,
    "business_cuped": False,
}


@pytest.fixture
def experiment():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    gate_policy_save(name="fam", config=POLICY, actor=SYSTEM)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    started = experiment_start_registered(experiment=created, actor=SYSTEM, reason="go")
    return experiment_backdate(started, started=timedelta(hours=2))


@pytest.fixture
def suite():
    records = [{"id": "a", "input": "x", "label": "payment"}]
    return eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]


def test_an_alpha_override_is_refused_at_the_start_naming_the_key(experiment, suite, ci_client):
    response = ci_client.post(
        "/api/v1/gate-runs/",
        {"candidate": "fam:v4", "policy_overrides": {"business_alpha": 0.25, "business_cuped": True}},
        format="json",
    )
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"]["code"] == "not_registered_test"
    assert set(body["error"]["fields"]) == {
        "policy_overrides.business_alpha",
        "policy_overrides.business_cuped",
    }
    assert body["error"]["fields"]["policy_overrides.business_alpha"][0].startswith(
        "experiment exp registered 0.05 for business_value at "
    )
    assert (body["error"]["reason"], body["error"]["params"]) == (
        "horizons.not_registered_test",
        {"name": "exp", "keys": ["business_alpha", "business_cuped"]},
    )
    assert not GateRun.objects.exists()


def test_overrides_equal_to_the_plan_and_of_other_layers_are_accepted(experiment, suite):
    run = gate_run_start(
        candidate=experiment.candidate,
        suite=suite,
        actor=SYSTEM,
        policy_overrides={"business_alpha": 0.05, "robustness_min": 0.5},
    )
    assert run.pk
    # A run that does not require layer 3 may set its keys: they judge nothing.
    other = gate_run_start(
        candidate=experiment.candidate,
        suite=suite,
        actor=SYSTEM,
        policy_overrides={"required_layers": ["clean_accuracy"], "business_alpha": 0.25},
    )
    assert other.pk


def test_a_policy_changed_after_the_start_makes_the_layer_an_error_naming_the_keys(experiment, suite):
    gate_policy_save(name="fam", config={**POLICY, "business_alpha": 0.1, "business_mde": None}, actor=SYSTEM)
    run = gate_run_start(candidate=experiment.candidate, suite=suite, actor=SYSTEM)
    gate_run_execute(gate_run_id=run.pk, worker="test")
    [layer] = GateRun.objects.get(pk=run.pk).layers.all()
    assert layer.verdict == "error" and GateRun.objects.get(pk=run.pk).verdict == "error"
    registered_at = moment(experiment.business_horizon["registered_at"])
    differences = [
        reason(PlanCode.SETTING_DIFFERS, key="business_alpha", value="0.1", registered="0.05"),
        reason(PlanCode.SETTING_DIFFERS, key="business_mde", value="null", registered="0.6"),
    ]
    assert layer.reasons == [
        reason(PlanCode.NOT_REGISTERED, differences=differences, at=registered_at).to_json()
    ]
    assert layer.estimate is None and layer_get("business_value").details(layer).judged.blind


def test_a_new_registration_counts_from_then_on(experiment, suite, make_client):
    # Users who arrived before the new registration never count under it.
    before = experiment.share_since + timedelta(minutes=5)
    OutcomeEvent.objects.bulk_create(
        OutcomeEvent(
            experiment=experiment,
            event_id=f"old-{u}",
            unit_id=f"old-{u}",
            user_id=f"old-{u}",
            arm="baseline" if u % 2 else "candidate",
            metric="review_hours",
            value=2.0,
            occurred_at=before,
        )
        for u in range(40)
    )
    gate_policy_save(name="fam", config={**POLICY, "business_alpha": 0.1}, actor=SYSTEM)
    manager = make_client(RELEASE_MANAGER)
    refused = manager.post("/api/v1/canary/experiments/exp/plan/", {}, format="json")
    assert refused.status_code == 400 and "reason" in refused.json()["error"]["fields"]
    assert make_client("ci").post("/api/v1/canary/experiments/exp/plan/", {"reason": "x"}).status_code == 403
    response = manager.post(
        "/api/v1/canary/experiments/exp/plan/", {"reason": "alpha 0.1 agreed with finance"}, format="json"
    )
    assert response.status_code == 200, response.content
    plan = response.json()["business_horizon"]
    assert plan["sequence"] == 2 and plan["settings"]["business_alpha"] == 0.1
    assert plan["earlier"] == [
        {
            "sequence": 1,
            "registered_at": experiment.business_horizon["registered_at"],
            "look_verdict": None,
            "look_taken_at": None,
            "look_gate_run": None,
        }
    ]
    assert timezone.now() - timedelta(seconds=30) < timezone.datetime.fromisoformat(plan["counted_from"])
    row = AuditLog.objects.get(action="experiment.plan_replace")
    assert row.actor == manager.user and row.reason == "alpha 0.1 agreed with finance"
    assert row.before["business_value"]["settings"]["business_alpha"] == 0.05
    # The new plan binds: the run under the changed policy judges it (no error), blind and empty.
    run = gate_run_start(candidate=experiment.candidate, suite=suite, actor=SYSTEM)
    gate_run_execute(gate_run_id=run.pk, worker="test")
    [layer] = GateRun.objects.get(pk=run.pk).layers.all()
    judged = layer_get("business_value").details(layer).judged
    assert layer.verdict == "insufficient_data" and judged.blind
    assert (judged.baseline.units, judged.candidate.units) == (0, 0)
    # Only a running or paused experiment takes a new plan.
    Experiment.objects.filter(pk=experiment.pk).update(status="rolled_back")
    with pytest.raises(ApplicationError) as ended:
        from gate.services.horizons import experiment_plans_register_again

        experiment_plans_register_again(experiment=experiment, actor=SYSTEM, reason="again")
    assert ended.value.status_code == 409
