"""The sentence shapes still kept for sentences (refusals, serving checks; the gate's reasons are codes,
see tests/evalhub/test_wordings.py): English comes back as it was written, Chinese keeps every number
and name."""

import re

import pytest
from django.utils import translation

from evalhub.reasons import reason_translate

REASONS = [
    "No reviewable turn 5 in experiment 'exp'.",
    # The incumbent declaration and the clearance check
    "fam:v4 is gate_passed: only a registered version is declared its family's production incumbent.",
    "fam:v3 serves fam in production already: a new version gets there by approval and promotion.",
    "Incumbent request 12 on fam:v4 is already waiting for confirmation.",
    "Incumbent request 12 is already confirmed.",
    "A declaration needs a second release manager: you filed the request.",
    "fam:v4 cannot become promoted without a release decision: approval (or a confirmed override) after "
    "its gate, or a confirmed incumbent declaration.",
    "promoted needs a release decision (POST /api/v1/decisions/)",
    # What serves is what was judged
    "not the model that serves: http://127.0.0.1:8102/v1 serves config hash 9bff8c631215, not fam:v4's "
    "24fa220417fc",
    "Experiment exp cannot start: http://127.0.0.1:8102/v1 serves config hash none, not fam:v4's "
    "24fa220417fc.",
    "fam:v4 is gate_passed: where it serves is part of what its gate judged; register a new version to "
    "serve elsewhere.",
    "serving_url http://127.0.0.1:8999/v1 is not the endpoint the gate calls (backend_config.base_url "
    "http://127.0.0.1:9/v1): leave it empty, or register the endpoint you serve as the backend.",
    # A run's overrides against the registered test
    "Not the registered test of experiment exp: the overrides change business_alpha, business_cuped.",
    "experiment exp registered 0.05 for business_value at 2026-12-02 01:14:18; registering the plan again "
    "changes it",
]


@pytest.mark.parametrize("reason", REASONS)
def test_a_new_reason_reads_in_chinese_with_its_numbers_and_names(reason):
    with translation.override("zh-hans"):
        shown = reason_translate(reason)
    assert re.search(r"[\u4e00-\u9fff]", shown), shown
    kept = re.findall(
        r"[-+]?\d+(?:\.\d+)?|follow-up-lr-2|revenue|'\w+'|business_\w+|follow_up_\w+|textfooler-v1|fam:v4",
        reason,
    )
    for piece in kept:
        assert piece in shown, (piece, shown)
    with translation.override("en"):
        assert reason_translate(reason) == reason
