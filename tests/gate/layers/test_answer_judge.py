"""Layer 0 with an answer judge: a chat version behind a real loopback model server judges free-text
answers, and only once its Cohen's kappa with the labelled demo answers clears the bar. The judge is
a fake (no LLM runs here): one that agrees with the people, one that says the opposite. The
BERTScore/chrF cut-offs' kappa on the same answers is shown beside the judge's."""

import re
import shutil
import threading
from pathlib import Path

import pytest

from engines.backends.base import Prediction
from engines.demo.dataset import ANSWERS, CLAUSE_TYPES, demo_dataset_build
from engines.model_server import model_server_create
from engines.scoring.build_baseline import PARAPHRASES
from engines.scoring.judge import agreement_measure, labelled_answers_parse
from gate.layers.registry import gate_policy_parse
from gate.policy import PolicyError
from gate.services.gate_runs import gate_run_execute, gate_run_start
from registry.actors import SYSTEM
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_register
from tests.pages import page_text

pytestmark = pytest.mark.django_db
LABELS = Path(__file__).resolve().parents[3] / "engines" / "scoring" / "data" / "answer_labels_demo.jsonl"
HUMAN = {(a.reference, a.answer): a.correct for a in labelled_answers_parse(content=LABELS.read_text())}
# Which clause type a text explains: the demo's reference answers and their paraphrases.
TYPE_OF = {
    text: label
    for label in CLAUSE_TYPES
    for language in ("en", "zh")
    for text in (ANSWERS[label][language], *PARAPHRASES[label][language])
}
_FIELD = re.compile(r"^Reference answer: (?P<reference>.*)\nAnswer to grade: (?P<answer>.*)$", re.M | re.S)


class FakeJudge:
    """Answers the rubric prompt as a person would (`inverted`: the opposite): the people's verdict
    where the pair is labelled, else whether the answer explains the reference's clause type."""

    def __init__(self, *, inverted: bool = False):
        self.inverted = inverted
        self.asked: list[str] = []

    def predict(self, inputs):
        answers = []
        for prompt in inputs:
            self.asked.append(prompt)
            found = _FIELD.search(prompt)
            reference, answer = found["reference"], found["answer"]
            truth = HUMAN.get((reference, answer))
            if truth is None:
                truth = TYPE_OF.get(reference) is not None and TYPE_OF.get(reference) == TYPE_OF.get(answer)
            verdict = "correct" if truth != self.inverted else "incorrect"
            answers.append(Prediction(label=None, text=f"Reason.\nVERDICT: {verdict}", latency_ms=1.0))
        return answers


@pytest.fixture
def labels_dir(settings, tmp_path):
    settings.EVALHUB_LABELS_DIR = tmp_path / "labels"
    (tmp_path / "labels" / "demo").mkdir(parents=True)
    shutil.copy(LABELS, tmp_path / "labels" / "demo" / "answers.jsonl")
    return tmp_path / "labels"


@pytest.fixture
def judges():
    """Register a fake judge behind a real model server as an `openai` chat version."""
    servers = []

    def make(label, fake):
        server = model_server_create(backend=fake, model_name=label)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return model_version_register(
            family="judges",
            label=label,
            backend_kind="openai",
            backend_config={"base_url": f"http://127.0.0.1:{server.server_port}/v1", "model": label},
            actor=SYSTEM,
        )

    yield make
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def free_text_suite():
    """Free-text items only: each plain eval clause with a paraphrase as its reference and no label,
    so a model's canned answer is never the reference word for word and the judge decides it."""
    items = [i for i in demo_dataset_build(seed=0).eval if i.tags == ("plain",)][::2][:40]
    records = [
        {
            "id": i.id,
            "input": i.input,
            "reference": PARAPHRASES[i.label][i.language][0],
            "language": i.language,
            "tags": list(i.tags),
        }
        for i in items
    ]
    suite = eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]
    return suite, {i.id: i.label for i in items}


@pytest.fixture
def candidate(small_bow):
    return model_version_register(
        family="fam",
        label="bow",
        backend_kind="builtin",
        backend_config={"path": str(small_bow)},
        actor=SYSTEM,
    )


def clean_layer(candidate, suite, **policy):
    overrides = {
        "required_layers": ["clean_accuracy"],
        "run_baseline": False,
        "clean_min_items": 20,
        **policy,
    }
    run = gate_run_start(candidate=candidate, suite=suite, actor=SYSTEM, policy_overrides=overrides)
    return gate_run_execute(gate_run_id=run.pk, worker="w").layers.get(layer="clean_accuracy")


def test_an_agreeing_judge_is_admitted_and_decides_the_free_text_answers(
    labels_dir, judges, free_text_suite, candidate, admin_client
):
    suite, true_label = free_text_suite
    fake = FakeJudge()
    judge = judges("agrees", fake)
    layer = clean_layer(candidate, suite, answer_judge=judge.ref, answer_judge_labels="demo/answers.jsonl")
    details = layer.details["answer_judge"]
    agreement = details["judge_agreement"]
    assert details["admitted"] and details["judge"] == "judges:agrees"
    assert (agreement["n"], agreement["agree"], agreement["kappa"]) == (64, 64, pytest.approx(1.0))
    assert agreement["table"] == [[32, 0, 0], [0, 32, 0]]
    # The cut-offs on the same labelled answers, computed here independently of the layer.
    default = details["default_agreement"]
    assert default["n"] == 64 and default["kappa"] < 0.6 and default["agreement"] < agreement["agreement"]
    # It decided every free-text answer: 64 labelled prompts, then one per suite item.
    assert details["items_judged"] == 40 and details["unreadable"] == 0 and len(fake.asked) == 64 + 40
    assert details["cost"]["version"] == "judges:agrees" and details["cost"]["queries"] == 104
    assert details["cost"]["tokens_in"] > 0 and details["cost"]["tokens_out"] > 0
    assert "judges:agrees" in [c["version"] for c in layer.details["costs"]]
    # What it decided is what a person would: right exactly where the model named the clause type.
    samples = list(layer.samples.select_related("item"))
    right = sum(s.output_label == true_label[s.item.external_id] for s in samples)
    assert layer.details["candidate"]["correct"] == right and all(
        s.correct == (s.output_label == true_label[s.item.external_id]) for s in samples
    )
    assert 0 < right < 40  # the small model gets some wrong: the judge said "incorrect" too
    assert layer.verdict in ("pass", "fail") and layer.estimate == pytest.approx(right / 40)
    assert "clean_accuracy.judge_admitted" in [r["code"] for r in layer.reasons]
    page = page_text(admin_client.get(f"/gate-runs/{layer.gate_run_id}/"))
    assert "Answer judge" in page and "judges:agrees" in page and "Cohen" in page


def test_an_inverted_judge_is_refused_and_the_layer_is_insufficient_data(
    labels_dir, judges, free_text_suite, candidate, admin_client
):
    suite, _ = free_text_suite
    fake = FakeJudge(inverted=True)
    judge = judges("inverted", fake)
    layer = clean_layer(candidate, suite, answer_judge=judge.ref, answer_judge_labels="demo/answers.jsonl")
    assert layer.verdict == "insufficient_data" and layer.estimate is None
    assert [r["code"] for r in layer.reasons] == ["clean_accuracy.judge_bound_below"]
    params = layer.reasons[0]["params"]
    assert params["kappa"] == pytest.approx(-1.0) and params["bar"] == 0.6 and params["n"] == 64
    assert params["high"] < 0.6
    details = layer.details["answer_judge"]
    assert not details["admitted"] and details["items_judged"] == 0
    assert details["judge_agreement"]["table"] == [[0, 32, 0], [32, 0, 0]]
    # The candidate was not asked, and only the labelled answers went to the judge.
    assert layer.details["candidate"] is None and layer.samples.count() == 0 and len(fake.asked) == 64
    page = page_text(admin_client.get(f"/gate-runs/{layer.gate_run_id}/"))
    assert "may not decide" in page and "-1.000" in page
    chinese = page_text(admin_client.get(f"/gate-runs/{layer.gate_run_id}/", HTTP_ACCEPT_LANGUAGE="zh-CN"))
    assert "答案评判" in chinese and "不得判定" in chinese


def test_the_bar_is_read_on_the_lower_bound_or_the_estimate(labels_dir, judges, free_text_suite, candidate):
    """A judge that agrees on 3/4 of the pairs: kappa 0.5, under a bar of 0.4 on the estimate
    (decide_on point) it decides; on the lower bound it does not."""
    suite, _ = free_text_suite
    rows = labelled_answers_parse(content=LABELS.read_text())
    # Flip the verdicts of one in four pairs: the second paraphrase of every other question and the
    # other-type answer of the rest.
    flip = {rows[i].id for i in range(len(rows)) if i % 4 == (1 if (i // 4) % 2 == 0 else 2)}
    fake = FakeJudge()
    fake_human = {(a.reference, a.answer): (a.correct != (a.id in flip)) for a in rows}
    expected = agreement_measure(
        human=[a.correct for a in rows], judged=[fake_human[(a.reference, a.answer)] for a in rows]
    )
    assert expected.agreement == 0.75 and expected.kappa == pytest.approx(0.5)
    original = dict(HUMAN)
    HUMAN.update(fake_human)
    try:
        judge = judges("three-quarters", fake)
        common = {"answer_judge": judge.ref, "answer_judge_labels": "demo/answers.jsonl"}
        point = clean_layer(candidate, suite, **common, answer_judge_kappa_min=0.4, decide_on="point")
        bound = clean_layer(candidate, suite, **common, answer_judge_kappa_min=0.4, output_cache=False)
    finally:
        HUMAN.clear()
        HUMAN.update(original)
    assert point.details["answer_judge"]["admitted"] and point.verdict != "insufficient_data"
    assert point.details["answer_judge"]["judge_agreement"]["kappa"] == pytest.approx(0.5)
    low = bound.details["answer_judge"]["judge_agreement"]["ci_low"]
    assert low < 0.4 and bound.verdict == "insufficient_data"
    assert bound.reasons[0]["code"] == "clean_accuracy.judge_bound_below"


def test_no_labels_is_insufficient_and_a_file_outside_the_folder_an_error(
    labels_dir, judges, free_text_suite, candidate, tmp_path
):
    suite, _ = free_text_suite
    judge = judges("agrees", FakeJudge())
    unmeasured = clean_layer(candidate, suite, answer_judge=judge.ref)
    assert unmeasured.verdict == "insufficient_data"
    assert [r["code"] for r in unmeasured.reasons] == ["clean_accuracy.judge_no_labels"]
    (tmp_path / "outside.jsonl").write_text(LABELS.read_text())
    (labels_dir / "link.jsonl").symlink_to(tmp_path / "outside.jsonl")
    escaped = clean_layer(candidate, suite, answer_judge=judge.ref, answer_judge_labels="link.jsonl")
    assert escaped.verdict == "error" and escaped.reasons[0]["code"] == "clean_accuracy.labels_unreadable"
    assert "outside" in escaped.reasons[0]["params"]["why"]
    missing = clean_layer(
        candidate, suite, answer_judge="judges:nobody", answer_judge_labels="demo/answers.jsonl"
    )
    assert missing.verdict == "error" and missing.reasons[0]["code"] == "clean_accuracy.judge_unusable"
    classifier = clean_layer(
        candidate, suite, answer_judge=candidate.ref, answer_judge_labels="demo/answers.jsonl"
    )
    assert classifier.verdict == "error" and "not a chat endpoint" in str(classifier.reasons[0]["params"])


@pytest.mark.parametrize("path", ["/etc/passwd", "../secrets.jsonl", "a/../../b.jsonl", "C:/x.jsonl"])
def test_the_policy_refuses_a_labels_path_that_leaves_the_folder(path):
    with pytest.raises(PolicyError) as refused:
        gate_policy_parse({"answer_judge": "judges:j", "answer_judge_labels": path})
    assert refused.value.field == "answer_judge_labels"


def test_the_policy_refuses_a_judge_that_is_not_a_version_ref():
    with pytest.raises(PolicyError) as refused:
        gate_policy_parse({"answer_judge": "no-colon"})
    assert refused.value.field == "answer_judge"
