"""Versions in tests reach their statuses as in production: a production incumbent is registered,
then declared by one release manager and confirmed by another (registration takes no status); an
approved version has a passing gate run and an approval. Only a release decision clears a version
for production, so tests cannot set those statuses by hand either."""

from django.contrib.auth import get_user_model
from django.utils import timezone

from gate.layers.registry import gate_policy_parse
from gate.models import GateRun
from gate.services.decisions import (
    decision_record,
    model_version_incumbent_confirm,
    model_version_incumbent_declare,
)
from registry.actors import SYSTEM, SystemActor
from registry.models import ModelVersion
from registry.roles import RELEASE_MANAGER
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_promote, model_version_register, model_version_transition

Status = ModelVersion.Status
DECLARERS = ("incumbent-declarer-1", "incumbent-declarer-2")


def declarers() -> list:
    """Two release managers who sign declarations and approvals in tests."""
    users = []
    for username in DECLARERS:
        user, created = get_user_model().objects.get_or_create(username=username)
        if created:
            user_role_grant(user=user, role=RELEASE_MANAGER)
        users.append(get_user_model().objects.get(pk=user.pk))
    return users


def incumbent_declare(version: ModelVersion) -> ModelVersion:
    first, second = declarers()
    request = model_version_incumbent_declare(version=version, actor=first, reason="serves production today")
    model_version_incumbent_confirm(request=request, actor=second, reason="confirmed: it does")
    version.refresh_from_db()
    return version


def incumbent_register(**registration) -> ModelVersion:
    """`model_version_register(**registration)`, then declared the family's production incumbent."""
    return incumbent_declare(model_version_register(**registration))


def gate_run_record(version: ModelVersion, verdict: str) -> GateRun:
    """A finished gate run of `version` with that verdict; the version settled as the gate would."""
    suite, _ = eval_suite_import(
        name="lifecycle", items=suite_items_parse(records=[{"input": "q", "label": "a"}]), actor=SYSTEM
    )
    run = GateRun.objects.create(
        candidate=version,
        suite=suite,
        status=GateRun.Status.SUCCEEDED,
        verdict=verdict,
        policy_config=gate_policy_parse({}).as_dict(),
        progress=100,
        finished_at=timezone.now(),
    )
    model_version_transition(version=version, to_status=Status.EVALUATING, actor=SYSTEM)
    settled = {"pass": Status.GATE_PASSED, "fail": Status.GATE_FAILED}.get(verdict, Status.REGISTERED)
    model_version_transition(version=version, to_status=settled, actor=SystemActor("gate"))
    return run


def version_to(version: ModelVersion, status: str) -> ModelVersion:
    """Take a registered `version` to `status` along the release lifecycle."""
    approver = declarers()[0]
    before = {
        Status.CANARY: Status.APPROVED,
        Status.ROLLED_BACK: Status.CANARY,
        Status.RETIRED: Status.PROMOTED,
    }
    if status in (Status.GATE_PASSED, Status.GATE_FAILED):
        gate_run_record(version, "pass" if status == Status.GATE_PASSED else "fail")
    elif status == Status.APPROVED:
        version_to(version, Status.GATE_PASSED)
        decision_record(version=version, action="approve", reason="the gate passed", actor=approver)
    elif status == Status.REJECTED:
        decision_record(version=version, action="reject", reason="not this one", actor=approver)
    elif status == Status.PROMOTED:
        version_to(version, Status.APPROVED)
        model_version_promote(version=version, actor=SYSTEM, reason="promoted")
    elif status in before:
        version_to(version, before[status])
        model_version_transition(version=version, to_status=status, actor=SYSTEM)
    elif status == Status.EVALUATING:
        model_version_transition(version=version, to_status=status, actor=SYSTEM)
    version.refresh_from_db()
    assert version.status == status, (version.status, status)
    return version
