import pytest

from registry.actors import SYSTEM
from registry.models import AuditAction, AuditLog
from registry.services.audit import AuditSubject, audit_record

pytestmark = pytest.mark.django_db


def test_each_action_has_its_own_value_in_the_noun_verb_shape():
    values = [action.value for action in AuditAction]
    assert len(values) == len(set(values))
    assert all(value.count(".") == 1 and value == value.lower() for value in values)


def test_a_member_is_stored_as_its_value_and_a_plain_string_is_refused():
    target = AuditSubject(kind="network.address", id="10.0.0.1")
    row = audit_record(actor=SYSTEM, action=AuditAction.SIGN_IN_ADDRESS_LOCKED_OUT, target=target)
    assert AuditLog.objects.get(pk=row.pk).action == "sign_in.address_locked_out"
    with pytest.raises(TypeError, match="AuditAction"):
        audit_record(actor=SYSTEM, action="sign_in.address_locked_out", target=target)  # type: ignore[arg-type]
    assert AuditLog.objects.count() == 1
