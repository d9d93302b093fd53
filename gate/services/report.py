"""The gate report: one document per run, for CI (JSON) and for audits (Markdown).

Per layer it holds the inputs (suite hash, perturbation recipe and seed, traffic window, policy),
the method, estimates, intervals, threshold, verdict and cost; a layer that did not pass also
carries an attribution in three levels (phenomenon, data, system), each with the query or command
that reproduces it. The traffic layers store their attribution when they run (it needs the event
store as it was); the model layers' attribution is read here from their stored samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engines.reasons import stored_reason_read
from gate.cost import VersionCost, costs_total
from gate.layers.base import GateLayer, ReportPart, StoredDetails
from gate.layers.registry import gate_layers, gate_policy_read
from gate.models import GateRun, LayerResult
from gate.policy import PolicyFindings
from gate.reporting import GateReport, LayerCost, LayerReport, PolicyRef, SuiteRef


@dataclass(frozen=True)
class LayerView:
    """A stored layer with its declaration and its details as the layer's dataclass (None when not
    readable), for pages and reports; `read` says what reading them found."""

    layer: GateLayer[Any]
    result: LayerResult
    read: StoredDetails

    @property
    def details(self) -> Any:
        return self.read.details


def gate_run_layers(*, run: GateRun) -> list[LayerView]:
    """The run's stored layers in the registry's order."""
    stored = {result.layer: result for result in run.layers.all()}
    return [
        LayerView(layer=layer, result=stored[layer.name], read=layer.details_read(stored[layer.name]))
        for layer in gate_layers()
        if layer.name in stored
    ]


@dataclass(frozen=True)
class CostRow:
    """One version's model work in one layer, for the run page's cost table."""

    layer: GateLayer[Any]
    cost: VersionCost


def gate_run_costs(*, layers: list[LayerView]) -> list[CostRow]:
    """Each model layer's stored costs, version by version, in the layers' order."""
    return [
        CostRow(layer=view.layer, cost=cost)
        for view in layers
        for cost in (getattr(view.details, "costs", None) or [])
    ]


def gate_run_policy_findings(*, run: GateRun) -> PolicyFindings:
    """What reading the run's stored policy with this version found (retired, defaulted, invalid keys)."""
    return gate_policy_read(run.policy_config).found


def gate_run_retired_layers(*, run: GateRun) -> dict[str, str]:
    """Stored results of layers this version does not have: name -> verdict."""
    known = {layer.name for layer in gate_layers()}
    return {result.layer: result.verdict for result in run.layers.all() if result.layer not in known}


def _layer_report(*, run: GateRun, view: LayerView, required: bool) -> LayerReport:
    result = view.result
    part = (
        view.layer.report(run=run, result=result, details=view.details)
        if view.details is not None or not result.details
        else ReportPart(
            inputs={}, estimates={"unreadable": "details stored in an older format: see the run's API"}
        )
    )
    return LayerReport(
        layer=result.layer,
        title=str(view.layer.title),
        required=required,
        verdict=result.verdict,
        metric=result.metric,
        estimate=result.estimate,
        ci_low=result.ci_low,
        ci_high=result.ci_high,
        threshold=result.threshold,
        reasons=[stored_reason_read(value) for value in result.reasons],
        inputs=part.inputs,
        method=view.layer.method,
        estimates=part.estimates,
        cost=LayerCost(
            wall_seconds=result.wall_seconds,
            device=result.device,
            versions=list(getattr(view.details, "costs", None) or []),
        ),
        attribution=part.attribution,
        retired_keys=view.read.retired_keys,
        unreadable=view.read.unreadable,
    )


def gate_run_report(*, run: GateRun) -> GateReport:
    stored_policy = gate_policy_read(run.policy_config)
    policy, found = stored_policy.config, stored_policy.found
    views = gate_run_layers(run=run)
    stored = {view.layer.name for view in views}
    costs = [row.cost for row in gate_run_costs(layers=views)]
    return GateReport(
        cost_total=costs_total(costs),
        cost_currency=costs[0].currency if costs else "",
        gate_run=run.pk,
        candidate=run.candidate.ref,
        baseline=run.baseline.ref if run.baseline else None,
        suite=SuiteRef(name=run.suite.name, version=run.suite.version, hash=run.suite.content_hash),
        policy=PolicyRef(
            name=run.policy.name if run.policy else None,
            config=run.policy_config,
            retired_keys=found.retired_keys,
            defaulted_keys=found.defaulted_keys,
            invalid_keys=found.invalid_keys,
        ),
        experiment=run.experiment.name if run.experiment else None,
        status=run.status,
        verdict=run.verdict,
        verdict_reasons=[stored_reason_read(value) for value in run.verdict_reasons],
        created_at=run.created_at.isoformat(),
        finished_at=run.finished_at.isoformat() if run.finished_at else None,
        layers=[
            _layer_report(run=run, view=view, required=policy.requires(view.layer.name)) for view in views
        ],
        missing_layers=[name for name in policy.general.required_layers if name not in stored],
        retired_layers=gate_run_retired_layers(run=run),
    )
