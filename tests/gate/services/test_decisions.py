"""Release decisions: who may decide, when approval needs an override by two release managers,
and that a decision is recorded once, audited, announced, and never changed."""

import json
import threading

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import Client

from engines.reasons import Term, reason
from gate.models import Decision, GateRun
from gate.selectors.decisions import override_request_open
from gate.services import decisions as decisions_service
from gate.services.decisions import DecisionsCode, decision_record
from gate.services.gate_runs import gate_run_fail, gate_run_finish, gate_run_start
from registry.actors import SYSTEM
from registry.dispatch import Task
from registry.errors import ApplicationError
from registry.models import AuditLog, EvalSuite, ModelVersion
from registry.services.versions import model_version_register
from tests.lifecycle import version_to
from tests.pages import page_text

pytestmark = pytest.mark.django_db
Status = ModelVersion.Status
BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}


def refused(status_code: int, field: str, code: str | None = None, **kwargs) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        decision_record(**{"reason": "because", **kwargs})
    error = caught.value
    assert (error.status_code, list(error.fields)) == (status_code, [field]), (error.code, error.message)
    if code is not None:
        assert error.code == code
    return error


def status_of(version) -> str:
    version.refresh_from_db()
    return version.status


@pytest.mark.parametrize("role", ["viewer", "ci", "app", None])
def test_only_release_managers_decide(decision_user, version_gated, role):
    version, _ = version_gated("pass")
    refused(
        403, "decided_by", "permission_denied", version=version, action="approve", actor=decision_user(role)
    )
    assert not Decision.objects.exists() and status_of(version) == Status.GATE_PASSED


@pytest.mark.parametrize("reason", ["", "   ", "x" * 2001])
def test_reason_is_required_and_bounded(decision_user, version_gated, reason):
    version, _ = version_gated("pass")
    refused(400, "reason", version=version, action="approve", reason=reason, actor=decision_user())
    assert not Decision.objects.exists()


def test_approval_of_a_passed_gate_moves_the_version_audits_and_announces(
    decision_user, version_gated, settings, django_capture_on_commit_callbacks, sent_tasks
):
    settings.EVALHUB_WEBHOOK_URL = "http://127.0.0.1:9/hook"
    version, run = version_gated("pass")
    manager = decision_user()
    with django_capture_on_commit_callbacks(execute=True):
        decision = decision_record(version=version, action="approve", reason=" looks good ", actor=manager)
    assert (decision.gate_run, decision.gate_verdict, decision.reason) == (run, "pass", "looks good")
    assert decision.decided_by == manager and status_of(version) == Status.APPROVED
    row = AuditLog.objects.get(action="decision.approve")
    assert (row.actor, row.target_id, row.reason) == (manager, str(version.pk), "looks good")
    assert row.before == {"status": "gate_passed"}
    assert row.after["status"] == "approved" and row.after["decision"] == decision.pk
    assert AuditLog.objects.filter(action="model_version.transition", after={"status": "approved"}).exists()
    [(event, body)] = [args for name, args in sent_tasks if name == Task.WEBHOOK_DELIVER]
    assert event == "decision.recorded"
    assert json.loads(body)["data"] == {
        "decision": decision.pk,
        "version": "fam:v1",
        "version_id": version.pk,
        "action": "approve",
        "reason": "looks good",
        "by": manager.username,
        "gate_run": run.pk,
        "gate_verdict": "pass",
        "gate_weakened": [],
        "confirms": None,
        "status": "approved",
    }


def test_approval_of_a_gate_that_did_not_pass_needs_an_override(decision_user, version_gated):
    version, _ = version_gated("fail")
    error = refused(
        409, "action", "override_required", version=version, action="approve", actor=decision_user()
    )
    assert error.reason == reason(
        DecisionsCode.OVERRIDE_REQUIRED_FAILED, ref=version.ref, verdict=Term("fail")
    )
    assert status_of(version) == Status.GATE_FAILED and not Decision.objects.exists()


def test_a_version_not_at_a_decision_point_is_refused(decision_user, version_gated):
    version, _ = version_gated("pass")
    ModelVersion.objects.filter(pk=version.pk).update(status=Status.EVALUATING)
    refused(409, "version", "illegal_transition", version=version, action="approve", actor=decision_user())
    ModelVersion.objects.filter(pk=version.pk).update(status=Status.ROLLED_BACK)
    refused(409, "version", "illegal_transition", version=version, action="reject", actor=decision_user())


@pytest.fixture
def running(version_gated, sent_tasks):
    """A version whose gate failed once and is being gated again (a run queued, the version evaluating)."""
    version, _ = version_gated("fail")
    run = gate_run_start(candidate=version, suite=EvalSuite.objects.get(name="decisions"), actor=SYSTEM)
    assert status_of(version) == Status.EVALUATING
    return version, run


@pytest.mark.parametrize("action", ["approve", "override_request"])
def test_a_running_gate_holds_approval_back_once_and_clearly(decision_user, running, action):
    version, run = running
    error = refused(409, "gate_run", "gate_run_active", version=version, action=action, actor=decision_user())
    assert error.reason == reason(
        DecisionsCode.GATE_RUN_ACTIVE, pk=run.pk, ref="fam:v1", status=Term("queued")
    )
    assert error.fields == {"gate_run": [error.reason]}  # the reason once, naming the field
    assert status_of(version) == Status.EVALUATING and not Decision.objects.exists()


@pytest.mark.parametrize("ending", ["fail", "finish"])
def test_a_version_is_rejected_while_its_gate_runs_and_the_runs_end_leaves_it_rejected(
    decision_user, running, ending
):
    """Rejecting cancels nothing: the run goes on to its end, which moves a rejected version nowhere."""
    version, run = running
    decision = decision_record(
        version=version, action="reject", reason="stuck run; not this one", actor=decision_user()
    )
    assert status_of(version) == Status.REJECTED and decision.gate_run.verdict == "fail"  # the last finished
    if ending == "fail":
        gate_run_fail(gate_run_id=run.pk, status=GateRun.Status.ERROR, reason="worker lost")
    else:
        GateRun.objects.filter(pk=run.pk).update(status=GateRun.Status.RUNNING, worker="w")
        run.refresh_from_db()
        gate_run_finish(run=run)
    run.refresh_from_db()
    assert run.is_finished and status_of(version) == Status.REJECTED
    moves = AuditLog.objects.filter(action="model_version.transition", target_id=str(version.pk))
    assert moves.order_by("-id").first().after == {"status": "rejected"}


@pytest.mark.parametrize("action", ["approve", "override_request"])
def test_approving_needs_a_finished_gate_run_even_by_override(decision_user, action):
    version = model_version_register(family="fam", label="new", actor=SYSTEM, **BUILTIN)
    error = refused(
        409, "gate_run", "no_finished_gate_run", version=version, action=action, actor=decision_user()
    )
    assert error.reason == reason(DecisionsCode.NO_FINISHED_RUN, ref="fam:new")
    decision_record(version=version, action="reject", reason="never mind", actor=decision_user())
    assert status_of(version) == Status.REJECTED


@pytest.mark.parametrize(
    "status",
    [
        Status.REGISTERED,
        Status.EVALUATING,
        Status.GATE_PASSED,
        Status.GATE_FAILED,
        Status.APPROVED,
        Status.CANARY,
    ],
)
def test_a_version_is_rejected_from_every_status_before_production(decision_user, status):
    version = version_to(model_version_register(family="fam", label="v", actor=SYSTEM, **BUILTIN), status)
    decision_record(version=version, action="reject", reason="no", actor=decision_user())
    assert status_of(version) == Status.REJECTED


@pytest.mark.parametrize("status", [Status.PROMOTED, Status.REJECTED, Status.ROLLED_BACK, Status.RETIRED])
def test_production_and_the_ends_are_not_rejected(decision_user, status):
    version = version_to(model_version_register(family="fam", label="v", actor=SYSTEM, **BUILTIN), status)
    error = refused(
        409, "version", "illegal_transition", version=version, action="reject", actor=decision_user()
    )
    if status == Status.PROMOTED:
        assert error.reason == reason(DecisionsCode.SERVES_PRODUCTION, ref=version.ref)
    assert status_of(version) == status


def test_the_version_page_says_why_once(decision_user, running):
    version, run = running
    client = Client()
    client.force_login(decision_user())
    page = client.post(
        f"/versions/{version.ref}/decide/", {"action": "approve", "reason": "ship it"}, follow=True
    )
    text = page_text(page)
    sentence = f"Gate run {run.pk} of fam:v1 is still queued: approving waits for a finished run"
    assert text.count(sentence) == 1 and text.count("rejecting is possible now") == 1
    page = client.post(
        f"/versions/{version.ref}/decide/", {"action": "reject", "reason": "stuck"}, follow=True
    )
    assert "Recorded: reject of fam:v1." in page_text(page) and status_of(version) == Status.REJECTED


@pytest.mark.parametrize("verdict", ["pass", "fail"])
def test_reject_whatever_the_gate_said_also_by_the_registrant(decision_user, version_gated, verdict):
    registrant = decision_user()
    version, _ = version_gated(verdict, registered_by=registrant)
    decision = decision_record(version=version, action="reject", reason="not now", actor=registrant)
    assert decision.gate_verdict == verdict and status_of(version) == Status.REJECTED
    assert AuditLog.objects.filter(action="decision.reject", reason="not now").count() == 1


def test_registrant_may_not_approve_while_the_switch_is_on(decision_user, version_gated, settings):
    registrant = decision_user()
    version, _ = version_gated("pass", registered_by=registrant)
    assert settings.EVALHUB_DECISIONS_FORBID_SELF_APPROVAL is True  # the default
    refused(403, "decided_by", "self_approval", version=version, action="approve", actor=registrant)
    failed, _ = version_gated("fail", registered_by=registrant)
    refused(403, "decided_by", "self_approval", version=failed, action="override_request", actor=registrant)
    settings.EVALHUB_DECISIONS_FORBID_SELF_APPROVAL = False
    decision_record(version=version, action="approve", reason="own call", actor=registrant)
    assert status_of(version) == Status.APPROVED


def test_override_takes_two_different_release_managers(decision_user, version_gated):
    version, run = version_gated("fail")
    first, second = decision_user(), decision_user()
    request = decision_record(
        version=version, action="override_request", reason="known flaky layer", actor=first
    )
    assert (request.gate_run, request.gate_verdict) == (run, "fail")
    assert status_of(version) == Status.GATE_FAILED and override_request_open(version=version) == request
    refused(
        403,
        "decided_by",
        "second_release_manager_required",
        version=version,
        action="override_confirm",
        confirms=request,
        actor=first,
    )
    confirm = decision_record(
        version=version, action="override_confirm", reason="agreed", confirms=request, actor=second
    )
    assert confirm.confirms == request and status_of(version) == Status.APPROVED
    assert override_request_open(version=version) is None
    actions = list(AuditLog.objects.filter(action__startswith="decision.").values_list("action", flat=True))
    assert sorted(actions) == ["decision.override_confirm", "decision.override_request"]


def test_override_request_only_when_the_gate_did_not_pass_and_one_at_a_time(decision_user, version_gated):
    passed, _ = version_gated("pass")
    refused(409, "action", "gate_passed", version=passed, action="override_request", actor=decision_user())
    failed, _ = version_gated("fail")
    decision_record(version=failed, action="override_request", reason="first", actor=decision_user())
    refused(
        409,
        "action",
        "override_request_open",
        version=failed,
        action="override_request",
        actor=decision_user(),
    )


def test_a_request_about_an_older_gate_run_is_stale(decision_user, version_gated, gate_run_finished):
    version, _ = version_gated("fail")
    request = decision_record(version=version, action="override_request", reason="r", actor=decision_user())
    newer = gate_run_finished(version, "fail")
    refused(
        409,
        "confirms",
        "stale_override_request",
        version=version,
        action="override_confirm",
        confirms=request,
        actor=decision_user(),
    )
    assert override_request_open(version=version) is None
    fresh = decision_record(version=version, action="override_request", reason="again", actor=decision_user())
    assert fresh.gate_run == newer and status_of(version) == Status.GATE_FAILED


def test_a_named_gate_run_must_be_the_latest_finished_run_of_the_version(
    decision_user, version_gated, gate_run_finished
):
    version, old = version_gated("pass")
    _, other_run = version_gated("pass")
    refused(400, "gate_run", version=version, action="approve", gate_run=other_run, actor=decision_user())
    gate_run_finished(version, "fail")
    # The run the caller looked at passed, but a newer one has failed since.
    refused(
        409,
        "gate_run",
        "stale_gate_run",
        version=version,
        action="approve",
        gate_run=old,
        actor=decision_user(),
    )


def test_confirms_must_point_at_an_open_request_of_the_version(decision_user, version_gated):
    version, _ = version_gated("fail")
    manager = decision_user()
    refused(400, "confirms", version=version, action="override_confirm", actor=manager)
    other, _ = version_gated("fail")
    request = decision_record(version=other, action="override_request", reason="r", actor=decision_user())
    refused(400, "confirms", version=version, action="override_confirm", confirms=request, actor=manager)
    refused(400, "confirms", version=other, action="reject", confirms=request, actor=manager)
    rejection = decision_record(version=version, action="reject", reason="r", actor=decision_user())
    ModelVersion.objects.filter(pk=version.pk).update(status=Status.GATE_FAILED)
    refused(400, "confirms", version=version, action="override_confirm", confirms=rejection, actor=manager)


def test_a_request_is_confirmed_once(decision_user, version_gated, monkeypatch):
    version, _ = version_gated("fail")
    request = decision_record(version=version, action="override_request", reason="r", actor=decision_user())
    decision_record(
        version=version, action="override_confirm", reason="ok", confirms=request, actor=decision_user()
    )
    ModelVersion.objects.filter(pk=version.pk).update(status=Status.GATE_FAILED)  # as if re-gated
    kwargs = {"version": version, "action": "override_confirm", "confirms": request}
    refused(409, "confirms", "already_confirmed", actor=decision_user(), **kwargs)
    # Past the checks, the one-to-one `confirms` still refuses a second confirmation.
    monkeypatch.setattr(decisions_service, "_confirm_check", lambda **_: None)
    refused(409, "confirms", "already_confirmed", actor=decision_user(), **kwargs)
    assert Decision.objects.filter(action="override_confirm").count() == 1


def test_decisions_cannot_be_changed_or_deleted_through_the_model(decision_user, version_gated):
    version, _ = version_gated("pass")
    decision = decision_record(version=version, action="approve", reason="ok", actor=decision_user())
    decision.reason = "changed"
    with pytest.raises(ValueError):
        decision.save()
    with pytest.raises(ValueError):
        decision.delete()
    assert Decision.objects.get().reason == "ok"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the immutability triggers are PostgreSQL's")
def test_the_database_refuses_raw_updates_and_deletes(decision_user, version_gated):
    version, _ = version_gated("pass")
    decision = decision_record(version=version, action="approve", reason="ok", actor=decision_user())
    rows = Decision.objects.filter(pk=decision.pk)
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        rows.update(reason="x")
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        rows.delete()  # a bulk delete never calls the model's delete()
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        AuditLog.objects.filter(action="decision.approve").update(reason="x")
    assert Decision.objects.get().reason == "ok"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the immutability triggers are PostgreSQL's")
def test_the_database_refuses_truncate_and_a_changed_actor(decision_user, version_gated):
    from django.contrib.auth import get_user_model

    version, _ = version_gated("pass")
    manager = decision_user()
    decision_record(version=version, action="approve", reason="ok", actor=manager)
    for table in (Decision._meta.db_table, AuditLog._meta.db_table):
        with (
            pytest.raises(DatabaseError, match="immutable"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            # The test's open transaction holds deferred foreign-key checks, which TRUNCATE refuses first.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute(f"TRUNCATE {table} CASCADE")
    row = AuditLog.objects.filter(action="decision.approve")
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        row.update(actor=get_user_model().objects.create_user(username="someone-else"))
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        row.update(actor=None)
    assert row.get().actor == manager and Decision.objects.count() == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs concurrent PostgreSQL sessions")
@pytest.mark.django_db(transaction=True)
def test_two_confirmations_at_once_only_one_lands(decision_user, version_gated):
    version, _ = version_gated("fail")
    request = decision_record(version=version, action="override_request", reason="r", actor=decision_user())
    confirmers = [decision_user(), decision_user()]
    barrier, outcomes = threading.Barrier(2), []

    def confirm(user):
        try:
            barrier.wait(timeout=10)
            decision_record(
                version=version, action="override_confirm", reason="ok", confirms=request, actor=user
            )
            outcomes.append(201)
        except ApplicationError as exc:
            outcomes.append(exc.status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=confirm, args=(user,)) for user in confirmers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == [201, 409]
    assert Decision.objects.filter(action="override_confirm").count() == 1
    assert status_of(version) == Status.APPROVED


def test_a_pass_of_a_weakened_gate_needs_an_override(gate_run_finished, decision_user):
    version = model_version_register(
        family="fam",
        label="weak",
        backend_kind="builtin",
        backend_config={"path": "placeholder"},
        actor=SYSTEM,
    )
    run = gate_run_finished(version, "pass", policy_overrides={"required_layers": ["clean_accuracy"]})
    first, second = decision_user(), decision_user()
    error = refused(409, "action", "override_required", version=version, action="approve", actor=first)
    assert error.reason.code == DecisionsCode.OVERRIDE_REQUIRED_WEAKENED
    weakened = error.reason.params["weakened"]
    assert [(w.code, w.params) for w in weakened] == [
        (DecisionsCode.LAYER_NOT_REQUIRED, {"layer": Term("robustness")}),
        (DecisionsCode.LAYER_NOT_REQUIRED, {"layer": Term("follow_up_rate")}),
        (DecisionsCode.LAYER_NOT_REQUIRED, {"layer": Term("business_value")}),
        (DecisionsCode.POLICY_OVERRIDDEN, {"keys": ["required_layers"]}),
    ]
    request = decision_record(version=version, action="override_request", reason="hotfix", actor=first)
    decision_record(
        version=version, action="override_confirm", reason="agreed", actor=second, confirms=request
    )
    assert status_of(version) == Status.APPROVED and request.gate_run == run


def test_an_inconclusive_gate_can_still_be_rejected_or_approved_by_override(gate_run_finished, decision_user):
    """insufficient_data leaves the version `registered`, from where a decision must still be possible."""
    manager, other = decision_user(), decision_user()
    for label, action in (("short", "reject"), ("short-2", "override_request")):
        version = model_version_register(
            family="fam",
            label=label,
            backend_kind="builtin",
            backend_config={"path": "placeholder"},
            actor=SYSTEM,
        )
        run = gate_run_finished(version, "pass")
        GateRun.objects.filter(pk=run.pk).update(verdict="insufficient_data")
        ModelVersion.objects.filter(pk=version.pk).update(status=Status.REGISTERED)
        decision = decision_record(version=version, action=action, reason="decided", actor=manager)
        assert decision.gate_verdict == "insufficient_data"
    decision_record(
        version=version, action="override_confirm", reason="agreed", actor=other, confirms=decision
    )
    assert status_of(version) == Status.APPROVED
