"""Layer 2 corrected by the detector's error rates measured on the experiment's reviewed live turns:
live once a language has enough reviewed follow-ups and others, shipped before that (and saying so),
and `insufficient_data` naming the language when the reviews already contradict a shipped rate still
in use. From stored turns and reviews through the gate run to its details, report and page."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import translation

from canary.models import TurnEvent
from canary.services.experiments import experiment_create, experiment_horizon_register, experiment_start
from canary.services.follow_ups import follow_up_thresholds_set
from canary.services.reviews import follow_up_review_record
from engines.follow_up.classifier import VERSION, detector_load
from engines.follow_up.live_rates import LIVE, SHIPPED
from gate.layers.follow_up_rate import detector_accuracy
from gate.layers.registry import gate_policy_parse, layer_get
from gate.models import GateRun
from gate.services.gate_runs import gate_run_execute, gate_run_start
from gate.services.horizons import follow_up_horizon_plan
from gate.services.policies import gate_policy_save
from registry.actors import SYSTEM
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_register
from tests.canary.traffic import chat_session, experiment_backdate
from tests.lifecycle import incumbent_register
from tests.wordings import english

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
QUESTION = "这是什么条款：'买方应在收到发票后三十日内付款。'？"
ANSWER = "[付款] 这是付款条款。"
FOLLOW_UP, CLOSING = "那如果逾期付款呢？", "好的，谢谢！"


@pytest.fixture
def experiment():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    return experiment_backdate(experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=1))


def traffic(experiment, *, follow_ups: int, caught: int, others: int, false_alarms: int):
    """Chinese sessions on both arms, judged by the trained detector: `follow_ups` true follow-ups of
    which the detector caught `caught`, `others` closings of which it called `false_alarms`
    follow-ups. Returns {turn id: its true label}."""
    truth = {}
    for arm in ("baseline", "candidate"):
        for s in range(follow_ups + others):
            is_follow_up = s < follow_ups
            said = (s < caught) if is_follow_up else (s - follow_ups < false_alarms)
            *_, turn = chat_session(
                experiment,
                session=f"{arm}-{s}",
                arm=arm,
                turns=[QUESTION, ANSWER, FOLLOW_UP if is_follow_up else CLOSING],
                kind="follow_up" if said else "new",
            )
            truth[turn.pk] = "follow_up" if is_follow_up else "new"
    TurnEvent.objects.filter(experiment=experiment, role="user", turn_index=2).update(
        follow_up_language="zh", follow_up_detector=VERSION
    )
    return truth


def review(experiment, truth, turn_ids):
    for turn_id in turn_ids:
        follow_up_review_record(experiment=experiment, turn_id=turn_id, label=truth[turn_id], actor=SYSTEM)


POLICY = {
    "required_layers": ["follow_up_rate"],
    "follow_up_min_answered": 20,
    "follow_up_max": 1.0,
    "follow_up_margin": 1.0,
    "follow_up_planning_rate": 0.5,
}


def run_layer_2(experiment) -> GateRun:
    """Layer 2 under the family's policy and the plan registered for it (a horizon of 20 answers per
    arm, reached: the run takes the one look, so a pass or a fail is a decision)."""
    gate_policy_save(name="fam", config=POLICY, actor=SYSTEM)
    # The turns are a minute old: the detector's follow-up window must have passed for the look.
    follow_up_thresholds_set(family="fam", thresholds={"window_seconds": 10}, actor=SYSTEM)
    plan = follow_up_horizon_plan(experiment=experiment, policy=gate_policy_parse(POLICY), policy_name="fam")
    experiment_horizon_register(experiment=experiment, horizon={}, follow_up=plan, actor=SYSTEM)
    suite, _ = eval_suite_import(
        name="fam", items=suite_items_parse(records=[{"input": "x", "label": "payment"}]), actor=SYSTEM
    )
    run = gate_run_start(candidate=experiment.candidate, suite=suite, actor=SYSTEM)
    gate_run_execute(gate_run_id=run.pk, worker="test")
    return GateRun.objects.get(pk=run.pk)


def test_enough_reviews_correct_by_the_live_rates(experiment, make_client):
    # Per arm 40 true follow-ups, 24 caught (Se 0.6 on this traffic), 60 others, 3 false alarms.
    truth = traffic(experiment, follow_ups=40, caught=24, others=60, false_alarms=3)
    review(experiment, truth, sorted(truth))  # 80 follow-ups and 120 others reviewed: both live
    run = run_layer_2(experiment)
    [layer] = run.layers.all()
    assert layer.verdict == "pass", english(layer.reasons)
    judged = layer_get("follow_up_rate").details(layer).judged
    zh = judged.error_rates["zh"]
    assert (zh.sensitivity.source, zh.specificity.source) == (LIVE, LIVE)
    assert (zh.sensitivity.live_k, zh.sensitivity.live_n) == (48, 80)
    assert (zh.specificity.live_k, zh.specificity.live_n) == (114, 120)
    [language] = judged.candidate.corrected.languages
    assert (language.sensitivity, language.specificity) == (0.6, 0.95)
    # Rogan–Gladen by hand on the look's counts: (p + 0.95 - 1) / 0.55, clipped to [0, 1].
    p = language.detected / language.judged
    assert language.corrected == pytest.approx(min(1.0, max(0.0, (p + 0.95 - 1) / 0.55)))
    assert (
        "error rates for language 'zh' from 200 reviewed live turns: sensitivity 0.600 (48 of 80), "
        "specificity 0.950 (114 of 120)"
    ) in english(layer.reasons)
    assert any(
        r.startswith("language 'zh': the live sensitivity 0.600") and r.endswith("the live one is used")
        for r in english(layer.reasons)
    )

    viewer = make_client("viewer")
    report = viewer.get(f"/api/v1/gate-runs/{run.pk}/report/").json()
    [reported] = report["layers"]
    assert reported["estimates"]["error_rates"]["zh"]["sensitivity"]["source"] == LIVE
    page = Client()
    page.force_login(viewer.user)
    html = page.get(f"/gate-runs/{run.pk}/").content.decode()
    assert "Error rates the correction uses" in html and "0.600 (48/80)" in html
    with translation.override("zh-hans"):
        chinese = page.get(f"/gate-runs/{run.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "校正所用的错误率" in chinese and "取自 200 个已复核的线上轮次" in chinese


def test_few_reviews_keep_the_shipped_rates_and_say_so(experiment):
    truth = traffic(experiment, follow_ups=40, caught=34, others=60, false_alarms=3)
    review(experiment, truth, sorted(truth)[:20])  # 20 follow-ups of the baseline: too few
    run = run_layer_2(experiment)
    [layer] = run.layers.all()
    judged = layer_get("follow_up_rate").details(layer).judged
    zh = judged.error_rates["zh"]
    assert (zh.sensitivity.source, zh.specificity.source) == (SHIPPED, SHIPPED)
    shipped = detector_accuracy(detector=detector_load(), kinds=("follow_up",)).errors["zh"]
    [language] = judged.candidate.corrected.languages
    assert (language.sensitivity, language.specificity) == (shipped.sensitivity, shipped.specificity)
    assert any(
        r.startswith("error rates for language 'zh' as shipped, from the detector's test split")
        and r.endswith("(20 follow-ups and 0 others reviewed, the live ones need 30 of each)")
        for r in english(layer.reasons)
    )
    assert layer.verdict == "pass", english(layer.reasons)


def test_reviews_that_contradict_a_shipped_rate_make_layer_2_insufficient_naming_the_language(experiment):
    # The detector caught 4 of 40 follow-ups on this traffic; 20 reviewed follow-ups show it.
    truth = traffic(experiment, follow_ups=40, caught=4, others=60, false_alarms=3)
    review(experiment, truth, sorted(truth)[:20])
    run = run_layer_2(experiment)
    [layer] = run.layers.all()
    assert (layer.verdict, run.verdict) == ("insufficient_data", "insufficient_data")
    blocking = [
        r
        for r in english(layer.reasons)
        if r.startswith("language 'zh': the live sensitivity 0.200 (4 of 20")
    ]
    assert len(blocking) == 1 and blocking[0].endswith(
        "too few turns are reviewed to replace it, so the corrected rate cannot be trusted yet"
    )
    zh = layer_get("follow_up_rate").details(layer).judged.error_rates["zh"]
    assert zh.sensitivity.blocking and zh.sensitivity.adjusted_p < 0.05
