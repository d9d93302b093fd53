"""The canary proxy over real HTTP: a live Django server, real model servers, the official client."""

import httpx
import httpx2
import openai
import pytest
from django.conf import settings as django_settings

from canary.models import TurnEvent
from canary.services import telemetry
from canary.services.experiments import experiment_create, experiment_start
from canary.services.proxy import chat_completion_proxy
from registry.actors import SYSTEM
from registry.services.tokens import api_token_create, user_role_grant
from tests.canary.traffic import user_on

pytestmark = pytest.mark.django_db(transaction=True)
QUESTION = "The Buyer shall pay each invoice within 30 days of receipt."
QA_TOKEN = "qa-token-0123456789abcdef"


@pytest.fixture
def served(small_bow, serve_versions):
    """v3 and v4 behind real model servers (the same small checkpoint)."""
    return serve_versions({"v3": small_bow, "v4": small_bow}, family="fam")


@pytest.fixture
def token(django_user_model):
    user = django_user_model.objects.create_user("chat-app")
    user_role_grant(user=user, role="app")
    return api_token_create(user=user, name="app")[1]


def running(versions, percent=50.0, name="exp"):
    v3, v4 = versions
    experiment = experiment_create(
        name=name, baseline=v3, candidate=v4, traffic_percent=percent, actor=SYSTEM
    )
    return experiment_start(experiment=experiment, actor=SYSTEM)


def proxy_url(live_server, name="exp"):
    return f"{live_server.url}/api/v1/canary/{name}/v1"


def test_official_openai_client_gets_completions_through_the_proxy(live_server, served, token):
    running(served)
    client = openai.OpenAI(base_url=proxy_url(live_server), api_key=token, max_retries=0)
    arms = {}
    for i in range(30):
        raw = client.chat.completions.with_raw_response.create(
            model="ignored", messages=[{"role": "user", "content": QUESTION}], user=f"user-{i}"
        )
        completion = raw.parse()
        assert completion.choices[0].message.content
        arms[f"user-{i}"] = raw.headers["X-EvalHub-Arm"]
        version = raw.headers["X-EvalHub-Model-Version"]
        assert version == ("fam:v4" if arms[f"user-{i}"] == "candidate" else "fam:v3")
    assert set(arms.values()) == {"baseline", "candidate"}
    # Two turn events per request, each on the caller's arm.
    assert TurnEvent.objects.count() == 60
    for user, arm in arms.items():
        assert set(TurnEvent.objects.filter(user_id=user).values_list("arm", flat=True)) == {arm}
    answer = TurnEvent.objects.filter(role="assistant").first()
    assert answer.version.ref in ("fam:v3", "fam:v4") and answer.latency_ms > 0 and answer.source == "proxy"
    assert (answer.turn_index, TurnEvent.objects.filter(role="user").first().turn_index) == (1, 0)


def test_a_failing_candidate_is_answered_by_the_baseline_and_recorded(live_server, served, token):
    v3, v4 = served
    v4.serving_url = "http://127.0.0.1:9/v1"  # nothing listens there
    v4.save(update_fields=["serving_url"])
    running(served, percent=100)
    response = httpx.post(
        f"{proxy_url(live_server)}/chat/completions",
        json={"messages": [{"role": "user", "content": QUESTION}], "user": "u1"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["X-EvalHub-Arm"] == "candidate"
    assert response.headers["X-EvalHub-Model-Version"] == "fam:v3"
    assert response.headers["X-EvalHub-Fallback"] == "1"
    answer = TurnEvent.objects.get(role="assistant")
    assert answer.fallback and "fam:v4 unreachable" in answer.error and answer.version == v3


def test_a_serving_url_that_rebinds_to_a_private_address_is_refused_and_the_baseline_answers(
    served, settings
):
    v3, v4 = served
    answers = {"v4.models.example.com": ["93.184.216.34"]}
    settings.EVALHUB_OUTBOUND_RESOLVE = lambda host: answers[host]
    v4.serving_url = "http://v4.models.example.com/v1"  # public when it was set
    v4.save(update_fields=["serving_url"])
    answers["v4.models.example.com"] = ["10.0.0.1"]
    answer = chat_completion_proxy(
        experiment=running(served, percent=100),
        body={"messages": [{"role": "user", "content": QUESTION}], "user": "u1"},
    )
    assert answer.fallback and answer.version == v3
    recorded = TurnEvent.objects.get(role="assistant")
    assert "fam:v4 refused" in recorded.error and "10.0.0.1" in recorded.error


def test_bad_requests_are_4xx_naming_the_field(live_server, served, token):
    running(served)
    url = f"{proxy_url(live_server)}/chat/completions"
    headers = {"Authorization": f"Bearer {token}"}
    cases = [
        ({"messages": [{"role": "user", "content": "hi"}]}, "user"),
        ({"messages": [{"role": "user", "content": "hi"}], "user": "u", "stream": 1}, "stream"),
        ({"messages": [{"role": "user", "content": "hi"}], "user": "u", "n": 3}, "n"),
        ({"messages": [], "user": "u"}, "messages"),
        ({"messages": [{"role": "user", "content": 3}], "user": "u"}, "messages[0].content"),
        ({"messages": [{"role": "assistant", "content": "x"}], "user": "u"}, "messages[0].role"),
    ]
    for body, field in cases:
        response = httpx.post(url, json=body, headers=headers)
        assert response.status_code == 400, (body, response.text)
        assert field in response.json()["error"]["fields"], response.json()
    session = httpx.post(
        url,
        json={"messages": [{"role": "user", "content": "hi"}]},
        headers={**headers, "X-EvalHub-Session": "s9"},
    )
    assert session.status_code == 200 and TurnEvent.objects.filter(session_id="s9").count() == 2
    missing = httpx.post(
        f"{live_server.url}/api/v1/canary/nope/v1/chat/completions", json={}, headers=headers
    )
    assert missing.status_code == 404
    assert httpx.post(url, json={}).status_code in (401, 403)
    assert not TurnEvent.objects.exclude(session_id="s9").exists()


def test_an_arm_forced_by_qa_is_recorded_by_the_proxy_itself(live_server, served, token):
    """The proxy writes its own turn events (not through POST /events): a QA-forced turn is stored on
    the forced arm, though the router has that user on the other one."""
    v3, v4 = served
    created = experiment_create(
        name="exp", baseline=v3, candidate=v4, traffic_percent=0.01, qa_tokens=[QA_TOKEN], actor=SYSTEM
    )
    experiment = experiment_start(experiment=created, actor=SYSTEM)
    user = user_on(experiment, "baseline", "qa-user")
    response = httpx.post(
        f"{proxy_url(live_server)}/chat/completions",
        json={"messages": [{"role": "user", "content": QUESTION}], "user": user},
        headers={
            "Authorization": f"Bearer {token}",
            "X-EvalHub-Force-Arm": "candidate",
            "X-EvalHub-QA-Token": QA_TOKEN,
        },
    )
    assert response.status_code == 200, response.text
    assert response.headers["X-EvalHub-Arm"] == "candidate"
    assert set(TurnEvent.objects.values_list("arm", "source")) == {("candidate", "proxy")}
    assert TurnEvent.objects.get(role="assistant").version == v4


@pytest.mark.skipif(not django_settings.REDIS_UP, reason="needs Redis on 127.0.0.1:6379")
def test_turn_events_wait_in_a_redis_stream_until_a_drain_stores_them(live_server, served, token, settings):
    settings.EVALHUB_TELEMETRY_REDIS_URL = django_settings.REDIS_URL
    client = telemetry._redis()
    client.delete(settings.EVALHUB_TELEMETRY_STREAM)
    running(served)
    openai_client = openai.OpenAI(base_url=proxy_url(live_server), api_key=token, max_retries=0)
    for i in range(10):
        openai_client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": QUESTION}], user=f"u{i}"
        )
    assert TurnEvent.objects.count() == 0 and telemetry.turn_stream_pending() == 20
    # A consumer that read events and died before storing them: its events are claimed later.
    client.xgroup_create(settings.EVALHUB_TELEMETRY_STREAM, telemetry.GROUP, id="0", mkstream=True)
    client.xreadgroup(telemetry.GROUP, "dead-worker", {settings.EVALHUB_TELEMETRY_STREAM: ">"}, count=6)
    assert telemetry.turn_stream_drain(claim_idle_ms=0) == 20
    assert TurnEvent.objects.count() == 20 and telemetry.turn_stream_pending() == 0
    assert telemetry.turn_stream_drain(claim_idle_ms=0) == 0
    client.delete(settings.EVALHUB_TELEMETRY_STREAM)


def test_without_redis_the_proxy_stores_its_events_itself(live_server, served, token, settings):
    settings.EVALHUB_TELEMETRY_REDIS_URL = "redis://127.0.0.1:9/0"  # nothing listens there
    running(served)
    client = openai.OpenAI(base_url=proxy_url(live_server), api_key=token, max_retries=0)
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": QUESTION}], user="u1")
    assert TurnEvent.objects.count() == 2


class FirstAnswerLost(httpx2.HTTPTransport):  # the openai client's own httpx
    """The first try reaches the server, which answers; the answer never reaches the client."""

    def __init__(self):
        super().__init__()
        self.tries = 0

    def handle_request(self, request):
        self.tries += 1
        response = super().handle_request(request)
        if self.tries == 1:
            response.read()
            raise httpx2.ReadError("connection reset after the server answered", request=request)
        return response


@pytest.mark.parametrize("keyed", [True, False])
def test_a_question_the_client_retried_is_recorded_once_when_it_carries_an_idempotency_key(
    live_server, served, token, keyed
):
    running(served)
    transport = FirstAnswerLost()
    client = openai.OpenAI(
        base_url=proxy_url(live_server),
        api_key=token,
        max_retries=2,
        http_client=openai.DefaultHttpxClient(transport=transport),
    )
    client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": QUESTION}],
        user="u1",
        extra_headers={"Idempotency-Key": "question-1"} if keyed else None,
    )
    assert transport.tries == 2  # the server answered both tries
    assert TurnEvent.objects.count() == (2 if keyed else 4)
    if keyed:  # the same key from another user is another question
        client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": QUESTION}],
            user="u2",
            extra_headers={"Idempotency-Key": "question-1"},
        )
        assert transport.tries == 3 and TurnEvent.objects.filter(user_id="u2").count() == 2


def test_a_bad_idempotency_key_is_a_400_naming_it(live_server, served, token):
    running(served)
    response = httpx.post(
        f"{proxy_url(live_server)}/chat/completions",
        json={"messages": [{"role": "user", "content": QUESTION}], "user": "u1"},
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "k" * 201},
    )
    assert response.status_code == 400, response.text
    assert "Idempotency-Key" in response.json()["error"]["fields"]
    assert not TurnEvent.objects.exists()
