"""A shadow window's comparison: the candidate's answers to mirrored questions against the baseline's
answers to the same questions. Pure, no Django.

Each pair is one question: the baseline's answer (what the user got) and the candidate's (mirrored in
the background). The comparison reports
- label agreement, over the pairs where both answers carry a label and neither failed, with a Wilson
  interval;
- free-text similarity, chrF (`engines.scoring.text.chrf_score`) of the candidate's text against the
  baseline's, its mean over the pairs where neither failed;
- error rates on the pairs, candidate − baseline, with Newcombe's interval (it treats the two rates as
  independent, which is conservative for pairs of answers to the same questions);
- latency, the ratio of medians candidate ÷ baseline over the pairs where both answered, with a paired
  bootstrap percentile interval (fixed seed, so a page shows the same interval twice).

The verdict (`shadow_judge`): insufficient_data below `min_pairs` pairs; fail when agreement is below
its bar (labelled pairs) or, with no labelled pairs, mean chrF is below its bar, when the error rate
grows by more than its limit, or when the latency ratio is above its limit; pass otherwise. The bars
are held to the point estimates: a shadow window exposes nobody, so it has no reason to give the
candidate the benefit of the doubt. Drops (mirrors the queue had no room for) are counted, not judged.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from engines.reasons import Reason, gettext_noop, reason, wordings_register
from engines.scoring.text import chrf_score
from engines.stats.comparisons import FAIL, INSUFFICIENT_DATA, PASS
from engines.stats.intervals import newcombe_interval, wilson_interval

BOOTSTRAP_RESAMPLES = 999
BOOTSTRAP_SEED = 20


class ShadowCode(StrEnum):
    TOO_FEW_PAIRS = "shadow.too_few_pairs"
    AGREEMENT_LOW = "shadow.agreement_low"
    SIMILARITY_LOW = "shadow.similarity_low"
    ERRORS_UP = "shadow.errors_up"
    SLOWER = "shadow.slower"
    CLEAN = "shadow.clean"


wordings_register(
    {
        ShadowCode.TOO_FEW_PAIRS: gettext_noop(
            "insufficient data: {pairs} shadow pairs, fewer than the minimum {min_pairs}"
        ),
        ShadowCode.AGREEMENT_LOW: gettext_noop(
            "label agreement {agreement:.1%} ({agree}/{labelled}) is below the minimum {limit:.1%}"
        ),
        ShadowCode.SIMILARITY_LOW: gettext_noop(
            "mean chrF {similarity:.3f} is below the minimum {limit:.3f}"
        ),
        ShadowCode.ERRORS_UP: gettext_noop(
            "the candidate's error rate {candidate:.2%} exceeds the baseline's {baseline:.2%} by more than "
            "{limit:.2%}"
        ),
        ShadowCode.SLOWER: gettext_noop(
            "the candidate's median latency is {ratio:.2f}× the baseline's, above the limit {limit:.2f}×"
        ),
        ShadowCode.CLEAN: gettext_noop(
            "clean: {pairs} pairs within every shadow guardrail (agreement, errors, latency)"
        ),
    }
)


@dataclass(frozen=True, kw_only=True)
class ShadowPair:
    """One mirrored question: each side's label (None: the answer has none), text, latency (ms) and
    whether it failed."""

    baseline_label: str | None
    baseline_text: str
    baseline_latency_ms: float | None
    baseline_error: bool
    candidate_label: str | None
    candidate_text: str
    candidate_latency_ms: float | None
    candidate_error: bool


@dataclass(frozen=True, kw_only=True)
class ShadowBars:
    """The shadow guardrails (see `canary.services.experiments.GUARDRAIL_DEFAULTS`)."""

    min_pairs: int
    min_agreement: float
    min_similarity: float
    max_error_increase: float
    max_latency_ratio: float


@dataclass(frozen=True, kw_only=True)
class ShadowComparison:
    pairs: int
    dropped: int
    labelled: int
    agree: int
    agreement: float | None
    agreement_interval: tuple[float, float] | None
    similarity: float | None  # mean chrF, 0..1
    similarity_n: int
    candidate_errors: int
    baseline_errors: int
    error_difference: float | None  # candidate − baseline error rate
    error_interval: tuple[float, float] | None
    latency_n: int
    candidate_latency_ms: float | None  # medians
    baseline_latency_ms: float | None
    latency_ratio: float | None
    latency_interval: tuple[float, float] | None
    verdict: str
    reasons: tuple[Reason, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (reasons as codes and parameters)."""
        data = asdict(self)
        data["reasons"] = [item.to_json() for item in self.reasons]
        return data


Interval = tuple[float, float]


def _latency(
    pairs: Sequence[ShadowPair],
) -> tuple[int, float | None, float | None, float | None, Interval | None]:
    """(n, candidate median, baseline median, ratio, bootstrap interval) over the pairs both answered."""
    import numpy as np
    from scipy import stats as scipy_stats

    timed = [
        (p.candidate_latency_ms, p.baseline_latency_ms)
        for p in pairs
        if not p.candidate_error and not p.baseline_error
        if p.candidate_latency_ms is not None and p.baseline_latency_ms is not None
    ]
    if not timed:
        return 0, None, None, None, None
    candidate, baseline = (np.array(side, dtype=float) for side in zip(*timed, strict=True))
    c_median, b_median = float(np.median(candidate)), float(np.median(baseline))
    if b_median <= 0:
        return len(timed), c_median, b_median, None, None
    interval = None
    if len(timed) >= 2 and (np.ptp(candidate) > 0 or np.ptp(baseline) > 0):

        def ratio(c: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
            ratios: np.ndarray = np.median(c, axis=axis) / np.maximum(np.median(b, axis=axis), 1e-9)
            return ratios

        result = scipy_stats.bootstrap(
            (candidate, baseline),
            ratio,
            paired=True,
            vectorized=True,
            n_resamples=BOOTSTRAP_RESAMPLES,
            method="percentile",
            rng=np.random.default_rng(BOOTSTRAP_SEED),
        )
        interval = (float(result.confidence_interval.low), float(result.confidence_interval.high))
    return len(timed), c_median, b_median, c_median / b_median, interval


def shadow_compare(*, pairs: Sequence[ShadowPair], dropped: int, bars: ShadowBars) -> ShadowComparison:
    """The window's figures and its verdict (see the module's docstring)."""
    answered = [p for p in pairs if not p.candidate_error and not p.baseline_error]
    labelled = [p for p in answered if p.baseline_label is not None and p.candidate_label is not None]
    agree = sum(1 for p in labelled if p.candidate_label == p.baseline_label)
    similarities = [chrf_score(reference=p.baseline_text, candidate=p.candidate_text) for p in answered]
    c_errors = sum(1 for p in pairs if p.candidate_error)
    b_errors = sum(1 for p in pairs if p.baseline_error)
    n = len(pairs)
    error_interval = None
    if n:
        _, low, high = newcombe_interval(successes_1=c_errors, n_1=n, successes_2=b_errors, n_2=n)
        error_interval = (low, high)
    latency_n, c_latency, b_latency, latency_ratio, latency_interval = _latency(pairs)
    figures = dict(
        pairs=n,
        dropped=dropped,
        labelled=len(labelled),
        agree=agree,
        agreement=agree / len(labelled) if labelled else None,
        agreement_interval=wilson_interval(successes=agree, n=len(labelled)) if labelled else None,
        similarity=statistics.fmean(similarities) if similarities else None,
        similarity_n=len(similarities),
        candidate_errors=c_errors,
        baseline_errors=b_errors,
        error_difference=(c_errors - b_errors) / n if n else None,
        error_interval=error_interval,
        latency_n=latency_n,
        candidate_latency_ms=c_latency,
        baseline_latency_ms=b_latency,
        latency_ratio=latency_ratio,
        latency_interval=latency_interval,
    )
    verdict, reasons = _judge(figures, bars)
    return ShadowComparison(**figures, verdict=verdict, reasons=reasons)  # type: ignore[arg-type]


def _judge(figures: dict[str, Any], bars: ShadowBars) -> tuple[str, tuple[Reason, ...]]:
    n = figures["pairs"]
    if n < bars.min_pairs:
        return INSUFFICIENT_DATA, (reason(ShadowCode.TOO_FEW_PAIRS, pairs=n, min_pairs=bars.min_pairs),)
    failing: list[Reason] = []
    agreement, similarity = figures["agreement"], figures["similarity"]
    if agreement is not None and agreement < bars.min_agreement:
        failing.append(
            reason(
                ShadowCode.AGREEMENT_LOW,
                agreement=agreement,
                agree=figures["agree"],
                labelled=figures["labelled"],
                limit=bars.min_agreement,
            )
        )
    elif agreement is None and similarity is not None and similarity < bars.min_similarity:
        # No labels to compare: the text is (no answered pair at all: the error rate says so).
        failing.append(reason(ShadowCode.SIMILARITY_LOW, similarity=similarity, limit=bars.min_similarity))
    if figures["error_difference"] > bars.max_error_increase:
        failing.append(
            reason(
                ShadowCode.ERRORS_UP,
                candidate=figures["candidate_errors"] / n,
                baseline=figures["baseline_errors"] / n,
                limit=bars.max_error_increase,
            )
        )
    ratio = figures["latency_ratio"]
    if ratio is not None and ratio > bars.max_latency_ratio:
        failing.append(reason(ShadowCode.SLOWER, ratio=ratio, limit=bars.max_latency_ratio))
    if failing:
        return FAIL, tuple(failing)
    return PASS, (reason(ShadowCode.CLEAN, pairs=n),)
