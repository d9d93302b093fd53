"""Streamed chat completions through the canary proxy (`stream: true`), in OpenAI's chunk format.

The arm's server-sent events are relayed chunk by chunk as they arrive, never buffered. The request
is checked and routed as an unstreamed one is (`canary.services.proxy`), and the fallback to the
baseline happens only before anything reached the client: the candidate's stream is opened and its
first chunk read before the response starts. A failure after that ends the stream with an error
event, which the official SDK raises as `APIError`, and the answer is recorded as failed (not a
fallback). A client that goes away mid-stream closes the relay: the upstream request is closed with
it and the answer is recorded as abandoned, with the text sent so far.

The upstream is always asked for its usage (`stream_options.include_usage`), so the turn event has
the answer's token count; the client gets that last chunk only when it asked for it. The turn event
holds the assembled answer (so the follow-up detector and the review queue read it as any other),
the time to the first text, the total time and the tokens.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx

from canary.models import Experiment
from canary.services.proxy import (
    StreamFacts,
    UpstreamError,
    proxy_route,
    turn_pair_record,
    upstream_or_fallback,
    upstream_send,
)
from canary.services.shadow import MirrorResult, shadow_offer
from registry.models import ModelVersion

DONE = b"data: [DONE]\n\n"


@dataclass(frozen=True)
class ProxyStream:
    arm: str  # the user's arm (stays "candidate" when the baseline stood in)
    version: ModelVersion  # the version that answers
    fallback: bool
    chunks: Iterator[bytes]  # the server-sent events, as the response's body


def _events_read(response: httpx.Response, *, ref: str) -> Iterator[tuple[str, dict]]:
    """Each event's data (the JSON text) and the chunk it holds. After `[DONE]` the body is read to
    its end, so the connection goes back to the pool rather than being closed half-read."""
    try:
        lines = response.iter_lines()
        for line in lines:
            if not line.startswith("data:"):
                continue  # blank lines between events, comments, `event:` fields
            data = line[5:].strip()
            if data == "[DONE]":
                for _ in lines:
                    pass
                return
            chunk = json.loads(data)
            if not isinstance(chunk, dict):
                raise UpstreamError(f"{ref} sent a chunk that is not an object")
            if chunk.get("error"):
                raise UpstreamError(f"{ref} failed mid-stream: {chunk['error']}")
            yield data, chunk
    except httpx.TimeoutException:
        raise UpstreamError(f"{ref} timed out mid-stream") from None
    except httpx.HTTPError as exc:
        raise UpstreamError(f"{ref} broke off: {type(exc).__name__}") from None
    except ValueError:
        raise UpstreamError(f"{ref} sent a chunk that is not JSON") from None


class _Open:
    """An arm's open stream, its first event already read: `events()` yields every event's data and
    chunk, the first one first. (The reader is a function of the response, not a method: a generator
    holding `self` would make a cycle, left to the garbage collector with the response's buffers.)"""

    def __init__(self, *, response: httpx.Response, version: ModelVersion):
        self.response, self.version = response, version
        self._events = _events_read(response, ref=version.ref)
        try:
            self._first = next(self._events)
        except StopIteration:
            self.close()
            raise UpstreamError(f"{version.ref} ended its stream before any chunk") from None
        except Exception:
            self.close()
            raise

    def events(self) -> Iterator[tuple[str, dict]]:
        yield self._first
        yield from self._events

    def close(self) -> None:
        self.response.close()


def _stream_open(*, version: ModelVersion, body: dict) -> _Open:
    # Always asked for its usage: the turn event's token count (the client gets it only if it asked).
    payload = {**body, "stream": True, "stream_options": {"include_usage": True}}
    return _Open(response=upstream_send(version=version, body=payload, stream=True), version=version)


def chat_completion_stream(*, experiment: Experiment, body: object, **who: str | None) -> ProxyStream:
    """A streamed chat completion by the caller's arm; `who`: `proxy_route`'s keywords. Refusals
    (4xx, and a 502 when no arm could begin) are raised before any chunk."""
    routed = proxy_route(experiment=experiment, body=body, **who)
    assert isinstance(body, dict)
    started = time.perf_counter()
    answered = upstream_or_fallback(
        experiment=experiment, routed=routed, call=lambda v: _stream_open(version=v, body=body)
    )
    options = body.get("stream_options") or {}

    def record(*, text: str, error: str, facts: StreamFacts) -> None:
        turn_pair_record(
            experiment=experiment,
            routed=routed,
            text=text,
            version=answered.version,
            latency_ms=(time.perf_counter() - started) * 1000,
            error="; ".join(e for e in (answered.error, error) if e),
            fallback=answered.fallback,
            stream=facts,
        )
        if not facts.abandoned:  # at the shadow step: the question to the candidate, in the background
            shadow_offer(
                experiment=experiment,
                arm=routed.arm,
                event=routed.event,
                ask=lambda: _mirror_stream(version=experiment.candidate, body=body),
            )

    chunks = _relay(
        upstream=answered.value,
        include_usage=options.get("include_usage") is True,
        started=started,
        record=record,
    )
    return ProxyStream(arm=routed.arm, version=answered.version, fallback=answered.fallback, chunks=chunks)


def _mirror_stream(*, version: ModelVersion, body: dict) -> MirrorResult:
    """The candidate's answer to a mirrored streamed request, read to its end (on a shadow thread)."""
    started = time.perf_counter()
    answer, error = _Answer(started), ""
    try:
        upstream = _stream_open(version=version, body=body)
    except UpstreamError as exc:
        return MirrorResult(text="", latency_ms=(time.perf_counter() - started) * 1000, error=str(exc))
    try:
        for _, chunk in upstream.events():
            answer.take(chunk)
    except UpstreamError as exc:
        error = str(exc)
    finally:
        upstream.close()
    return MirrorResult(
        text=answer.text,
        latency_ms=(time.perf_counter() - started) * 1000,
        error=error,
        streamed=True,
        first_token_ms=answer.first_token_ms,
        output_tokens=answer.tokens,
    )


def _delta_text(chunk: dict) -> str:
    choices = chunk.get("choices") or []
    delta = choices[0].get("delta") if choices and isinstance(choices[0], dict) else None
    content = delta.get("content") if isinstance(delta, dict) else None
    return content if isinstance(content, str) else ""


class _Answer:
    """A streamed answer assembled from its chunks: the text, when its first text came (ms after
    `started`) and the upstream's token count from its usage chunk (else the chunks of text)."""

    def __init__(self, started: float):
        self.started = started
        self.parts: list[str] = []
        self.first_token_ms: float | None = None
        self.usage_tokens: int | None = None

    def take(self, chunk: dict) -> bool:
        """Adds a chunk; True for the usage chunk (no choices, only the count)."""
        text = _delta_text(chunk)
        if text:
            self.parts.append(text)
            if self.first_token_ms is None:
                self.first_token_ms = (time.perf_counter() - self.started) * 1000
        usage = chunk.get("usage")
        if not isinstance(usage, dict) or chunk.get("choices"):
            return False
        tokens = usage.get("completion_tokens")
        self.usage_tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
        return True

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def tokens(self) -> int:
        return self.usage_tokens if self.usage_tokens is not None else len(self.parts)


def _error_event(message: str) -> bytes:
    error = {"message": message, "type": "upstream_error", "code": "upstream_error"}
    return f"data: {json.dumps({'error': error}, ensure_ascii=False)}\n\n".encode()


def _relay(
    *, upstream: _Open, include_usage: bool, started: float, record: Callable[..., None]
) -> Iterator[bytes]:
    """The upstream's events as the client's, the answer assembled on the way. The answer is recorded
    once, as it ends: done or failed (before the client's last event, so it is stored by the time the
    client has read it), or abandoned by the client."""
    answer = _Answer(started)
    recorded = False

    def finish(*, error: str = "", abandoned: bool = False) -> None:
        nonlocal recorded
        upstream.close()  # done, or cancelling the upstream's request
        if not recorded:
            recorded = True
            facts = StreamFacts(
                first_token_ms=answer.first_token_ms, output_tokens=answer.tokens, abandoned=abandoned
            )
            record(text=answer.text, error=error, facts=facts)

    try:
        for data, chunk in upstream.events():
            if answer.take(chunk) and not include_usage:
                continue  # asked for the proxy's own count, not the client's
            yield f"data: {data}\n\n".encode()
        finish()
    except GeneratorExit:  # the client went away
        finish(abandoned=True)
        raise
    except UpstreamError as exc:
        finish(error=str(exc))
        yield _error_event(str(exc))
        return
    finally:
        finish(error="the relay stopped unexpectedly")  # a no-op once recorded: a bug's trace
    yield DONE
