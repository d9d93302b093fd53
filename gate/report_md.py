"""The gate report as Markdown, for audits: a pure rendering of `gate_run_report`'s document."""

from __future__ import annotations

import json

LEVELS = ("phenomenon", "data", "system")


def _number(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _interval(layer: dict) -> str:
    if layer.get("ci_low") is None or layer.get("ci_high") is None:
        return "–"
    return f"[{_number(layer['ci_low'])}, {_number(layer['ci_high'])}]"


def _block(value) -> list[str]:
    return ["```json", json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str), "```"]


def gate_report_markdown(report: dict) -> str:
    suite = report["suite"]
    lines = [
        f"# Gate run {report['gate_run']}: {report['candidate']} — **{report['verdict'].upper()}**",
        "",
        f"- Candidate: `{report['candidate']}`; baseline: `{report['baseline'] or 'none'}`",
        f"- Suite: `{suite['name']}@{suite['version']}` (sha256 `{suite['hash']}`)",
        f"- Policy: `{report['policy']['name']}`; canary experiment: `{report['experiment'] or 'none'}`",
        f"- Status: {report['status']}; started {report['created_at']}; "
        f"finished {report['finished_at'] or '–'}",
        f"- Rule: {report['rule']}",
        "",
    ]
    if report["verdict_reasons"]:
        lines += ["Reasons:", *[f"- {reason}" for reason in report["verdict_reasons"]], ""]
    lines += [
        "| layer | verdict | metric | estimate | interval | threshold | seconds | device |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for layer in report["layers"]:
        lines.append(
            f"| {layer['layer']} | **{layer['verdict']}** | {layer['metric']} | "
            f"{_number(layer['estimate'])} | {_interval(layer)} | {_number(layer['threshold'])} | "
            f"{layer['cost']['wall_seconds']:.1f} | "
            f"{layer['cost']['device'] or '–'} |"
        )
    for name in report["missing_layers"]:
        lines.append(f"| {name} | **missing** | | | | | | |")
    for layer in report["layers"]:
        lines += ["", f"## {layer['layer']}: {layer['verdict']}", "", f"Method: {layer['method']}", ""]
        lines += [f"- {reason}" for reason in layer["reasons"]]
        lines += ["", "Inputs:", "", *_block(layer["inputs"])]
        if layer.get("estimates"):
            lines += ["", "Estimates:", "", *_block(layer["estimates"])]
        attribution = layer.get("attribution")
        if attribution:
            lines += ["", "### Attribution"]
            for level in LEVELS:
                part = dict(attribution.get(level) or {})
                if not part:
                    continue
                reproduce = part.pop("reproduce", None)
                summary = part.pop("summary", None)
                lines += ["", f"**{level.capitalize()}**" + (f": {summary}" if summary else "")]
                if reproduce:
                    lines += ["", "Reproduce:", "", "```", str(reproduce), "```"]
                if part:
                    lines += ["", *_block(part)]
    return "\n".join(lines) + "\n"
