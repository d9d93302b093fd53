"""Every reason code has its words: each owner's codes (a `StrEnum` beside a `wordings_register`) are
registered with an English wording, and each wording has a Chinese translation that uses the same
parameters. A code added without them fails here, not on a reader's page."""

import importlib
import string
from enum import StrEnum
from pathlib import Path

import pytest
from django.utils import translation

from engines.reasons import Reason, reason, wording_of
from evalhub.wordings import reason_words

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engines", "registry", "canary", "gate", "evalhub")


def _owner_modules() -> list[str]:
    """The modules that declare wordings (found by their call, so a new owner is never missed)."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "wordings_register(" in path.read_text(encoding="utf-8") and path.name != "reasons.py":
                found.append(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return found


OWNERS = _owner_modules()


def _codes() -> list[StrEnum]:
    codes = []
    for name in OWNERS:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, StrEnum) and value.__module__ == name:
                codes += [code for code in value if "." in code]
    return codes


def _fields(wording: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(wording) if field}


def test_the_owners_are_found():
    assert {"registry.errors", "canary.services.experiments", "engines.stats.comparisons"} <= set(OWNERS)


@pytest.mark.parametrize("code", _codes(), ids=str)
def test_each_code_has_an_english_wording_and_a_chinese_translation(code):
    assert str(code).split(".")[0].isidentifier(), code  # `<owner>.<name>`
    wording = wording_of(str(code))
    assert wording, f"{code} has no English wording"
    catalogue = translation.trans_real.translation("zh-hans")._catalog
    chinese = catalogue.get(wording)
    assert chinese, f"{code}: no Chinese translation of {wording!r} (run makemessages, fill it in)"
    assert _fields(chinese) == _fields(wording), (code, wording, chinese)


def test_a_code_without_a_wording_shows_as_the_code_and_its_params():
    assert reason_words(reason("nobody.declared", n=3)) == "nobody.declared(n=3)"


def test_a_stored_sentence_from_before_codes_is_shown_as_it_was():
    old = "overall fail: 1 fail across 1 metrics"
    with translation.override("zh-hans"):
        assert reason_words(old) == old
        assert reason_words(Reason("comparisons.no_metrics").to_json()) == "数据不足：没有分析任何指标"


def test_an_analysis_reads_in_each_language_with_its_numbers_and_labels():
    from engines.stats.comparisons import analysis_combine, error_rate_compare
    from engines.stats.sufficient import Proportion
    from evalhub.templatetags.evalhub_i18n import reasons

    result = error_rate_compare(
        candidate=Proportion(successes=30, n=1000),
        baseline=Proportion(successes=20, n=1000),
        max_increase=0.005,
        min_n=100,
    )
    _, combined = analysis_combine([result])
    stored = [item.to_json() for item in combined]
    with translation.override("en"):
        english = reasons(stored)
    with translation.override("zh-hans"):
        chinese = reasons(stored)
    assert english.startswith("overall marginal: 1 marginal across 1 metrics; error_rate [marginal]: ")
    assert "candidate 3.000% (30/1000) vs baseline 2.000% (20/1000), difference +1.000 points" in english
    assert "z=1.4322 (pooled rate 2.5000%, standard error 0.006982)" in english
    assert "候选 3.000%（30/1000），基线 2.000%（20/1000），相差 +1.000 个百分点" in chinese
    assert "z=1.4322（合并比率 2.5000%，标准误 0.006982）" in chinese
    assert "marginal" not in chinese and "error_rate" not in chinese  # verdicts and metrics by label


def test_a_page_says_a_refusal_and_its_notes_in_the_readers_language():
    from evalhub.permissions import error_text
    from gate.policy import PolicyCode
    from gate.services.policies import PoliciesCode
    from registry.errors import ApplicationError

    refused = ApplicationError(
        reason(PoliciesCode.OVERRIDES_NOT_OBJECT),
        fields={
            "policy_overrides": [reason(PoliciesCode.MUST_BE_OBJECT)],
            "robustness_min": [reason(PolicyCode.BETWEEN, low=0, high=1)],
        },
    )
    with translation.override("zh-hans"):
        shown = error_text(refused)
    assert shown == (
        "policy_overrides 必须是对象。 (policy_overrides: 必须是对象; robustness_min: 必须介于 0 和 1 之间)"
    )
    assert error_text(refused).startswith(
        "policy_overrides must be an object. (policy_overrides: must be an object;"
    )
