"""Class scores from token log-probabilities: the label position, multi-token labels, labels missing
from the alternatives, and answers without log-probabilities or a label."""

import math
import re

import pytest

from engines.backends.config import DEFAULT_LABEL_REGEX
from engines.backends.logprobs import (
    TokenLogprob,
    label_position,
    logprobs_class_scores,
    logprobs_parse,
)

PATTERN = re.compile(DEFAULT_LABEL_REGEX)
LABELS = ["payment", "termination", "liability", "confidentiality"]


def tokens(*pieces, top=None, at=1):
    """The answer's tokens, certain but the one at `at`, whose alternatives are `top` (token -> prob)."""
    out = []
    for i, piece in enumerate(pieces):
        if i == at and top is not None:
            alternatives = tuple((t, math.log(p)) for t, p in top.items())
            out.append(TokenLogprob(token=piece, logprob=math.log(top[piece]), top=alternatives))
        else:
            out.append(TokenLogprob(token=piece, logprob=0.0, top=((piece, 0.0),)))
    return out


def test_the_label_tokens_probabilities_normalised_over_the_labels():
    top = {"payment": 0.6, "termination": 0.2, "liability": 0.1, "confidentiality": 0.05, "The": 0.05}
    scores = logprobs_class_scores(
        tokens=tokens("[", "payment", "]", " Pay", " now.", top=top), labels=LABELS, pattern=PATTERN
    )
    # "The" is no label: its mass drops out when the scores are normalised over the labels.
    assert scores == pytest.approx([0.6 / 0.95, 0.2 / 0.95, 0.1 / 0.95, 0.05 / 0.95], abs=1e-12)


def test_a_label_missing_from_the_alternatives_gets_the_mass_they_leave():
    top = {"payment": 0.5, "termination": 0.3}  # 0.2 is below the listed ones
    scores = logprobs_class_scores(
        tokens=tokens("[", "payment", "] x", top=top), labels=LABELS, pattern=PATTERN
    )
    # liability and confidentiality share the leftover 0.2 evenly: 0.1 each; the sum is already 1.
    assert scores == pytest.approx([0.5, 0.3, 0.1, 0.1], abs=1e-12)


def test_listed_mass_of_one_leaves_missing_labels_nothing():
    top = {"payment": 0.7, "termination": 0.3}
    scores = logprobs_class_scores(
        tokens=tokens("[", "payment", "]", top=top), labels=LABELS, pattern=PATTERN
    )
    assert scores == pytest.approx([0.7, 0.3, 0.0, 0.0], abs=1e-12)


def test_multi_token_labels_are_read_by_their_first_token():
    labels = ["late_payment", "termination", "term_sheet"]
    # "late" begins one label only; "term" begins two and tells them apart at no position.
    top = {"late": 0.5, "term": 0.3, "termination": 0.2}
    scores = logprobs_class_scores(
        tokens=tokens("[", "late", "_payment", "]", top=top), labels=labels, pattern=PATTERN
    )
    assert scores == pytest.approx([0.5 / 0.7, 0.2 / 0.7, 0.0], abs=1e-12)


def test_a_token_that_holds_the_bracket_or_the_closing_bracket_too():
    # "[payment" starts before the label: the alternatives are read less that "[".
    top = {"[payment": 0.9, "[termination": 0.1}
    scores = logprobs_class_scores(
        tokens=tokens("[payment", "] ok", top=top, at=0), labels=LABELS, pattern=PATTERN
    )
    assert scores == pytest.approx([0.9, 0.1, 0.0, 0.0], abs=1e-12)
    # "payment]" completes the label group: read by the regex.
    top = {"payment]": 0.8, "liability]": 0.2}
    scores = logprobs_class_scores(
        tokens=tokens("[", "payment]", " ok", top=top), labels=LABELS, pattern=PATTERN
    )
    assert scores == pytest.approx([0.8, 0.0, 0.2, 0.0], abs=1e-12)


def test_the_position_is_the_token_where_the_label_begins():
    answer = tokens(" ", "[", "pay", "ment", "] ", "text")
    assert label_position(answer, PATTERN) == (2, " [", "")


def test_no_label_no_scores_and_nothing_named_equal_scores():
    assert (
        logprobs_class_scores(tokens=tokens("I", " think", top=None), labels=LABELS, pattern=PATTERN) is None
    )
    top = {"pay": 1.0}  # certain, and the beginning of one label only: payment
    assert (
        logprobs_class_scores(tokens=tokens("[", "pay", "]", top=top), labels=LABELS, pattern=PATTERN)[0]
        == 1.0
    )
    top = {"zzz": 1.0}  # certain, and no label: no mass for any label
    scores = logprobs_class_scores(tokens=tokens("[", "zzz", "]", top=top), labels=LABELS, pattern=PATTERN)
    assert scores == [0.25] * 4


def test_parse_reads_openais_shape_and_none_without_it():
    choice = {
        "message": {"content": "[a] b"},
        "logprobs": {
            "content": [
                {"token": "[", "logprob": 0.0, "bytes": [91], "top_logprobs": []},
                {
                    "token": "a",
                    "logprob": -0.1,
                    "bytes": [97],
                    "top_logprobs": [{"token": "a", "logprob": -0.1}],
                },
            ],
            "refusal": None,
        },
    }
    parsed = logprobs_parse(choice)
    assert parsed == [
        TokenLogprob(token="[", logprob=0.0, top=()),
        TokenLogprob(token="a", logprob=-0.1, top=(("a", -0.1),)),
    ]
    assert logprobs_parse({"message": {"content": "x"}}) is None
    assert logprobs_parse({"message": {"content": "x"}, "logprobs": None}) is None
    assert logprobs_parse({"logprobs": {"content": [{"token": "a"}]}}) is None
