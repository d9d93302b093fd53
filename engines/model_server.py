"""A reference model server: any registered version behind the OpenAI-compatible chat API.

The answer's content is "[<label>] <text>", which the `openai` backend's default
`label_regex` reads back. With `stream: true` it is sent as OpenAI's server-sent chunks, a token (a
word and the space after it) per chunk, `token_delay` seconds apart (0: as fast as it can; a demo or
a test sets a delay to look like a chat model), the first one `first_token_delay` seconds later still
(a slow prefill: what a chat user waits for before any text), then a usage chunk when
`stream_options.include_usage` asks for one, then `data: [DONE]`.

It holds the concurrency a canary puts on it: each connection has its own (daemon) thread, the
listen backlog is as deep as the kernel allows (the standard library's 5 made a burst of new
connections wait for SYN retransmits or fail, which the canary proxy counts as the candidate's
failures), and the model runs one forward pass at a time (torch uses both cores per call) on one
thread that takes the waiting requests in the order they came.
"""

from __future__ import annotations

import json
import queue
import re
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from engines.backends import ModelBackend, Prediction

MAX_BODY_BYTES = 1_000_000


class _Job:
    def __init__(self, question: str):
        self.question = question
        self.done = threading.Event()
        self.prediction: Prediction | None = None
        self.failure: BaseException | None = None


class ModelQueue:
    """One forward pass at a time, in arrival order: requests wait in a queue (never refused) for
    the one thread that calls the model."""

    def __init__(self, backend: ModelBackend):
        self.backend = backend
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._work, name="model", daemon=True)
        self.thread.start()

    def predict(self, question: str) -> Prediction:
        job = _Job(question)
        self.jobs.put(job)
        job.done.wait()
        if job.failure is not None:
            raise job.failure
        assert job.prediction is not None
        return job.prediction

    def close(self) -> None:
        self.jobs.put(None)

    def _work(self) -> None:
        while (job := self.jobs.get()) is not None:
            try:
                job.prediction = self.backend.predict([job.question])[0]
            except Exception as exc:  # the request that asked answers it; the queue goes on
                job.failure = exc
            finally:
                job.done.set()


class ModelHTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # a client holding a connection open never blocks shutdown
    request_queue_size = socket.SOMAXCONN  # the listen backlog (the kernel caps it at somaxconn)

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], model: ModelQueue):
        self.model = model
        super().__init__(address, handler)

    def server_close(self) -> None:
        super().server_close()
        self.model.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (closed its end) before its answer was written is not a server error.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def answer_tokens(content: str) -> list[str]:
    """An answer cut into the pieces a stream sends: each word with the white space after it."""
    return re.findall(r"\S+\s*|\s+", content)


def model_server_create(
    *,
    backend: ModelBackend,
    model_name: str,
    config_hash: str = "",
    host: str = "127.0.0.1",
    port: int = 0,
    token_delay: float = 0.0,
    first_token_delay: float = 0.0,
) -> ModelHTTPServer:
    """`backend` behind the chat API on host:port (0: a free port), answering as `model_name`.
    `config_hash` (`engines.backends.config.backend_config_hash` of the version served) is announced on
    `/v1/models` (`evalhub_config_hash`) and `/health`, so a caller can check what model it reaches."""
    model = ModelQueue(backend)

    class Handler(BaseHTTPRequestHandler):
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
                                "id": model_name,
                                "object": "model",
                                "owned_by": "evalhub",
                                "evalhub_config_hash": config_hash,
                            }
                        ],
                    },
                )
            elif self.path == "/health":
                self._send(200, {"status": "ok", "model": model_name, "config_hash": config_hash})
            else:
                self._error(404, f"no route {self.path}", "not_found")

        def do_POST(self) -> None:
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                return self._error(404, f"no route {self.path}", "not_found")
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                return self._error(413, "request body too large", "too_large")
            try:
                body = json.loads(self.rfile.read(length) or b"null")
            except json.JSONDecodeError as exc:
                return self._error(400, f"body is not JSON: {exc.msg}", "invalid_json")
            if not isinstance(body, dict):
                return self._error(400, "body must be a JSON object", "invalid_body")
            messages = body.get("messages")
            users = [m for m in messages or [] if isinstance(m, dict) and m.get("role") == "user"]
            if not users or not isinstance(users[-1].get("content"), str):
                return self._error(
                    400, "messages must hold a user message with string content", "invalid_messages"
                )
            question = users[-1]["content"]
            try:
                prediction = model.predict(question)
            except Exception as exc:  # the model failed on this question: say so, keep serving
                prediction = Prediction(
                    label=None, text="", latency_ms=0.0, error=f"{type(exc).__name__}: {exc}"
                )
            if prediction.error:
                return self._send(
                    500,
                    {"error": {"message": prediction.error, "type": "server_error", "code": "model_error"}},
                )
            content = f"[{prediction.label}] {prediction.text}" if prediction.label else prediction.text
            usage = {
                "prompt_tokens": len(question.split()),
                "completion_tokens": len(answer_tokens(content)),
                "total_tokens": len(question.split()) + len(answer_tokens(content)),
            }
            completion = {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "created": int(time.time()),
                "model": model_name,
            }
            if body.get("stream") is True:
                options = body.get("stream_options")
                include_usage = isinstance(options, dict) and options.get("include_usage") is True
                return self._stream(
                    completion=completion, content=content, usage=usage if include_usage else None
                )
            self._send(
                200,
                {
                    **completion,
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                },
            )

        def _stream(self, *, completion: dict[str, Any], content: str, usage: dict[str, int] | None) -> None:
            """The answer as server-sent chunks, in HTTP/1.1 chunked encoding (the connection stays open)."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def chunk(delta: dict[str, str], finish: str | None = None, **extra: Any) -> dict[str, Any]:
                choice = {"index": 0, "delta": delta, "finish_reason": finish}
                return {**completion, "object": "chat.completion.chunk", "choices": [choice], **extra}

            tokens = answer_tokens(content)
            events = [chunk({"role": "assistant", "content": ""})]
            events += [chunk({"content": token}) for token in tokens]
            events.append(chunk({}, "stop"))
            if usage is not None:
                events.append(
                    {**completion, "object": "chat.completion.chunk", "choices": [], "usage": usage}
                )
            for index, event in enumerate(events):
                # The role chunk goes at once, as a server's headers do; the text waits for the prefill,
                # each token for the one before; the stop and usage chunks follow the last at once.
                pause = (token_delay if 1 <= index <= len(tokens) else 0) + (
                    first_token_delay if index == 1 else 0
                )
                if pause:
                    time.sleep(pause)
                self._write_chunk(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
            self._write_chunk(b"data: [DONE]\n\n")
            self._write_chunk(b"")  # the last, empty chunk ends the body

        def _write_chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    return ModelHTTPServer((host, port), Handler, model)
