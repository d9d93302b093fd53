"""Sign-in and token authentication are throttled per account and per address: django-axes counts
failed password sign-ins (EvalHub's page and the admin's), a cache counts invalid API tokens per
address. A lockout answers 429 with Retry-After and a clear message (the page in English and
Chinese, the API in its one error shape) and writes one audit row. The suite's settings set the
limits far above any test; these tests set their own."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.core.cache import cache
from django.test import Client, RequestFactory
from django.utils import timezone

from evalhub.throttle import client_address
from registry.models import AuditLog
from registry.services.tokens import api_token_create, api_token_revoke, user_role_grant
from tests.evalhub.views.test_accounts import account, sign_in
from tests.evalhub.views.test_zh_hans import untranslated

pytestmark = pytest.mark.django_db
LIMIT = 5


@pytest.fixture(autouse=True)
def limits(settings):
    settings.AXES_FAILURE_LIMIT = LIMIT
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)
    settings.EVALHUB_TOKEN_FAILURE_LIMIT = LIMIT
    settings.EVALHUB_TOKEN_COOLOFF_SECONDS = 900
    cache.clear()
    yield
    cache.clear()


def from_address(address: str, **headers) -> Client:
    return Client(REMOTE_ADDR=address, **headers)


def test_fifty_wrong_passwords_then_the_right_one_is_refused_with_a_clear_message():
    account("alice", "viewer")
    client = from_address("203.0.113.7")
    answers = [sign_in(client, "alice", password=f"guess {n}").status_code for n in range(50)]
    assert answers[: LIMIT - 1] == [200] * (LIMIT - 1)  # the form again, "wrong password"
    assert set(answers[LIMIT - 1 :]) == {429}
    right = sign_in(client, "alice")
    assert right.status_code == 429 and int(right["Retry-After"]) > 14 * 60
    text = right.content.decode()
    assert "Too many failed sign-ins for this account or from this address" in text
    assert "paused for 15 more minutes" in text
    assert client.get("/").status_code == 302  # not signed in
    # One audit row per lockout (the account's and the address's), not one per refused attempt.
    rows = AuditLog.objects.filter(action__startswith="sign_in.")
    assert sorted(rows.values_list("action", "target_id")) == sorted(
        [("sign_in.account_locked_out", str(rows.get(action="sign_in.account_locked_out").target_id)),
         ("sign_in.address_locked_out", "203.0.113.7")]
    )  # fmt: skip
    account_row = rows.get(action="sign_in.account_locked_out")
    assert account_row.target_type == "auth.user" and account_row.target_repr == "alice"
    assert account_row.reason == f"{LIMIT} failed sign-ins for alice"


def test_the_account_is_locked_whatever_address_the_guesses_come_from():
    account("bob", "viewer")
    for n in range(LIMIT):
        sign_in(from_address(f"198.51.100.{n + 1}"), "bob", password="nope")
    assert sign_in(from_address("192.0.2.99"), "bob").status_code == 429


def test_the_address_is_locked_whatever_accounts_it_tries():
    account("carol", "viewer")
    guesser = from_address("203.0.113.50")
    for n in range(LIMIT):
        sign_in(guesser, f"someone-{n}", password="nope")
    assert sign_in(guesser, "carol").status_code == 429
    assert sign_in(from_address("203.0.113.51"), "carol").status_code == 302  # carol elsewhere: fine


def test_after_the_cool_off_the_right_password_works_and_a_success_clears_the_count():
    account("dave", "viewer")
    client = from_address("203.0.113.9")
    for _ in range(LIMIT):
        sign_in(client, "dave", password="nope")
    assert sign_in(client, "dave").status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert sign_in(client, "dave").status_code == 302
    client.post("/logout/")
    for _ in range(LIMIT - 1):  # the success cleared the count: four more misses are not a lockout
        sign_in(client, "dave", password="nope")
    assert sign_in(client, "dave").status_code == 302


def test_the_admin_login_is_throttled_too():
    account("erin", None)
    client = from_address("203.0.113.20")
    for _ in range(LIMIT):
        last = client.post("/admin/login/", {"username": "erin", "password": "nope", "next": "/admin/"})
    assert last.status_code == 429 and "Sign-in paused" in last.content.decode()


def test_the_lockout_page_in_chinese():
    account("fay", "viewer")
    client = from_address("203.0.113.30", HTTP_ACCEPT_LANGUAGE="zh-hans")
    for _ in range(LIMIT):
        last = sign_in(client, "fay", password="nope")
    html = last.content.decode()
    assert last.status_code == 429 and "登录已暂停" in html and "还需等待 15 分钟" in html
    assert untranslated(html, frozenset({"fay"})) == []


# ---------------------------------------------------------------------------------------------
# API tokens
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def valid_key(django_user_model):
    user = django_user_model.objects.create_user(username="ci-bot")
    user_role_grant(user=user, role="ci")
    return api_token_create(user=user, name="ci")


def get(address: str, key: str):
    return from_address(address).get("/api/v1/model-versions/", HTTP_AUTHORIZATION=f"Token {key}")


def test_bad_tokens_from_one_address_end_in_429_with_retry_after_even_for_a_good_token(valid_key):
    _, key = valid_key
    answers = [get("203.0.113.40", f"wrong-{n}").status_code for n in range(LIMIT + 3)]
    assert answers == [401] * (LIMIT - 1) + [429] * 4
    refused = get("203.0.113.40", key)
    assert refused.status_code == 429 and 890 <= int(refused["Retry-After"]) <= 900
    error = refused.json()["error"]
    assert error["code"] == "throttled"
    assert error["message"].startswith("Too many invalid or revoked API tokens from this address")
    assert get("203.0.113.41", key).status_code == 200  # another address is not affected
    (row,) = AuditLog.objects.filter(action="api_token.address_locked_out")
    assert (row.target_type, row.target_id, row.actor_name) == (
        "network.address",
        "203.0.113.40",
        "token throttle",
    )
    assert row.after == {"failures": LIMIT, "window_seconds": 300, "cooloff_seconds": 900}


def test_a_revoked_token_counts_as_a_bad_one(valid_key):
    token, key = valid_key
    api_token_revoke(token=token, actor=token.user)
    assert [get("203.0.113.60", key).status_code for _ in range(LIMIT)] == [401] * (LIMIT - 1) + [429]


def test_the_address_behind_trusted_proxies_is_the_one_they_saw(settings, valid_key):
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="1.2.3.4, 198.51.100.8")
    assert client_address(request) == "10.0.0.2"
    settings.EVALHUB_CLIENT_ADDRESS_PROXIES = 1
    assert client_address(request) == "198.51.100.8"  # what the one trusted proxy saw; 1.2.3.4 is forgeable
