"""Reasons in English as a service writes them (`engines.reasons.ENGLISH`), for tests that check a
judge's numbers through the sentence they end up in."""

from collections.abc import Iterable
from typing import Any

from engines.reasons import ENGLISH, reason_render, stored_reason_read


def english(reasons: Iterable[Any]) -> list[str]:
    return [reason_render(stored_reason_read(value), words=ENGLISH) for value in reasons]
