"""EvalHub's own sign-in for every reading role (not the admin's staff-only form), sign-out, session
expiry, the password command, and the remembered language switch."""

import io

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client, override_settings

from registry.models import AuditLog
from registry.services.tokens import user_role_grant

pytestmark = pytest.mark.django_db
PASSWORD = "long enough and uncommon 42"


def account(username: str, role: str | None) -> None:
    call_command(
        "set_password", username, "--password-stdin", "--create-user", stdin=io.StringIO(PASSWORD + "\n")
    )
    if role:
        user_role_grant(user=get_user_model().objects.get(username=username), role=role)


def sign_in(client: Client, username: str, password: str = PASSWORD, next_url: str = ""):
    return client.post("/login/", {"username": username, "password": password, "next": next_url})


@pytest.mark.parametrize("role", ["viewer", "ci", "release_manager"])
def test_every_reading_role_signs_in_on_evalhubs_own_page_and_lands_on_next(role):
    account("someone", role)
    client = Client()
    first = client.get("/canary/")
    assert first.status_code == 302 and first["Location"] == "/login/?next=/canary/"
    page = client.get(first["Location"])
    assert page.status_code == 200 and b'name="next" value="/canary/"' in page.content
    response = sign_in(client, "someone", next_url="/canary/")
    assert response.status_code == 302 and response["Location"] == "/canary/"
    assert client.get("/canary/").status_code == 200
    user = get_user_model().objects.get(username="someone")
    assert not user.is_staff  # the admin's form would have refused this user


@pytest.fixture
def pages():
    """A version, a gate run and an experiment, so each role's pages have something to show."""
    from canary.services.experiments import experiment_create, experiment_start
    from registry.actors import SYSTEM
    from registry.services.versions import model_version_register
    from tests.lifecycle import gate_run_record

    builtin = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
    v3 = model_version_register(family="fam", label="v3", actor=SYSTEM, **builtin)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **builtin)
    run = gate_run_record(v4, "fail")
    experiment_start(
        experiment=experiment_create(name="exp", baseline=v3, candidate=v4, actor=SYSTEM), actor=SYSTEM
    )
    return {"run": f"/gate-runs/{run.pk}/"}


READER_PAGES = ["/", "/versions/fam:v4/", "/canary/", "/canary/exp/", "/api/docs/"]
# role -> (where the sign-in lands without a `next`, the pages it opens, a page it may not open)
ROLE_PAGES = {
    "viewer": ("/", [*READER_PAGES, "run"], "/review/"),
    "ci": ("/", [*READER_PAGES, "run", "/new/version/", "/new/gate-run/"], "/new/experiment/"),
    "release_manager": (
        "/",
        [*READER_PAGES, "run", "/new/experiment/", "/review/", "/review/exp/"],
        "/api/v1/events",
    ),
    "annotator": ("/review/", ["/review/", "/review/exp/", "/review/exp/export.jsonl"], "/"),
}


@pytest.mark.parametrize("role", list(ROLE_PAGES))
def test_each_role_signs_in_through_the_form_and_opens_its_pages(pages, role):
    landing, allowed, refused = ROLE_PAGES[role]
    account(f"someone-{role}", role)
    client = Client()
    assert "Sign in to EvalHub" in client.get("/login/").content.decode()
    response = sign_in(client, f"someone-{role}")
    assert response.status_code == 302 and response["Location"] == landing
    for url in (pages["run"] if page == "run" else page for page in allowed):
        assert client.get(url).status_code == 200, url
    if refused.startswith("/api/"):
        answer = client.post(refused, {"events": []}, content_type="application/json")
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "permission_denied"
    else:
        assert client.get(refused).status_code == 403, refused
    header = client.get(landing).content.decode()
    assert ('href="/review/"' in header) == (role in ("release_manager", "annotator"))
    assert ('href="/canary/"' in header) == (role != "annotator")


def test_an_annotator_sent_to_another_page_lands_on_the_review_queue(pages):
    account("ann", "annotator")
    client = Client()
    assert client.get("/")["Location"] == "/login/?next=/"
    assert sign_in(client, "ann", next_url="/")["Location"] == "/review/"
    assert client.get("/review/").status_code == 200
    # Signed in already, the sign-in page sends them on to the queue too.
    assert client.get("/login/?next=/canary/")["Location"] == "/review/"
    assert sign_in(Client(), "ann", next_url="/review/exp/")["Location"] == "/review/exp/"


def test_the_chat_apps_account_is_refused_with_its_message():
    account("chat", "app")
    client = Client()
    refused = sign_in(client, "chat")
    assert refused.status_code == 200 and "_auth_user_id" not in client.session
    assert (
        "This account has no role that may open these pages (viewer, ci, release_manager or annotator)"
        in refused.content.decode()
    )


def test_a_release_manager_signs_out_with_the_headers_button():
    account("rm2", "release_manager")
    client = Client()
    sign_in(client, "rm2")
    home = client.get("/").content.decode()
    assert 'action="/logout/"' in home and "Sign out" in home
    assert client.post("/logout/").status_code == 302
    assert client.get("/")["Location"] == "/login/?next=/"


def test_wrong_passwords_and_accounts_without_a_reading_role_are_told_why():
    account("chat-app", "app")
    account("nobody", None)
    client = Client()
    wrong = sign_in(client, "chat-app", password="not it")
    assert wrong.status_code == 200 and "enter a correct username and password" in wrong.content.decode()
    for username in ("chat-app", "nobody"):
        refused = sign_in(client, username)
        assert refused.status_code == 200
        assert "no role that may open these pages" in refused.content.decode()
        assert "_auth_user_id" not in client.session


def test_next_never_leaves_the_site():
    account("viewer1", "viewer")
    response = sign_in(Client(), "viewer1", next_url="https://evil.example.com/")
    assert response.status_code == 302 and response["Location"] == "/"


@override_settings(SESSION_COOKIE_AGE=600)
def test_the_session_expires_after_the_setting():
    account("viewer1", "viewer")
    client = Client()
    response = sign_in(client, "viewer1")
    assert response.cookies[settings.SESSION_COOKIE_NAME]["max-age"] == 600
    assert client.session.get_expiry_age() == 600


def test_set_password_validates_resets_and_audits_without_the_password():
    account("ops", "viewer")
    with pytest.raises(CommandError, match=r"too short|too common"):
        call_command("set_password", "ops", "--password-stdin", stdin=io.StringIO("1234\n"))
    with pytest.raises(CommandError, match=r"No user 'ghost'\. Pass --create-user"):
        call_command("set_password", "ghost", "--password-stdin", stdin=io.StringIO(PASSWORD + "\n"))
    out = io.StringIO()
    call_command(
        "set_password", "ops", "--password-stdin", stdin=io.StringIO("another good password 7\n"), stdout=out
    )
    assert "Password set for ops" in out.getvalue()
    assert sign_in(Client(), "ops").status_code == 200  # the old password no longer works
    assert sign_in(Client(), "ops", password="another good password 7").status_code == 302
    rows = AuditLog.objects.filter(action="user.password_set", target_repr="ops")
    assert [row.after for row in rows.order_by("pk")] == [{"created": True}, {"created": False}]
    assert not AuditLog.objects.filter(after__icontains="another good password").exists()


def test_the_language_follows_the_browser_and_the_switch_is_remembered():
    account("viewer1", "viewer")
    client = Client()
    sign_in(client, "viewer1")
    assert "<h1>Model versions</h1>" in client.get("/").content.decode()
    chinese = client.get("/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9").content.decode()
    assert '<html lang="zh-hans">' in chinese and "<h1>模型版本</h1>" in chinese
    switched = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/canary/"})
    assert switched.status_code == 302 and switched["Location"] == "/canary/"
    cookie = switched.cookies[settings.LANGUAGE_COOKIE_NAME]
    assert cookie.value == "zh-hans" and cookie["max-age"] == 365 * 24 * 3600
    # The remembered choice wins over the browser's.
    page = client.get("/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "<h1>模型版本</h1>" in page and "退出登录" in page
