"""Promotion goes through the registry: on every path (service, API, page, admin action, the analysis'
automatic ramp to 100 %) an unapproved candidate is refused and nothing moves; an approved one takes
all traffic, becomes `promoted` and retires the version it replaces, so the router and the registry
agree. Above the ungated share a canary needs a gate run whose offline layers passed."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from canary.models import Experiment
from canary.services.analysis import AnalysisCode, experiment_analyze
from canary.services.assignment import experiment_assign
from canary.services.experiments import (
    experiment_create,
    experiment_promote,
    experiment_ramp,
    experiment_rollback,
    experiment_start,
)
from registry.actors import SYSTEM
from registry.errors import ApplicationError
from registry.models import AuditLog, ModelVersion
from registry.services.versions import (
    VersionsCode,
    model_version_offline_gate_record,
    model_version_register,
)
from tests.canary.services.test_analysis import probe_report, traffic
from tests.canary.traffic import experiment_backdate
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db
BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
USERS = [f"user-{i}" for i in range(400)]


@pytest.fixture
def experiment():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=5, actor=SYSTEM)
    return experiment_start(experiment=created, actor=SYSTEM)


@pytest.fixture
def manager(make_client):
    return make_client("release_manager", username="rm")


def served(experiment: Experiment) -> set[str]:
    """The versions the router sends a few hundred users to now."""
    experiment = Experiment.objects.select_related("baseline", "candidate").get(pk=experiment.pk)
    return {experiment_assign(experiment=experiment, user_id=user).version.ref for user in USERS}


def statuses() -> dict[str, str]:
    return dict(ModelVersion.objects.values_list("label", "status"))


def assert_unchanged(experiment: Experiment) -> None:
    experiment.refresh_from_db()
    assert (experiment.status, experiment.traffic_percent) == ("running", 5.0)
    assert statuses() == {"v3": "promoted", "v4": "registered"}
    assert served(experiment) == {"fam:v3", "fam:v4"}
    assert not AuditLog.objects.filter(action="experiment.promoted").exists()
    # The only status moves: v3's declaration as the incumbent (registered -> promoted).
    moves = AuditLog.objects.filter(action="model_version.transition")
    assert [(m.target_repr, m.before, m.after) for m in moves] == [
        ("fam:v3", {"status": "registered"}, {"status": "promoted"})
    ]


def assert_promoted(experiment: Experiment) -> None:
    experiment.refresh_from_db()
    assert (experiment.status, experiment.traffic_percent) == ("promoted", 100.0)
    assert statuses() == {"v3": "retired", "v4": "promoted"}
    assert served(experiment) == {"fam:v4"}  # the router and the registry agree


def test_the_service_refuses_an_unapproved_candidate(experiment):
    with pytest.raises(ApplicationError) as refused:
        experiment_promote(experiment=experiment, actor=SYSTEM, reason="looks fine")
    assert (refused.value.status_code, refused.value.code, list(refused.value.fields)) == (
        409,
        "not_approved",
        ["candidate"],
    )
    assert_unchanged(experiment)


def test_an_approved_candidate_is_promoted_and_the_old_version_retired(
    experiment, approve, settings, sent_tasks, django_capture_on_commit_callbacks
):
    settings.EVALHUB_WEBHOOK_URL = "http://127.0.0.1:9/hook"
    approve(experiment.candidate)
    with django_capture_on_commit_callbacks(execute=True):
        experiment_promote(experiment=experiment, actor=SYSTEM, reason="all guardrails green")
    assert_promoted(experiment)
    retired = AuditLog.objects.get(action="model_version.transition", after={"status": "retired"})
    assert retired.target_repr == "fam:v3" and retired.reason == "replaced by fam:v4"
    events = [args[0] for name, args in sent_tasks if name.endswith("webhook_deliver_task")]
    assert "experiment.promoted" in events


def test_the_api_path(experiment, manager, approve):
    url = "/api/v1/canary/experiments/exp/promote"
    refused = manager.post(url, {"reason": "ship it"}, format="json")
    assert refused.status_code == 409 and list(refused.json()["error"]["fields"]) == ["candidate"]
    assert_unchanged(experiment)
    approve(experiment.candidate)
    assert manager.post(url, {"reason": "ship it"}, format="json").status_code == 200
    assert_promoted(experiment)


def test_the_page_path(experiment, approve):
    user = get_user_model().objects.create_user(username="rm-page", password="pw")
    from registry.services.tokens import user_role_grant

    user_role_grant(user=user, role="release_manager")
    page = Client()
    page.force_login(user)
    response = page.post("/canary/exp/promote/", {"reason": "ship it"}, follow=True)
    assert "not approved" in response.content.decode()
    assert_unchanged(experiment)
    approve(experiment.candidate)
    page.post("/canary/exp/promote/", {"reason": "ship it"})
    assert_promoted(experiment)


def test_the_admin_action_path(experiment, approve):
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser(username="root", password="pw"))
    action = {"action": "promote", "_selected_action": [experiment.pk]}
    response = admin.post("/admin/canary/experiment/", action, follow=True)
    assert "not approved" in response.content.decode()
    assert_unchanged(experiment)
    approve(experiment.candidate)
    admin.post("/admin/canary/experiment/", action, follow=True)
    assert_promoted(experiment)


def test_the_automatic_ramp_to_100_percent_path(approve):
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    created = experiment_create(
        name="exp", baseline=v3, candidate=v4, ramp=[5, 100], ramp_auto=True, actor=SYSTEM
    )
    # The traffic is half an hour old: the experiment started before it.
    experiment = experiment_backdate(
        experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=1)
    )
    traffic(sessions=400, arm="baseline")
    traffic(sessions=400, arm="candidate", seed=1)
    probe_report(experiment)
    waiting = experiment_analyze(experiment=experiment)
    assert (waiting.verdict, waiting.action) == ("pass", "waiting_for_release_manager")
    waits = waiting.reasons[-1]
    assert (waits["code"], waits["params"]["why"]["reason"]["code"]) == (
        AnalysisCode.RAMP_WAITS,
        VersionsCode.NOT_APPROVED,
    )
    assert_unchanged(experiment)
    approve(v4)
    experiment.refresh_from_db()
    promoted = experiment_analyze(experiment=experiment)
    assert promoted.action == "promoted"
    assert_promoted(experiment)


def test_above_the_ungated_share_a_canary_needs_an_offline_gate_pass(experiment, manager, settings):
    settings.EVALHUB_CANARY_UNGATED_MAX_PERCENT = 10
    url = "/api/v1/canary/experiments/exp/ramp"
    assert manager.post(url, {"traffic_percent": 10}, format="json").status_code == 200
    refused = manager.post(url, {"traffic_percent": 25}, format="json")
    assert refused.status_code == 409 and list(refused.json()["error"]["fields"]) == ["traffic_percent"]
    experiment.refresh_from_db()
    assert experiment.traffic_percent == 10.0
    model_version_offline_gate_record(version=experiment.candidate, gate_run_id=1, actor=SYSTEM)
    assert manager.post(url, {"traffic_percent": 25}, format="json").json()["traffic_percent"] == 25.0


def test_an_experiment_cannot_start_above_the_ungated_share(settings):
    settings.EVALHUB_CANARY_UNGATED_MAX_PERCENT = 10
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    draft = experiment_create(name="big", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    with pytest.raises(ApplicationError) as refused:
        experiment_start(experiment=draft, actor=SYSTEM)
    assert refused.value.code == "gate_required"
    assert Experiment.objects.get(pk=draft.pk).status == "draft"


def test_ramping_to_100_percent_is_a_promotion(experiment, approve):
    with pytest.raises(ApplicationError):
        experiment_ramp(experiment=experiment, actor=SYSTEM, traffic_percent=100)
    assert_unchanged(experiment)
    approve(experiment.candidate)
    experiment_ramp(experiment=experiment, actor=SYSTEM, traffic_percent=100)
    assert_promoted(experiment)


def test_a_rollback_leaves_the_registrys_promoted_version_serving(experiment, approve):
    approve(experiment.candidate)
    experiment_rollback(experiment=experiment, actor=SYSTEM, reason="guardrail")
    assert served(experiment) == {"fam:v3"}
    assert statuses() == {"v3": "promoted", "v4": "approved"}
