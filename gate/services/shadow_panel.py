"""The canary page's shadow panel (and the experiment API's shadow summary): the shadow window's
comparison, relative changes first, each with its interval, beside the bars it is held to."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from canary.models import Experiment
from canary.selectors.shadow import shadow_window_compare, shadow_window_exists
from canary.services.experiments import experiment_shadow_bars
from engines.stats.shadow import ShadowBars, ShadowComparison


@dataclass(frozen=True, kw_only=True)
class Change:
    """A relative (or absolute, for rates) change with its interval, in the unit it is read in."""

    estimate: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True, kw_only=True)
class ShadowPanel:
    active: bool  # the experiment is at its shadow step now
    shadow_percent: float
    require_clean: bool
    first_at: datetime | None
    last_at: datetime | None
    comparison: ShadowComparison
    bars: ShadowBars
    latency_change: Change  # (candidate ÷ baseline median) − 1
    error_change: Change  # candidate − baseline error rate, points as a fraction
    agreement: Change  # share of labelled pairs whose labels agree
    candidate_first_token_ms: float | None


def _minus_one(value: float | None) -> float | None:
    return None if value is None else value - 1


def shadow_panel_build(*, experiment: Experiment) -> ShadowPanel | None:
    """The panel, for an experiment with a shadow step or shadow answers; None otherwise."""
    if not experiment.has_shadow_step and not shadow_window_exists(experiment=experiment):
        return None
    bars = experiment_shadow_bars(experiment=experiment)
    window = shadow_window_compare(experiment=experiment, bars=bars)
    c = window.comparison
    latency_low, latency_high = c.latency_interval or (None, None)
    error_low, error_high = c.error_interval or (None, None)
    agreement_low, agreement_high = c.agreement_interval or (None, None)
    return ShadowPanel(
        active=experiment.in_shadow and experiment.status in Experiment.ACTIVE,
        shadow_percent=experiment.shadow_percent,
        require_clean=experiment.require_clean_shadow,
        first_at=window.first_at,
        last_at=window.last_at,
        comparison=c,
        bars=bars,
        latency_change=Change(
            estimate=_minus_one(c.latency_ratio), low=_minus_one(latency_low), high=_minus_one(latency_high)
        ),
        error_change=Change(estimate=c.error_difference, low=error_low, high=error_high),
        agreement=Change(estimate=c.agreement, low=agreement_low, high=agreement_high),
        candidate_first_token_ms=window.candidate_first_token_ms,
    )
