"""The openai backend against real HTTP servers on loopback: a scripted endpoint standing in
for a third-party API (retries, errors, concurrency), and EvalHub's own model server. Loopback is
allowed explicitly: the backend's default outbound policy refuses it."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engines.backends.base import BackendError, Usage, usage_of
from engines.backends.config import backend_config_validate
from engines.backends.logprobs import LogprobsCode
from engines.backends.openai import OpenAIBackend
from engines.outbound import OutboundPolicy

LOOPBACK = OutboundPolicy.parse(allow_networks=["127.0.0.0/8"])


class ScriptedEndpoint:
    """Answers "[<first word>] echo: <text>"; `fail_first` requests get `fail_status`."""

    def __init__(self, *, fail_first=0, fail_status=503, delay=0.0, retry_after=None):
        self.fail_first, self.fail_status, self.delay = fail_first, fail_status, delay
        self.retry_after = retry_after
        self.requests, self.in_flight, self.max_in_flight = [], 0, 0
        self.lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with endpoint.lock:
                    endpoint.requests.append((self.path, dict(self.headers), body))
                    failing = len(endpoint.requests) <= endpoint.fail_first
                    endpoint.in_flight += 1
                    endpoint.max_in_flight = max(endpoint.max_in_flight, endpoint.in_flight)
                time.sleep(endpoint.delay)
                with endpoint.lock:
                    endpoint.in_flight -= 1
                if failing:
                    payload, status = b'{"error": "busy"}', endpoint.fail_status
                else:
                    text = body["messages"][-1]["content"]
                    content = f"[{text.split()[0]}] echo: {text}"
                    payload = json.dumps(
                        {"choices": [{"message": {"role": "assistant", "content": content}}]}
                    ).encode()
                    status = 200
                self.send_response(status)
                if failing and endpoint.retry_after is not None:
                    self.send_header("Retry-After", endpoint.retry_after)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint_factory():
    made = []

    def make(**kwargs):
        made.append(ScriptedEndpoint(**kwargs))
        return made[-1]

    yield make
    for endpoint in made:
        endpoint.close()


def backend(url, **config):
    full = backend_config_validate(kind="openai", config={"base_url": url, "model": "m", **config})
    return OpenAIBackend(config=full, api_key=config.pop("key", ""), outbound=LOOPBACK, sleep=lambda s: None)


def test_reads_label_and_answer_in_order(endpoint_factory):
    endpoint = endpoint_factory()
    predictions = backend(endpoint.url, system_prompt="Classify.").predict(
        ["payment a", "deposit b", "liability c"]
    )
    assert [p.label for p in predictions] == ["payment", "deposit", "liability"]
    assert predictions[0].text == "echo: payment a" and predictions[0].error is None
    path, _, body = endpoint.requests[0]
    assert path == "/v1/chat/completions"
    assert body["messages"][0] == {"role": "system", "content": "Classify."}


def test_an_answer_without_usage_has_unknown_tokens_not_0(endpoint_factory):
    endpoint = endpoint_factory()  # its answers carry no `usage`
    predictions = backend(endpoint.url).predict(["payment a", "deposit b"])
    assert [(p.tokens_in, p.tokens_out) for p in predictions] == [(None, None)] * 2
    assert usage_of(predictions=predictions, device_seconds=None) == Usage(
        queries=2, tokens_in=None, tokens_out=None, device_seconds=None
    )


def test_api_key_sent_as_bearer(endpoint_factory):
    endpoint = endpoint_factory()
    full = backend_config_validate(kind="openai", config={"base_url": endpoint.url, "model": "m"})
    OpenAIBackend(config=full, api_key="sk-test", outbound=LOOPBACK).predict(["x y"])
    assert endpoint.requests[0][1]["Authorization"] == "Bearer sk-test"


def test_api_key_from_an_allowed_environment_variable(endpoint_factory, monkeypatch):
    endpoint = endpoint_factory()
    monkeypatch.setenv("EVALHUB_BACKEND_SECRET_VENDOR", "sk-env")
    backend(endpoint.url, api_key_env="EVALHUB_BACKEND_SECRET_VENDOR").predict(["x y"])
    assert endpoint.requests[0][1]["Authorization"] == "Bearer sk-env"


@pytest.mark.parametrize(
    "name", ["DATABASE_URL", "SECRET_KEY", "EVALHUB_WEBHOOK_SECRET", "EVALHUB_BACKEND_SECRET_"]
)
def test_api_key_env_outside_the_allowed_prefix_is_refused(name, monkeypatch):
    monkeypatch.setenv(name, "the deployment's own secret")
    with pytest.raises(BackendError, match=r"backend_config\.api_key_env"):
        backend("http://127.0.0.1:9/v1", api_key_env=name)


def test_the_prefix_is_the_callers(monkeypatch):
    config = backend_config_validate(
        kind="openai", config={"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "TEAM_A_KEY"}
    )
    monkeypatch.setenv("TEAM_A_KEY", "k")
    OpenAIBackend(config=config, outbound=LOOPBACK, api_key_env_prefix="TEAM_A_").close()
    with pytest.raises(BackendError):
        OpenAIBackend(config=config, outbound=LOOPBACK, api_key_env_prefix="")


def test_by_default_loopback_is_refused_before_any_request_and_not_retried(endpoint_factory):
    endpoint = endpoint_factory()
    full = backend_config_validate(kind="openai", config={"base_url": endpoint.url, "model": "m"})
    with pytest.raises(BackendError, match="loopback") as caught:
        OpenAIBackend(config=full, sleep=lambda s: None).predict(["a b", "c d"])
    assert not caught.value.transient and endpoint.requests == []


def test_retries_transient_errors(endpoint_factory):
    endpoint = endpoint_factory(fail_first=2, fail_status=503)
    (prediction,) = backend(endpoint.url, max_retries=3).predict(["payment x"])
    assert prediction.label == "payment" and len(endpoint.requests) == 3


def test_client_errors_are_not_retried_and_mark_the_item(endpoint_factory):
    endpoint = endpoint_factory(fail_first=1, fail_status=400)
    first, second = backend(endpoint.url, max_concurrency=1).predict(["a b", "c d"])
    assert first.error.startswith("HTTP 400") and first.label is None
    assert second.label == "c" and len(endpoint.requests) == 2


def test_concurrency_is_bounded(endpoint_factory):
    endpoint = endpoint_factory(delay=0.05)
    backend(endpoint.url, max_concurrency=3).predict([f"w{i} text" for i in range(12)])
    assert endpoint.max_in_flight == 3


def test_unreachable_endpoint_is_a_transient_backend_error():
    with pytest.raises(BackendError) as caught:
        backend("http://127.0.0.1:9/v1", max_retries=1, timeout_s=1).predict(["a", "b"])
    assert caught.value.transient


def test_timeout_is_unreachable(endpoint_factory):
    endpoint = endpoint_factory(delay=0.5)
    with pytest.raises(BackendError):
        backend(endpoint.url, timeout_s=0.1, max_retries=0).predict(["a b"])


def test_class_scores_ask_for_logprobs_retry_as_answers_do_and_say_when_none_come(endpoint_factory):
    endpoint = endpoint_factory(fail_first=2)
    scorer = backend(endpoint.url, labels=["payment", "deposit"], top_logprobs=3, max_retries=2)
    with pytest.raises(BackendError) as caught:
        scorer.class_scores(["payment a", "payment a"])
    assert caught.value.reason.code == LogprobsCode.NONE_RETURNED and not caught.value.transient
    # Two 503s retried, then an answer without log-probabilities: one text, asked once.
    assert len(endpoint.requests) == 3
    body = endpoint.requests[-1][2]
    assert body["logprobs"] is True and body["top_logprobs"] == 3
    scorer.predict(["payment a"])
    assert "logprobs" not in endpoint.requests[-1][2] and "top_logprobs" not in endpoint.requests[-1][2]


@pytest.mark.parametrize(
    "header, waited",
    [("7", 7.0), ("120", 60.0), ("soon", None)],
    ids=["seconds", "capped at a minute", "unreadable: plain backoff"],
)
def test_a_429_with_retry_after_waits_as_long_as_the_endpoint_asks(endpoint_factory, header, waited):
    endpoint = endpoint_factory(fail_first=1, fail_status=429, retry_after=header)
    sleeps = []
    full = backend_config_validate(kind="openai", config={"base_url": endpoint.url, "model": "m"})
    [prediction] = OpenAIBackend(config=full, outbound=LOOPBACK, sleep=sleeps.append).predict(["payment a"])
    assert prediction.label == "payment" and len(endpoint.requests) == 2
    if waited is None:
        assert len(sleeps) == 1 and 0.125 <= sleeps[0] <= 0.25  # the first backoff, with its jitter
    else:
        assert sleeps == [waited]


def test_retry_after_as_an_http_date():
    from engines.backends.openai import retry_after_seconds

    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:30 GMT", now=1445412500.0) == 10.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:30 GMT", now=1445412520.0) == 0.0  # past: at once
    assert retry_after_seconds(None) is None and retry_after_seconds("") is None
