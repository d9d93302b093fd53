"""Admin writes that matter go through the audited services."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from registry.models import ApiToken, AuditLog
from registry.roles import user_roles
from registry.services.tokens import api_token_create, roles_ensure

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client():
    client = Client()
    client.force_login(get_user_model().objects.create_superuser(username="root", password="pw"))
    return client


def test_tokens_are_revoked_by_the_action_and_never_edited_or_deleted(admin_client):
    user = get_user_model().objects.create_user(username="ci-bot")
    token, _ = api_token_create(user=user, name="ci")
    url = "/admin/evalhub/apitoken/"
    response = admin_client.post(url, {"action": "revoke", "_selected_action": [token.pk]})
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    row = AuditLog.objects.get(action="api_token.revoke")
    assert row.actor.username == "root" and row.reason == "revoked from the admin"
    assert admin_client.post(f"{url}{token.pk}/change/", {"name": "renamed"}).status_code == 403
    assert admin_client.post(f"{url}{token.pk}/delete/", {"post": "yes"}).status_code == 403
    assert ApiToken.objects.get().name == "ci"


def test_a_role_given_in_the_admin_is_audited(admin_client):
    user = get_user_model().objects.create_user(username="alice")
    page = admin_client.get(f"/admin/auth/user/{user.pk}/change/")
    form = page.context["adminform"].form
    data = {
        k: v for k, v in form.initial.items() if v is not None and k not in ("groups", "user_permissions")
    }
    data.update(
        {
            "username": "alice",
            "roles": ["release_manager"],
            "date_joined_0": "2026-12-01",
            "date_joined_1": "10:00",
        }
    )
    data.pop("password", None)
    data.pop("last_login", None)
    data.pop("date_joined", None)
    response = admin_client.post(f"/admin/auth/user/{user.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert user_roles(get_user_model().objects.get(pk=user.pk)) == {"release_manager"}
    row = AuditLog.objects.get(action="user.roles_set")
    assert row.actor.username == "root" and row.after == {"roles": ["release_manager"]}


def test_the_groups_that_are_roles_cannot_be_renamed_or_deleted(admin_client):
    roles_ensure()
    group = Group.objects.get(name="release_manager")
    url = f"/admin/auth/group/{group.pk}/"
    assert admin_client.post(f"{url}change/", {"name": "everyone"}).status_code == 403
    assert admin_client.post(f"{url}delete/", {"post": "yes"}).status_code == 403
    assert Group.objects.filter(name="release_manager").exists()
