"""The reference model server: a registered version over the OpenAI-compatible chat API."""

import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from engines.backends import BackendError, Prediction, backend_build
from engines.backends.base import TokenTally
from engines.backends.config import backend_config_hash, backend_config_validate
from engines.backends.logprobs import LogprobsCode
from engines.demo.dataset import demo_dataset_build
from engines.model_server import ModelQueue, answer_tokens, model_server_create
from engines.outbound import OutboundPolicy
from registry.actors import SYSTEM
from registry.services.versions import model_version_backend, model_version_register

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = OutboundPolicy.parse(allow_networks=["127.0.0.0/8"])


@pytest.fixture
def v3(small_bow):
    return model_version_register(
        family="fam",
        label="v3",
        backend_kind="builtin",
        backend_config={"path": str(small_bow)},
        actor=SYSTEM,
    )


@pytest.fixture
def server(v3):
    server = model_server_create(
        backend=model_version_backend(version=v3, cached=False), model_name=v3.ref, port=0
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_openai_backend_through_the_server_equals_direct_calls(v3, server):
    questions = [item.input for item in demo_dataset_build(seed=0).eval[:24]]
    direct = backend_build(kind="builtin", config=v3.backend_config).predict(questions)
    remote = backend_build(
        kind="openai", config={"base_url": f"{server}/v1", "model": v3.ref}, outbound=LOOPBACK
    ).predict(questions)
    assert [p.label for p in remote] == [p.label for p in direct]
    assert [p.text for p in remote] == [p.text for p in direct]


def test_chat_completion_shape_and_errors(server):
    body = {"model": "fam:v3", "messages": [{"role": "user", "content": "The buyer pays within 30 days."}]}
    answer = httpx.post(f"{server}/v1/chat/completions", json=body).json()
    assert answer["object"] == "chat.completion" and answer["model"] == "fam:v3"
    assert answer["choices"][0]["message"]["content"].startswith("[")
    assert httpx.get(f"{server}/v1/models").json()["data"][0]["id"] == "fam:v3"
    assert httpx.post(f"{server}/v1/chat/completions", content=b"{nope").status_code == 400
    assert httpx.post(f"{server}/v1/chat/completions", json={"messages": []}).status_code == 400
    assert httpx.get(f"{server}/v2/anything").status_code == 404


def test_a_stream_is_the_answer_token_by_token_in_openais_chunks(server):
    body = {"model": "fam:v3", "messages": [{"role": "user", "content": "The buyer pays within 30 days."}]}
    content = httpx.post(f"{server}/v1/chat/completions", json=body).json()["choices"][0]["message"][
        "content"
    ]
    for include_usage in (False, True):
        streamed = {**body, "stream": True, "stream_options": {"include_usage": include_usage}}
        response = httpx.post(f"{server}/v1/chat/completions", json=streamed)
        assert response.headers["content-type"] == "text/event-stream"
        events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        chunks = [json.loads(event) for event in events[:-1]]
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        texts = [c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]]
        assert "".join(texts) == content and texts[1:-1] == answer_tokens(content)
        usage = [c["usage"] for c in chunks if not c["choices"]]
        assert usage == (
            [
                {
                    "prompt_tokens": 6,
                    "completion_tokens": len(answer_tokens(content)),
                    "total_tokens": 6 + len(answer_tokens(content)),
                }
            ]
            if include_usage
            else []
        )


def test_serve_model_command_serves_over_http(small_bow, tmp_path):
    """`manage.py serve_model` as a user runs it, on its own SQLite database."""
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")},
        "DJANGO_SETTINGS_MODULE": "evalhub.settings.local",
        "EVALHUB_VAR_DIR": str(tmp_path),
        "EVALHUB_MODEL_DIR": str(small_bow.parent),
    }
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    register = (
        "from registry.actors import SYSTEM; "
        "from registry.services.versions import model_version_register as r; "
        "r(family='fam', label='v3', backend_kind='builtin', actor=SYSTEM, "
        f"backend_config={{'path': {str(small_bow)!r}}})"
    )
    subprocess.run([*manage, "shell", "-c", register], cwd=ROOT, env=env, check=True)
    process = subprocess.Popen(
        [*manage, "serve_model", "fam:v3", "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("serving fam:v3 on http://127.0.0.1:"), line
        base_url = line.split(" on ")[1].split()[0]
        # It announces the hash of the version it serves, which the gate and the canary check.
        announced = httpx.get(f"{base_url}/models").json()["data"][0]["evalhub_config_hash"]
        stored = backend_config_validate(kind="builtin", config={"path": str(small_bow)})  # defaults filled
        expected = backend_config_hash(kind="builtin", config=stored)
        assert announced == expected and announced[:12] in line
        (prediction,) = backend_build(
            kind="openai", config={"base_url": base_url, "model": "fam:v3"}, outbound=LOOPBACK
        ).predict(["本合同适用中华人民共和国法律。"])
        assert prediction.error is None and prediction.label
    finally:
        process.terminate()
        process.wait(timeout=10)


QUESTION = "The buyer pays within 30 days of the invoice."


def test_logprobs_in_openais_format_as_the_official_client_reads_them(v3, server):
    import openai

    direct = model_version_backend(version=v3, cached=False)
    (scores,) = direct.class_scores([QUESTION])
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": QUESTION}]
    answer = client.chat.completions.create(model=v3.ref, messages=messages, logprobs=True, top_logprobs=5)
    content = answer.choices[0].logprobs.content
    assert "".join(t.token for t in content) == answer.choices[0].message.content
    # Tokens "[", the label, "] ", then the answer's words: the label token carries the class scores.
    label = direct.labels[max(range(len(scores)), key=scores.__getitem__)]
    assert [t.token for t in content[:3]] == ["[", label, "] "]
    assert math.exp(content[1].logprob) == pytest.approx(max(scores), rel=1e-12)
    ranked = sorted(zip(direct.labels, scores, strict=True), key=lambda pair: -pair[1])[:5]
    assert [(t.token, math.exp(t.logprob)) for t in content[1].top_logprobs] == [
        (name, pytest.approx(score, rel=1e-12)) for name, score in ranked
    ]
    assert content[1].top_logprobs[0].bytes == list(label.encode())
    assert all(t.logprob == 0.0 and [a.token for a in t.top_logprobs] == [t.token] for t in content[2:])
    # Streamed: the same tokens, each chunk carrying those of its text.
    stream = client.chat.completions.create(
        model=v3.ref, messages=messages, logprobs=True, top_logprobs=5, stream=True
    )
    chunks = [c.choices[0] for c in stream if c.choices]
    streamed = [t for c in chunks if c.logprobs and c.logprobs.content for t in c.logprobs.content]
    assert [(t.token, t.logprob) for t in streamed] == [(t.token, t.logprob) for t in content]
    for chunk in chunks:
        tokens = chunk.logprobs.content if chunk.logprobs else None
        assert "".join(t.token for t in tokens or []) == (chunk.delta.content or "")
    # Not asked: none.
    plain = client.chat.completions.create(model=v3.ref, messages=messages)
    assert plain.choices[0].logprobs is None


def test_class_scores_through_the_server_equal_the_in_process_model(v3, server):
    questions = [item.input for item in demo_dataset_build(seed=0).eval[:16]]
    direct = model_version_backend(version=v3, cached=False)
    config = {"base_url": f"{server}/v1", "model": v3.ref, "labels": direct.labels}
    remote = backend_build(kind="openai", config=config, outbound=LOOPBACK)
    # The server computes one question at a time: so does the reference (a batch's float32 sums round
    # otherwise, by about 1e-7).
    expected = [direct.class_scores([question])[0] for question in questions]
    tally = TokenTally()
    asked = remote.class_scores(questions + questions[:3], tally=tally)  # three asked again
    for got, want in zip(asked, expected + expected[:3], strict=True):
        total = sum(want)
        assert got == pytest.approx([w / total for w in want], rel=1e-12, abs=1e-300)
    # Each text asked once, its tokens as the server counts them: the question's words in, the
    # answer's pieces out ("[label] " and the label's explanation).
    answers = [direct.predict([question])[0] for question in questions]
    assert tally.tokens_in == sum(len(question.split()) for question in questions)
    contents = [f"[{a.label}] {a.text}" if a.label else a.text for a in answers]
    assert tally.tokens_out == sum(len(answer_tokens(content)) for content in contents)
    # Five of the eight labels listed: the three others share what the five leave.
    top5 = backend_build(kind="openai", config={**config, "top_logprobs": 5}, outbound=LOOPBACK)
    for got, want in zip(top5.class_scores(questions), expected, strict=True):
        ranked = sorted(range(len(want)), key=lambda i: -want[i])
        rest = (1 - sum(want[i] for i in ranked[:5])) / 3
        assert sum(got) == pytest.approx(1.0)
        assert [got[i] for i in ranked[5:]] == pytest.approx([rest] * 3, rel=1e-6, abs=1e-12)


def test_bad_logprobs_fields_are_400(server):
    body = {"model": "fam:v3", "messages": [{"role": "user", "content": QUESTION}]}
    for extra in ({"logprobs": "yes"}, {"logprobs": True, "top_logprobs": 21}, {"top_logprobs": 3}):
        response = httpx.post(f"{server}/v1/chat/completions", json={**body, **extra})
        assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_logprobs"


def test_an_endpoint_without_logprobs_is_a_backend_error_that_says_so(v3, server):
    """A server in front of a model without class scores (here: an openai backend that names no labels)
    answers without log-probabilities: scoring through it fails, naming why."""
    unscored = backend_build(
        kind="openai", config={"base_url": f"{server}/v1", "model": v3.ref}, outbound=LOOPBACK
    )
    front = model_server_create(backend=unscored, model_name="front", port=0)
    threading.Thread(target=front.serve_forever, daemon=True).start()
    try:
        config = {
            "base_url": f"http://127.0.0.1:{front.server_port}/v1",
            "model": "front",
            "labels": ["a", "b"],
        }
        with pytest.raises(BackendError) as caught:
            backend_build(kind="openai", config=config, outbound=LOOPBACK).class_scores([QUESTION])
        assert caught.value.reason.code == LogprobsCode.NONE_RETURNED
        assert "returned no token log-probabilities" in str(caught.value)
        with pytest.raises(BackendError) as caught:
            unscored.class_scores([QUESTION])
        assert caught.value.reason.code == LogprobsCode.NO_LABELS
    finally:
        front.shutdown()
        front.server_close()


def test_label_sample_is_seeded_and_sharpened_by_temperature():
    from engines.model_server import label_sample

    labels, scores = ["a", "b", "c"], [0.5, 0.3, 0.2]
    draws = [label_sample(labels=labels, scores=scores, temperature=1.0, seed=s) for s in range(400)]
    assert draws == [label_sample(labels=labels, scores=scores, temperature=1.0, seed=s) for s in range(400)]
    assert 0.4 < draws.count("a") / 400 < 0.6 and draws.count("c") > 40
    cold = {label_sample(labels=labels, scores=scores, temperature=0.01, seed=s) for s in range(200)}
    assert cold == {"a"}
    assert label_sample(labels=labels, scores=[0.0, 1.0, 0.0], temperature=5.0, seed=None) == "b"


class PassRecorder:
    """A classifier that records the questions of each forward pass; the first pass waits to be
    released, so the requests sent meanwhile are all waiting when the next one starts."""

    labels = ["yes", "no"]

    def __init__(self):
        self.passes: list[list[str]] = []
        self.started, self.release = threading.Event(), threading.Event()

    def predict(self, questions):
        if not self.passes:
            self.started.set()
            self.release.wait(10)
        self.passes.append(list(questions))
        if "boom" in questions:
            raise ValueError("the model fails on boom")
        return [Prediction(label="yes" if "y" in q else "no", text=q, latency_ms=1.0) for q in questions]

    def class_scores(self, questions):
        return [[0.9, 0.1] if "y" in q else [0.2, 0.8] for q in questions]


def test_waiting_requests_share_one_forward_pass_and_a_failing_question_fails_only_its_own():
    backend = PassRecorder()
    model = ModelQueue(backend, max_batch=64)
    questions = ["first", *[f"q{i} {'y' if i % 2 else 'n'}" for i in range(10)], "q1 y", "boom"]
    answers: dict[int, object] = {}

    def ask(i: int, question: str) -> None:
        try:
            answers[i] = model.answer(question, scores=i % 3 == 0)
        except ValueError as exc:
            answers[i] = exc

    threads = [threading.Thread(target=ask, args=(0, questions[0]))]
    threads[0].start()
    assert backend.started.wait(10)
    threads += [threading.Thread(target=ask, args=(i, q)) for i, q in enumerate(questions) if i]
    for thread in threads[1:]:
        thread.start()
    while model.jobs.qsize() < len(questions) - 1:
        threading.Event().wait(0.01)
    backend.release.set()
    for thread in threads:
        thread.join(10)
    model.close()

    # One pass for the first, one for all that waited (each distinct question once), which failed on
    # "boom"; then each request of that pass alone, so only "boom" fails.
    assert backend.passes[0] == ["first"]
    assert sorted(backend.passes[1]) == sorted(set(questions[1:]))
    assert len(backend.passes) == 2 + len(questions[1:])
    assert isinstance(answers[len(questions) - 1], ValueError)
    for i, question in enumerate(questions[:-1]):
        prediction, scores = answers[i]
        assert prediction.text == question and prediction.label == ("yes" if "y" in question else "no")
        assert scores == (backend.class_scores([question])[0] if i % 3 == 0 else None)
