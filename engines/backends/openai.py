"""Backend for any OpenAI-compatible `/v1/chat/completions` endpoint (vLLM, TGI, Ollama,
OpenAI, or EvalHub's own `serve_model`).

Each input is one chat request. Requests run with bounded concurrency; transient failures
(connection errors, timeouts, 408/409/429/5xx) are retried with exponential backoff. The label
is read from the answer with `label_regex` (default: a leading "[label]").

With the version's `labels` in its config the backend also gives class scores (`class_scores`, what
the adversarial attacks search with): each input is then asked with `logprobs: true` and
`top_logprobs`, and the scores are read from the token log-probabilities at the answer's label
(`engines.backends.logprobs`); an endpoint that returns none fails the call (BackendError). Plain
answers (`predict`) never ask for log-probabilities.

Every connection goes through an `engines.outbound.OutboundPolicy` (public addresses only unless
the policy allows more); a refused address fails the whole backend, not retried. The key is the
one given, else the environment variable `api_key_env`, which must start with the allowed prefix.
"""

from __future__ import annotations

import email.utils
import os
import random
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpx

from engines.outbound import OutboundPolicy, OutboundRefusedError, outbound_client
from engines.reasons import reason

from .base import BackendCode, BackendError, Prediction, TokenTally
from .config import (
    DEFAULT_API_KEY_ENV_PREFIX,
    DEFAULT_TOP_LOGPROBS,
    BackendConfigError,
    api_key_env_check,
)
from .logprobs import LogprobsCode, logprobs_class_scores, logprobs_parse

MAX_RETRY_AFTER = 60.0  # an endpoint asking for longer is asked again after a minute
RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
UNREACHABLE = "unreachable: "  # an item's error when no attempt got through, before the exception


_T = TypeVar("_T")
_A = TypeVar("_A")


class _Transient(Exception):
    def __init__(self, message: str, *, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after  # seconds the endpoint asked to wait (Retry-After), if it did


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """A Retry-After header's wait in seconds (RFC 9110: delay-seconds or an HTTP date), capped at
    MAX_RETRY_AFTER; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return min(max(0.0, when - (time.time() if now is None else now)), MAX_RETRY_AFTER)


class _Unreachable(Exception):
    """No attempt got through (the last one's failure is the message)."""


def _tokens(answer: dict[str, Any]) -> tuple[int | None, int | None]:
    """Tokens in and out from a completion's `usage` (OpenAI's `prompt_tokens`, `completion_tokens`);
    None for what the endpoint does not say."""
    usage = answer.get("usage")
    if not isinstance(usage, dict):
        return None, None
    counts = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
    known = [c if isinstance(c, int) and not isinstance(c, bool) and c >= 0 else None for c in counts]
    return known[0], known[1]


class OpenAIBackend:
    def __init__(
        self,
        *,
        config: dict[str, Any],
        api_key: str = "",
        outbound: OutboundPolicy | None = None,
        api_key_env_prefix: str = DEFAULT_API_KEY_ENV_PREFIX,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.config = config
        if not api_key and config["api_key_env"]:
            try:
                api_key_env_check(name=config["api_key_env"], prefix=api_key_env_prefix)
            except BackendConfigError as exc:
                raise BackendError(str(exc)) from None
            api_key = os.environ.get(config["api_key_env"], "")
        self.label_pattern = re.compile(config["label_regex"])
        # The version's labels (config `labels`, absent in configs stored before it): with them the
        # backend gives class scores, when the endpoint returns token log-probabilities.
        self.labels: list[str] = list(config.get("labels") or [])
        self.top_logprobs: int = config.get("top_logprobs", DEFAULT_TOP_LOGPROBS)
        self.url = config["base_url"].rstrip("/") + "/chat/completions"
        self.sleep = sleep
        self.client = outbound_client(
            policy=outbound or OutboundPolicy(),
            timeout=httpx.Timeout(config["timeout_s"]),
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
            limits=httpx.Limits(max_connections=config["max_concurrency"]),
        )

    def close(self) -> None:
        self.client.close()

    def predict(self, inputs: Sequence[str], *, seeds: Sequence[int] | None = None) -> list[Prediction]:
        """The answers; with `seeds` (one per input) each request carries its `seed`, so an endpoint
        that honours seeds samples the same answer again (`repeats` in the clean-accuracy layer)."""
        if not inputs:
            return []
        if seeds is not None and len(seeds) != len(inputs):
            raise ValueError(f"{len(seeds)} seeds for {len(inputs)} inputs")
        asked = list(zip(inputs, seeds if seeds is not None else [None] * len(inputs), strict=True))
        predictions = self._map(lambda pair: self._predict_one(pair[0], seed=pair[1]), asked)
        unreachable = [p.error for p in predictions if p.error and p.error.startswith(UNREACHABLE)]
        if len(unreachable) == len(predictions):
            # Nothing got through: the endpoint is down, not the inputs bad. Worth a retry later.
            why = unreachable[0].removeprefix(UNREACHABLE)
            raise BackendError(reason(BackendCode.UNREACHABLE, url=self.url, why=why), transient=True)
        return predictions

    # The endpoint says what each answer cost (`usage`): an attack's `class_scores` calls pass a tally.
    counts_tokens = True

    def class_scores(self, inputs: Sequence[str], *, tally: TokenTally | None = None) -> list[list[float]]:
        """Class probabilities per input, in the order of `labels` (the config's), read from the
        answer's token log-probabilities at its label (`engines.backends.logprobs`); each answer's
        tokens added to `tally`. All or nothing: an input without scores (its request failed, the
        endpoint gave no log-probabilities, the answer no label) raises BackendError."""
        if not self.labels:
            raise BackendError(reason(LogprobsCode.NO_LABELS, url=self.url))
        if not inputs:
            return []
        unique = list(dict.fromkeys(inputs))  # an attack's texts repeat: each is asked once per call
        answers = self._map(lambda text: self._scores_one(text, tally=tally), unique)
        scores = dict(zip(unique, answers, strict=True))
        return [list(scores[text]) for text in inputs]

    def _map(self, one: Callable[[_A], _T], inputs: Sequence[_A]) -> list[_T]:
        """`one` over the inputs with bounded concurrency, in order."""
        with ThreadPoolExecutor(max_workers=min(self.config["max_concurrency"], len(inputs))) as pool:
            try:
                return list(pool.map(one, inputs))
            except OutboundRefusedError as exc:
                # The endpoint's address is refused: no item can be answered, and no retry helps.
                raise BackendError(f"{self.url}: {exc}") from None

    def _request_body(self, text: str, seed: int | None = None) -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        if self.config["system_prompt"]:
            messages.append({"role": "system", "content": self.config["system_prompt"]})
        messages.append({"role": "user", "content": text})
        return {
            "model": self.config["model"],
            "messages": messages,
            "temperature": self.config["temperature"],
            "max_tokens": self.config["max_tokens"],
            **({"seed": seed} if seed is not None else {}),
        }

    def _predict_one(self, text: str, *, seed: int | None = None) -> Prediction:
        started = time.perf_counter()
        try:
            answer = self._completion(self._request_body(text, seed))
        except _Unreachable as exc:
            return self._failed(f"{UNREACHABLE}{exc}", started)
        except BackendError as exc:
            return self._failed(str(exc), started)
        content = answer["choices"][0]["message"]["content"] or ""
        match = self.label_pattern.search(content)
        label = match.group("label").strip() if match else None
        text_out = (content[: match.start()] + content[match.end() :]).strip() if match else content
        tokens_in, tokens_out = _tokens(answer)
        return Prediction(
            label=label,
            text=text_out,
            latency_ms=self._ms(started),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
        )

    def _scores_one(self, text: str, *, tally: TokenTally | None) -> list[float]:
        body = {**self._request_body(text), "logprobs": True, "top_logprobs": self.top_logprobs}
        try:
            answer = self._completion(body)
        except _Unreachable as exc:
            raise BackendError(
                reason(BackendCode.UNREACHABLE, url=self.url, why=str(exc)), transient=True
            ) from None
        if tally is not None:
            tokens_in, tokens_out = _tokens(answer)
            tally.add(tokens_in=tokens_in, tokens_out=tokens_out)
        tokens = logprobs_parse(answer["choices"][0])
        if tokens is None:
            raise BackendError(reason(LogprobsCode.NONE_RETURNED, url=self.url))
        scores = logprobs_class_scores(tokens=tokens, labels=self.labels, pattern=self.label_pattern)
        if scores is None:
            said = "".join(t.token for t in tokens)[:80]
            raise BackendError(reason(LogprobsCode.NO_LABEL, url=self.url, answer=said))
        return scores

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """The answer (a chat completion); transient failures retried with backoff, then _Unreachable."""
        attempts = self.config["max_retries"] + 1
        for attempt in range(attempts):
            try:
                return self._post(body)
            except _Transient as exc:
                if attempt + 1 == attempts:
                    raise _Unreachable(str(exc)) from None
                # Exponential backoff with jitter: 0.25 s, 0.5 s, 1 s ... capped at 8 s; longer when the
                # endpoint says how long to wait (429/503 with Retry-After).
                backoff = min(8.0, 0.25 * 2**attempt) * (0.5 + random.random() / 2)
                self.sleep(max(backoff, exc.retry_after or 0.0))
        raise AssertionError("unreachable: the loop returns or raises")

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self.client.post(self.url, json=body)
        except (httpx.TransportError, httpx.TimeoutException) as exc:
            raise _Transient(type(exc).__name__ + (f": {exc}" if str(exc) else "")) from None
        if response.status_code in RETRY_STATUS:
            wait = retry_after_seconds(response.headers.get("retry-after"))
            raise _Transient(f"HTTP {response.status_code}", retry_after=wait)
        if response.status_code >= 400:
            raise BackendError(f"HTTP {response.status_code}: {response.text[:200]}")
        try:
            answer: dict[str, Any] = response.json()
            if "content" not in answer["choices"][0]["message"]:  # a chat completion has it (maybe null)
                raise KeyError("content")
        except (ValueError, KeyError, IndexError, TypeError):
            raise BackendError(f"not a chat completion: {response.text[:200]}") from None
        return answer

    @staticmethod
    def _ms(started: float) -> float:
        return (time.perf_counter() - started) * 1000

    def _failed(self, error: str, started: float) -> Prediction:
        return Prediction(label=None, text="", latency_ms=self._ms(started), error=error)
