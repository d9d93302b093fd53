"""The gate report's shape, and its Markdown rendering for audits. Pure, no Django.

`gate.services.report` fills these dataclasses from a run; the API answers them as JSON and
`gate_report_markdown` renders them. An attribution explains a layer that did not pass in three
levels, each a short summary, the tables behind it and the query or call that reproduces it:
phenomenon (which metric, tag, perturbation type or hour moved), data (which items, follow-ups,
units or probes), system (errors, fallbacks and latency on each version's path).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engines.reasons import ENGLISH, Reason, Words, reason_render, stored_reason_read
from gate.cost import VersionCost

LEVELS = ("phenomenon", "data", "system")
RULE = (
    "a gate run passes only when every required layer passes; otherwise the worst outcome wins: "
    "fail, then error, then insufficient_data (a missing layer is insufficient_data)"
)


@dataclass(frozen=True, kw_only=True)
class Table:
    title: Reason | str
    columns: list[str]
    rows: list[list[Any]]


@dataclass(frozen=True, kw_only=True)
class AttributionLevel:
    summary: Reason | str
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
    """The layer's wall seconds and device, and each version's model work priced (model layers)."""

    wall_seconds: float
    device: str
    versions: list[VersionCost] = field(default_factory=list)


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
    reasons: list[Reason | str]
    inputs: dict[str, Any]
    method: str
    estimates: dict[str, Any]
    cost: LayerCost
    attribution: Attribution | None
    # Stored detail keys this version does not know (dotted path -> value), and, when the details
    # could not be read at all, why.
    retired_keys: dict[str, Any] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class SuiteRef:
    name: str
    version: int
    hash: str


@dataclass(frozen=True, kw_only=True)
class PolicyRef:
    """The policy as the run stored it, and what reading it with this version found: keys it no
    longer knows (retired), keys the snapshot lacks (read with these values), values it would refuse
    (kept as stored, with why)."""

    name: str | None
    config: dict[str, Any]
    retired_keys: dict[str, Any] = field(default_factory=dict)
    defaulted_keys: dict[str, Any] = field(default_factory=dict)
    invalid_keys: dict[str, dict[str, Any]] = field(default_factory=dict)


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
    verdict_reasons: list[Reason | str]
    created_at: str
    finished_at: str | None
    layers: list[LayerReport]
    missing_layers: list[str]
    # Stored results of layers this version does not have (name -> verdict).
    retired_layers: dict[str, str] = field(default_factory=dict)
    rule: str = RULE
    # The model layers' costs summed (None: some of it unpriced), in `cost_currency`.
    cost_total: float | None = None
    cost_currency: str = ""


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


MAX_ROWS = 12  # rows of one table in the Markdown report; the JSON report has them all
MAX_LIST = 8  # values of a list written out in a cell
SIDES = ("candidate", "baseline")


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _text(value: Any) -> str:
    if isinstance(value, list):
        if all(_scalar(v) for v in value):
            shown = ", ".join(_number(v) for v in value[:MAX_LIST])
            return shown + (f" (+{len(value) - MAX_LIST} more)" if len(value) > MAX_LIST else "")
        return f"{len(value)} entries"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_text(v)}" for k, v in value.items() if _scalar(v)) or f"{len(value)} entries"
    return _number(value)


def _cell(value: Any) -> str:
    return _text(value).replace("|", "\\|").replace("\n", " ")


def _grid(title: str, rows: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """A table of records (rows keyed by name, columns the records' keys), at most MAX_ROWS rows."""
    columns: list[str] = []
    for _, record in rows:
        columns += [key for key in record if key not in columns]
    table = Table(
        title=title,
        columns=["", *columns],
        rows=[[name, *[record.get(key) for key in columns]] for name, record in rows[:MAX_ROWS]],
    )
    lines = table_markdown(table)
    if len(rows) > MAX_ROWS:
        lines.append(f"\n{len(rows) - MAX_ROWS} more rows in the JSON report.")
    return lines


def _flat_records(value: dict[str, Any]) -> bool:
    """A mapping of records: each value a mapping of plain values (a breakdown by tag, type, ...)."""
    return bool(value) and all(
        isinstance(v, dict) and v and all(_scalar(x) for x in v.values()) for v in value.values()
    )


def facts_markdown(title: str, value: dict[str, Any]) -> list[str]:
    """A layer's inputs or estimates as a review document: plain values in a two-column table,
    breakdowns and lists of records as their own tables, deeper mappings as sub-sections (their
    keys joined with dots). No raw JSON."""
    plain: list[list[Any]] = []
    sections: list[str] = []

    def walk(prefix: str, node: dict[str, Any]) -> None:
        sides = [key for key in SIDES if isinstance(node.get(key), dict)]
        if len(sides) == len(SIDES):
            # Candidate beside baseline: their plain values in one table, then their breakdowns.
            pair = [node[side] for side in SIDES]
            keys = [k for k, v in pair[0].items() if _scalar(v)]
            keys += [k for k, v in pair[1].items() if _scalar(v) and k not in keys]
            table = Table(title=prefix + " / ".join(SIDES), columns=["", *SIDES], rows=[])
            table.rows.extend([key, *[side.get(key) for side in pair]] for key in keys)
            sections.extend(["", *table_markdown(table)])
            for side, values in zip(SIDES, pair, strict=True):
                walk(f"{prefix}{side}.", {k: v for k, v in values.items() if not _scalar(v)})
            node = {k: v for k, v in node.items() if k not in SIDES}
        for key, item in node.items():
            name = f"{prefix}{key}"
            if _scalar(item) or (isinstance(item, list) and all(_scalar(v) for v in item)):
                plain.append([name, item])
            elif isinstance(item, list) and all(isinstance(v, dict) for v in item):
                records = [(str(i + 1), {k: v for k, v in r.items()}) for i, r in enumerate(item)]
                sections.extend(["", *_grid(name, records)] if records else [])
            elif isinstance(item, dict) and _flat_records(item):
                sections.extend(["", *_grid(name, list(item.items()))])
            elif isinstance(item, dict):
                walk(f"{name}.", item)
            else:
                plain.append([name, _text(item)])

    walk("", value)
    lines = table_markdown(Table(title=title, columns=["", "value"], rows=plain)) if plain else []
    return lines + sections


def table_markdown(table: Table, *, words: Words = ENGLISH) -> list[str]:
    lines = [
        f"*{reason_render(table.title, words=words)}*",
        "",
        "| " + " | ".join(table.columns) + " |",
        "|" + "---|" * len(table.columns),
    ]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in table.rows]
    return lines


def _stored_policy_markdown(policy: PolicyRef, *, words: Words) -> list[str]:
    """What reading the stored policy found, when it is not as this version would write it."""
    tables = [
        Table(
            title="Retired policy keys (this version no longer knows them and does not apply them)",
            columns=["key", "stored value"],
            rows=[[key, value] for key, value in policy.retired_keys.items()],
        ),
        Table(
            title="Stored policy values this version would refuse (shown as stored)",
            columns=["key", "stored value", "why"],
            rows=[
                [key, bad["value"], reason_render(stored_reason_read(bad["why"]), words=words)]
                for key, bad in policy.invalid_keys.items()
            ],
        ),
        Table(
            title="Policy keys the stored policy lacks",
            columns=["key", "read as"],
            rows=[[key, value] for key, value in policy.defaulted_keys.items()],
        ),
    ]
    return [line for table in tables if table.rows for line in [*table_markdown(table), ""]]


def _known(value: float | int | None, spec: str = "") -> str:
    return "unknown" if value is None else format(value, spec)


def _money(value: float | None, currency: str) -> str:
    return "unpriced" if value is None else f"{value:.4f} {currency}"


def cost_markdown(report: GateReport) -> list[str]:
    """The model work of each layer and version, priced, and the run's total (none: no lines)."""
    costs = [(layer.layer, cost) for layer in report.layers for cost in layer.cost.versions]
    if not costs:
        return []
    lines = [
        "",
        "## Cost",
        "",
        "| layer | version | device | queries | tokens in | tokens out | wall s | device s | cost |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, c in costs:
        lines.append(
            f"| {name} | {c.version} | {c.device or '–'} | {c.queries} | {_known(c.tokens_in)} | "
            f"{_known(c.tokens_out)} | {c.wall_seconds:.2f} | {_known(c.device_seconds, '.2f')} | "
            f"{_money(c.cost, c.currency)} |"
        )
    lines += ["", f"Total: {_money(report.cost_total, report.cost_currency)}"]
    return lines


def gate_report_markdown(report: GateReport, *, words: Words) -> str:
    """The report for audits, its reasons in `words` (the reader's language, given by the edge)."""
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
        lines += ["Reasons:", *[f"- {reason_render(r, words=words)}" for r in report.verdict_reasons], ""]
    lines += _stored_policy_markdown(report.policy, words=words)
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
    for name, verdict in report.retired_layers.items():
        lines.append(f"| {name} | {verdict} (retired layer) | | | | | | |")
    lines += cost_markdown(report)
    for layer in report.layers:
        lines += ["", f"## {layer.layer}: {layer.verdict}", "", f"Method: {layer.method}", ""]
        lines += [f"- {reason_render(reason, words=words)}" for reason in layer.reasons]
        if layer.inputs:
            lines += ["", *facts_markdown("Inputs", layer.inputs)]
        if layer.estimates:
            lines += ["", *facts_markdown("Estimates", layer.estimates)]
        if layer.unreadable:
            lines += ["", "Details this version cannot read:", *[f"- {why}" for why in layer.unreadable]]
        if layer.retired_keys:
            lines += ["", *facts_markdown("Retired keys in the stored details", layer.retired_keys)]
        if layer.attribution is not None:
            lines += ["", "### Attribution"]
            for name, level in layer.attribution.levels():
                lines += ["", f"**{name.capitalize()}**: {reason_render(level.summary, words=words)}"]
                if level.reproduce:
                    lines += ["", "Reproduce:", "", "```", level.reproduce, "```"]
                for table in level.tables:
                    lines += ["", *table_markdown(table, words=words)]
    return "\n".join(lines) + "\n"
