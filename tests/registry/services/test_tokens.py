import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from registry.errors import ApplicationError
from registry.models import AuditLog
from registry.roles import user_roles
from registry.services.tokens import api_token_create, api_token_revoke, user_role_grant, user_roles_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def user():
    return get_user_model().objects.create_user(username="ci-bot")


def test_a_revoked_token_is_refused_and_the_revocation_audited_once(user):
    user_role_grant(user=user, role="viewer")
    token, key = api_token_create(user=user, name="ci")
    client = APIClient(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/model-versions/").status_code == 200
    api_token_revoke(token=token, reason="leaked in a log")
    api_token_revoke(token=token, reason="again")
    assert client.get("/api/v1/model-versions/").status_code == 401
    rows = AuditLog.objects.filter(action="api_token.revoke")
    assert [(r.target_id, r.reason, r.after) for r in rows] == [
        (str(token.pk), "leaked in a log", {"user": "ci-bot", "name": "ci"})
    ]


def test_the_command_revokes_by_prefix_and_names_a_missing_one(user, capsys):
    token, _ = api_token_create(user=user)
    call_command("revoke_api_token", token.key_prefix, "--reason", "rotation")
    token.refresh_from_db()
    assert token.revoked_at is not None and token.key_prefix in capsys.readouterr().out
    with pytest.raises(CommandError, match="No active token"):
        call_command("revoke_api_token", token.key_prefix)


def test_roles_are_set_exactly_and_each_change_audited(user):
    user_roles_set(user=user, roles=["ci", "viewer"])
    user_roles_set(user=user, roles=["viewer", "ci"])  # no change: no row
    user_roles_set(user=user, roles=["release_manager"])
    assert user_roles(get_user_model().objects.get(pk=user.pk)) == {"release_manager"}
    rows = AuditLog.objects.filter(action="user.roles_set").order_by("id")
    assert [(r.before, r.after) for r in rows] == [
        ({"roles": []}, {"roles": ["ci", "viewer"]}),
        ({"roles": ["ci", "viewer"]}, {"roles": ["release_manager"]}),
    ]
    with pytest.raises(ApplicationError) as refused:
        user_roles_set(user=user, roles=["root"])
    assert "roles" in refused.value.fields
