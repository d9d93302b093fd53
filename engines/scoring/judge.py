"""A rubric judge for free-text answers, and how far a judge agrees with people. Pure.

A registered chat version (any OpenAI-compatible endpoint) is shown the question, the reference
answer and the answer to grade (`answer_judge_prompt`) and must end with a line `VERDICT: correct` or
`VERDICT: incorrect`. `answer_verdict_parse` reads that line; an answer without one, or with both
verdicts, is unreadable (None): it never counts as correct.

Before a judge may decide, its verdicts on answers people have labelled are compared with theirs
(`agreement_measure`): raw agreement and Cohen's κ with its asymptotic standard error and a normal
interval (Fleiss, Cohen & Everitt 1969: the formula of statsmodels'
`statsmodels.stats.inter_rater.cohens_kappa`, which the tests check it against).
An unreadable verdict is a third category the people never use, so it counts as a
disagreement and leaves the chance agreement of the two real verdicts as it is.

    labelled = labelled_answers_parse(content=path.read_text())
    verdicts = [answer_verdict_parse(p.text) for p in predict([answer_judge_prompt(...) ...])]
    agreement = agreement_measure(human=[a.correct for a in labelled], judged=verdicts, confidence=0.95)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RUBRIC = """You grade an answer to a question about a contract against a reference answer.
The answer is correct when it says what the reference says: the same meaning, in any words or \
language. It is incorrect when it misses or contradicts the reference's point, negates it ("may" for \
"may not"), or is about another matter.
Give at most one short sentence of reason, then a last line that is exactly "VERDICT: correct" or \
"VERDICT: incorrect".

Question: {question}
Reference answer: {reference}
Answer to grade: {answer}"""

# A line ending "VERDICT: correct" (a full stop, a full-width colon, Markdown bold as in
# "**VERDICT:** **correct**" allowed); "VERDICT: correct or incorrect", the rubric echoed, is none.
_VERDICT = re.compile(
    r"\bVERDICT\s*\**\s*[:：][ \t*]*(correct|incorrect)\b[ \t*.。!]*$", re.IGNORECASE | re.MULTILINE
)


def answer_judge_prompt(*, question: str, reference: str, answer: str) -> str:
    return RUBRIC.format(question=question, reference=reference, answer=answer)


def answer_verdict_parse(text: str) -> bool | None:
    """True for a line ending `VERDICT: correct`, False for `VERDICT: incorrect`; None (unreadable)
    when the text has no such line or gives both verdicts."""
    found = {match.lower() for match in _VERDICT.findall(text or "")}
    if len(found) != 1:
        return None
    return found == {"correct"}


@dataclass(frozen=True)
class LabelledAnswer:
    """An answer a person has judged against the reference: `correct` is their verdict."""

    id: str
    question: str
    reference: str
    answer: str
    correct: bool
    language: str = "en"


_FIELDS = ("id", "question", "reference", "answer", "verdict")


def labelled_answers_parse(*, content: str) -> list[LabelledAnswer]:
    """A JSONL file of labelled answers, one object a line: `id`, `question`, `reference`, `answer`,
    `verdict` ("correct" or "incorrect") and an optional `language` ("en", "zh"). Blank lines are
    skipped; anything else that is not such an object is a ValueError naming its line."""
    answers: list[LabelledAnswer] = []
    seen: set[str] = set()
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {number}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"line {number}: not an object")
        missing = [name for name in _FIELDS if not isinstance(row.get(name), str) or not row[name].strip()]
        if missing:
            raise ValueError(f"line {number}: needs text in {', '.join(missing)}")
        if row["verdict"] not in ("correct", "incorrect"):
            raise ValueError(f"line {number}: verdict must be 'correct' or 'incorrect'")
        if row["id"] in seen:
            raise ValueError(f"line {number}: id {row['id']!r} twice")
        seen.add(row["id"])
        answers.append(
            LabelledAnswer(
                id=row["id"],
                question=row["question"],
                reference=row["reference"],
                answer=row["answer"],
                correct=row["verdict"] == "correct",
                language=str(row.get("language") or "en"),
            )
        )
    return answers


@dataclass(frozen=True, kw_only=True)
class Agreement:
    """A rater's verdicts against people's on `n` labelled answers. `table`: rows the people's
    verdicts (correct, incorrect), columns the rater's (correct, incorrect, unreadable). `kappa`,
    `se`, `ci_low`, `ci_high`: None when κ is undefined (chance agreement 1: one verdict only)."""

    n: int
    agree: int
    agreement: float | None
    kappa: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    unreadable: int
    table: tuple[tuple[int, int, int], tuple[int, int, int]]


def _kappa_with_ase(table: list[list[int]]) -> tuple[float, float]:
    """Cohen's kappa of a square table and its asymptotic standard error (Fleiss, Cohen & Everitt
    1969): statsmodels' `cohens_kappa` formula (`kappa`, `std_kappa`), written out here because
    statsmodels is a test-only dependency; tests/engines/scoring/test_judge.py checks the two agree."""
    counts = np.asarray(table, dtype=float)
    n = counts.sum()
    probs = counts / n
    rows, cols = counts.sum(1) / n, counts.sum(0) / n
    expected = float((rows * cols).sum())
    kappa = (float(np.trace(probs)) - expected) / (1 - expected)
    term_a = float((np.diag(probs) * (1 - (rows + cols) * (1 - kappa)) ** 2).sum())
    off = probs * (cols[:, None] + rows) ** 2
    np.fill_diagonal(off, 0.0)
    term_b = (1 - kappa) ** 2 * float(off.sum())
    term_c = (kappa - expected * (1 - kappa)) ** 2
    variance = (term_a + term_b - term_c) / (1 - expected) ** 2 / n
    return kappa, math.sqrt(variance) if variance >= 0 else math.nan


def agreement_measure(
    *, human: Sequence[bool], judged: Sequence[bool | None], confidence: float = 0.95
) -> Agreement:
    """Raw agreement and Cohen's κ of `judged` (None: unreadable) against `human`, with the κ's
    two-sided `confidence` interval: κ ± z·ASE, the asymptotic standard error statsmodels gives."""
    from scipy.stats import norm

    if len(human) != len(judged):
        raise ValueError(f"{len(human)} human verdicts but {len(judged)} judged")
    column = {True: 0, False: 1, None: 2}
    rows = [[0, 0, 0], [0, 0, 0]]
    for person, rater in zip(human, judged, strict=True):
        rows[0 if person else 1][column[rater]] += 1
    n = len(human)
    agree = rows[0][0] + rows[1][1]
    table = ((rows[0][0], rows[0][1], rows[0][2]), (rows[1][0], rows[1][1], rows[1][2]))
    kappa = se = low = high = None
    if n:
        square = [rows[0], rows[1], [0, 0, 0]]  # people never give "unreadable"
        expected = sum(sum(r[i] for r in square) * sum(square[i]) for i in range(3)) / n**2
        if expected < 1:
            kappa, se = _kappa_with_ase(square)
            z = float(norm.isf((1 - confidence) / 2))
            low, high = max(-1.0, kappa - z * se), min(1.0, kappa + z * se)
            if not all(math.isfinite(v) for v in (kappa, se)):
                kappa = se = low = high = None
    return Agreement(
        n=n,
        agree=agree,
        agreement=agree / n if n else None,
        kappa=kappa,
        se=se,
        ci_low=low,
        ci_high=high,
        unreadable=rows[0][2] + rows[1][2],
        table=table,
    )


def cutoffs_agreement_print(*, path: str, confidence: float = 0.95) -> None:
    """The shipped BERTScore/chrF cut-offs' agreement with the verdicts of a labelled file, by
    language and in all (`python -m engines.scoring.judge FILE`; loads BERTScore: ~10 s)."""
    from engines.scoring.text import text_scores

    with open(path, encoding="utf-8") as handle:
        labelled = labelled_answers_parse(content=handle.read())
    scores = text_scores(
        references=[a.reference for a in labelled],
        candidates=[a.answer for a in labelled],
        languages=[a.language for a in labelled],
    )
    judged = [
        a.answer.strip() == a.reference.strip() or s.correct for a, s in zip(labelled, scores, strict=True)
    ]
    for language in (*sorted({a.language for a in labelled}), "all"):
        chosen = [i for i, a in enumerate(labelled) if language in ("all", a.language)]
        agreement = agreement_measure(
            human=[labelled[i].correct for i in chosen],
            judged=[judged[i] for i in chosen],
            confidence=confidence,
        )
        kappa = (
            "undefined"
            if agreement.kappa is None
            else (f"{agreement.kappa:.3f} [{agreement.ci_low:.3f}, {agreement.ci_high:.3f}]")
        )
        print(f"{language:4} n={agreement.n:4}  agreement {agreement.agreement or 0:.3f}  kappa {kappa}")


if __name__ == "__main__":
    import sys

    cutoffs_agreement_print(path=sys.argv[1])
