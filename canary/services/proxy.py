"""The canary proxy: an OpenAI-compatible chat completion, answered by the user's arm.

The request is assigned by its `user` field (OpenAI's own), else the X-EvalHub-User header, else
the X-EvalHub-Session header, and forwarded to the arm's version at its serving URL. When the
candidate fails (unreachable, times out, answers non-2xx or no choices) the baseline answers that
request and the failure is recorded as a fallback. A streamed request (`stream: true`) is relayed
chunk by chunk by `canary.services.proxy_stream`, with the same checks, routing and fallback.

A client that retries (the official clients do, after a timeout, a dropped connection or a 5xx)
may send an `Idempotency-Key` header, the same on every try of one question: the tries' turn
events then share their ids, so a question answered twice because the first answer never reached
the client is stored once. The key is scoped to the unit (user or session) that sent it.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Generic, TypeVar

import httpx
from django.conf import settings
from django.utils import timezone

from canary.models import Experiment, TurnEvent
from canary.services.assignment import experiment_assign
from canary.services.shadow import MirrorResult, shadow_offer
from canary.services.telemetry import ProxiedTurn, turn_events_record
from engines.backends.base import BackendError
from engines.input_checks import FieldCode, json_problem, text_problem, text_storable
from engines.outbound import OutboundPolicy, OutboundRefusedError, outbound_client
from engines.reasons import gettext_noop, reason, reason_render, wordings_register
from engines.routing import CANDIDATE
from registry.errors import ENGLISH, ApplicationError, CommonCode
from registry.models import ModelVersion
from registry.outbound import outbound_policy
from registry.services.serving import model_version_serving_verify
from registry.services.versions import (
    model_version_api_key,
    model_version_config_hash,
    model_version_serving_model,
    model_version_serving_url,
)

# One pooled client per process, every connection checked by the outbound policy; rebuilt when
# the policy's settings change.
_client: tuple[OutboundPolicy, httpx.Client] | None = None


def _http() -> httpx.Client:
    global _client
    policy = outbound_policy()
    if _client is None or _client[0] is not policy:
        client = outbound_client(
            policy=policy,
            timeout=settings.EVALHUB_PROXY_TIMEOUT_SECONDS,
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
        )
        _client = (policy, client)
    return _client[1]


@dataclass(frozen=True)
class ProxyAnswer:
    body: dict
    arm: str  # the user's arm (stays "candidate" when the baseline stood in)
    version: ModelVersion  # the version that answered
    fallback: bool
    latency_ms: float


IDEMPOTENCY_KEY_MAX = 200


class ProxyCode(StrEnum):
    BODY_NOT_OBJECT = "proxy.body_not_object"
    A_JSON_OBJECT = "proxy.a_json_object"
    STREAM_NOT_BOOLEAN = "proxy.stream_not_boolean"
    STREAM_OPTIONS = "proxy.stream_options"
    ONE_CHOICE = "proxy.one_choice"
    MODEL_NOT_STRING = "proxy.model_not_string"
    MODEL_NOTE = "proxy.model_note"
    USER_LENGTH = "proxy.user_length"
    USER_LENGTH_NOTE = "proxy.user_length_note"
    MESSAGES_EMPTY = "proxy.messages_empty"
    A_NON_EMPTY_LIST = "proxy.a_non_empty_list"
    ROLE_MISSING = "proxy.role_missing"
    CONTENT_NOT_TEXT = "proxy.content_not_text"
    MUST_BE_STRING = "proxy.must_be_string"
    LAST_NOT_USER = "proxy.last_not_user"
    WHO_IS_ASKING = "proxy.who_is_asking"
    WHO_IS_ASKING_NOTE = "proxy.who_is_asking_note"
    BASELINE_FAILED = "proxy.baseline_failed"
    BOTH_FAILED = "proxy.both_failed"
    KEY_LENGTH = "proxy.key_length"


wordings_register(
    {
        ProxyCode.BODY_NOT_OBJECT: gettext_noop("The body must be a JSON object."),
        ProxyCode.A_JSON_OBJECT: gettext_noop("a JSON object"),
        ProxyCode.STREAM_NOT_BOOLEAN: gettext_noop("stream must be true or false."),
        ProxyCode.STREAM_OPTIONS: gettext_noop(
            "stream_options must be an object whose include_usage is a boolean."
        ),
        ProxyCode.ONE_CHOICE: gettext_noop(
            "The canary proxy answers one choice per request (n = 1): each answer is a user's turn."
        ),
        ProxyCode.MODEL_NOT_STRING: gettext_noop("model must be a string."),
        ProxyCode.MODEL_NOTE: gettext_noop("a string (it is ignored)"),
        ProxyCode.USER_LENGTH: gettext_noop("user must be a string of 1 to 200 characters."),
        ProxyCode.USER_LENGTH_NOTE: gettext_noop("1-200 characters"),
        ProxyCode.MESSAGES_EMPTY: gettext_noop("messages must be a non-empty list."),
        ProxyCode.A_NON_EMPTY_LIST: gettext_noop("a non-empty list"),
        ProxyCode.ROLE_MISSING: gettext_noop("Each message needs a role."),
        ProxyCode.CONTENT_NOT_TEXT: gettext_noop("Message content must be text."),
        ProxyCode.MUST_BE_STRING: gettext_noop("must be a string"),
        ProxyCode.LAST_NOT_USER: gettext_noop("The last message must be the user's."),
        ProxyCode.WHO_IS_ASKING: gettext_noop(
            "Say who is asking: the request's `user`, or an X-EvalHub-User or X-EvalHub-Session header."
        ),
        ProxyCode.WHO_IS_ASKING_NOTE: gettext_noop("required (or X-EvalHub-User / X-EvalHub-Session)"),
        ProxyCode.BASELINE_FAILED: gettext_noop("The baseline could not answer: {error}"),
        ProxyCode.BOTH_FAILED: gettext_noop("Neither version could answer: {error}; {again}"),
        ProxyCode.KEY_LENGTH: gettext_noop("must be 1 to {max} characters"),
    }
)


class UpstreamError(Exception):
    pass


def _validate(body: object) -> list[dict]:
    if not isinstance(body, dict):
        raise ApplicationError(
            reason(ProxyCode.BODY_NOT_OBJECT), fields={"body": [reason(ProxyCode.A_JSON_OBJECT)]}
        )
    # Every string is forwarded upstream and the question is stored: both need storable text.
    found = json_problem(body)
    if found:
        field = found[0] or "body"
        raise ApplicationError(
            reason(CommonCode.FIELD_PROBLEM, field=field, problem=found[1]), fields={field: [found[1]]}
        )
    _stream_check(body)
    if "model" in body and not isinstance(body["model"], str):
        raise ApplicationError(
            reason(ProxyCode.MODEL_NOT_STRING), fields={"model": [reason(ProxyCode.MODEL_NOTE)]}
        )
    user = body.get("user")
    if "user" in body and not (isinstance(user, str) and 0 < len(user) <= 200):
        raise ApplicationError(
            reason(ProxyCode.USER_LENGTH), fields={"user": [reason(ProxyCode.USER_LENGTH_NOTE)]}
        )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApplicationError(
            reason(ProxyCode.MESSAGES_EMPTY), fields={"messages": [reason(ProxyCode.A_NON_EMPTY_LIST)]}
        )
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ApplicationError(
                reason(ProxyCode.ROLE_MISSING),
                fields={f"messages[{index}].role": [reason(CommonCode.REQUIRED)]},
            )
        if not isinstance(message.get("content"), str):
            raise ApplicationError(
                reason(ProxyCode.CONTENT_NOT_TEXT),
                fields={f"messages[{index}].content": [reason(ProxyCode.MUST_BE_STRING)]},
            )
    if messages[-1]["role"] != "user":
        raise ApplicationError(
            reason(ProxyCode.LAST_NOT_USER), fields={f"messages[{len(messages) - 1}].role": ["'user'"]}
        )
    return messages


def _stream_check(body: dict) -> None:
    """`stream`, `stream_options` and `n` as the proxy takes them (OpenAI's types; one choice)."""
    if "stream" in body and not isinstance(body["stream"], bool):
        raise ApplicationError(
            reason(ProxyCode.STREAM_NOT_BOOLEAN), fields={"stream": [reason(FieldCode.BOOLEAN)]}
        )
    options = body.get("stream_options")
    if options is not None and not (
        isinstance(options, dict)
        and set(options) <= {"include_usage"}
        and isinstance(options.get("include_usage", False), bool)
    ):
        raise ApplicationError(
            reason(ProxyCode.STREAM_OPTIONS), fields={"stream_options": [reason(ProxyCode.STREAM_OPTIONS)]}
        )
    if "n" in body and (isinstance(body["n"], bool) or body["n"] != 1):
        raise ApplicationError(
            reason(ProxyCode.ONE_CHOICE), fields={"n": [reason(FieldCode.INTEGER_BETWEEN, low=1, high=1)]}
        )


# (version, serving address, config hash) whose address this process has seen serve that model.
_verified: set[tuple[int, str, str]] = set()


def _serving_verify(*, version: ModelVersion) -> None:
    """On the first call per process to a version's serving address: refuse (as an upstream error) an
    address that serves another model than the one its gate judged. Not cached until it answers."""
    key = (version.pk, version.serving_url, model_version_config_hash(version=version))
    if key in _verified:
        return
    check = model_version_serving_verify(version=version, timeout=settings.EVALHUB_PROXY_TIMEOUT_SECONDS)
    if check is not None and check.mismatch and check.problem is not None:
        raise UpstreamError(reason_render(check.problem, words=ENGLISH))
    if check is None or not check.problem:
        _verified.add(key)


@dataclass(frozen=True)
class Upstream:
    """Where a version's chat completions go: the URL, the headers (its key) and the model it names."""

    url: str
    headers: dict[str, str]
    model: str


def upstream_of(*, version: ModelVersion) -> Upstream:
    """The version's serving address, checked to serve the model its gate judged (UpstreamError)."""
    url = model_version_serving_url(version=version)
    if not url:
        raise UpstreamError(f"{version.ref} has no serving URL")
    _serving_verify(version=version)
    try:
        api_key = model_version_api_key(version=version)
    except BackendError as exc:
        raise UpstreamError(str(exc)) from None
    return Upstream(
        url=f"{url.rstrip('/')}/chat/completions",
        headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
        model=model_version_serving_model(version=version),
    )


def upstream_send(*, version: ModelVersion, body: dict, stream: bool = False) -> httpx.Response:
    """POST `body` to the version's chat completions (its model named); a 2xx response, open for
    reading when `stream`. Anything else is an UpstreamError saying what failed."""
    upstream = upstream_of(version=version)
    client = _http()
    request = client.build_request(
        "POST", upstream.url, json={**body, "model": upstream.model}, headers=upstream.headers
    )
    try:
        response = client.send(request, stream=stream)
    except OutboundRefusedError as exc:
        raise UpstreamError(f"{version.ref} refused: {exc}") from None
    except httpx.TimeoutException:
        raise UpstreamError(f"{version.ref} timed out") from None
    except httpx.HTTPError as exc:
        raise UpstreamError(f"{version.ref} unreachable: {type(exc).__name__}") from None
    if response.status_code >= 300:
        response.close()
        raise UpstreamError(f"{version.ref} answered HTTP {response.status_code}")
    return response


def _ask(*, version: ModelVersion, body: dict) -> dict:
    response = upstream_send(version=version, body=body)
    try:
        answer = response.json()
        content = answer["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise UpstreamError(f"{version.ref} answered without a chat completion") from None
    if not isinstance(content, str):
        raise UpstreamError(f"{version.ref} answered without text")
    return answer


@dataclass(frozen=True, kw_only=True)
class Routed:
    """A checked request and where it goes: its messages, who asks, their arm and version, and the id
    its two turn events share."""

    messages: list[dict]
    user_id: str
    session_id: str
    arm: str
    version: ModelVersion
    event: str


def proxy_route(
    *,
    experiment: Experiment,
    body: object,
    user_id: str | None = None,
    session_id: str | None = None,
    force_arm: str | None = None,
    qa_token: str | None = None,
    idempotency_key: str | None = None,
) -> Routed:
    """Check the request (400s name the field) and assign its unit to an arm."""
    messages = _validate(body)
    assert isinstance(body, dict)  # _validate refuses anything else
    user_id = body.get("user") or user_id
    if not user_id and not session_id:
        raise ApplicationError(
            reason(ProxyCode.WHO_IS_ASKING), fields={"user": [reason(ProxyCode.WHO_IS_ASKING_NOTE)]}
        )
    routing = experiment_assign(
        experiment=experiment, user_id=user_id, session_id=session_id, force_arm=force_arm, qa_token=qa_token
    )
    return Routed(
        messages=messages,
        user_id=user_id or "",
        session_id=session_id or f"user:{user_id}",
        arm=routing.assignment.arm,
        version=routing.version,
        event=_event_id(unit_id=routing.unit_id, idempotency_key=idempotency_key),
    )


T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Answered(Generic[T]):
    """What `call` gave, from which version, and whether the baseline stood in (and why)."""

    value: T
    version: ModelVersion
    fallback: bool
    error: str


def upstream_or_fallback(
    *, experiment: Experiment, routed: Routed, call: Callable[[ModelVersion], T]
) -> Answered[T]:
    """`call(version)` for the user's arm; when the candidate fails, `call(baseline)` (a fallback).
    A failing baseline, or both, is a 502."""
    try:
        return Answered(value=call(routed.version), version=routed.version, fallback=False, error="")
    except UpstreamError as exc:
        if routed.arm != CANDIDATE:
            raise ApplicationError(
                reason(ProxyCode.BASELINE_FAILED, error=str(exc)), code="upstream_error", status_code=502
            ) from None
        try:
            value = call(experiment.baseline)
        except UpstreamError as again:
            raise ApplicationError(
                reason(ProxyCode.BOTH_FAILED, error=str(exc), again=str(again)),
                code="upstream_error",
                status_code=502,
            ) from None
        return Answered(value=value, version=experiment.baseline, fallback=True, error=str(exc))


def chat_completion_proxy(*, experiment: Experiment, body: object, **who: str | None) -> ProxyAnswer:
    """A chat completion (not streamed) by the caller's arm; `who`: `proxy_route`'s keywords."""
    routed = proxy_route(experiment=experiment, body=body, **who)
    assert isinstance(body, dict)
    started = time.perf_counter()
    answered = upstream_or_fallback(
        experiment=experiment, routed=routed, call=lambda v: _ask(version=v, body=body)
    )
    latency_ms = (time.perf_counter() - started) * 1000
    turn_pair_record(
        experiment=experiment,
        routed=routed,
        text=answered.value["choices"][0]["message"]["content"],
        version=answered.version,
        latency_ms=latency_ms,
        error=answered.error,
        fallback=answered.fallback,
    )
    # At the shadow step: the same question to the candidate, in the background, once answered.
    shadow_offer(
        experiment=experiment,
        arm=routed.arm,
        event=routed.event,
        ask=lambda: _mirror_ask(version=experiment.candidate, body=body),
    )
    return ProxyAnswer(
        body=answered.value,
        arm=routed.arm,
        version=answered.version,
        fallback=answered.fallback,
        latency_ms=latency_ms,
    )


def _mirror_ask(*, version: ModelVersion, body: dict) -> MirrorResult:
    """The candidate's answer to a mirrored plain request (on a shadow thread)."""
    started = time.perf_counter()
    try:
        answer = _ask(version=version, body=body)
    except UpstreamError as exc:
        return MirrorResult(text="", latency_ms=(time.perf_counter() - started) * 1000, error=str(exc))
    usage = answer.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return MirrorResult(
        text=answer["choices"][0]["message"]["content"],
        latency_ms=(time.perf_counter() - started) * 1000,
        output_tokens=tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
    )


def _event_id(*, unit_id: str, idempotency_key: str | None) -> str:
    """The id both turn events of this question share: from the unit and its key, else random."""
    if idempotency_key is None:
        return uuid.uuid4().hex
    problem = text_problem(idempotency_key)
    if problem or not 0 < len(idempotency_key) <= IDEMPOTENCY_KEY_MAX:
        note = problem or reason(ProxyCode.KEY_LENGTH, max=IDEMPOTENCY_KEY_MAX)
        raise ApplicationError(
            reason(CommonCode.FIELD_PROBLEM, field="Idempotency-Key", problem=note),
            fields={"Idempotency-Key": [note]},
        )
    return hashlib.sha256(f"{unit_id}\0{idempotency_key}".encode()).hexdigest()[:32]


@dataclass(frozen=True, kw_only=True)
class StreamFacts:
    """What a streamed answer adds to its turn event (see `TurnEvent`)."""

    first_token_ms: float | None
    output_tokens: int | None
    abandoned: bool


def turn_pair_record(
    *,
    experiment: Experiment,
    routed: Routed,
    text: str,
    version: ModelVersion,
    latency_ms: float,
    error: str,
    fallback: bool,
    stream: StreamFacts | None = None,
) -> None:
    """The user's question and the answer (`text`), as two turn events (off the response path)."""
    asked = sum(1 for m in routed.messages if m["role"] == "user")
    common = {
        "experiment_id": experiment.pk,
        "session_id": routed.session_id[:200],
        "user_id": routed.user_id[:200],
        "arm": routed.arm,
        "occurred_at": timezone.now(),
    }
    turn_events_record(
        events=[
            ProxiedTurn(
                **common,
                event_id=f"px-{routed.event}-q",
                turn_index=2 * (asked - 1),
                role=TurnEvent.Role.USER,
                text=routed.messages[-1]["content"],
            ),
            ProxiedTurn(
                **common,
                event_id=f"px-{routed.event}-a",
                turn_index=2 * asked - 1,
                role=TurnEvent.Role.ASSISTANT,
                # The version's answer, as storable text (an upstream may answer a NUL).
                text=text_storable(text),
                version_id=version.pk,
                latency_ms=latency_ms,
                error=error,
                fallback=fallback,
                **({"streamed": True, **asdict(stream)} if stream else {}),
            ),
        ]
    )
