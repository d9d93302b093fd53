"""The canary analysis at a shadow step: no user is on the candidate, so the shadow window is what is
judged (`canary.selectors.shadow`), and acted on as Flagger and Argo Rollouts act on a failed mirror
analysis: a failing window rolls the experiment back (audited, with a webhook; no user was exposed), a
passing one moves to the first user step where the plan ramps automatically (`ramp_auto`) and waits
for a release manager otherwise; too few pairs waits."""

from __future__ import annotations

from enum import StrEnum

from canary.models import CanaryAnalysis, Experiment
from canary.selectors.shadow import shadow_window_compare
from canary.services.experiments import experiment_ramp, experiment_rollback, experiment_shadow_bars
from engines.reasons import gettext_noop, reason_render, wordings_register
from engines.reasons import reason as reason_of
from engines.stats.comparisons import FAIL, PASS
from registry.actors import Actor
from registry.errors import ENGLISH, ApplicationError


class ShadowAnalysisCode(StrEnum):
    FIRST_STEP_WAITS = "shadow_analysis.first_step_waits"


wordings_register({ShadowAnalysisCode.FIRST_STEP_WAITS: gettext_noop("the first user step waits: {why}")})


def shadow_analyze(*, experiment: Experiment, act: bool, actor: Actor) -> CanaryAnalysis:
    """Judge the shadow window; with `act`, roll back on fail and ramp on pass where the plan allows."""
    window = shadow_window_compare(experiment=experiment, bars=experiment_shadow_bars(experiment=experiment))
    comparison = window.comparison
    reasons = comparison.reasons
    action = ""
    if act and experiment.status in Experiment.ACTIVE:
        if comparison.verdict == FAIL:
            why = "; ".join(reason_render(item, words=ENGLISH) for item in reasons)
            experiment_rollback(experiment=experiment, actor=actor, reason=f"shadow window failed: {why}")
            action = "rolled_back"
        elif comparison.verdict == PASS and experiment.status == Experiment.Status.RUNNING:
            action = "waiting_for_release_manager"
            if experiment.ramp_auto:
                try:
                    experiment_ramp(experiment=experiment, actor=actor, reason="shadow window passed")
                    action = "ramped"
                except ApplicationError as exc:  # e.g. above the ungated share
                    reasons = (*reasons, reason_of(ShadowAnalysisCode.FIRST_STEP_WAITS, why=exc.reason))
    return CanaryAnalysis.objects.create(
        experiment=experiment,
        verdict=comparison.verdict,
        reasons=[item.to_json() for item in reasons],
        metrics=[{"metric": "shadow", **comparison.to_dict()}],
        action=action,
    )
