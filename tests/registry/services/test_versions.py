import pytest

from registry.actors import SYSTEM
from registry.errors import ApplicationError
from registry.models import AuditLog, ModelVersion
from registry.services.versions import TRANSITIONS, model_version_register, model_version_transition

pytestmark = pytest.mark.django_db
Status = ModelVersion.Status
BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "x"}}


def register(label="v1", **kwargs):
    return model_version_register(family="fam", label=label, actor=SYSTEM, **BUILTIN, **kwargs)


def test_happy_lifecycle_is_audited_step_by_step():
    version = register()
    path = [Status.EVALUATING, Status.GATE_PASSED, Status.APPROVED, Status.CANARY, Status.PROMOTED]
    for step in path:
        model_version_transition(version=version, to_status=step, actor=SYSTEM, reason=f"to {step}")
    version.refresh_from_db()
    assert version.status == Status.PROMOTED
    rows = AuditLog.objects.filter(action="model_version.transition").order_by("id")
    assert [r.after["status"] for r in rows] == path
    assert [r.before["status"] for r in rows] == [Status.REGISTERED, *path[:-1]]


@pytest.mark.parametrize(
    ("start", "target"),
    [(s, t) for s in Status.values for t in Status.values if t not in TRANSITIONS[s]],
)
def test_every_illegal_transition_is_refused(start, target):
    version = register()
    ModelVersion.objects.filter(pk=version.pk).update(status=start)
    with pytest.raises(ApplicationError) as caught:
        model_version_transition(version=version, to_status=target, actor=SYSTEM)
    assert caught.value.code == "illegal_transition" and "status" in caught.value.fields
    version.refresh_from_db()
    assert version.status == start
    assert not AuditLog.objects.filter(action="model_version.transition").exists()


def test_terminal_states_have_no_exit():
    for status in (Status.REJECTED, Status.ROLLED_BACK, Status.RETIRED):
        assert TRANSITIONS[status] == set()
    # A promoted version leaves production only when another one replaces it.
    assert TRANSITIONS[Status.PROMOTED] == {Status.RETIRED}


def test_register_refuses_a_mid_lifecycle_status_and_foreign_baseline():
    with pytest.raises(ApplicationError) as caught:
        register(status=Status.APPROVED)
    assert "status" in caught.value.fields
    other = model_version_register(family="other", label="v1", actor=SYSTEM, **BUILTIN)
    with pytest.raises(ApplicationError) as caught:
        register(label="v2", baseline=other)
    assert "baseline" in caught.value.fields


def test_audit_rows_are_append_only():
    register()
    row = AuditLog.objects.get()
    with pytest.raises(ValueError):
        row.save()
    with pytest.raises(ValueError):
        row.delete()
