"""What people read for the domain's stored codes: statuses, verdicts, actions, arms and the like are
stored (and returned by the API) as codes, and the English pages show them as they are; other
languages get a label. Each code is a msgid in the context "code" (`rolled_back` -> 已回滚), written
out so that `makemessages` collects it."""

from __future__ import annotations

from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import pgettext, pgettext_lazy

TERMS = {
    # Version status
    "registered": pgettext_lazy("code", "registered"),
    "evaluating": pgettext_lazy("code", "evaluating"),
    "gate_passed": pgettext_lazy("code", "gate_passed"),
    "gate_failed": pgettext_lazy("code", "gate_failed"),
    "approved": pgettext_lazy("code", "approved"),
    "rejected": pgettext_lazy("code", "rejected"),
    "canary": pgettext_lazy("code", "canary"),
    "promoted": pgettext_lazy("code", "promoted"),
    "rolled_back": pgettext_lazy("code", "rolled_back"),
    "retired": pgettext_lazy("code", "retired"),
    # Gate run status and verdicts, also the canary analysis's
    "queued": pgettext_lazy("code", "queued"),
    "running": pgettext_lazy("code", "running"),
    "succeeded": pgettext_lazy("code", "succeeded"),
    "failed": pgettext_lazy("code", "failed"),
    "error": pgettext_lazy("code", "error"),
    "cancelled": pgettext_lazy("code", "cancelled"),
    "pending": pgettext_lazy("code", "pending"),
    "pass": pgettext_lazy("code", "pass"),
    "fail": pgettext_lazy("code", "fail"),
    "marginal": pgettext_lazy("code", "marginal"),
    "insufficient_data": pgettext_lazy("code", "insufficient_data"),
    # Experiment status, lifecycle actions, what an analysis did
    "draft": pgettext_lazy("code", "draft"),
    "paused": pgettext_lazy("code", "paused"),
    "create": pgettext_lazy("code", "create"),
    "start": pgettext_lazy("code", "start"),
    "pause": pgettext_lazy("code", "pause"),
    "resume": pgettext_lazy("code", "resume"),
    "ramp": pgettext_lazy("code", "ramp"),
    "ramp_refused": pgettext_lazy("code", "ramp_refused"),  # leaving the shadow step without a clean window
    "rollback": pgettext_lazy("code", "rollback"),
    "promote": pgettext_lazy("code", "promote"),
    "ramped": pgettext_lazy("code", "ramped"),
    "waiting_for_release_manager": pgettext_lazy("code", "waiting_for_release_manager"),
    "analysis": pgettext_lazy("code", "analysis"),  # a canary analysis in an experiment's history
    # The traffic layers' plans in an experiment's history (canary.services.plans)
    "horizon_register": pgettext_lazy("code", "horizon_register"),
    "plan_replace": pgettext_lazy("code", "plan_replace"),
    "look": pgettext_lazy("code", "look"),
    "unblind": pgettext_lazy("code", "unblind"),
    # Release decisions
    "approve": pgettext_lazy("code", "approve"),
    "reject": pgettext_lazy("code", "reject"),
    "override_request": pgettext_lazy("code", "override_request"),
    "override_confirm": pgettext_lazy("code", "override_confirm"),
    "incumbent_request": pgettext_lazy("code", "incumbent_request"),
    "incumbent_confirm": pgettext_lazy("code", "incumbent_confirm"),
    # Arms, directions, units, detector kinds
    "baseline": pgettext_lazy("code", "baseline"),
    "candidate": pgettext_lazy("code", "candidate"),
    "increase": pgettext_lazy("code", "increase"),
    "decrease": pgettext_lazy("code", "decrease"),
    "user": pgettext_lazy("code", "user"),
    "outcome": pgettext_lazy("code", "outcome"),
    "follow_up": pgettext_lazy("code", "follow_up"),
    "deepening": pgettext_lazy("code", "deepening"),
    "new": pgettext_lazy("code", "new"),
    # The follow-up detector's error rates: which one, and where layer 2 takes it from
    "sensitivity": pgettext_lazy("code", "sensitivity"),
    "specificity": pgettext_lazy("code", "specificity"),
    "live": pgettext_lazy("code", "live"),
    "shipped": pgettext_lazy("code", "shipped"),
    # Languages of user turns (the detector's and the review queue's)
    "en": pgettext_lazy("code", "en"),
    "zh": pgettext_lazy("code", "zh"),
    # Gate layers and their metrics, as the API names them
    "clean_accuracy": pgettext_lazy("code", "clean_accuracy"),
    "robustness": pgettext_lazy("code", "robustness"),
    "follow_up_rate": pgettext_lazy("code", "follow_up_rate"),
    "business_value": pgettext_lazy("code", "business_value"),
    "suite_shift": pgettext_lazy("code", "suite_shift"),
    "live_to_suite_distance": pgettext_lazy("code", "live_to_suite_distance"),
    "accuracy": pgettext_lazy("code", "accuracy"),
    "robustness_rate": pgettext_lazy("code", "robustness_rate"),
    # Attribution levels and its tables' columns
    "phenomenon": pgettext_lazy("code", "phenomenon"),
    "data": pgettext_lazy("code", "data"),
    "system": pgettext_lazy("code", "system"),
    "difference": pgettext_lazy("code", "difference"),
    "item": pgettext_lazy("code", "item"),
    "expected": pgettext_lazy("code", "expected"),
    "answered": pgettext_lazy("code", "answered"),
    # The canary analysis's metrics
    "error_rate": pgettext_lazy("code", "error_rate"),
    "fallback_rate": pgettext_lazy("code", "fallback_rate"),
    "latency": pgettext_lazy("code", "latency"),
    "latency_p95": pgettext_lazy("code", "latency_p95"),
    "first_token_p50": pgettext_lazy("code", "first_token_p50"),
    "first_token_p95": pgettext_lazy("code", "first_token_p95"),
    "tokens_per_second": pgettext_lazy("code", "tokens_per_second"),
    "turns_per_session": pgettext_lazy("code", "turns_per_session"),
    "probes": pgettext_lazy("code", "probes"),
    # Columns of the attribution's tables, units of the analysis's counts
    "hour": pgettext_lazy("code", "hour"),
    "follow-ups": pgettext_lazy("code", "follow-ups"),
    "rate": pgettext_lazy("code", "rate"),
    "session": pgettext_lazy("code", "session"),
    "question": pgettext_lazy("code", "question"),
    "answer": pgettext_lazy("code", "answer"),
    "follow-up": pgettext_lazy("code", "follow-up"),
    "arm": pgettext_lazy("code", "arm"),
    "outcomes": pgettext_lazy("code", "outcomes"),
    "mean": pgettext_lazy("code", "mean"),
    "unit": pgettext_lazy("code", "unit"),
    "value": pgettext_lazy("code", "value"),
    "at": pgettext_lazy("code", "at"),
    "weakness": pgettext_lazy("code", "weakness"),
    "pairs": pgettext_lazy("code", "pairs"),
    "McNemar p": pgettext_lazy("code", "McNemar p"),
    "finding": pgettext_lazy("code", "finding"),
    "answers": pgettext_lazy("code", "answers"),
    "errors": pgettext_lazy("code", "errors"),
    "fallbacks": pgettext_lazy("code", "fallbacks"),
    "latency p50 ms": pgettext_lazy("code", "latency p50 ms"),
    "latency p95 ms": pgettext_lazy("code", "latency p95 ms"),
    "samples": pgettext_lazy("code", "samples"),
    "perturbation": pgettext_lazy("code", "perturbation"),
    "tag": pgettext_lazy("code", "tag"),
    "language": pgettext_lazy("code", "language"),
    "n": pgettext_lazy("code", "n"),
    "observations": pgettext_lazy("code", "observations"),
    # Form fields a refusal names
    "reason": pgettext_lazy("code", "reason"),
    "status": pgettext_lazy("code", "status"),
    "action": pgettext_lazy("code", "action"),
    "version": pgettext_lazy("code", "version"),
    "confirms": pgettext_lazy("code", "confirms"),
    "gate_run": pgettext_lazy("code", "gate_run"),
    "decided_by": pgettext_lazy("code", "decided_by"),
    "traffic_percent": pgettext_lazy("code", "traffic_percent"),
    "guardrails": pgettext_lazy("code", "guardrails"),
    "label": pgettext_lazy("code", "label"),
    "turn_id": pgettext_lazy("code", "turn_id"),
    # Backend kinds
    "openai": pgettext_lazy("code", "openai"),
    "hf": pgettext_lazy("code", "hf"),
    "builtin": pgettext_lazy("code", "builtin"),
    # Where a layer computed (a torch device, or an endpoint), and the SRM check's error
    "remote": pgettext_lazy("code", "remote"),
    "no units": pgettext_lazy("code", "no units"),
    # Readings of the daily table and probe findings (stored as phrases)
    "improvement shown": pgettext_lazy("code", "improvement shown"),
    "candidate worse": pgettext_lazy("code", "candidate worse"),
    "not decided yet": pgettext_lazy("code", "not decided yet"),
    "candidate fixes this weakness": pgettext_lazy("code", "candidate fixes this weakness"),
    "candidate regresses": pgettext_lazy("code", "candidate regresses"),
    "no clear difference": pgettext_lazy("code", "no clear difference"),
}


def term_label(value: object) -> object:
    """The label of a stored code in the active language: the domain's own (`TERMS`), else any installed
    app's (a layer from outside names its codes in its catalogue, context "code"); anything else (data,
    such as a metric's name) unchanged."""
    if isinstance(value, str) and value:
        label = TERMS.get(value)
        return label if label is not None else pgettext("code", value)
    return value


# The parts of the system that act on their own (`registry.actors.SystemActor` names, as audit rows
# and the canary history store them), in the reader's language; a user's name is data and stays.
SYSTEM_ACTORS = {
    "system": pgettext_lazy("actor", "system"),
    "gate": pgettext_lazy("actor", "gate"),
    "reaper": pgettext_lazy("actor", "reaper"),
    "demo": pgettext_lazy("actor", "demo"),
    "admin": pgettext_lazy("actor", "admin"),
    "canary analysis": pgettext_lazy("actor", "canary analysis"),
}


def actor_label(name: str) -> str | SafeString:
    """A system part's name in the active language. "gate run 12" and "worker <host:task>" keep their
    number or host (marked as not for translation); a command ("manage.py import_suite") stays as is."""
    if name in SYSTEM_ACTORS:
        return str(SYSTEM_ACTORS[name])
    run = name.removeprefix("gate run ")
    if run != name and run.isdigit():
        return pgettext("actor", "gate run #%(id)s") % {"id": run}
    worker = name.removeprefix("worker ")
    if worker != name and worker:
        return format_html('{} <span translate="no">{}</span>', pgettext("actor", "worker"), worker)
    return name
