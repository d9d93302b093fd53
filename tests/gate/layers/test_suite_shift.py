"""The suite-vs-live shift check on stored canary turns: insufficient data, pass and fail, probes left
out, its panels on the gate run and experiment pages, and that no policy requires it unless it says so."""

from datetime import timedelta

import pytest
from django.utils import timezone

from canary.models import TurnEvent
from canary.services.experiments import experiment_create, experiment_start
from gate.judges.suite_shift import ShiftCode
from gate.layers.registry import default_layer_names, gate_policy_parse, layer_get, layer_names
from gate.models import GateRun
from gate.policy import LAYERS_BEFORE_EXPLICIT
from gate.services.gate_runs import gate_run_execute, gate_run_start
from gate.services.policies import gate_policy_save
from registry.actors import SYSTEM
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_register
from tests.canary.traffic import experiment_backdate
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
CLAUSES = ["payment", "termination", "renewal", "liability", "governing law", "confidentiality"]
SUITE = [f"What does the {clause} clause in section {k} say?" for k, clause in enumerate(CLAUSES)]


@pytest.fixture
def experiment():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    return experiment_backdate(experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=1))


@pytest.fixture
def suite():
    records = [
        {"id": str(k), "input": text, "label": "payment", "language": "en"} for k, text in enumerate(SUITE)
    ]
    return eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]


def questions(experiment, texts, *, source="client"):
    """User turns straight into the event store, one session each, half an hour ago."""
    at = timezone.now() - timedelta(minutes=30)
    TurnEvent.objects.bulk_create(
        TurnEvent(
            experiment=experiment,
            event_id=f"{source}-{k}",
            session_id=f"{source}-{k}",
            arm="baseline" if k % 2 else "candidate",
            turn_index=0,
            role="user",
            text=text,
            source=source,
            occurred_at=at,
        )
        for k, text in enumerate(texts)
    )


def run_shift(experiment, suite, **overrides):
    policy = {"required_layers": ["suite_shift"], **overrides}
    run = gate_run_start(candidate=experiment.candidate, suite=suite, actor=SYSTEM, policy_overrides=policy)
    gate_run_execute(gate_run_id=run.pk, worker="test")
    run = GateRun.objects.get(pk=run.pk)
    layer = run.layers.get(layer="suite_shift")
    return run, layer, layer_get("suite_shift").details(layer)


def test_too_few_live_questions_is_insufficient_data(experiment, suite):
    questions(experiment, SUITE[:5])
    run, layer, details = run_shift(experiment, suite)
    assert layer.verdict == "insufficient_data" and run.verdict == "insufficient_data"
    assert layer.reasons[0]["code"] == ShiftCode.TOO_FEW
    assert layer.reasons[0]["params"] == {"live": 5, "min_live": 200}
    assert details.live_total == 5 and details.judged == []


def test_live_questions_like_the_suite_pass(experiment, suite):
    # Each suite input with one letter dropped: distance 1/len, far under the bar.
    questions(experiment, [text.replace("a", "", 1) for text in SUITE] * 5)
    _, layer, details = run_shift(experiment, suite, suite_shift_min_live=20)
    assert layer.verdict == "pass", layer.reasons
    (english,) = details.languages
    assert english.language == "en" and english.live_total == 30
    assert english.live_to_suite == pytest.approx(1 / 44, abs=0.01)
    assert layer.estimate == pytest.approx(english.live_to_suite)
    assert layer.reasons[0]["code"] == ShiftCode.NEAR


def test_a_suite_item_declared_mixed_meets_the_live_questions_of_its_script(experiment):
    # The demo's mixed items: an English clause number and a Chinese clause. Grouped by the declared
    # language, they sat in a "mixed" group no live question reached, and live copies of them measured
    # 0.78 from unrelated English inputs.
    mixed = (
        "Clause 15. 如南京博远医药有限公司出现重大违约且在45天内未能补救，成都锦程建设有限公司可即刻终止。"
    )
    records = [{"id": "m", "input": mixed, "label": "termination", "language": "mixed"}] + [
        {"id": str(k), "input": text, "label": "payment", "language": "en"} for k, text in enumerate(SUITE)
    ]
    suite = eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]
    questions(experiment, [mixed.replace("Clause", "clause")] * 20)
    _, layer, details = run_shift(experiment, suite, suite_shift_min_live=20)
    (chinese,) = [f for f in details.languages if f.live_total]
    assert chinese.language == "zh" and chinese.suite_total == 1
    assert chinese.live_to_suite == pytest.approx(1 / len(mixed)) and layer.verdict == "pass"


def test_colloquial_mixed_traffic_fails_and_its_farthest_questions_are_listed(experiment, suite):
    live = [f"hey so wat abt {clause} lol??" for clause in CLAUSES] * 4 + [
        "这个合同的 renewal 条款是啥意思"
    ] * 6
    questions(experiment, live)
    questions(experiment, SUITE * 10, source="probe")  # probes look like the suite: never counted
    _, layer, details = run_shift(experiment, suite, suite_shift_min_live=20)
    assert layer.verdict == "fail"
    by_language = {f.language: f for f in details.languages}
    assert details.live_total == 30 and by_language["en"].live_total == 24
    assert by_language["en"].live_to_suite > 0.3
    assert by_language["en"].live.typos.share == 1.0 and by_language["en"].suite.typos.share == 0.0
    zh = by_language["zh"]  # six questions, under the minimum: not judged, but shown
    assert zh.live.mixed_script.share == 1.0 and zh.suite_total == 0
    assert details.judged == ["en"]
    codes = [r["code"] for r in layer.reasons]
    assert codes == [ShiftCode.FAR, ShiftCode.TOO_FEW_LANGUAGE]
    farthest = by_language["en"].farthest
    assert len(farthest) == 6 and farthest[0].distance >= farthest[-1].distance
    assert all(q.nearest in SUITE for q in farthest)


def test_the_panel_renders_on_the_run_and_experiment_pages(experiment, suite, admin_client):
    questions(experiment, [f"hey so wat abt {clause} lol??" for clause in CLAUSES] * 4)
    run, _, _ = run_shift(experiment, suite, suite_shift_min_live=20)
    page = admin_client.get(f"/gate-runs/{run.pk}/").content.decode()
    assert 'class="shift-farthest"' in page and "hey so wat abt payment lol??" in page
    canary = admin_client.get("/canary/exp/").content.decode()
    assert 'id="suite-shift"' in canary and "hey so wat abt payment lol??" in canary
    assert f"gate run {run.pk}" in canary
    report = admin_client.get(f"/api/v1/gate-runs/{run.pk}/report/?format=md")
    assert report.status_code == 200 and "## suite_shift: " in report.content.decode()
    chinese = admin_client.get(f"/gate-runs/{run.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "与评测集最不相像的线上问题（en）" in chinese and "评测集不像线上流量" in chinese


def test_the_farthest_live_questions_export_as_jsonl(experiment, suite, admin_client, tmp_path):
    import json

    from django.core.management import CommandError, call_command

    # Seven distinct English questions, one with Chinese in it (Latin letters outnumber its CJK ones).
    live = [f"hey so wat abt {clause} lol??" for clause in CLAUSES] * 4 + [
        "so wat does the 付款 payment clause say"
    ] * 2
    questions(experiment, live)
    run, _, details = run_shift(experiment, suite, suite_shift_min_live=20)
    response = admin_client.get(f"/api/v1/gate-runs/{run.pk}/shift-examples.jsonl")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    assert f"gate-run-{run.pk}-shift-examples.jsonl" in response["Content-Disposition"]
    body = b"".join(response.streaming_content).decode()
    rows = [json.loads(line) for line in body.splitlines()]
    expected = [
        (f.language, rank, q.text, q.distance, q.nearest)
        for f in details.languages
        for rank, q in enumerate(f.farthest, start=1)
    ]
    assert [
        (r["language"], r["rank"], r["question"], r["distance"], r["nearest_suite_input"]) for r in rows
    ] == expected
    assert len(rows) == 7 and [r["rank"] for r in rows] == [1, 2, 3, 4, 5, 6, 7]
    assert rows[0]["distance"] >= rows[-1]["distance"] and all(
        r["nearest_suite_input"] in SUITE for r in rows
    )
    assert "so wat does the 付款 payment clause say" in body  # as written, not \u-escaped
    assert all(r["gate_run"] == run.pk and r["experiment"] == "exp" and r["bar"] == 0.3 for r in rows)
    assert all(r["language"] == "en" and r["judged"] for r in rows)
    out = tmp_path / "shift.jsonl"
    call_command("export_shift_examples", str(run.pk), "--out", str(out))
    assert out.read_text(encoding="utf-8") == body
    # A run without a shift result: 404 on the API, a refusal from the command, nothing written.
    other = gate_run_start(
        candidate=experiment.candidate,
        suite=suite,
        actor=SYSTEM,
        policy_overrides={"required_layers": ["clean_accuracy"]},
    )
    assert admin_client.get(f"/api/v1/gate-runs/{other.pk}/shift-examples.jsonl").status_code == 404
    with pytest.raises(CommandError, match="no suite-vs-live shift result"):
        call_command("export_shift_examples", str(other.pk), "--out", str(tmp_path / "none.jsonl"))
    assert not (tmp_path / "none.jsonl").exists()


def test_no_policy_requires_it_unless_it_says_so():
    assert "suite_shift" in layer_names()
    assert "suite_shift" not in default_layer_names()
    assert "suite_shift" not in gate_policy_parse({}).general.required_layers
    assert gate_policy_parse({}).general.required_layers == LAYERS_BEFORE_EXPLICIT
    saved = gate_policy_save(name="plain", config={"clean_accuracy_min": 0.9}, actor=SYSTEM)
    assert saved.config["required_layers"] == list(LAYERS_BEFORE_EXPLICIT)


def test_the_suite_page_shows_the_latest_shift_measured_on_it_and_what_it_holds(
    experiment, suite, admin_client
):
    from tests.pages import page_text

    page = page_text(admin_client.get("/suites/fam/"))
    assert "No gate run on this suite has measured it yet" in page
    questions(experiment, [f"hey so wat abt {clause} lol??" for clause in CLAUSES] * 5)
    run, _, _ = run_shift(experiment, suite, suite_shift_min_live=20)
    response = admin_client.get("/suites/fam@1/")
    assert response.status_code == 200
    page = page_text(response)
    assert (
        f"As measured by gate run {run.pk}" in page
        and "Live questions least like anything in the suite" in page
    )
    assert "hey so wat abt" in page  # the farthest live questions
    assert '<td translate="no">en</td><td>6</td>' in response.content.decode()  # six English items
    assert 'href="/suites/fam@1/"' in admin_client.get(f"/gate-runs/{run.pk}/").content.decode()
    assert admin_client.get("/suites/nope/").status_code == 404
