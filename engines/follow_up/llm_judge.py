"""A prompted LLM as the follow-up detector: any OpenAI-compatible chat model (a registered `openai`
version) labels each pair, and `judge_evaluate` measures its agreement with the labels the same way
the trained detector is measured. Pure: `predict` is a backend's `predict` (engines.backends).

The model is asked to answer with the kind in brackets first ("[follow_up] ..."), which the openai
backend's default `label_regex` reads. An answer without a known kind, or an error, counts as "new"
and is counted apart (`unreadable`). A turn after the window is "new" before the model is asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from engines.backends.base import Prediction
from engines.follow_up.classifier import detection_scores, rows_to_pairs
from engines.follow_up.detector import KINDS, NEW, FollowUpJudgement, FollowUpThresholds, TurnPair

PROMPT = """You label chat turns for a quality metric. Given a user's question, the assistant's answer \
and the user's next turn, say what the next turn is:
- follow_up: more about the SAME matter, usually because the answer was wrong, vague or unclear \
(a "what if", a repeat, "I don't get it", the user's own situation in the same case);
- deepening: the user accepted the answer and asks a NEW but related question about the same case;
- new: an unrelated matter, another case, a greeting, thanks or a closing only.
Answer with the kind in square brackets first, e.g. "[follow_up]", then at most one short sentence.

Question: {question}
Answer: {answer}
Next turn: {turn}"""


def judge_prompt(pair: TurnPair) -> str:
    return PROMPT.format(question=pair.previous_question, answer=pair.previous_answer, turn=pair.next_turn)


def follow_ups_judge_llm(
    *,
    pairs: Sequence[TurnPair],
    predict: Callable[[Sequence[str]], list[Prediction]],
    thresholds: FollowUpThresholds = FollowUpThresholds(),
    name: str = "llm",
) -> list[FollowUpJudgement]:
    """The kind of each pair as the model says; `reason` says which answers could not be read."""
    inside = [
        i for i, p in enumerate(pairs) if p.gap_seconds is None or p.gap_seconds <= thresholds.window_seconds
    ]
    predictions = predict([judge_prompt(pairs[i]) for i in inside]) if inside else []
    judged = {i: prediction for i, prediction in zip(inside, predictions, strict=True)}
    judgements = []
    for i, pair in enumerate(pairs):
        if i not in judged:
            kind, reason = NEW, f"outside window ({pair.gap_seconds:g} s > {thresholds.window_seconds:g} s)"
        else:
            prediction = judged[i]
            label = (prediction.label or "").strip().lower().replace("-", "_").replace(" ", "_")
            if label in KINDS and not prediction.error:
                kind, reason = label, f"{name}: [{label}]"
            else:
                kind, reason = NEW, f"{name}: unreadable ({prediction.error or prediction.text[:80]!r})"
        judgements.append(
            FollowUpJudgement(
                kind=kind, question_similarity=0.0, answer_similarity=0.0, markers=(), reason=reason
            )
        )
    return judgements


def judge_evaluate(
    *, rows: Sequence[dict[str, Any]], predict: Callable[[Sequence[str]], list[Prediction]], name: str
) -> dict[str, Any]:
    """The LLM judge on labelled rows: the trained detector's report shape (agreement with the labels
    as precision, recall, F1, the confusion matrices), plus how many answers could not be read."""
    started = time.perf_counter()
    judged = follow_ups_judge_llm(pairs=rows_to_pairs(rows), predict=predict, name=name)
    seconds = time.perf_counter() - started
    return {
        "n": len(rows),
        "detector": name,
        **detection_scores([j.kind for j in judged], rows),
        "unreadable": sum("unreadable" in j.reason for j in judged),
        "seconds": seconds,
        "turns_per_second": len(rows) / seconds if seconds else None,
        "mistakes": [
            {
                "id": r["id"],
                "label": r["label"],
                "predicted": j.kind,
                "next_turn": r["next_turn"],
                "reason": j.reason,
            }
            for r, j in zip(rows, judged, strict=True)
            if j.kind != r["label"]
        ],
    }
