"""Every page rendered in Simplified Chinese, with real data behind it (a gate run of all four layers
on real models and canary traffic, an analysis, a probe report, decisions), fails on any visible
English left untranslated.

What counts as untranslated: a word of two or more Latin letters (not a snake_case identifier such
as a policy key) in text a person reads (text
nodes, and the title, placeholder, aria-label and alt attributes). Not counted: what the page marks
as not to be translated (`translate="no"`: names, references, data such as model answers; `<code>`
and `<pre>`), text in another language on purpose (an element with its own `lang`, such as
"English" in the language switch), and the product and method names in ALLOWED."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.contrib.auth import get_user_model
from django.template.loader import render_to_string
from django.test import Client
from django.utils import translation

from canary.models import Experiment, OutcomeEvent, ProbeSet
from canary.services.analysis import experiment_analyze
from canary.services.experiments import experiment_create, experiment_start
from engines.demo.dataset import demo_dataset_build
from engines.follow_up.classifier import VERSION as DETECTOR_VERSION
from gate.models import GatePolicy, GateRun, SampleResult
from gate.services.decisions import decision_record
from gate.services.gate_runs import gate_run_execute, gate_run_start
from registry.actors import SYSTEM
from registry.models import EvalItem, EvalSuite, ModelVersion
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_register
from tests.canary.traffic import experiment_backdate, probe_run_finished
from tests.evalhub.views.test_canary import traffic  # noqa: F401 (a fixture: the experiment's events)
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db

# Names that stay as they are in Chinese text: the product, formats, and statistical methods named
# after people (as Chinese statistics texts write them).
ALLOWED = {
    "EvalHub", "API", "JSON", "Markdown", "CI", "OpenAI", "transformers", "sha256",
    "Wilson", "Newcombe", "McNemar", "Welch", "delta", "alpha", "tau", "cpu", "cuda", "p50", "p95",
    "Rogan", "Gladen", "Cohen", "CUPED", "JSONL",
    "viewer", "ci",  # role names, as `--role` takes them
    "CSV", "URL",
    "Holm", "ms",  # Holm's adjustment; milliseconds, as SI symbols are written in Chinese too
}  # fmt: skip
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]+")
READ_ATTRIBUTES = ("title", "placeholder", "aria-label", "alt")
SKIP_TAGS = {"script", "style", "code", "pre"}
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class VisibleText(HTMLParser):
    """Collects what a reader sees, less what is marked as not for translation."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[bool] = []  # per open element: is its content exempt?
        self.seen: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        exempt = (
            (self.stack and self.stack[-1])
            or tag in SKIP_TAGS
            or attributes.get("translate") == "no"
            or not (attributes.get("lang") or "zh").startswith("zh")
        )
        if not exempt:
            self.seen += [attributes[name] for name in READ_ATTRIBUTES if attributes.get(name)]
        if tag not in VOID_TAGS:
            self.stack.append(bool(exempt))

    def handle_endtag(self, tag):
        if tag not in VOID_TAGS and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if data.strip() and not (self.stack and self.stack[-1]):
            self.seen.append(" ".join(data.split()))


def untranslated(html: str, data: frozenset[str] = frozenset()) -> list[str]:
    """The visible texts with a word outside ALLOWED once the `data` names (refs, experiment, user
    and suite names, which titles carry too) are taken out."""
    parser = VisibleText()
    parser.feed(html)
    # Whole names only: the user "rm" is not taken out of "transformers".
    names = [re.compile(rf"(?<!\w){re.escape(name)}(?!\w)") for name in sorted(data, key=len, reverse=True)]
    left = []
    for text in parser.seen:
        bare = text
        for name in names:
            bare = name.sub(" ", bare)
        # A snake_case word is an identifier (a policy key, a role), never English prose.
        if {word for word in WORD.findall(bare) if "_" not in word} - ALLOWED:
            left.append(text)
    return left


def data_names() -> frozenset[str]:
    """What the database holds as names: they are data, not text to translate."""
    names = set(get_user_model().objects.values_list("username", flat=True))
    for version in ModelVersion.objects.all():
        names |= {version.ref, version.family, version.label}
    names |= set(Experiment.objects.values_list("name", flat=True))
    names.add(DETECTOR_VERSION)  # the bundled follow-up detector's version, named like a model's ref
    names |= set(EvalSuite.objects.values_list("name", flat=True))
    names |= set(ProbeSet.objects.values_list("name", flat=True))
    names |= set(GatePolicy.objects.values_list("name", flat=True))
    names |= set(OutcomeEvent.objects.values_list("metric", flat=True))
    names |= set(SampleResult.objects.exclude(perturbation="").values_list("perturbation", flat=True))
    for tags in EvalItem.objects.values_list("tags", flat=True):
        names |= set(tags)
    return frozenset(names)


def test_the_detector_finds_english_and_spares_what_is_marked():
    html = (
        '<html lang="zh-hans"><head><title>门禁 · EvalHub</title><style>p {color: red}</style></head><body>'
        '<h1>模型版本</h1><p>Model versions</p><p title="Synthetic demo">合成</p>'
        '<p translate="no">fam:v4 payment</p><code>POST /api/v1/events</code>'
        '<option lang="en">English</option><td>0.716 (0.664–0.762)</td><p>McNemar 检验 p = 0.03</p>'
        '<input placeholder="reason"><br><p>未通过 fail</p></body></html>'
    )
    assert untranslated(html) == ["Model versions", "Synthetic demo", "reason", "未通过 fail"]


@pytest.fixture
def experiment(small_bow):
    """Two real (small) models in a running canary: the one `traffic` sends events to."""
    model = {"backend_kind": "builtin", "backend_config": {"path": str(small_bow)}}
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **model)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, is_demo=True, **model)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    return experiment_backdate(
        experiment_start(experiment=created, actor=SYSTEM), started=timedelta(days=3, hours=-1)
    )


@pytest.fixture
def world(experiment, traffic):  # noqa: F811 (pytest resolves `traffic` to the import above)
    """A finished gate run of all four layers, an analysis, a probe report and two decisions."""
    items = demo_dataset_build(seed=0).eval[::10]
    records = [
        {"id": i.id, "input": i.input, "label": i.label, "language": i.language, "tags": list(i.tags)}
        for i in items
    ]
    suite = eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]
    overrides = {
        "robustness_samples": 60,
        "robustness_min_samples": 50,
        "business_metric": "review_hours",
        "business_direction": "decrease",
        "business_min_effect": 0.2,
    }
    run = gate_run_start(
        candidate=experiment.candidate, suite=suite, actor=SYSTEM, policy_overrides=overrides
    )
    run = gate_run_execute(gate_run_id=run.pk, worker="test")
    assert run.status == GateRun.Status.SUCCEEDED and run.layers.count() == 4
    experiment_analyze(experiment=experiment, act=False)
    probe_run_finished(experiment=experiment)
    manager = get_user_model().objects.create_user(username="rm")
    user_role_grant(user=manager, role="release_manager")
    decision_record(
        version=experiment.candidate,
        action="override_request",
        reason="业务急需",
        actor=manager,
        gate_run=run,
    )
    return {"run": run, "manager": manager}


def test_every_page_in_chinese_has_no_untranslated_text(world):
    manager = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    manager.force_login(world["manager"])
    app = get_user_model().objects.create_user(username="chat-app")
    user_role_grant(user=app, role="app")
    chat_app = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    chat_app.force_login(app)
    staff = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    staff.force_login(get_user_model().objects.create_superuser(username="ops", password="x", email=""))
    pages = [
        ("/", manager, 200),
        ("/versions/fam:v4/", manager, 200),
        ("/versions/fam:v3/", manager, 200),
        (f"/gate-runs/{world['run'].pk}/", manager, 200),
        ("/suites/fam/", manager, 200),
        ("/canary/", manager, 200),
        ("/canary/exp/", manager, 200),
        ("/review/", manager, 200),
        ("/review/exp/", manager, 200),
        ("/review/exp/?second=1", manager, 200),
        ("/login/", Client(HTTP_ACCEPT_LANGUAGE="zh-hans"), 200),
        ("/login/?next=/canary/", Client(HTTP_ACCEPT_LANGUAGE="zh-hans"), 200),
        ("/versions/fam:v9/", manager, 404),
        ("/canary/exp/", chat_app, 403),
        ("/new/version/", manager, 200),
        ("/new/suite/", manager, 200),
        ("/new/gate-run/", manager, 200),
        ("/new/experiment/", manager, 200),
        ("/canary/exp/probes/", manager, 200),
        ("/admin/", staff, 200),  # the apps' and models' names; Django translates the rest
    ]
    data = data_names()
    found = {}
    refused = Client(HTTP_ACCEPT_LANGUAGE="zh-hans").post(
        "/login/", {"username": "chat-app", "password": "x"}
    )
    wrong_password = untranslated(refused.content.decode(), data)
    if wrong_password or "请输入" not in refused.content.decode():
        found["POST /login/ (wrong password)"] = wrong_password
    # A refusal shown on the page it came from: the rollback's missing reason, then an illegal step.
    for action, reason, expected in (("rollback", "", "回滚须填写理由"), ("resume", "x", "无法从")):
        response = manager.post(f"/canary/exp/{action}/", {"reason": reason}, follow=True)
        html = response.content.decode()
        if expected not in html or untranslated(html, data):
            found[f"POST /canary/exp/{action}/"] = untranslated(html, data) or [f"no {expected!r}"]
    for url, client, status in pages:
        response = client.get(url)
        assert response.status_code == status, url
        html = response.content.decode()
        assert '<html lang="zh-hans"' in html, url
        left = untranslated(html, data)
        if left:
            found[f"{url} ({status})"] = left
    assert found == {}, json.dumps(found, ensure_ascii=False, indent=1)


def test_layer_1_under_an_adversarial_recipe_reads_in_chinese():
    """The gate run above perturbs at random; an attack's table is rendered here from its details."""
    report = {
        "attacked": 40,
        "accuracy_before": 0.92,
        "accuracy_under_attack": 0.41,
        "succeeded": 21,
        "failed": 17,
        "attack_success_rate": 0.553,
        "queries_per_item": 37.2,
        "words_changed_per_success": 1.6,
        "budget_spent": 3,
        "cached": True,
        "examples": [{"item_id": "q-7", "label_after": "billing", "diff": "refund → reimbursement"}],
    }
    details = {
        "adversarial": {"fam:v4": report, "fam:v3": {**report, "cached": False}},
        "recipe": "textfooler-v1",
        "mode": "transfer",
        "transfer_from": "fam:v3",
    }
    with translation.override("zh-hans"):
        html = render_to_string("gate/layers/robustness.html", {"details": details})
    assert "攻击下" in html and "（已存储的攻击集）" in html
    assert untranslated(html, frozenset({"fam:v4", "fam:v3"})) == []
    with translation.override("en"):
        english = render_to_string("gate/layers/robustness.html", {"details": details})
    assert "Under attack:" in english and "(stored set)" in english and "ended on the budget" in english
