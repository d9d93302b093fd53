"""A reason stored before reason codes (an English sentence) is shown as it was written, in every
language; the codes that replaced the sentence shapes read in Chinese."""

import pytest
from django.utils import translation

from engines.reasons import reason
from evalhub.templatetags.evalhub_i18n import reason as reason_filter
from gate.services.gate_runs import GateRunsCode
from registry.services.serving import ServingCode

OLD = (
    "not the model that serves: http://127.0.0.1:8102/v1 serves config hash 9bff8c631215, not fam:v4's "
    "24fa220417fc"
)


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_an_old_stored_sentence_is_shown_as_written(language):
    with translation.override(language):
        assert reason_filter(OLD) == OLD


def test_its_code_reads_in_chinese_with_its_names_and_hashes():
    why = reason(
        ServingCode.OTHER_MODEL,
        url="http://127.0.0.1:8102/v1",
        announced="9bff8c631215",
        ref="fam:v4",
        expected="24fa220417fc",
    )
    coded = reason(GateRunsCode.NOT_SERVING, why=why)
    with translation.override("en"):
        assert reason_filter(coded) == OLD
    with translation.override("zh-hans"):
        assert reason_filter(coded) == (
            "不是正在服务的模型：http://127.0.0.1:8102/v1 服务的配置哈希是 9bff8c631215，"
            "而不是 fam:v4 的 24fa220417fc"
        )
