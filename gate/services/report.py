"""The gate report: one document per run, for CI (JSON) and for audits (Markdown).

Per layer it holds the inputs (suite hash, perturbation recipe and seed, traffic window, policy),
the method, estimates, intervals, threshold, verdict and cost; a layer that did not pass also
carries an attribution in three levels (phenomenon, data, system), each with the query or command
that reproduces it. The traffic layers store their attribution when they run (it needs the event
store as it was); the model layers' attribution is read here from their stored results.
"""

from __future__ import annotations

from django.db.models import Avg, Count, Q

from gate.models import GateRun, LayerResult
from gate.policy import gate_policy_parse

Layer = LayerResult.Layer
RULE = (
    "a gate run passes only when every required layer passes; otherwise the worst outcome wins: "
    "fail, then error, then insufficient_data (a missing layer is insufficient_data)"
)
METHODS = {
    Layer.CLEAN_ACCURACY: "share of suite items answered correctly (label match, else BERTScore/chrF cut-off "
    "against the reference), Wilson interval; judged on the bound the policy names",
    Layer.ROBUSTNESS: "share of perturbed inputs (TextAttack transformations, seeded) still answered "
    "correctly, Wilson interval; McNemar against the baseline on the same inputs",
}
# What a traffic layer's details hold besides its estimates.
TRAFFIC_BOOKKEEPING = {"inputs", "method", "attribution", "timings", "labelled_now", "reasons", "verdict"}
PHENOMENON_KEYS = {Layer.CLEAN_ACCURACY: ("by_tag", "by_language"), Layer.ROBUSTNESS: ("by_type", "by_tag")}


def _model_inputs(run: GateRun, layer: LayerResult, policy) -> dict:
    inputs = {"suite": f"{run.suite.name}@{run.suite.version}", "suite_hash": run.suite.content_hash}
    if layer.layer == Layer.ROBUSTNESS:
        details = layer.details
        inputs.update(
            recipe=details.get("recipe"),
            seed=details.get("seed"),
            samples_requested=details.get("samples_requested"),
            set_hash=details.get("set_hash"),
            judged_by=details.get("judged_by"),
            attack_recipe=policy.attack_recipe,
        )
    return inputs


def _moved(candidate: dict, baseline: dict, key: str) -> list[dict]:
    """The breakdown cells where the candidate is weakest, with the baseline beside them. Cells hold
    an `accuracy` (clean accuracy) or a `rate` (robustness)."""
    cells = []
    for name, cell in (candidate.get(key) or {}).items():
        base = (baseline.get(key) or {}).get(name, {})
        value, base_value = cell.get("accuracy", cell.get("rate")), base.get("accuracy", base.get("rate"))
        cells.append(
            {
                key.removeprefix("by_"): name,
                "n": cell.get("n"),
                "candidate": value,
                "baseline": base_value,
                "difference": value - base_value if value is not None and base_value is not None else None,
            }
        )
    return sorted(cells, key=lambda c: c["candidate"] if c["candidate"] is not None else 2.0)[:6]


def _model_attribution(run: GateRun, layer: LayerResult) -> dict:
    details = layer.details
    candidate, baseline = details.get("candidate") or {}, details.get("baseline") or {}
    samples = layer.samples.filter(version=run.candidate)
    phenomenon = {
        key: _moved(candidate, baseline, key) for key in PHENOMENON_KEYS[layer.layer] if key in candidate
    }
    wrong = samples.filter(correct=False)
    data = {
        "worst_items": details.get("worst_items")
        or list(wrong.values("item__external_id", "output_label", "item__label")[:10]),
        "reproduce": f"GET /api/v1/gate-runs/{run.pk}/samples/?layer={layer.layer}&correct=false",
    }
    if layer.layer == Layer.ROBUSTNESS:
        data["by_perturbation"] = list(
            wrong.values("perturbation").annotate(failed=Count("id")).order_by("-failed")[:10]
        )
    system = samples.aggregate(
        samples=Count("id"), errors=Count("id", filter=~Q(error="")), mean_latency_ms=Avg("latency_ms")
    )
    system["device"] = layer.device
    system["reproduce"] = (
        f"GET /api/v1/gate-runs/{run.pk}/samples/?layer={layer.layer}  (fields error, latency_ms)"
    )
    summary = "; ".join(layer.reasons)
    return {
        "phenomenon": {
            "summary": summary,
            **phenomenon,
            "reproduce": f"GET /api/v1/gate-runs/{run.pk}/  (layers[].details)",
        },
        "data": data,
        "system": {
            "summary": f"{system['errors']} of {system['samples']} candidate answers errored, mean latency "
            f"{system['mean_latency_ms'] or 0:.1f} ms on {layer.device or 'unknown device'}",
            **system,
        },
    }


def _layer_report(run: GateRun, layer: LayerResult, policy) -> dict:
    details = layer.details or {}
    traffic = layer.layer in (Layer.FOLLOW_UP_RATE, Layer.BUSINESS_VALUE)
    if traffic:
        inputs = details.get("inputs", {})
        method = details.get("method", "")
        attribution = details.get("attribution")
        # Both arms, the difference or improvement interval, the checks and the sample-ratio test.
        estimates = {k: v for k, v in details.items() if k not in TRAFFIC_BOOKKEEPING}
    else:
        inputs = _model_inputs(run, layer, policy)
        method = METHODS[layer.layer]
        attribution = _model_attribution(run, layer) if layer.verdict not in ("pass", "pending") else None
        estimates = {
            key: details[key]
            for key in ("candidate", "baseline", "difference", "comparison")
            if key in details
        }
    return {
        "layer": layer.layer,
        "required": layer.layer in policy.required_layers,
        "verdict": layer.verdict,
        "metric": layer.metric,
        "estimate": layer.estimate,
        "ci_low": layer.ci_low,
        "ci_high": layer.ci_high,
        "threshold": layer.threshold,
        "reasons": layer.reasons,
        "inputs": inputs,
        "method": method,
        "estimates": estimates,
        "cost": {"wall_seconds": layer.wall_seconds, "device": layer.device},
        "attribution": attribution,
    }


def gate_run_report(*, run: GateRun) -> dict:
    policy = gate_policy_parse(run.policy_config)
    layers = {layer.layer: layer for layer in run.layers.all()}
    return {
        "gate_run": run.pk,
        "candidate": run.candidate.ref,
        "baseline": run.baseline.ref if run.baseline else None,
        "suite": {"name": run.suite.name, "version": run.suite.version, "hash": run.suite.content_hash},
        "policy": {"name": run.policy.name if run.policy else None, "config": run.policy_config},
        "experiment": run.experiment.name if run.experiment else None,
        "status": run.status,
        "verdict": run.verdict,
        "verdict_reasons": run.verdict_reasons,
        "rule": RULE,
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "layers": [_layer_report(run, layers[name], policy) for name in Layer.values if name in layers],
        "missing_layers": [name for name in policy.required_layers if name not in layers],
    }
