"""Reasons in the reader's language: the edge's side of `engines.reasons`. Pages (the `reason`
filter), the Markdown report, the CLI, the webhook and API error bodies call `reason_words` on a
stored or returned reason; the active language (the request's, or `translation.override`) decides."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.utils.translation import gettext

from engines.reasons import Reason, Words, reason_render, stored_reason_read
from engines.reasons import reason_payload as engines_reason_payload
from evalhub.terms import term_label

WORDS = Words(translate=gettext, term=lambda code: str(term_label(code)))


def reason_words(value: Any) -> str:
    """A reason (a `Reason`, its stored JSON, or the sentence a run from before codes stored)."""
    return reason_render(value if isinstance(value, Reason) else stored_reason_read(value), words=WORDS)


def reasons_words(values: Iterable[Any]) -> list[str]:
    return [reason_words(value) for value in values]


def reason_payload(value: Any) -> dict[str, Any]:
    """A reason as the API gives it: `code`, `params` and `message` in the request's language."""
    return engines_reason_payload(value, words=WORDS)
