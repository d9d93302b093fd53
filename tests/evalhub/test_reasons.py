"""The sentence shapes still kept for sentences (refusals, serving checks; the gate's reasons are codes,
see tests/evalhub/test_wordings.py): English comes back as it was written, Chinese keeps every number
and name."""

import re

import pytest
from django.utils import translation

from evalhub.reasons import reason_translate

REASONS = [
    # What serves is what was judged
    "not the model that serves: http://127.0.0.1:8102/v1 serves config hash 9bff8c631215, not fam:v4's "
    "24fa220417fc",
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
