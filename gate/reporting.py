"""The gate report's shape, and its Markdown rendering for audits. Pure, no Django.

`gate.services.report` fills these dataclasses from a run; the API answers them as JSON and
`gate_report_markdown` renders them. An attribution explains a layer that did not pass in three
levels, each a short summary, the tables behind it and the query or call that reproduces it:
phenomenon (which metric, tag, perturbation type or hour moved), data (which items, follow-ups,
units or probes), system (errors, fallbacks and latency on each version's path).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

LEVELS = ("phenomenon", "data", "system")
RULE = (
    "a gate run passes only when every required layer passes; otherwise the worst outcome wins: "
    "fail, then error, then insufficient_data (a missing layer is insufficient_data)"
)


@dataclass(frozen=True, kw_only=True)
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]]


@dataclass(frozen=True, kw_only=True)
class AttributionLevel:
    summary: str
    reproduce: str = ""
    tables: list[Table] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Attribution:
    phenomenon: AttributionLevel
    data: AttributionLevel
    system: AttributionLevel

    def levels(self) -> list[tuple[str, AttributionLevel]]:
        return [(name, getattr(self, name)) for name in LEVELS]


@dataclass(frozen=True, kw_only=True)
class LayerCost:
    wall_seconds: float
    device: str


@dataclass(frozen=True, kw_only=True)
class LayerReport:
    layer: str
    title: str
    required: bool
    verdict: str
    metric: str
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    threshold: float | None
    reasons: list[str]
    inputs: dict[str, Any]
    method: str
    estimates: dict[str, Any]
    cost: LayerCost
    attribution: Attribution | None


@dataclass(frozen=True, kw_only=True)
class SuiteRef:
    name: str
    version: int
    hash: str


@dataclass(frozen=True, kw_only=True)
class PolicyRef:
    name: str | None
    config: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class GateReport:
    gate_run: int
    candidate: str
    baseline: str | None
    suite: SuiteRef
    policy: PolicyRef
    experiment: str | None
    status: str
    verdict: str
    verdict_reasons: list[str]
    created_at: str
    finished_at: str | None
    layers: list[LayerReport]
    missing_layers: list[str]
    rule: str = RULE


def _number(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _interval(layer: LayerReport) -> str:
    if layer.ci_low is None or layer.ci_high is None:
        return "–"
    return f"[{_number(layer.ci_low)}, {_number(layer.ci_high)}]"


def _block(value: Any) -> list[str]:
    return ["```json", json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str), "```"]


def _cell(value: Any) -> str:
    return _number(value).replace("|", "\\|").replace("\n", " ")


def table_markdown(table: Table) -> list[str]:
    lines = [
        f"*{table.title}*",
        "",
        "| " + " | ".join(table.columns) + " |",
        "|" + "---|" * len(table.columns),
    ]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in table.rows]
    return lines


def gate_report_markdown(report: GateReport) -> str:
    suite = report.suite
    lines = [
        f"# Gate run {report.gate_run}: {report.candidate} — **{report.verdict.upper()}**",
        "",
        f"- Candidate: `{report.candidate}`; baseline: `{report.baseline or 'none'}`",
        f"- Suite: `{suite.name}@{suite.version}` (sha256 `{suite.hash}`)",
        f"- Policy: `{report.policy.name}`; canary experiment: `{report.experiment or 'none'}`",
        f"- Status: {report.status}; started {report.created_at}; finished {report.finished_at or '–'}",
        f"- Rule: {report.rule}",
        "",
    ]
    if report.verdict_reasons:
        lines += ["Reasons:", *[f"- {reason}" for reason in report.verdict_reasons], ""]
    lines += [
        "| layer | verdict | metric | estimate | interval | threshold | seconds | device |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for layer in report.layers:
        lines.append(
            f"| {layer.layer} | **{layer.verdict}** | {layer.metric} | {_number(layer.estimate)} | "
            f"{_interval(layer)} | {_number(layer.threshold)} | {layer.cost.wall_seconds:.1f} | "
            f"{layer.cost.device or '–'} |"
        )
    for name in report.missing_layers:
        lines.append(f"| {name} | **missing** | | | | | | |")
    for layer in report.layers:
        lines += ["", f"## {layer.layer}: {layer.verdict}", "", f"Method: {layer.method}", ""]
        lines += [f"- {reason}" for reason in layer.reasons]
        lines += ["", "Inputs:", "", *_block(layer.inputs)]
        if layer.estimates:
            lines += ["", "Estimates:", "", *_block(layer.estimates)]
        if layer.attribution is not None:
            lines += ["", "### Attribution"]
            for name, level in layer.attribution.levels():
                lines += ["", f"**{name.capitalize()}**: {level.summary}"]
                if level.reproduce:
                    lines += ["", "Reproduce:", "", "```", level.reproduce, "```"]
                for table in level.tables:
                    lines += ["", *table_markdown(table)]
    return "\n".join(lines) + "\n"
