"""The gate run page's charts from a layer's stored details: robustness by perturbation type and tag."""

import pytest

from gate.judges.robustness import RobustnessDetails, RobustnessSide, SampleOutcome, robustness_summarize
from gate.layers.base import to_json
from gate.layers.registry import layer_get
from gate.models import LayerResult
from gate.services.charts import gate_run_charts
from gate.services.report import LayerView


def side(version: str, correct_typos: int) -> RobustnessSide:
    outcomes = [
        SampleOutcome(item_id=f"i{i}", type="typo", language="en", tags=("plain",), correct=i < correct_typos)
        for i in range(10)
    ] + [SampleOutcome(item_id="j", type="homophone", language="zh", tags=("ocr_noise",), correct=True)]
    summary = robustness_summarize(outcomes=outcomes, confidence=0.95)
    return RobustnessSide(**vars(summary), version=version)


def test_robustness_charts_hold_each_versions_rate_interval_and_the_bar():
    details = RobustnessDetails(recipe="r", seed=0, candidate=side("fam:v4", 9), baseline=side("fam:v3", 6))
    layer = layer_get("robustness")
    result = LayerResult(
        layer="robustness", verdict="fail", metric="m", threshold=0.85, details=to_json(details)
    )
    by_type, by_tag = gate_run_charts(
        layers=[LayerView(layer=layer, result=result, read=layer.details_read(result))]
    )
    assert (by_type.id, by_type.categories, by_type.threshold) == (
        "robustness-by-type",
        ["homophone", "typo"],
        0.85,
    )
    candidate, baseline = by_type.bars
    assert (candidate.name, baseline.name) == ("fam:v4", "fam:v3")
    assert candidate.values == [1.0, 0.9] and baseline.values[1] == pytest.approx(0.6)
    assert candidate.low[1] == details.candidate.by_type["typo"].ci_low
    assert by_tag.categories == ["ocr_noise", "plain"]
