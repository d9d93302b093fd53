"""Exports read from a run's stored layer details (the rows; `engines.jsonl` writes them)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from engines.reasons import gettext_noop, reason, wordings_register
from gate.judges.suite_shift import SuiteShiftDetails
from gate.layers.registry import layer_get
from gate.models import GateRun
from registry.errors import NotFoundError


class ExportCode(StrEnum):
    NO_SHIFT = "gate_exports.no_shift_layer"


wordings_register(
    {ExportCode.NO_SHIFT: gettext_noop("Gate run {pk} has no suite-vs-live shift result to export.")}
)


def shift_examples_export(*, run: GateRun) -> list[dict[str, Any]]:
    """The run's suite-vs-live shift examples as JSONL rows: per language, the live questions farthest
    from any suite input (at most `engines.shift.FARTHEST`, farthest first), each with its distance,
    its nearest suite input and the language's median live → suite distance against the bar: live
    questions the suite lacks, to grow it from. NotFoundError when the run has no shift result (the
    layer not run, or not yet finished), before any row: a list (ten rows a language at most), so a
    refusal is an answer of its own and not a cut stream."""
    result = run.layers.filter(layer="suite_shift").first()
    layer = layer_get("suite_shift")
    details = layer.details(result) if layer is not None and result is not None else None
    if not isinstance(details, SuiteShiftDetails):
        raise NotFoundError(reason(ExportCode.NO_SHIFT, pk=run.pk), field="id")
    return [
        {
            "gate_run": run.pk,
            "experiment": details.inputs.experiment,
            "language": language.language,
            "rank": rank,
            "question": question.text,
            "distance": question.distance,
            "nearest_suite_input": question.nearest,
            "live_to_suite": language.live_to_suite,
            "bar": details.bar,
            "judged": language.language in details.judged,
        }
        for language in details.languages
        for rank, question in enumerate(language.farthest, start=1)
    ]
