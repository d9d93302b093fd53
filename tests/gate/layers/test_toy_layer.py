"""A layer is one folder: the toy layer in `tests/fixtures/toy_layer` (judge, layer, template, English
and Chinese wordings, chart), installed as an app from outside the tree (copied to a temporary
directory, its catalogue compiled there), runs in a gate run, renders on the run page in both
languages, appears in the Markdown and JSON report and the API, and no policy saved before it was
installed requires it. Nothing in EvalHub names it."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from engines.demo.dataset import demo_dataset_build
from gate.layers.registry import default_layer_names, gate_policy_read, layer_names
from gate.models import GatePolicy, SampleResult
from gate.services.decisions import gate_run_weakened
from gate.services.gate_runs import gate_run_execute, gate_run_start
from gate.services.policies import gate_policy_resolve, gate_policy_save
from registry.actors import SYSTEM
from registry.services.suites import eval_suite_import, suite_items_parse
from tests.pages import page_text

pytestmark = pytest.mark.django_db
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "toy_layer"
MAX_CHARS = 9


@pytest.fixture(scope="module")
def toy_package(tmp_path_factory) -> Path:
    """The fixture package outside the tree, with its `.mo` compiled beside its `.po`."""
    root = tmp_path_factory.mktemp("plugins")
    shutil.copytree(FIXTURE, root / "toy_layer")
    messages = root / "toy_layer" / "locale" / "zh_Hans" / "LC_MESSAGES"
    subprocess.run(["msgfmt", "--check", "-o", messages / "django.mo", messages / "django.po"], check=True)
    return root


@pytest.fixture
def toy_installed(toy_package, settings, monkeypatch):
    monkeypatch.syspath_prepend(str(toy_package))
    settings.INSTALLED_APPS = [*django_settings.INSTALLED_APPS, "toy_layer"]
    yield
    for name in [name for name in sys.modules if name == "toy_layer" or name.startswith("toy_layer.")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.fixture
def suite():
    items = demo_dataset_build(seed=0).eval[::8]  # 40 items, five of each clause type
    records = [{"id": i.id, "input": i.input, "label": i.label, "language": i.language} for i in items]
    return eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]


def test_an_installed_layer_runs_renders_in_both_languages_and_reports(
    toy_installed, versions, suite, admin_client
):
    assert layer_names() == (
        "clean_accuracy",
        "robustness",
        "answer_length",
        "follow_up_rate",
        "business_value",
        "suite_shift",
    )
    candidate, _ = versions
    overrides = {
        "required_layers": ["clean_accuracy", "answer_length"],
        "clean_accuracy_min": 0.0,
        "answer_length_max_chars": MAX_CHARS,
        "answer_length_min_share": 0.5,
    }
    run = gate_run_start(candidate=candidate, suite=suite, actor=SYSTEM, policy_overrides=overrides)
    run = gate_run_execute(gate_run_id=run.pk, worker="toy")
    assert run.status == "succeeded"

    # Its number is the answers' own: measured again from the answers layer 0 stored.
    answers = SampleResult.objects.filter(layer_result__gate_run=run, layer_result__layer="clean_accuracy")
    answers = answers.filter(version=candidate)
    lengths = [len(s.output_label or s.output_text) for s in answers]
    expected = sum(n <= MAX_CHARS for n in lengths) / len(lengths)
    toy = run.layers.get(layer="answer_length")
    assert toy.estimate == pytest.approx(expected) and toy.threshold == 0.5
    assert 0 < expected < 1 and toy.verdict == ("pass" if expected >= 0.5 else "fail")
    assert toy.details["n"] == 40 and toy.reasons[0]["code"].startswith("answer_length.")

    english = page_text(admin_client.get(f"/gate-runs/{run.pk}/", HTTP_ACCEPT_LANGUAGE="en"))
    assert f"{toy.details['within']} of 40 answers within {MAX_CHARS} characters" in english
    assert "Answer length" in english and f"of answers within {MAX_CHARS} characters" in english
    chinese = admin_client.get(f"/gate-runs/{run.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    text = page_text(chinese)
    assert f"40 个回答中有 {toy.details['within']} 个不超过 {MAX_CHARS} 个字符" in text
    assert "回答长度" in text and f"的回答不超过 {MAX_CHARS} 个字符" in text
    assert 'id="chart-answer-length-by-language"' in chinese.content.decode()
    assert "各语言的短回答占比" in chinese.content.decode()

    report = admin_client.get(f"/api/v1/gate-runs/{run.pk}/report/", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    [part] = [layer for layer in report["layers"] if layer["layer"] == "answer_length"]
    assert part["required"] and part["estimate"] == pytest.approx(expected)
    zh = (
        f"{expected:.3f} 的回答不超过 {MAX_CHARS} 个字符（门槛 0.5）"
        if expected >= 0.5
        else f"只有 {expected:.3f} 的回答不超过 {MAX_CHARS} 个字符，低于门槛 0.5"
    )
    assert part["reasons"][0]["message"] == zh
    markdown = admin_client.get(f"/api/v1/gate-runs/{run.pk}/report/?format=md").content.decode()
    assert "## answer_length: " in markdown and f"of answers within {MAX_CHARS} characters" in markdown

    detail = admin_client.get(f"/api/v1/gate-runs/{run.pk}/").json()
    assert {layer["layer"] for layer in detail["layers"]} == {"clean_accuracy", "answer_length"}
    samples = admin_client.get(f"/api/v1/gate-runs/{run.pk}/samples/?layer=answer_length")
    assert samples.status_code == 200


def test_a_policy_saved_before_a_layer_was_installed_does_not_require_it(settings, monkeypatch, toy_package):
    before = gate_policy_save(name="strict", config={"clean_accuracy_min": 0.9}, actor=SYSTEM)
    legacy = GatePolicy.objects.create(name="handmade", config={})
    assert before.config["required_layers"] == list(default_layer_names()) == legacy.config["required_layers"]

    monkeypatch.syspath_prepend(str(toy_package))
    settings.INSTALLED_APPS = [*django_settings.INSTALLED_APPS, "toy_layer"]
    try:
        assert "answer_length" in layer_names()
        for name in ("strict", "handmade"):
            _, config = gate_policy_resolve(name=name, overrides=None)
            assert "answer_length" not in config.general.required_layers
        after = gate_policy_save(name="newer", config={}, actor=SYSTEM)
        assert "answer_length" in after.config["required_layers"]
        # A run's snapshot that names no layers (from before they were stored) means the four.
        assert "answer_length" not in gate_policy_read({}).config.general.required_layers
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] == "toy_layer"]:
            monkeypatch.delitem(sys.modules, name)


def test_a_policy_that_leaves_out_an_added_layer_is_not_a_weakened_gate(
    toy_installed, gate_run_finished, versions
):
    candidate, _ = versions
    full = ["clean_accuracy", "robustness", "follow_up_rate", "business_value"]
    run = gate_run_finished(candidate, "pass")
    run.policy_config = {**run.policy_config, "required_layers": full}
    assert gate_run_weakened(gate_run=run) == []
    run.policy_config = {**run.policy_config, "required_layers": full[:3]}
    assert [w.params["layer"].code for w in gate_run_weakened(gate_run=run)] == ["business_value"]
