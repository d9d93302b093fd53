from __future__ import annotations

import re
import unicodedata


def _normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def answer_correct(*, expected_label: str, reference: str, label: str | None, text: str) -> bool:
    """Label match where the item has a label (the label wins: similarity misses negation);
    otherwise the answer must equal the reference up to case, width and whitespace."""
    if expected_label:
        return label is not None and _normalize(label) == _normalize(expected_label)
    return _normalize(text) == _normalize(reference)


def answer_label_split(*, content: str, pattern: re.Pattern[str]) -> tuple[str | None, str]:
    """A chat answer's label and the rest of its text, as the `openai` backend reads them (`label_regex`,
    whose group `label`); (None, content) when it carries none."""
    match = pattern.search(content)
    if not match:
        return None, content
    return match.group("label").strip(), (content[: match.start()] + content[match.end() :]).strip()
