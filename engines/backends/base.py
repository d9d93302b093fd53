"""The one interface every model backend implements.

A backend takes a batch of input texts and returns one `Prediction` per input, in order.
Backends never raise for a single bad item: the item's `error` says what went wrong.
A failure of the whole backend (server down, checkpoint missing) raises `BackendError`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeGuard

from engines.reasons import ENGLISH, Reason, gettext_noop, reason_render, wordings_register


class BackendCode(StrEnum):
    UNREACHABLE = "backends.unreachable"  # nothing got through to `url`; `why`: the last exception
    OF_VERSION = "backends.of_version"  # `why`, the backend's error, for the version `ref`


wordings_register(
    {
        BackendCode.UNREACHABLE: gettext_noop("{url}: unreachable: {why}"),
        BackendCode.OF_VERSION: gettext_noop("{ref}: {why}"),
    }
)


@dataclass(frozen=True)
class Prediction:
    """One answer. `tokens_in`/`tokens_out`: what the model counted for it (an endpoint's `usage`);
    None where the backend does not count tokens (not 0: unknown is not free)."""

    label: str | None
    text: str
    latency_ms: float
    error: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None


def _plus(a: int | float | None, b: int | float | None) -> Any:
    return None if a is None or b is None else a + b


@dataclass(frozen=True, kw_only=True)
class Usage:
    """What model work spent: queries asked, tokens in and out (None: not known for some query), and
    seconds the model ran on a local device (None: a remote endpoint's device time is not known)."""

    queries: int = 0
    tokens_in: int | None = 0
    tokens_out: int | None = 0
    device_seconds: float | None = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            queries=self.queries + other.queries,
            tokens_in=_plus(self.tokens_in, other.tokens_in),
            tokens_out=_plus(self.tokens_out, other.tokens_out),
            device_seconds=_plus(self.device_seconds, other.device_seconds),
        )


def usage_of(*, predictions: Sequence[Prediction], device_seconds: float | None) -> Usage:
    """The usage of answers just computed (one query each), their tokens summed when all are known."""
    tokens_in = [p.tokens_in for p in predictions]
    tokens_out = [p.tokens_out for p in predictions]
    return Usage(
        queries=len(predictions),
        tokens_in=None if None in tokens_in else sum(t or 0 for t in tokens_in),
        tokens_out=None if None in tokens_out else sum(t or 0 for t in tokens_out),
        device_seconds=device_seconds,
    )


class TokenTally:
    """The tokens a run of queries spent, summed as the answers come (an endpoint is asked from
    several threads at once); each None once an answer did not say it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.tokens_in: int | None = 0
        self.tokens_out: int | None = 0

    def add(self, *, tokens_in: int | None, tokens_out: int | None) -> None:
        with self._lock:
            self.tokens_in = _plus(self.tokens_in, tokens_in)
            self.tokens_out = _plus(self.tokens_out, tokens_out)


class BackendError(Exception):
    """The backend as a whole cannot answer: `reason` says why (a code, or an English sentence not
    coded yet), the message is it in English. `transient` marks errors worth a retry."""

    def __init__(self, reason: Reason | str, *, transient: bool = False):
        super().__init__(reason_render(reason, words=ENGLISH))
        self.reason = reason
        self.transient = transient


class ModelBackend(Protocol):
    def predict(self, inputs: Sequence[str]) -> list[Prediction]: ...


class ScoringBackend(Protocol):
    """A backend that gives class scores (what adversarial attacks search with)."""

    labels: list[str]

    def class_scores(self, inputs: Sequence[str]) -> list[list[float]]: ...


def backend_scores_classes(backend: object) -> TypeGuard[ScoringBackend]:
    """Whether `backend` gives class scores: it has `class_scores` and a label set. A classifier
    checkpoint (`hf`, `builtin`) does; an `openai` backend does when its config names the version's
    labels (it reads the scores from the endpoint's token log-probabilities)."""
    return callable(getattr(backend, "class_scores", None)) and bool(getattr(backend, "labels", None))


def language_of(text: str) -> str:
    """'zh' when CJK characters outnumber Latin letters, else 'en'."""
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    latin = sum(1 for ch in text if ch.isascii() and ch.isalpha())
    return "zh" if cjk > latin else "en"


def answer_text(answers: dict[str, dict[str, str]], label: str, text: str) -> str:
    """The short answer for `label`, in the language of the question `text`.

    `answers` maps label -> {"en": ..., "zh": ...}; a missing language falls back to English,
    a missing label to the label itself.
    """
    by_language = answers.get(label)
    if not by_language:
        return label
    return by_language.get(language_of(text)) or by_language.get("en") or label
