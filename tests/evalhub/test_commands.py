import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import translation
from rest_framework.test import APIClient

from canary.services.experiments import experiment_create, experiment_start
from canary.services.reviews import follow_up_review_record
from registry.actors import SYSTEM
from registry.models import ApiToken, EvalSuite
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_register
from tests.canary.traffic import chat_session, experiment_backdate
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db


def test_create_api_token_prints_a_working_key_once(capsys, django_user_model):
    call_command("create_api_token", "robot", "--create-user", "--role", "ci", "--name", "jenkins")
    key = capsys.readouterr().out.strip()
    token = ApiToken.objects.get(user__username="robot")
    assert token.key_hash != key and key.startswith(token.key_prefix)  # only the hash is stored
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/model-versions/").status_code == 200
    with pytest.raises(CommandError, match="No user"):
        call_command("create_api_token", "ghost")


def test_import_suite_names_line_and_field(tmp_path, capsys):
    good = tmp_path / "suite.jsonl"
    good.write_text("\n".join(json.dumps({"input": f"q{i}", "label": "a"}) for i in range(3)))
    call_command("import_suite", str(good), "--name", "golden")
    assert "imported golden@1: 3 items" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": "q", "label": "a"}\n{"input": "q2", "lable": "a"}\n')
    with pytest.raises(CommandError, match=r"line 2\.lable"):
        call_command("import_suite", str(bad), "--name", "golden")
    assert EvalSuite.objects.count() == 1


def test_import_commands_say_what_is_wrong_in_english(tmp_path):
    """A command's refusal is English whatever language is active (its notes are reasons)."""
    suite = tmp_path / "bad.jsonl"
    suite.write_text('{"id": "a", "input": "q", "label": "x"}\n{"id": "a", "input": "q2", "label": "x"}\n')
    probes = tmp_path / "probes.jsonl"
    probes.write_text('{"id": "p1", "input": "x", "weakness": "w"}\n')
    with translation.override("zh-hans"):
        with pytest.raises(CommandError) as caught:
            call_command("import_suite", str(suite), "--name", "golden")
        assert f"  {suite}: line 2.id: duplicate id 'a' (first at line 1)" in str(caught.value).splitlines()
        with pytest.raises(CommandError) as caught:
            call_command("import_probes", str(probes), "--name", "ps", "--family", "ca")
        assert str(caught.value) == (
            "The probe set could not be read: line 1.expected_label: required"
            " {'file: line 1.expected_label': ['required']}"
        )
    assert not EvalSuite.objects.exists()


def test_export_follow_up_reviews_writes_the_labelled_set_format(tmp_path, capsys, django_user_model):
    builtin = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **builtin)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **builtin)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, actor=SYSTEM)
    experiment = experiment_backdate(
        experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=1)
    )
    turn = chat_session(
        experiment, session="s", turns=["Which clause is this?", "[payment] Payment.", "Why?"]
    )[2]
    annotator = django_user_model.objects.create_user(username="ann")
    user_role_grant(user=annotator, role="annotator")
    follow_up_review_record(experiment=experiment, turn_id=turn.pk, label="follow_up", actor=annotator)
    out = tmp_path / "reviews.jsonl"
    call_command("export_follow_up_reviews", "--experiment", "exp", "--out", str(out))
    [row] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert (row["id"], row["next_turn"], row["label"], row["language"]) == (
        "exp-s-2",
        "Why?",
        "follow_up",
        "en",
    )
    assert "1 reviewed turns of exp" in capsys.readouterr().err
    with pytest.raises(CommandError, match="No experiment"):
        call_command("export_follow_up_reviews", "--experiment", "nope")


def test_followup_eval_scores_any_labelled_file(tmp_path, capsys):
    rows = [
        (
            "en",
            "What is a deposit clause?",
            "[deposit] Money paid up front.",
            "what if the seller backs out",
            "follow_up",
        ),
        (
            "en",
            "What is a deposit clause?",
            "[deposit] Money paid up front.",
            "Thanks, that's all I needed.",
            "new",
        ),
        ("zh", "定金条款是什么？", "[定金] 签约时先付的钱。", "那如果卖方违约呢？", "follow_up"),
        ("zh", "定金条款是什么？", "[定金] 签约时先付的钱。", "好的，谢谢！", "new"),
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(
                {
                    "id": f"r{i}",
                    "language": language,
                    "previous_question": q,
                    "previous_answer": a,
                    "next_turn": turn,
                    "gap_seconds": 30,
                    "label": label,
                },
                ensure_ascii=False,
            )
            for i, (language, q, a, turn, label) in enumerate(rows)
        ),
        encoding="utf-8",
    )
    call_command("followup_eval", "--file", str(path), "--json")
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 4 and report["detector"] == "follow-up-lr-3"
    assert set(report["languages"]) == {"en", "zh"}
    for scores in (report["overall"], *report["languages"].values()):
        assert 0.0 <= scores["f1"] <= 1.0 and set(scores["confusion"]) == {"follow_up", "deepening", "new"}
    assert sum(sum(row.values()) for row in report["overall"]["confusion"].values()) == 4
    assert report["languages"]["zh"]["positives"] == 1 and "mistakes" not in report
    call_command("followup_eval", "--file", str(path))
    text = capsys.readouterr().out
    assert "overall  n=   4" in text and "confusion (rows: label, columns: predicted)" in text
    (tmp_path / "bad.jsonl").write_text('{"id": "x"}\n')
    with pytest.raises(CommandError, match="line 1: previous_question"):
        call_command("followup_eval", "--file", str(tmp_path / "bad.jsonl"))
    with pytest.raises(CommandError, match="No such file"):
        call_command("followup_eval", "--file", str(tmp_path / "missing.jsonl"))


def test_followup_eval_measures_a_prompted_openai_judge(tmp_path, capsys):
    """A registered openai version as the detector: a scripted endpoint that calls every "what if" a
    follow-up and garbles one answer; the command measures its agreement with the labels."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from registry.actors import SYSTEM
    from registry.services.versions import model_version_register

    prompts = []
    fields = ("id", "language", "previous_question", "previous_answer", "next_turn", "gap_seconds", "label")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = body["messages"][-1]["content"]
            prompts.append(prompt)
            turn = prompt.rsplit("Next turn: ", 1)[1]
            content = (
                "no idea" if "garble" in turn else "[follow_up] same matter" if "what if" in turn else "[new]"
            )
            payload = json.dumps(
                {"choices": [{"message": {"role": "assistant", "content": content}}]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        model_version_register(
            family="judge",
            label="llm",
            backend_kind="openai",
            actor=SYSTEM,
            backend_config={
                "base_url": f"http://127.0.0.1:{server.server_port}/v1",
                "model": "m",
                "max_retries": 0,
            },
        )
        rows = [
            ("en", "what if the seller backs out", 30, "follow_up"),
            ("en", "Thanks, that's all I needed.", 30, "new"),
            ("en", "garble this one", 30, "follow_up"),
            ("en", "what if it rains", 4000, "new"),  # outside the window: never sent
        ]
        path = tmp_path / "pairs.jsonl"
        path.write_text(
            "\n".join(
                json.dumps(
                    dict(
                        zip(
                            fields,
                            (
                                f"r{i}",
                                lang,
                                "What is a deposit?",
                                "[deposit] Paid up front.",
                                turn,
                                gap,
                                label,
                            ),
                            strict=True,
                        )
                    )
                )
                for i, (lang, turn, gap, label) in enumerate(rows)
            )
        )
        call_command("followup_eval", "--file", str(path), "--judge", "judge:llm", "--json")
    finally:
        server.shutdown()
    report = json.loads(capsys.readouterr().out)
    assert report["detector"] == "judge:llm" and report["unreadable"] == 1 and len(prompts) == 3
    assert any(p.endswith("Next turn: what if the seller backs out") for p in prompts)
    overall = report["overall"]
    assert (overall["tp"], overall["fn"], overall["fp"], overall["tn"]) == (1, 1, 0, 2)
    assert overall["f1"] == pytest.approx(2 / 3)
    with pytest.raises(CommandError, match="--judge: No model version"):
        call_command("followup_eval", "--file", str(path), "--judge", "judge:none")


def small_set_files(tmp_path):
    """Train and test files cut from the shipped set: six families' first turns, two test contexts."""
    from engines.follow_up.detector import follow_up_set_load
    from engines.follow_up.pair_set import SET_PATHS

    families = ["contracts", "legal", "it support", "banking", "hr", "coding"]
    train = [
        r
        for r in follow_up_set_load(SET_PATHS["train"])
        if r["domain"] in families and int(r["id"][-2:]) <= 4
    ]
    test = follow_up_set_load(SET_PATHS["test"])
    contexts = sorted({r["previous_question"] for r in test})[:2]
    test = [r for r in test if r["previous_question"] in contexts]
    paths = {}
    for name, rows in (("train", train), ("test", test)):
        paths[name] = tmp_path / f"{name}.jsonl"
        paths[name].write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    return paths, test


def test_followup_train_with_reviews_keeps_them_and_their_contexts_out_of_the_test_split(tmp_path, capsys):
    """`followup_train --with-reviews EXPERIMENT`: the experiment's reviewed turns join the train split,
    and the test pairs that share a reviewed turn's context move to train with them."""
    paths, test = small_set_files(tmp_path)
    builtin = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **builtin)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **builtin)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, actor=SYSTEM)
    experiment = experiment_backdate(
        experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=1)
    )
    shared = test[0]
    turn = chat_session(
        experiment, session="s", turns=[shared["previous_question"], shared["previous_answer"], "and then?"]
    )[2]
    follow_up_review_record(experiment=experiment, turn_id=turn.pk, label="follow_up", actor=SYSTEM)
    sharing = sum(r["previous_question"] == shared["previous_question"] for r in test)
    out = tmp_path / "models"
    common = [
        "--train-file",
        str(paths["train"]),
        "--test-file",
        str(paths["test"]),
        "--calibration-file",
        "",
    ]
    call_command(
        "followup_train", *common, "--with-reviews", "exp", "--out", str(out), "--detector-version", "t-r"
    )
    printed = capsys.readouterr().out
    assert (
        f"exp: 1 reviewed turns join the train split; {sharing} test pairs sharing their contexts move"
        in printed
    )
    meta = json.loads((out / "t-r.json").read_text())
    assert meta["trained_on"]["sources"]["reviewed"] == 1
    assert meta["test"]["rows"] == len(test) - sharing and meta["family_cv"]["reviewed"]["overall"]["n"] == 1
    assert "hand_written:" in printed and "cross-validation by family" in printed
    with pytest.raises(CommandError, match="--with-reviews nope: not a file, and No experiment"):
        call_command("followup_train", *common, "--with-reviews", "nope", "--out", str(out))


def test_followup_eval_prints_the_shipped_cross_validation(capsys):
    call_command("followup_eval", "--cv")
    text = capsys.readouterr().out
    assert "cross-validation by family, 5 folds over 13 families" in text
    assert "hand_written  en" in text and "hand_written  zh" in text
    call_command("followup_eval", "--cv", "--json")
    report = json.loads(capsys.readouterr().out)
    assert set(report["hand_written"]["languages"]) == {"en", "zh"}
