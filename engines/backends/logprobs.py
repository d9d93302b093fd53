"""Class scores read from a chat answer's token log-probabilities (OpenAI's `logprobs`).

An answer names its label where the version's `label_regex` finds it (by default a leading
"[label]"). The *label position* is the answer token in which the regex's `label` group begins (the
concatenated tokens are the answer's text). At that position the endpoint lists the most likely
tokens (`top_logprobs`, plus the token it chose); each alternative is read as a label when:

1. the answer's text before the position followed by the alternative holds a complete `label` group
   beginning at the position (a token such as "payment]" or "[payment]"), or else
2. the alternative, less the text its position's token has before the label (e.g. the "[" of a
   "[payment" token) and surrounding white space, is a label, or is the beginning of exactly one label:
   the first token of a label of several tokens, whose later tokens follow once it is chosen. A first
   token that begins several labels tells them apart at no position and counts for none of them.

A label's probability is the sum of its alternatives' (exp of their log-probabilities). Labels no
alternative names ("missing": below the listed ones) share the mass the listed alternatives leave,
1 - their sum (at least 0), evenly. The scores are then normalised to sum to 1 over the labels (so
alternatives that are no label, e.g. a preamble's first word, drop out); when no label has any mass
every label scores the same.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from engines.reasons import gettext_noop, wordings_register

VERY_UNLIKELY = -9999.0  # OpenAI's log-probability for a token outside its top 20


class LogprobsCode(StrEnum):
    NO_LABELS = "backends.scores_need_labels"  # `url`: the config names no labels
    NONE_RETURNED = "backends.no_logprobs"  # `url` answered without token log-probabilities
    NO_LABEL = "backends.no_label_position"  # `url`'s `answer` (its start) holds no label


wordings_register(
    {
        LogprobsCode.NO_LABELS: gettext_noop(
            "{url}: class scores need the version's labels (backend_config.labels)"
        ),
        LogprobsCode.NONE_RETURNED: gettext_noop(
            "{url} returned no token log-probabilities (logprobs), which class scores are read from"
        ),
        LogprobsCode.NO_LABEL: gettext_noop(
            "{url}: no label where label_regex looks in the answer {answer!r}, so no class scores"
        ),
    }
)


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]  # (token, log-probability) alternatives at this position


def logprobs_parse(choice: Any) -> list[TokenLogprob] | None:
    """A chat completion choice's `logprobs.content`, or None when it has none (not asked, not given,
    or not in OpenAI's shape)."""
    try:
        content = choice["logprobs"]["content"]
        return [
            TokenLogprob(
                token=str(entry["token"]),
                logprob=float(entry["logprob"]),
                top=tuple((str(t["token"]), float(t["logprob"])) for t in entry.get("top_logprobs") or ()),
            )
            for entry in content
        ] or None
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def label_position(tokens: Sequence[TokenLogprob], pattern: re.Pattern[str]) -> tuple[int, str, str] | None:
    """The label position's index, the answer's text before that token, and that token's text before
    the label; None when the answer has no label where `pattern` looks."""
    text = "".join(t.token for t in tokens)
    match = pattern.search(text)
    if match is None:
        return None
    start, offset = match.start("label"), 0
    for index, token in enumerate(tokens):
        if offset <= start < offset + len(token.token):
            return index, text[:offset], text[offset:start]
        offset += len(token.token)
    return None


def alternative_label(
    alternative: str, *, before: str, lead: str, labels: Sequence[str], pattern: re.Pattern[str]
) -> str | None:
    """The label an alternative token at the label position stands for (rules 1 and 2 above), if any."""
    match = pattern.search(before + alternative)
    if match is not None and match.start("label") >= len(before):
        label = match.group("label").strip()
        if label in labels:
            return label
    if not alternative.startswith(lead):
        return None
    piece = alternative[len(lead) :].strip()
    if not piece:
        return None
    if piece in labels:
        return piece
    beginning = [label for label in labels if label.startswith(piece)]
    return beginning[0] if len(beginning) == 1 else None


def logprobs_class_scores(
    *, tokens: Sequence[TokenLogprob], labels: Sequence[str], pattern: re.Pattern[str]
) -> list[float] | None:
    """The labels' scores (in the order of `labels`, summing to 1) at the label position; None when the
    answer has no label where `pattern` looks."""
    position = label_position(tokens, pattern)
    if position is None:
        return None
    index, before, lead = position
    chosen = tokens[index]
    alternatives = dict(reversed(chosen.top))  # a token listed twice: its first listing
    alternatives.setdefault(chosen.token, chosen.logprob)
    mass = dict.fromkeys(labels, 0.0)
    named: set[str] = set()
    listed = 0.0
    for alternative, logprob in alternatives.items():
        probability = math.exp(logprob)
        listed += probability
        label = alternative_label(alternative, before=before, lead=lead, labels=labels, pattern=pattern)
        if label is not None:
            mass[label] += probability
            named.add(label)
    missing = [label for label in labels if label not in named]
    for label in missing:
        mass[label] = max(0.0, 1.0 - listed) / len(missing)
    total = sum(mass.values())
    if total <= 0:
        return [1.0 / len(labels)] * len(labels)
    return [mass[label] / total for label in labels]
