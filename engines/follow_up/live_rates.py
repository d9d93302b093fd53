"""The detector's error rates per language measured on reviewed live turns, and the choice between
them and the shipped ones (measured on the detector's own test split). Pure: no Django.

Why live: the shipped sensitivity and specificity were measured on pairs written by the set's author;
on traffic they were not written for they can be off (Chinese sensitivity 0.725 on pairs written by
someone else, against the 0.849 shipped), and a correction by the wrong rates is biased by an amount
that more traffic does not shrink, so its interval misses the true rate ever more often.

Why unbiased: reviewers label turns the review queue draws uniformly at random among the
experiment's judged turns (per language when the reviewer keeps to one), blind to the detector's kind
(`canary.services.reviews`). Within a language, the reviewed turns that truly count are then a simple
random sample of the turns that truly count, so TP/P estimates the detector's sensitivity on this
traffic, binomial given P, and TN/N its specificity: exactly the counts `correction.ErrorRates`
carries, whose binomial variances the delta-method interval already adds.

The choice, per language: its live counts once the reviewed turns hold at least `min_labels` of each
class (follow-ups, whose share the detector got right is the sensitivity, and the others, for the
specificity), else the shipped counts. Both classes switch together: a specificity near 0.95
measured on a few dozen others is often exactly 1, with no variance, and an interval corrected by it
then covers too rarely (simulated: 0.76 at 30 others, `tests/engines/follow_up/test_live_rates.py`),
whereas by the time a language has `min_labels` follow-ups it has about three times as many others.
Each class with both counts is tested, live against shipped, by Fisher's exact test (two-sided;
Fisher, "The logic of inductive inference", J R Stat Soc 98, 1935; `scipy.stats.fisher_exact`), with
Holm's adjustment over all the tests of one judgement (Holm, Scand J Statist 6, 1979) at level
`alpha`. A class still on its shipped count whose live count already disagrees beyond chance is
`blocking`: the rate it corrects cannot be trusted, and too few turns are reviewed to replace it. A
disagreement on a class already on its live count only says the shipped figure does not hold here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from engines.follow_up.correction import ErrorRates
from engines.stats.hypothesis import holm_adjust

LIVE, SHIPPED = "live", "shipped"
SENSITIVITY, SPECIFICITY = "sensitivity", "specificity"
_KINDS = ("follow_up", "deepening", "new")


@dataclass(frozen=True, kw_only=True)
class ClassRate:
    """One class of one language: the rate used and where it comes from (`source`, the language's),
    the live counts (`live_n` reviewed turns of the class, `live_k` the detector got right) and the
    shipped ones, the need (`min_labels` of each class), Fisher's two-sided p-value of live against
    shipped and its Holm-adjusted value (None without both counts), and whether that adjusted value
    is below `alpha`."""

    name: str  # sensitivity or specificity
    source: str
    value: float | None
    live_n: int
    live_k: int
    shipped_n: int
    shipped_k: int
    min_labels: int
    p_value: float | None = None
    adjusted_p: float | None = None
    alpha: float = 0.05
    disagrees: bool = False

    @property
    def live(self) -> float | None:
        return self.live_k / self.live_n if self.live_n else None

    @property
    def shipped(self) -> float | None:
        return self.shipped_k / self.shipped_n if self.shipped_n else None

    @property
    def blocking(self) -> bool:
        """Still on the shipped count, which the live labels already contradict."""
        return self.source == SHIPPED and self.disagrees


@dataclass(frozen=True, kw_only=True)
class LanguageErrorRates:
    """The error rates one language is corrected by (`used`), class by class."""

    language: str
    used: ErrorRates
    sensitivity: ClassRate
    specificity: ClassRate

    @property
    def classes(self) -> tuple[ClassRate, ClassRate]:
        return self.sensitivity, self.specificity


def confusion_error_rates(confusion: Mapping[str, Mapping[str, int]], *, kinds: Sequence[str]) -> ErrorRates:
    """The counts of "is one of `kinds`" from reviewers' labels against the detector's kinds
    (`confusion[label][kind]` turns; missing cells are 0)."""
    counted = set(kinds)
    cells = [(label, kind, int(confusion.get(label, {}).get(kind, 0))) for label in _KINDS for kind in _KINDS]
    return ErrorRates(
        positives=sum(n for label, _, n in cells if label in counted),
        true_positives=sum(n for label, kind, n in cells if label in counted and kind in counted),
        negatives=sum(n for label, _, n in cells if label not in counted),
        true_negatives=sum(n for label, kind, n in cells if label not in counted and kind not in counted),
    )


def fisher_p(*, first: tuple[int, int], second: tuple[int, int]) -> float | None:
    """Fisher's exact two-sided p-value that two binomial samples, (successes, n) each, share one
    proportion; None when a sample is empty."""
    from scipy.stats import fisher_exact

    (k1, n1), (k2, n2) = first, second
    if not n1 or not n2:
        return None
    return float(fisher_exact([[k1, n1 - k1], [k2, n2 - k2]], alternative="two-sided").pvalue)


def _class_rate(
    *, name: str, live: tuple[int, int], shipped: tuple[int, int], source: str, min_labels: int
) -> ClassRate:
    (live_k, live_n), (shipped_k, shipped_n) = live, shipped
    k, n = (live_k, live_n) if source == LIVE else (shipped_k, shipped_n)
    return ClassRate(
        name=name,
        source=source,
        value=k / n if n else None,
        live_n=live_n,
        live_k=live_k,
        shipped_n=shipped_n,
        shipped_k=shipped_k,
        min_labels=min_labels,
        p_value=fisher_p(first=live, second=shipped),
    )


def error_rates_choose(
    *,
    shipped: Mapping[str, ErrorRates],
    live: Mapping[str, ErrorRates],
    languages: Sequence[str],
    min_labels: int,
    alpha: float,
) -> dict[str, LanguageErrorRates]:
    """Per language of `languages`, the error rates to correct by and why (the module docstring).
    A language nobody measured gets zero counts (the correction then reports it uninformative)."""
    if isinstance(min_labels, bool) or not isinstance(min_labels, int) or min_labels < 1:
        raise ValueError(f"min_labels={min_labels!r} must be a positive integer")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha} outside (0, 1)")
    none = ErrorRates(positives=0, true_positives=0, negatives=0, true_negatives=0)
    chosen: dict[str, tuple[ClassRate, ClassRate]] = {}
    for language in sorted(set(languages)):
        ours, theirs = live.get(language, none), shipped.get(language, none)
        enough = ours.positives >= min_labels and ours.negatives >= min_labels
        source = LIVE if enough else SHIPPED
        chosen[language] = (
            _class_rate(
                name=SENSITIVITY,
                live=(ours.true_positives, ours.positives),
                shipped=(theirs.true_positives, theirs.positives),
                source=source,
                min_labels=min_labels,
            ),
            _class_rate(
                name=SPECIFICITY,
                live=(ours.true_negatives, ours.negatives),
                shipped=(theirs.true_negatives, theirs.negatives),
                source=source,
                min_labels=min_labels,
            ),
        )
    # Holm over every test of this judgement (at most two per language).
    keys = [
        (lang, i) for lang, pair in chosen.items() for i, rate in enumerate(pair) if rate.p_value is not None
    ]
    adjusted = dict(zip(keys, holm_adjust([chosen[lang][i].p_value or 0.0 for lang, i in keys]), strict=True))
    result = {}
    for language, pair in chosen.items():
        se, sp = (_tested(rate, adjusted.get((language, i)), alpha) for i, rate in enumerate(pair))
        result[language] = LanguageErrorRates(
            language=language, used=_used(se, sp), sensitivity=se, specificity=sp
        )
    return result


def _tested(rate: ClassRate, adjusted_p: float | None, alpha: float) -> ClassRate:
    disagrees = adjusted_p is not None and adjusted_p < alpha
    return replace(rate, adjusted_p=adjusted_p, alpha=alpha, disagrees=disagrees)


def _used(se: ClassRate, sp: ClassRate) -> ErrorRates:
    positives = (se.live_k, se.live_n) if se.source == LIVE else (se.shipped_k, se.shipped_n)
    negatives = (sp.live_k, sp.live_n) if sp.source == LIVE else (sp.shipped_k, sp.shipped_n)
    return ErrorRates(
        positives=positives[1],
        true_positives=positives[0],
        negatives=negatives[1],
        true_negatives=negatives[0],
    )
