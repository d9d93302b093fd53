from __future__ import annotations

import unicodedata


def _normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def answer_correct(*, expected_label: str, reference: str, label: str | None, text: str) -> bool:
    """Label match where the item has a label (the label wins: similarity misses negation);
    otherwise the answer must equal the reference up to case, width and whitespace."""
    if expected_label:
        return label is not None and _normalize(label) == _normalize(expected_label)
    return _normalize(text) == _normalize(reference)
