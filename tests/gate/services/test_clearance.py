"""Only a release decision clears a version for production: the incumbent declaration (two release
managers, a reason, audited), and the check that holds whoever saves a version: the model's save
(admin, forms, `loaddata`), bulk writes, and on PostgreSQL any SQL."""

import json

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import Client

from engines.reasons import reason
from gate.models import Decision
from gate.selectors.decisions import incumbent_request_open
from gate.services.decisions import (
    DecisionsCode,
    decision_record,
    model_version_incumbent_confirm,
    model_version_incumbent_declare,
)
from registry.actors import SYSTEM
from registry.dispatch import Task
from registry.errors import ApplicationError
from registry.models import AuditLog, ModelVersion
from registry.services.versions import model_version_register
from tests.lifecycle import gate_run_record, incumbent_register, version_to

pytestmark = pytest.mark.django_db
Status = ModelVersion.Status
BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}


def register(label="v3", family="fam", **kwargs) -> ModelVersion:
    return model_version_register(family=family, label=label, actor=SYSTEM, **BUILTIN, **kwargs)


def status_of(version) -> str:
    version.refresh_from_db()
    return version.status


def refused(call, status_code: int, field: str, code: str | None = None) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        call()
    error = caught.value
    assert (error.status_code, list(error.fields)) == (status_code, [field]), error.message
    assert code is None or error.code == code, error.code
    return error


def test_an_incumbent_takes_two_release_managers_and_a_reason(
    decision_user, sent_tasks, settings, django_capture_on_commit_callbacks
):
    settings.EVALHUB_WEBHOOK_URL = "http://127.0.0.1:9/hook"
    version = register()
    first, second = decision_user(), decision_user()
    refused(lambda: model_version_incumbent_declare(version=version, actor=first, reason=" "), 400, "reason")
    request = model_version_incumbent_declare(version=version, actor=first, reason="serves production")
    assert status_of(version) == Status.REGISTERED and incumbent_request_open(version=version) == request
    refused(
        lambda: model_version_incumbent_confirm(request=request, actor=first, reason="me again"),
        403,
        "decided_by",
        "second_release_manager_required",
    )
    with django_capture_on_commit_callbacks(execute=True):
        confirm = model_version_incumbent_confirm(request=request, actor=second, reason="it does")
    assert status_of(version) == Status.PROMOTED and confirm.confirms == request
    assert (confirm.gate_run, confirm.gate_verdict) == (None, "")
    assert incumbent_request_open(version=version) is None
    rows = AuditLog.objects.filter(target_type="evalhub.modelversion", target_id=str(version.pk))
    rows = rows.exclude(action="model_version.register")
    assert [(r.action, r.actor, r.reason) for r in rows.order_by("id")] == [
        ("decision.incumbent_request", first, "serves production"),
        ("model_version.transition", second, "it does"),
        ("decision.incumbent_confirm", second, "it does"),
    ]
    [(event, body)] = [args for name, args in sent_tasks if name == Task.WEBHOOK_DELIVER]
    announced = json.loads(body)["data"]
    assert (event, announced["action"], announced["status"], announced["confirms"]) == (
        "decision.recorded",
        "incumbent_confirm",
        "promoted",
        request.pk,
    )


@pytest.mark.parametrize("role", ["viewer", "ci", "app", "annotator", None])
def test_only_release_managers_declare(decision_user, role):
    version = register()
    refused(
        lambda: model_version_incumbent_declare(version=version, actor=decision_user(role), reason="r"),
        403,
        "decided_by",
        "permission_denied",
    )
    assert not Decision.objects.exists()


def test_a_family_with_a_production_version_declares_no_other(decision_user):
    incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = register("v4")
    error = refused(
        lambda: model_version_incumbent_declare(version=v4, actor=decision_user(), reason="r"),
        409,
        "version",
        "incumbent_exists",
    )
    assert error.reason == reason(DecisionsCode.INCUMBENT_EXISTS, serving="fam:v3", family="fam")
    # Another family starts on its own.
    other = register("v1", family="other")
    model_version_incumbent_declare(version=other, actor=decision_user(), reason="r")


def test_two_requests_race_and_the_second_confirmation_is_refused(decision_user):
    v3, v4 = register("v3"), register("v4")
    first, second = decision_user(), decision_user()
    on_v3 = model_version_incumbent_declare(version=v3, actor=first, reason="v3 serves")
    on_v4 = model_version_incumbent_declare(version=v4, actor=first, reason="v4 serves")
    model_version_incumbent_confirm(request=on_v3, actor=second, reason="yes")
    refused(
        lambda: model_version_incumbent_confirm(request=on_v4, actor=second, reason="yes"),
        409,
        "version",
        "incumbent_exists",
    )
    assert (status_of(v3), status_of(v4)) == (Status.PROMOTED, Status.REGISTERED)


@pytest.mark.parametrize("status", [Status.EVALUATING, Status.GATE_PASSED, Status.REJECTED])
def test_only_a_registered_version_is_declared(decision_user, status):
    version = version_to(register(), status)
    refused(
        lambda: model_version_incumbent_declare(version=version, actor=decision_user(), reason="r"),
        409,
        "version",
        "illegal_transition",
    )


def test_one_open_request_per_version_and_a_request_confirmed_once(decision_user):
    version = register()
    first = decision_user()
    request = model_version_incumbent_declare(version=version, actor=first, reason="r")
    refused(
        lambda: model_version_incumbent_declare(version=version, actor=decision_user(), reason="r"),
        409,
        "action",
        "incumbent_request_open",
    )
    refused(
        lambda: decision_record(
            version=version, action="incumbent_confirm", reason="r", actor=decision_user()
        ),
        400,
        "confirms",
    )
    run = gate_run_record(register("v9"), "fail")
    refused(
        lambda: decision_record(
            version=version, action="incumbent_request", reason="r", actor=decision_user(), gate_run=run
        ),
        400,
        "gate_run",
    )
    assert Decision.objects.filter(action="incumbent_request").get() == request


def test_the_registrant_does_not_declare_its_own_version(decision_user):
    registrant = decision_user()
    version = model_version_register(family="fam", label="v3", actor=registrant, **BUILTIN)
    refused(
        lambda: model_version_incumbent_declare(version=version, actor=registrant, reason="r"),
        403,
        "decided_by",
        "self_approval",
    )


# ---------------------------------------------------------------------------------------------
# The check on every save
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", sorted(ModelVersion.CLEARED_STATUSES))
def test_a_save_never_clears_a_version_on_its_own(status):
    version = register()
    gate_run_record(version, "pass")
    version.status = status
    refused(version.save, 409, "status", "no_release_decision")
    assert status_of(version) == Status.GATE_PASSED
    made = ModelVersion(family="fam", label="minted", status=status, **BUILTIN)
    refused(made.save, 409, "status", "no_release_decision")
    assert not ModelVersion.objects.filter(label="minted").exists()


def test_an_old_approval_does_not_bring_an_ended_version_back(decision_user):
    version = register()
    gate_run_record(version, "pass")
    decision_record(version=version, action="approve", reason="passed", actor=decision_user())
    # Ended (rejected) with the approval still its latest decision, as if a rejection got lost.
    ModelVersion.objects.filter(pk=version.pk).update(status=Status.REJECTED)
    version.refresh_from_db()
    version.status = Status.PROMOTED
    refused(version.save, 409, "status", "no_release_decision")
    version.status = Status.APPROVED
    refused(version.save, 409, "status", "no_release_decision")
    assert status_of(version) == Status.REJECTED


def test_bulk_writes_set_no_cleared_status():
    version = register()
    for status in ModelVersion.CLEARED_STATUSES:
        with pytest.raises(ValueError, match="release decision"):
            ModelVersion.objects.filter(pk=version.pk).update(status=status)
        version.status = status
        with pytest.raises(ValueError, match="release decision"):
            ModelVersion.objects.bulk_update([version], ["status"])
        made = ModelVersion(family="fam", label=f"bulk-{status}", status=status, **BUILTIN)
        with pytest.raises(ValueError, match="release decision"):
            ModelVersion.objects.bulk_create([made])
    assert ModelVersion.objects.filter(pk=version.pk).update(status=Status.EVALUATING) == 1
    assert list(ModelVersion.objects.values_list("status", flat=True)) == [Status.EVALUATING]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the trigger is PostgreSQL's")
def test_the_database_refuses_any_sql_that_clears_a_version_without_a_decision(decision_user):
    version = register()
    table = ModelVersion._meta.db_table
    for status in sorted(ModelVersion.CLEARED_STATUSES):
        with (
            pytest.raises(DatabaseError, match="without a release decision"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(f"UPDATE {table} SET status = %s WHERE id = %s", [status, version.pk])
    with (
        pytest.raises(DatabaseError, match="without a release decision"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            f"INSERT INTO {table} (family, label, description, backend_kind, backend_config, "
            "api_key_encrypted, serving_url, status, is_demo, created_at, updated_at) VALUES "
            "('fam', 'sql', '', 'builtin', '{}', '', '', 'promoted', false, now(), now())"
        )
    assert status_of(version) == Status.REGISTERED
    # The same statement passes once the decision that allows it is there.
    model_version_incumbent_confirm(
        request=model_version_incumbent_declare(version=version, actor=decision_user(), reason="r"),
        actor=decision_user(),
        reason="yes",
    )
    assert status_of(version) == Status.PROMOTED


# ---------------------------------------------------------------------------------------------
# The version page
# ---------------------------------------------------------------------------------------------
def test_the_version_page_declares_an_incumbent_with_two_release_managers(decision_user):
    version = register()
    first, second = Client(), Client()
    first.force_login(decision_user())
    second.force_login(decision_user())
    page = first.get("/versions/fam:v3/").content.decode()
    assert 'id="incumbent-request"' in page and "No version of fam serves production yet" in page
    first.post("/versions/fam:v3/decide/", {"action": "incumbent_request", "reason": "it serves"})
    mine = first.get("/versions/fam:v3/").content.decode()
    assert 'id="incumbent-confirm"' not in mine and "waiting for a second release manager" in mine
    theirs = second.get("/versions/fam:v3/").content.decode()
    assert 'id="incumbent-confirm"' in theirs
    request = Decision.objects.get(action="incumbent_request")
    second.post(
        "/versions/fam:v3/decide/",
        {"action": "incumbent_confirm", "confirms": request.pk, "reason": "it does"},
    )
    assert status_of(version) == Status.PROMOTED
    after = second.get("/versions/fam:v3/").content.decode()
    assert 'id="incumbent-request"' not in after and 'id="incumbent-confirm"' not in after
    register("v4")  # the family has its production version now: no declaration offered
    assert 'id="incumbent-request"' not in second.get("/versions/fam:v4/").content.decode()
