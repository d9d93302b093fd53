"""Backend for any OpenAI-compatible `/v1/chat/completions` endpoint (vLLM, TGI, Ollama,
OpenAI, or EvalHub's own `serve_model`).

Each input is one chat request. Requests run with bounded concurrency; transient failures
(connection errors, timeouts, 408/409/429/5xx) are retried with exponential backoff. The label
is read from the answer with `label_regex` (default: a leading "[label]").

Every connection goes through an `engines.outbound.OutboundPolicy` (public addresses only unless
the policy allows more); a refused address fails the whole backend, not retried. The key is the
one given, else the environment variable `api_key_env`, which must start with the allowed prefix.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from engines.outbound import OutboundPolicy, OutboundRefusedError, outbound_client
from engines.reasons import reason

from .base import BackendCode, BackendError, Prediction
from .config import DEFAULT_API_KEY_ENV_PREFIX, BackendConfigError, api_key_env_check

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
UNREACHABLE = "unreachable: "  # an item's error when no attempt got through, before the exception


class _Transient(Exception):
    pass


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

    def predict(self, inputs: Sequence[str]) -> list[Prediction]:
        if not inputs:
            return []
        with ThreadPoolExecutor(max_workers=min(self.config["max_concurrency"], len(inputs))) as pool:
            try:
                predictions = list(pool.map(self._predict_one, inputs))
            except OutboundRefusedError as exc:
                # The endpoint's address is refused: no item can be answered, and no retry helps.
                raise BackendError(f"{self.url}: {exc}") from None
        unreachable = [p.error for p in predictions if p.error and p.error.startswith(UNREACHABLE)]
        if len(unreachable) == len(predictions):
            # Nothing got through: the endpoint is down, not the inputs bad. Worth a retry later.
            why = unreachable[0].removeprefix(UNREACHABLE)
            raise BackendError(reason(BackendCode.UNREACHABLE, url=self.url, why=why), transient=True)
        return predictions

    def _request_body(self, text: str) -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        if self.config["system_prompt"]:
            messages.append({"role": "system", "content": self.config["system_prompt"]})
        messages.append({"role": "user", "content": text})
        return {
            "model": self.config["model"],
            "messages": messages,
            "temperature": self.config["temperature"],
            "max_tokens": self.config["max_tokens"],
        }

    def _predict_one(self, text: str) -> Prediction:
        started = time.perf_counter()
        body = self._request_body(text)
        attempts = self.config["max_retries"] + 1
        last_error = ""
        for attempt in range(attempts):
            try:
                content = self._post(body)
            except _Transient as exc:
                last_error = f"{UNREACHABLE}{exc}"
                if attempt + 1 < attempts:
                    # Exponential backoff with jitter: 0.25 s, 0.5 s, 1 s ... capped at 8 s.
                    self.sleep(min(8.0, 0.25 * 2**attempt) * (0.5 + random.random() / 2))
                continue
            except BackendError as exc:
                return self._failed(str(exc), started)
            match = self.label_pattern.search(content)
            label = match.group("label").strip() if match else None
            answer = (content[: match.start()] + content[match.end() :]).strip() if match else content
            return Prediction(label=label, text=answer, latency_ms=self._ms(started))
        return self._failed(last_error, started)

    def _post(self, body: dict[str, Any]) -> str:
        try:
            response = self.client.post(self.url, json=body)
        except (httpx.TransportError, httpx.TimeoutException) as exc:
            raise _Transient(type(exc).__name__ + (f": {exc}" if str(exc) else "")) from None
        if response.status_code in RETRY_STATUS:
            raise _Transient(f"HTTP {response.status_code}")
        if response.status_code >= 400:
            raise BackendError(f"HTTP {response.status_code}: {response.text[:200]}")
        try:
            return response.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise BackendError(f"not a chat completion: {response.text[:200]}") from None

    @staticmethod
    def _ms(started: float) -> float:
        return (time.perf_counter() - started) * 1000

    def _failed(self, error: str, started: float) -> Prediction:
        return Prediction(label=None, text="", latency_ms=self._ms(started), error=error)
