"""The demo's loop (docs/loop.md): the hardening suite is training data only, and `demo_v5` trains V5
from no run that attacked the golden suite."""

import io

import pytest
from django.core.management import CommandError, call_command

from engines.demo.dataset import demo_dataset_build
from evalhub.demo import FAMILY, HARDENING_POLICY, HARDENING_SUITE
from gate.models import GateRun
from gate.selectors.policies import gate_policy_get
from registry.models import EvalSuite, ModelVersion

pytestmark = pytest.mark.django_db


def test_the_hardening_suite_is_a_quarter_of_the_training_split_and_none_of_the_golden_suite(demo):
    dataset = demo_dataset_build(seed=0)
    hardening = EvalSuite.objects.get(name=HARDENING_SUITE)
    ids = set(hardening.items.values_list("external_id", flat=True))
    assert ids == {item.id for item in dataset.train[::4]} and len(ids) == 240
    golden = EvalSuite.objects.get(name=FAMILY)
    assert not ids & set(golden.items.values_list("external_id", flat=True))
    assert not set(hardening.items.values_list("input", flat=True)) & {item.input for item in dataset.eval}
    config = gate_policy_get(name=HARDENING_POLICY).config
    assert config["required_layers"] == ["robustness"] and config["run_baseline"] is False


def test_demo_v5_refuses_a_run_on_the_golden_suite(demo):
    v4 = ModelVersion.objects.get(family=FAMILY, label="v4")
    golden = EvalSuite.objects.get(name=FAMILY)
    run = GateRun.objects.create(candidate=v4, suite=golden, status=GateRun.Status.SUCCEEDED)
    with pytest.raises(CommandError, match=r"attacked suite contract-assistant@1, the held-out suite"):
        call_command("demo_v5", str(run.pk), stdout=io.StringIO())
    assert not ModelVersion.objects.filter(family=FAMILY, label="v5").exists()


def test_demo_v5_without_the_demo_says_to_install_it():
    with pytest.raises(
        CommandError, match=r"the demo is not installed here: run manage\.py demo_setup first"
    ):
        call_command("demo_v5", "1", stdout=io.StringIO())
