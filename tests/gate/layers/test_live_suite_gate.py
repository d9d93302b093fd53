"""A suite version built from reviewed live questions is a suite like any other: the gate's clean-accuracy
layer runs on it (a real model, every item, the live ones under their tag), and the suite-vs-live shift
check compares it with the experiment's traffic, nearer than the base suite it grew from."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model

from canary.services.experiments import experiment_create, experiment_start
from canary.services.live_suite import eval_suite_from_reviews
from engines.demo.dataset import demo_dataset_build
from gate.layers.registry import layer_get
from gate.models import GateRun
from gate.services.gate_runs import gate_run_execute, gate_run_start
from registry.actors import SYSTEM
from registry.models import EvalItem
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import user_role_grant
from tests.canary.live import reviewed_question
from tests.canary.traffic import experiment_backdate

pytestmark = pytest.mark.django_db


def user_with(role, name):
    user = get_user_model().objects.create_user(username=name)
    user_role_grant(user=user, role=role)
    return user


@pytest.fixture
def live_suite(versions):
    """The base suite `fam` (24 demo eval items), an experiment of the candidate against its baseline,
    24 other demo questions asked live and reviewed with their expected clause type, and the suite
    `fam-live` built from them by a release manager."""
    candidate, baseline = versions
    dataset = [i for i in demo_dataset_build(seed=0).eval if i.language in ("en", "zh")]
    records = [
        {"id": i.id, "input": i.input, "label": i.label, "language": i.language, "tags": list(i.tags)}
        for i in dataset[::8][:24]
    ]
    base = eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]
    labels = {r["label"] for r in records}
    created = experiment_create(
        name="exp", baseline=baseline, candidate=candidate, traffic_percent=50, actor=SYSTEM
    )
    experiment = experiment_backdate(
        experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=1)
    )
    annotator = user_with("annotator", "ann")
    asked = [i for i in dataset[4::8] if i.label in labels][:24]
    for k, item in enumerate(asked):
        reviewed_question(
            experiment,
            session=f"s{k}",
            question=item.input,
            reviewer=annotator,
            expected_label=item.label,
            arm="baseline" if k % 2 else "candidate",
            next_turn=f"{item.input}?",  # the question again, as users repeat themselves
        )
    build = eval_suite_from_reviews(
        suite=base, experiment=experiment, per_stratum=100, seed=0, actor=user_with("release_manager", "rm")
    )
    return base, build, experiment, asked


def test_a_gate_runs_on_the_live_suite_and_the_shift_check_compares_it_with_traffic(versions, live_suite):
    candidate, _ = versions
    base, build, _, asked = live_suite
    suite = build.suite
    assert build.added == len(asked) == suite.item_count - base.item_count
    live = EvalItem.objects.filter(suite=suite, tags__contains=["live"])
    assert all(i.metadata["provenance"]["experiment"] == "exp" for i in live)

    run = gate_run_start(
        candidate=candidate,
        suite=suite,
        actor=SYSTEM,
        policy_overrides={
            "required_layers": ["clean_accuracy"],
            "run_baseline": False,
            "clean_min_items": 20,
        },
    )
    run = gate_run_execute(gate_run_id=run.pk, worker="test")
    layer = run.layers.get(layer="clean_accuracy")
    assert run.status == GateRun.Status.SUCCEEDED and layer.verdict in ("pass", "fail"), layer.reasons
    assert layer.details["candidate"]["n"] == suite.item_count
    assert layer.samples.filter(item__in=live).count() == build.added  # every live item was asked
    assert layer.details["candidate"]["by_tag"]["live"]["n"] == build.added
    suite.refresh_from_db()
    assert suite.locked  # a gate run used it: never edited again

    def shift(on):
        overrides = {"required_layers": ["suite_shift"], "suite_shift_min_live": 5}
        started = gate_run_start(candidate=candidate, suite=on, actor=SYSTEM, policy_overrides=overrides)
        gate_run_execute(gate_run_id=started.pk, worker="test")
        result = GateRun.objects.get(pk=started.pk).layers.get(layer="suite_shift")
        details = layer_get("suite_shift").details(result)
        return {f.language: f for f in details.languages}, details, result.verdict

    grown, details, verdict = shift(suite)
    before, _, verdict_before = shift(base)
    # On the base suite the traffic looks like nothing in it; grown by the live questions, it does.
    assert (verdict_before, verdict) == ("fail", "pass")
    assert details.suite == f"fam-live@{suite.version}" and details.inputs.experiment == "exp"
    assert details.live_total == 2 * len(asked)  # the questions and each one asked again
    for language, figures in grown.items():
        # The live questions are in the grown suite: the traffic is nearer to it than to the base.
        assert figures.suite_total > before[language].suite_total
        assert figures.live_to_suite < 0.05 < 0.5 < before[language].live_to_suite, language
