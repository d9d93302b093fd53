"""Streaming through the canary proxy over real HTTP: a live Django server, real model servers that
stream token by token, the official `openai` client; an upstream that breaks off mid-stream, a client
that goes away."""

import itertools
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import openai
import pytest

from canary.models import TurnEvent
from canary.services.experiments import experiment_create, experiment_start
from engines.model_server import answer_tokens
from registry.actors import SYSTEM
from registry.services.tokens import api_token_create, user_role_grant
from registry.services.versions import model_version_config_hash, model_version_serving_set
from tests.canary.traffic import user_on

pytestmark = pytest.mark.django_db(transaction=True)
QUESTION = "The Buyer shall pay each invoice within 30 days of receipt."
DELAY = 0.02  # seconds between the model servers' tokens


@pytest.fixture
def served(small_bow, serve_versions):
    return serve_versions({"v3": small_bow, "v4": small_bow}, family="fam", token_delay=DELAY)


@pytest.fixture
def token(django_user_model):
    user = django_user_model.objects.create_user("chat-app")
    user_role_grant(user=user, role="app")
    return api_token_create(user=user, name="app")[1]


def running(versions, percent=50.0):
    v3, v4 = versions
    experiment = experiment_create(
        name="exp", baseline=v3, candidate=v4, traffic_percent=percent, actor=SYSTEM
    )
    return experiment_start(experiment=experiment, actor=SYSTEM)


def client_for(live_server, token):
    return openai.OpenAI(base_url=f"{live_server.url}/api/v1/canary/exp/v1", api_key=token, max_retries=0)


def answer_of(user):
    return TurnEvent.objects.get(user_id=user, role="assistant")


def test_the_official_client_streams_through_the_proxy_chunk_by_chunk(live_server, served, token):
    experiment = running(served)
    client = client_for(live_server, token)
    user = user_on(experiment, "candidate", "streamer")
    unstreamed = (
        client.chat.completions.create(
            model="exp", messages=[{"role": "user", "content": QUESTION}], user=user
        )
        .choices[0]
        .message.content
    )
    started, arrivals, parts = time.perf_counter(), [], []
    stream = client.chat.completions.create(
        model="exp", messages=[{"role": "user", "content": QUESTION}], user=user, stream=True
    )
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk" and chunk.usage is None  # no usage unless asked
        arrivals.append(time.perf_counter() - started)
        parts.append(chunk.choices[0].delta.content or "")
    assert "".join(parts) == unstreamed
    tokens = answer_tokens(unstreamed)
    # Relayed as they came: the chunks arrive spread over the model's token delays, not in one burst.
    assert arrivals[-1] - arrivals[1] >= 0.8 * DELAY * (len(tokens) - 1)
    [first, second] = TurnEvent.objects.filter(user_id=user, role="assistant").order_by("id")
    assert second.streamed and not first.streamed and second.text == unstreamed
    assert second.output_tokens == len(tokens)  # the upstream's usage, asked for by the proxy
    assert 0 < second.first_token_ms < second.latency_ms and not second.abandoned and not second.error
    assert second.version.ref == "fam:v4" and second.arm == "candidate" and not second.fallback


def test_include_usage_gives_the_client_the_last_usage_chunk(live_server, served, token):
    experiment = running(served)
    user = user_on(experiment, "baseline", "counter")
    chunks = list(
        client_for(live_server, token).chat.completions.create(
            model="exp",
            messages=[{"role": "user", "content": QUESTION}],
            user=user,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert (
        chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == answer_of(user).output_tokens > 0
    )
    assert all(chunk.usage is None for chunk in chunks[:-1])


def test_models_list_and_refusals_before_any_chunk(live_server, served, token):
    running(served)
    client = client_for(live_server, token)
    assert [model.id for model in client.models.list()] == ["exp"]
    for extra, field in (
        ({"n": 2}, "n"),
        ({"stream": "yes"}, "stream"),
        ({"stream_options": []}, "stream_options"),
    ):
        response = httpx.post(
            f"{live_server.url}/api/v1/canary/exp/v1/chat/completions",
            json={"messages": [{"role": "user", "content": QUESTION}], "user": "u", "stream": True, **extra},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 400 and field in response.json()["error"]["fields"], response.text
    assert not TurnEvent.objects.exists()


def test_a_candidate_down_before_its_first_chunk_falls_back_to_the_baseline(live_server, served, token):
    v3, v4 = served
    experiment = running(served, percent=100)
    model_version_serving_set(version=v4, serving_url="http://127.0.0.1:9/v1", actor=SYSTEM)
    raw = client_for(live_server, token).chat.completions.with_raw_response.create(
        model="exp", messages=[{"role": "user", "content": QUESTION}], user="u1", stream=True
    )
    assert raw.headers["X-EvalHub-Fallback"] == "1" and raw.headers["X-EvalHub-Model-Version"] == "fam:v3"
    text = "".join(chunk.choices[0].delta.content or "" for chunk in raw.parse() if chunk.choices)
    answer = answer_of("u1")
    assert answer.fallback and answer.arm == "candidate" and answer.version == v3 and answer.text == text
    assert "unreachable" in answer.error and experiment.candidate == v4


class _BreakingUpstream(BaseHTTPRequestHandler):
    """Sends two chunks, then drops the connection (a model server killed mid-stream); or, with
    `slow`, keeps sending a chunk every 50 ms and notes when its client (the proxy) has gone."""

    protocol_version = "HTTP/1.1"
    slow = False
    gone = threading.Event()
    config_hash = ""

    def log_message(self, *args):
        pass

    def do_GET(self):  # the proxy's check of what the address serves: the version it stands for
        model = {"id": "fam:v4", "object": "model", "evalhub_config_hash": self.config_hash}
        body = json.dumps({"object": "list", "data": [model]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for index in range(400 if self.slow else 2):
            chunk = {
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": f"w{index} "}}],
            }
            data = f"data: {json.dumps(chunk)}\n\n".encode()
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            except OSError:
                type(self).gone.set()
                return
            time.sleep(0.05 if self.slow else 0)
        self.connection.shutdown(socket.SHUT_RDWR)  # no last chunk, no [DONE]: broken off


@pytest.fixture
def breaking(served):
    """v4 behind `_BreakingUpstream`."""
    _, v4 = served
    handler = type(
        "Handler",
        (_BreakingUpstream,),
        {"gone": threading.Event(), "config_hash": model_version_config_hash(version=v4)},
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    model_version_serving_set(
        version=v4, serving_url=f"http://127.0.0.1:{server.server_port}/v1", actor=SYSTEM
    )
    yield handler
    server.shutdown()
    server.server_close()


def test_a_failure_after_the_first_chunk_ends_the_stream_with_an_error_the_sdk_raises(
    live_server, served, token, breaking
):
    running(served, percent=100)
    received = []
    with pytest.raises(openai.APIError, match="broke off"):
        for chunk in client_for(live_server, token).chat.completions.create(
            model="exp", messages=[{"role": "user", "content": QUESTION}], user="u2", stream=True
        ):
            received.append(chunk.choices[0].delta.content)
    answer = answer_of("u2")
    assert received == ["w0 ", "w1 "] and answer.text == "w0 w1 "
    assert not answer.fallback and answer.version.ref == "fam:v4" and "broke off" in answer.error


def test_a_client_that_goes_away_is_recorded_as_abandoned_and_the_upstream_is_closed(
    live_server, served, token, breaking
):
    running(served, percent=100)
    breaking.slow = True
    with httpx.stream(
        "POST",
        f"{live_server.url}/api/v1/canary/exp/v1/chat/completions",
        json={"messages": [{"role": "user", "content": QUESTION}], "user": "u3", "stream": True},
        headers={"Authorization": f"Bearer {token}"},
    ) as response:
        lines = response.iter_lines()
        assert next(line for line in lines if line.startswith("data:"))
    assert breaking.gone.wait(10), "the proxy kept reading from the upstream after its client left"
    deadline = time.monotonic() + 10
    while (
        not TurnEvent.objects.filter(user_id="u3", role="assistant").exists() and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    answer = answer_of("u3")
    assert answer.abandoned and answer.streamed and answer.text.startswith("w0 ") and not answer.error


def test_chunks_arrive_through_the_proxy_when_they_arrive_direct(live_server, served, token, capsys):
    """A recording of each chunk's arrival, the same question straight to the baseline's server and
    through the proxy (official client both ways): the proxy adds its routing before the first chunk
    and relays every later one as it comes, so the gaps between chunks are the model's."""
    experiment = running(served)
    user = user_on(experiment, "baseline", "recorder")
    direct = openai.OpenAI(base_url=served[0].serving_url, api_key="unused", max_retries=0)

    def arrivals(client) -> list[float]:
        started, times = time.perf_counter(), []
        stream = client.chat.completions.create(
            model="exp", messages=[{"role": "user", "content": QUESTION}], user=user, stream=True
        )
        for _chunk in stream:
            times.append((time.perf_counter() - started) * 1000)
        return times

    proxy = client_for(live_server, token)
    arrivals(proxy)  # the first call also checks what model the baseline's address serves
    straight, proxied = arrivals(direct), arrivals(proxy)
    answer = TurnEvent.objects.filter(user_id=user, role="assistant").latest("id")
    assert len(straight) == len(proxied) == len(answer_tokens(answer.text)) + 2  # role and stop
    with capsys.disabled():
        print("\nchunk  direct ms  proxy ms  proxy − direct")
        for index, (a, b) in enumerate(zip(straight, proxied, strict=True)):
            print(f"{index:5d}  {a:9.1f}  {b:8.1f}  {b - a:+8.1f}")
    gaps = [b - a for a, b in itertools.pairwise(proxied[1:-1])]
    # Not buffered: the text chunks come a token delay apart through the proxy too.
    assert sorted(gaps)[len(gaps) // 2] >= 0.8 * DELAY * 1000
    assert proxied[-1] - proxied[1] >= 0.8 * (straight[-1] - straight[1])


def test_streams_one_after_another_reuse_the_connection_to_the_upstream(
    live_server, served, serve_versions, token
):
    """The proxy reads each stream's body to its end after `[DONE]`, so its connection to the arm goes
    back to the pool: no new connection (over TLS, a new handshake) before each answer's first chunk."""
    experiment = running(served)
    user = user_on(experiment, "baseline", "regular")
    server, accepted = serve_versions.servers["v3"], []
    accept = server.get_request

    def counted():
        accepted.append(1)
        return accept()

    server.get_request = counted
    client = client_for(live_server, token)

    def ask() -> str:
        stream = client.chat.completions.create(
            model="exp", messages=[{"role": "user", "content": QUESTION}], user=user, stream=True
        )
        return "".join(chunk.choices[0].delta.content or "" for chunk in stream)

    first = ask()  # the first call also checks what model the baseline's address serves
    after_first = len(accepted)
    assert [ask(), ask(), ask()] == [first] * 3
    assert len(accepted) == after_first
