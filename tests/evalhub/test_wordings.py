"""Reasons in words: every registered code has an English wording and a Chinese translation in the
compiled catalogue with the same fields; a handful of reasons rendered in each language; the API's
reasons (code, params, message in the request's language) and a run from before codes."""

import importlib
import pkgutil
import re
import string
from enum import StrEnum

import pytest
from django.utils import translation
from django.utils.translation import gettext

import canary
import gate
import registry
from engines.reasons import Reason, ReasonsCode, Term, reason, sentences, wording_fields, wordings_all
from evalhub.templatetags.evalhub_i18n import reason as reason_filter
from evalhub.wordings import reason_payload, reason_words
from gate.judges.clean_accuracy import CleanAccuracyCode
from gate.judges.follow_up_rate import FollowUpRateCode
from gate.judges.verdict import VerdictCode
from gate.models import GateRun, LayerResult
from registry.actors import SYSTEM
from registry.services.versions import model_version_register
from tests.lifecycle import gate_run_record

APPS = (gate, canary, registry)


def _code_enumerations() -> dict[str, type[StrEnum]]:
    """Every reason-code enumeration of the apps (each module imported, so its wordings are registered;
    the pure engines register theirs when an app imports them)."""
    found: dict[str, type[StrEnum]] = {}
    modules = [m for package in APPS for m in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")]
    for module in modules:
        if ".migrations" in module.name:
            continue
        loaded = importlib.import_module(module.name)
        for value in vars(loaded).values():
            if isinstance(value, type) and issubclass(value, StrEnum) and value.__name__.endswith("Code"):
                found[f"{value.__module__}.{value.__name__}"] = value
    return found


ENUMERATIONS = _code_enumerations()
CODES = sorted({str(code) for enumeration in [*ENUMERATIONS.values(), ReasonsCode] for code in enumeration})


def _filled(wording: str) -> dict[str, float]:
    """A number for each field: every format spec the wordings use takes one."""
    return {name: 0.5 for name in wording_fields(wording)}


def test_every_code_is_an_owners_name_and_has_an_english_wording():
    wordings = wordings_all()
    assert len(CODES) > 100
    for code in CODES:
        assert re.fullmatch(r"[a-z_]+\.[a-z_]+", code), code
        assert code in wordings, f"{code} has no English wording"
        wordings[code].format(**_filled(wordings[code]))  # its fields and specs take numbers


@pytest.mark.parametrize("code", CODES)
def test_every_wording_has_a_chinese_translation_with_the_same_fields(code):
    """Fails for a wording missing from the compiled catalogue (or left fuzzy there), and for a
    translation whose `{fields}` or format specs differ from the English ones."""
    english = wordings_all()[code]
    with translation.override("zh-hans"):
        chinese = gettext(english)
    latin = re.sub(r"\{[^}]*\}", "", english)
    assert chinese != english or not re.search(r"[A-Za-z]{2}", latin), f"{code}: no Chinese for {english!r}"

    def fields(text: str) -> set[tuple[str, str]]:
        return {(name, spec) for _, name, spec, _ in string.Formatter().parse(text) if name is not None}

    assert fields(chinese) == fields(english), code
    chinese.format(**_filled(english))


def test_a_verdict_reason_in_each_language():
    why = reason(VerdictCode.LAYER_VERDICT, layer=Term("follow_up_rate"), verdict=Term("insufficient_data"))
    with translation.override("en"):
        assert reason_words(why) == "follow_up_rate: insufficient_data"
    with translation.override("zh-hans"):
        assert reason_words(why) == "追问率：数据不足"


def test_a_judge_reason_keeps_its_numbers_in_each_language():
    below = reason(CleanAccuracyCode.BOUND_BELOW, value=0.72219, bar=0.8)
    with translation.override("en"):
        assert reason_words(below) == "lower bound 0.722 < bar 0.800"
    with translation.override("zh-hans"):
        assert reason_words(below) == "下界 0.722 < 门槛 0.800"


def test_nested_reasons_and_their_stored_json_in_each_language():
    described = reason(
        FollowUpRateCode.OBSERVED,
        rate=0.1,
        level=95.0,
        low=0.0829,
        high=0.1202,
        follow_ups=100,
        answered=1000,
    )
    judged = reason(
        FollowUpRateCode.BAR_CLEARS,
        what=reason(FollowUpRateCode.RATE_BOUND),
        judged=0.1202,
        bar=0.18,
        described=described,
    )
    stored = judged.to_json()
    with translation.override("en"):
        assert reason_words(stored) == (
            "follow-up rate upper bound 0.120 <= bar 0.18 (rate 0.100, 95 % CI [0.083, 0.120], "
            "100 follow-ups of 1000 answers)"
        )
    with translation.override("zh-hans"):
        assert reason_words(stored) == (
            "追问率上界 0.120 ≤ 门槛 0.18（追问率 0.100，95 % 置信区间 [0.083, 0.120]，"
            "1000 次回答中有 100 次追问）"
        )


def test_sentences_join_in_each_language():
    both = sentences([reason(FollowUpRateCode.NO_BASELINE), "a sentence stored before codes"])
    with translation.override("en"):
        assert reason_words(both) == (
            "no baseline arm: non-inferiority not checked, the verdict rests on the bar alone; "
            "a sentence stored before codes"
        )
    with translation.override("zh-hans"):
        assert (
            reason_words(both) == "没有基线组：未检验非劣效性，结论仅依据门槛；a sentence stored before codes"
        )


def test_a_stored_sentence_from_before_codes_shows_as_written():
    old = "lower bound 0.722 < 0.800"
    with translation.override("zh-hans"):
        assert reason_words(old) == old
        assert reason_payload(old) == {"code": None, "params": {}, "message": old}


def test_the_page_filter_words_codes_and_stored_json():
    why = reason(VerdictCode.NO_RESULT, layer=Term("robustness"))
    with translation.override("zh-hans"):
        assert reason_filter(why) == reason_filter(why.to_json()) == "鲁棒性：无结果"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("language", "message"),
    [("en", "clean_accuracy: fail"), ("zh-hans", "原始准确率：未通过")],
)
def test_the_api_gives_code_params_and_the_message_in_the_requests_language(ci_client, language, message):
    endpoint = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    version = model_version_register(
        family="fam", label="v1", backend_kind="openai", backend_config=endpoint, actor=SYSTEM
    )
    run = gate_run_record(version, "fail")
    why = reason(VerdictCode.LAYER_VERDICT, layer=Term("clean_accuracy"), verdict=Term("fail"))
    old = "clean accuracy 0.7 < 0.8"  # a layer's reason stored before codes
    GateRun.objects.filter(pk=run.pk).update(verdict_reasons=[why.to_json()])
    LayerResult.objects.create(
        gate_run=run, layer="clean_accuracy", verdict="fail", metric="m", reasons=[old]
    )
    body = ci_client.get(f"/api/v1/gate-runs/{run.pk}/", HTTP_ACCEPT_LANGUAGE=language).json()
    assert body["verdict_reasons"] == [
        {
            "code": "verdict.layer_verdict",
            "params": {"layer": {"term": "clean_accuracy"}, "verdict": {"term": "fail"}},
            "message": message,
        }
    ]
    assert body["layers"][0]["reasons"] == [{"code": None, "params": {}, "message": old}]


def test_reason_json_round_trips():
    nested = reason(FollowUpRateCode.NO_HORIZON, basis=sentences([reason(FollowUpRateCode.ZERO_MARGIN)]))
    assert Reason.from_json(nested.to_json()) == nested
