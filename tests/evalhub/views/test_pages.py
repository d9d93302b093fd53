"""Who may read the pages: a signed-in user with a reading role; not the chat app, not anonymous."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from registry.services.tokens import user_role_grant

pytestmark = pytest.mark.django_db
PAGES = ["/", "/canary/"]


@pytest.mark.parametrize(("role", "status"), [(None, 403), ("app", 403), ("viewer", 200), ("ci", 200)])
def test_pages_need_a_reading_role(role, status):
    user = get_user_model().objects.create_user(username=f"user-{role}")
    if role:
        user_role_grant(user=user, role=role)
    client = Client()
    client.force_login(user)
    assert [client.get(page).status_code for page in PAGES] == [status] * len(PAGES)


def test_anonymous_visitors_are_sent_to_sign_in():
    response = Client().get("/canary/")
    assert response.status_code == 302 and "login" in response["Location"]


def test_the_decision_form_says_plainly_when_no_gate_run_finished():
    from registry.actors import SYSTEM
    from registry.services.versions import model_version_register

    model_version_register(
        family="fam", label="v1", backend_kind="builtin", backend_config={"path": "placeholder"}, actor=SYSTEM
    )
    user = get_user_model().objects.create_user(username="rm")
    user_role_grant(user=user, role="release_manager")
    client = Client()
    client.force_login(user)
    html = client.get("/versions/fam:v1/").content.decode()
    assert "No gate run of this version has finished yet." in html and "none finished" not in html


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize("page", ["/login/", "/", "/canary/"])
def test_the_language_menu_names_each_language_in_itself(language, page):
    user = get_user_model().objects.create_user(username="reader")
    user_role_grant(user=user, role="viewer")
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    if page != "/login/":  # a signed-in user is sent on from the sign-in page
        client.force_login(user)
    html = client.get(page).content.decode()
    assert f'<html lang="{language}"' in html
    assert '<option value="en" lang="en">English</option>' in html.replace(" selected", "")
    assert '<option value="zh-hans" lang="zh-hans">简体中文</option>' in html.replace(" selected", "")
    assert "英语" not in html and "Simplified Chinese" not in html
