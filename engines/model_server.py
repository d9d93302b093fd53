"""A reference model server: any registered version behind the OpenAI-compatible chat API.

The answer's content is "[<label>] <text>", which the `openai` backend's default
`label_regex` reads back. With `stream: true` it is sent as OpenAI's server-sent chunks, a token (a
word and the space after it) per chunk, `token_delay` seconds apart (0: as fast as it can; a demo or
a test sets a delay to look like a chat model), the first one `first_token_delay` seconds later still
(a slow prefill: what a chat user waits for before any text), then a usage chunk when
`stream_options.include_usage` asks for one, then `data: [DONE]`.

With `logprobs: true` (and `top_logprobs`, 0 to 20) the answer carries its token log-probabilities in
OpenAI's format, each streamed chunk those of its text (`answer_logprobs`): the label token's are the
model's class scores, so a client reading them (the `openai` backend's `class_scores`) scores as the
model does in-process. A backend without class scores answers `logprobs: null`.

A server created with `sampling=True` (`serve_model --sample`) samples like a chat model at a
temperature: a request with `temperature` > 0 gets a label drawn from the model's class scores
sharpened or flattened by it (`label_sample`: p ∝ score^(1/T)), from a generator seeded by the request's
`seed` when it has one (the same seed, the same label), else fresh each time; the answer's text stays
the model's own (its most likely label's). Without `sampling`, or at temperature 0, or for a backend
without class scores, the answer is the model's most likely label as always.

It holds the concurrency a canary puts on it: each connection has its own (daemon) thread, the
listen backlog is as deep as the kernel allows (the standard library's 5 made a burst of new
connections wait for SYN retransmits or fail, which the canary proxy counts as the candidate's
failures), and the model runs one forward pass at a time (torch uses both cores per call) on one
thread that batches the requests waiting when it starts one (dynamic batching, as vLLM, TGI and
Triton do: up to `max_batch` questions, each distinct question once), so many clients at once share
forward passes instead of queueing for one each.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import json
import math
import queue
import random
import re
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from engines.backends import ModelBackend, Prediction
from engines.backends.logprobs import VERY_UNLIKELY

MAX_BODY_BYTES = 1_000_000
MAX_TOP = 20  # OpenAI's most alternatives per token (`top_logprobs`)


class _Job:
    def __init__(self, question: str, scores: bool):
        self.question = question
        self.want_scores = scores
        self.done = threading.Event()
        self.prediction: Prediction | None = None
        self.scores: list[float] | None = None
        self.failure: BaseException | None = None


class ModelQueue:
    """One forward pass at a time, in arrival order: requests wait in a queue (never refused) for
    the one thread that calls the model, which takes every request waiting when it starts a pass,
    up to `max_batch`, in that one pass."""

    def __init__(self, backend: ModelBackend, *, max_batch: int = 64):
        self.backend = backend
        self.max_batch = max_batch
        # The class scores, where the backend gives them (a classifier: `class_scores` and `labels`).
        scores = getattr(backend, "class_scores", None)
        self.labels: list[str] = list(getattr(backend, "labels", None) or []) if callable(scores) else []
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._work, name="model", daemon=True)
        self.thread.start()

    def answer(self, question: str, *, scores: bool = False) -> tuple[Prediction, list[float] | None]:
        """The model's prediction, and its class scores (in the order of `labels`) when asked and given."""
        job = _Job(question, scores=scores and bool(self.labels))
        self.jobs.put(job)
        job.done.wait()
        if job.failure is not None:
            raise job.failure
        assert job.prediction is not None
        return job.prediction, job.scores

    def close(self) -> None:
        self.jobs.put(None)

    def _work(self) -> None:
        while (job := self.jobs.get()) is not None:
            batch, closing = [job], False
            while len(batch) < self.max_batch:
                try:
                    waiting = self.jobs.get_nowait()
                except queue.Empty:
                    break
                if waiting is None:
                    closing = True
                    break
                batch.append(waiting)
            self._run(batch)
            if closing:
                return

    def _run(self, batch: list[_Job]) -> None:
        try:
            self._answer(batch)
        except Exception as exc:  # a question the model fails on fails its own request, not the batch
            if len(batch) > 1:
                for job in batch:
                    self._run([job])
                return
            batch[0].failure = exc
        for job in batch:
            job.done.set()

    def _answer(self, batch: list[_Job]) -> None:
        questions = list(dict.fromkeys(job.question for job in batch))
        predictions = dict(zip(questions, self.backend.predict(questions), strict=True))
        scored = list(dict.fromkeys(job.question for job in batch if job.want_scores))
        scores = (
            dict(zip(scored, self.backend.class_scores(scored), strict=True))  # type: ignore[attr-defined]
            if scored
            else {}
        )
        for job in batch:
            job.prediction = predictions[job.question]
            job.scores = scores.get(job.question) if job.want_scores else None


class ModelHTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # a client holding a connection open never blocks shutdown
    request_queue_size = socket.SOMAXCONN  # the listen backlog (the kernel caps it at somaxconn)

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        model: ModelQueue,
        *,
        model_name: str,
        config_hash: str = "",
        token_delay: float = 0.0,
        first_token_delay: float = 0.0,
        sampling: bool = False,
    ):
        self.model = model
        self.sampling = sampling
        self.model_name = model_name
        self.config_hash = config_hash
        self.token_delay = token_delay
        self.first_token_delay = first_token_delay
        super().__init__(address, handler)

    def server_close(self) -> None:
        super().server_close()
        self.model.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (closed its end) before its answer was written is not a server error.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def label_sample(*, labels: list[str], scores: list[float], temperature: float, seed: int | None) -> str:
    """A label drawn with probability ∝ score^(1/temperature) (temperature > 0; 1 draws from the
    scores as they are), by a generator seeded with `seed` (None: fresh randomness)."""
    logs = [math.log(s) if s > 0 else -math.inf for s in scores]
    top = max(logs)
    weights = [math.exp((value - top) / temperature) for value in logs]
    rng = random.Random(seed) if seed is not None else random.Random()
    return rng.choices(labels, weights=weights, k=1)[0]


def sampling_asked(body: dict[str, Any]) -> tuple[float, int | None] | None:
    """The request's temperature and seed when it asks to sample (temperature > 0), else None."""
    temperature, seed = body.get("temperature"), body.get("seed")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or temperature <= 0:
        return None
    return float(temperature), seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def answer_tokens(content: str) -> list[str]:
    """An answer cut into the pieces a stream sends: each word with the white space after it."""
    return re.findall(r"\S+\s*|\s+", content)


def logprobs_asked(body: dict[str, Any]) -> tuple[int | None, str]:
    """How many alternatives per token the request asks for (`top_logprobs`, 0 when it asks for
    `logprobs: true` alone), None when it asks for no log-probabilities; and what is wrong with the
    request's fields, if anything (OpenAI's rules: a boolean, an integer from 0 to 20 that needs
    `logprobs: true`)."""
    asked, top = body.get("logprobs", False), body.get("top_logprobs")
    if asked is None:
        asked = False
    if not isinstance(asked, bool):
        return None, "logprobs must be true or false"
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_TOP):
        return None, f"top_logprobs must be an integer from 0 to {MAX_TOP}"
    if top is not None and not asked:
        return None, "top_logprobs needs logprobs: true"
    return (top or 0) if asked else None, ""


def _logprob(probability: float) -> float:
    return math.log(probability) if probability > 0 else VERY_UNLIKELY


def _token_entry(token: str, logprob: float, top: list[tuple[str, float]]) -> dict[str, Any]:
    def one(text: str, value: float) -> dict[str, Any]:
        return {"token": text, "logprob": value, "bytes": list(text.encode())}

    return {**one(token, logprob), "top_logprobs": [one(text, value) for text, value in top]}


def answer_logprobs(
    *, content: str, label: str | None, labels: list[str], scores: list[float], top: int
) -> list[list[dict[str, Any]]]:
    """The answer's token log-probabilities in OpenAI's `logprobs.content` entries, per stream piece
    (`answer_tokens`). Tokens: "[", the label, then the stream's pieces ("] " cut from the first);
    the label token's log-probability is the log of its class score and its alternatives are the
    `top` labels by score (-9999.0, OpenAI's "very unlikely", for a score of 0); every other token is
    certain (log-probability 0: the text is the label's answer)."""
    pieces = answer_tokens(content)
    ends = list(itertools.accumulate(len(piece) for piece in pieces))
    labelled = bool(label) and label in labels and content.startswith(f"[{label}]")
    bounds = sorted({0, *ends, *((1, 1 + len(label or "")) if labelled else ())})
    ranked = sorted(zip(labels, scores, strict=True), key=lambda pair: -pair[1])[:top]
    alternatives = [(name, _logprob(score)) for name, score in ranked]
    entries: list[list[dict[str, Any]]] = [[] for _ in pieces]
    for begin, end in itertools.pairwise(bounds):
        token = content[begin:end]
        if labelled and begin == 1:
            entry = _token_entry(token, _logprob(scores[labels.index(token)]), alternatives)
        else:
            entry = _token_entry(token, 0.0, [(token, 0.0)] if top else [])
        entries[bisect.bisect_right(ends, begin)].append(entry)
    return entries


class ChatHandler(BaseHTTPRequestHandler):
    """The chat API of the `ModelHTTPServer` it serves (`self.server`: the model and its settings)."""

    server: ModelHTTPServer

    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without TCP_NODELAY the body waits for the
    # client's delayed ACK, about 40 ms per answer (measured by bench/router.py).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet: one line per request is noise
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _error(self, status: int, message: str, code: str) -> None:
        self._send(status, {"error": {"message": message, "type": "invalid_request_error", "code": code}})

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": self.server.model_name,
                            "object": "model",
                            "owned_by": "evalhub",
                            "evalhub_config_hash": self.server.config_hash,
                        }
                    ],
                },
            )
        elif self.path == "/health":
            self._send(
                200, {"status": "ok", "model": self.server.model_name, "config_hash": self.server.config_hash}
            )
        else:
            self._error(404, f"no route {self.path}", "not_found")

    def _request(self) -> tuple[dict[str, Any], str, int | None] | None:
        """The request's body, question and log-probabilities asked; None once an error is sent."""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route {self.path}", "not_found")
            return None
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self._error(413, "request body too large", "too_large")
            return None
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except json.JSONDecodeError as exc:
            self._error(400, f"body is not JSON: {exc.msg}", "invalid_json")
            return None
        if not isinstance(body, dict):
            self._error(400, "body must be a JSON object", "invalid_body")
            return None
        messages = body.get("messages")
        users = [m for m in messages or [] if isinstance(m, dict) and m.get("role") == "user"]
        if not users or not isinstance(users[-1].get("content"), str):
            self._error(400, "messages must hold a user message with string content", "invalid_messages")
            return None
        top, problem = logprobs_asked(body)
        if problem:
            self._error(400, problem, "invalid_logprobs")
            return None
        return body, users[-1]["content"], top

    def do_POST(self) -> None:
        request = self._request()
        if request is None:
            return
        body, question, top = request
        sample = sampling_asked(body) if self.server.sampling and self.server.model.labels else None
        try:
            prediction, scores = self.server.model.answer(
                question, scores=top is not None or sample is not None
            )
            if sample is not None and scores is not None and prediction.error is None:
                label = label_sample(
                    labels=self.server.model.labels, scores=scores, temperature=sample[0], seed=sample[1]
                )
                prediction = dataclasses.replace(prediction, label=label)
        except Exception as exc:  # the model failed on this question: say so, keep serving
            prediction, scores = (
                Prediction(label=None, text="", latency_ms=0.0, error=f"{type(exc).__name__}: {exc}"),
                None,
            )
        if prediction.error:
            return self._send(
                500,
                {"error": {"message": prediction.error, "type": "server_error", "code": "model_error"}},
            )
        content = f"[{prediction.label}] {prediction.text}" if prediction.label else prediction.text
        logprobs = None
        if scores is not None and top is not None:
            logprobs = answer_logprobs(
                content=content,
                label=prediction.label,
                labels=self.server.model.labels,
                scores=scores,
                top=top,
            )
        self._answer(body=body, question=question, content=content, logprobs=logprobs)

    def _answer(
        self,
        *,
        body: dict[str, Any],
        question: str,
        content: str,
        logprobs: list[list[dict[str, Any]]] | None,
    ) -> None:
        """The answer as one chat completion, or streamed when the request asks."""
        usage = {
            "prompt_tokens": len(question.split()),
            "completion_tokens": len(answer_tokens(content)),
            "total_tokens": len(question.split()) + len(answer_tokens(content)),
        }
        completion = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "model": self.server.model_name,
        }
        if body.get("stream") is True:
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and options.get("include_usage") is True
            return self._stream(
                completion=completion,
                content=content,
                usage=usage if include_usage else None,
                logprobs=logprobs,
            )
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "logprobs": None
            if logprobs is None
            else {"content": list(itertools.chain(*logprobs)), "refusal": None},
            "finish_reason": "stop",
        }
        self._send(200, {**completion, "object": "chat.completion", "choices": [choice], "usage": usage})

    def _stream(
        self,
        *,
        completion: dict[str, Any],
        content: str,
        usage: dict[str, int] | None,
        logprobs: list[list[dict[str, Any]]] | None,
    ) -> None:
        """The answer as server-sent chunks, in HTTP/1.1 chunked encoding (the connection stays open);
        each text chunk carries its tokens' log-probabilities when they were asked for."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(
            delta: dict[str, str], finish: str | None = None, tokens: list[dict[str, Any]] | None = None
        ) -> dict[str, Any]:
            choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
            if logprobs is not None:
                choice["logprobs"] = None if tokens is None else {"content": tokens, "refusal": None}
            return {**completion, "object": "chat.completion.chunk", "choices": [choice]}

        tokens = answer_tokens(content)
        events = [chunk({"role": "assistant", "content": ""})]
        events += [
            chunk({"content": token}, tokens=logprobs[i] if logprobs else None)
            for i, token in enumerate(tokens)
        ]
        events.append(chunk({}, "stop"))
        if usage is not None:
            events.append({**completion, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        for index, event in enumerate(events):
            # The role chunk goes at once, as a server's headers do; the text waits for the prefill,
            # each token for the one before; the stop and usage chunks follow the last at once.
            pause = (self.server.token_delay if 1 <= index <= len(tokens) else 0) + (
                self.server.first_token_delay if index == 1 else 0
            )
            if pause:
                time.sleep(pause)
            self._write_chunk(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")  # the last, empty chunk ends the body

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def model_server_create(
    *,
    backend: ModelBackend,
    model_name: str,
    config_hash: str = "",
    host: str = "127.0.0.1",
    port: int = 0,
    token_delay: float = 0.0,
    first_token_delay: float = 0.0,
    sampling: bool = False,
) -> ModelHTTPServer:
    """`backend` behind the chat API on host:port (0: a free port), answering as `model_name`.
    `config_hash` (`engines.backends.config.backend_config_hash` of the version served) is announced on
    `/v1/models` (`evalhub_config_hash`) and `/health`, so a caller can check what model it reaches.
    `sampling`: a request at temperature > 0 gets a sampled label (the module's docstring)."""
    return ModelHTTPServer(
        (host, port),
        ChatHandler,
        ModelQueue(backend),
        model_name=model_name,
        config_hash=config_hash,
        token_delay=token_delay,
        first_token_delay=first_token_delay,
        sampling=sampling,
    )
