"""`python -m evalhub.cli gate` as CI runs it: a real child process without Django settings,
talking HTTP to a live server, with a thread in the role of the Celery worker executing the
queued runs through the real service on a small real model."""

import io
import json
import os
import re
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone, translation

from engines.demo.dataset import demo_dataset_build
from evalhub import cli
from evalhub.devstack import port_free
from evalhub.wordings import reason_words
from gate.judges.clean_accuracy import CleanAccuracyCode
from gate.models import GateRun
from gate.services.gate_runs import gate_run_execute
from registry.actors import SYSTEM
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import api_token_create, user_role_grant
from registry.services.versions import model_version_register
from tests.lifecycle import incumbent_register

ROOT = Path(__file__).resolve().parents[2]
CLEAN_ONLY = ["--policy-override", 'required_layers=["clean_accuracy"]']


@pytest.fixture
def token(transactional_db) -> str:
    user = get_user_model().objects.create_user(username="ci-bot")
    user_role_grant(user=user, role="ci")
    return api_token_create(user=user)[1]


@pytest.fixture
def family(transactional_db, small_bow):
    """fam:v2 (candidate) and fam:v1 (its baseline), both the small real model; suite `fam`."""
    config = {"path": str(small_bow)}
    v1 = incumbent_register(
        family="fam",
        label="v1",
        backend_kind="builtin",
        backend_config=config,
        actor=SYSTEM,
    )
    model_version_register(
        family="fam", label="v2", backend_kind="builtin", backend_config=config, baseline=v1, actor=SYSTEM
    )
    records = [
        {"id": i.id, "input": i.input, "label": i.label, "tags": list(i.tags)}
        for i in demo_dataset_build(seed=0).eval[:60]
    ]
    eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)


@pytest.fixture
def worker(transactional_db):
    """Call it to start a thread that executes every queued run, as a worker would; a run waits
    in the queue for half a second first, so that the CLI sees it queued."""
    stop, errors, threads = threading.Event(), [], []

    def loop():
        try:
            while not stop.is_set():
                due = GateRun.objects.filter(
                    status="queued", created_at__lt=timezone.now() - timedelta(seconds=0.5)
                )
                for run_id in due.values_list("pk", flat=True):
                    gate_run_execute(gate_run_id=run_id, worker="test")
                stop.wait(0.1)
        except Exception as exc:  # reported by the fixture, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    def start():
        threads.append(threading.Thread(target=loop, daemon=True))
        threads[-1].start()

    yield start
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors


def gate(*args: str, token: str | None, server: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "EVALHUB_"))}
    if token is not None:
        env["EVALHUB_TOKEN"] = token
    argv = [sys.executable, "-m", "evalhub.cli", "gate", "--poll", "0.2"]
    argv += ["--server", server] if server else []
    return subprocess.run([*argv, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


EXPECTED_CODE = {
    "pass": CleanAccuracyCode.BOUND_CLEARS,
    "fail": CleanAccuracyCode.BOUND_BELOW,
    "insufficient_data": CleanAccuracyCode.TOO_FEW_ITEMS,
}


@pytest.mark.parametrize(
    ("bar", "min_items", "code", "verdict"),
    [("0.0", "30", 0, "pass"), ("1.0", "30", 1, "fail"), ("0.0", "1000", 2, "insufficient_data")],
)
def test_wait_prints_progress_summary_and_exits_by_verdict(
    live_server, token, family, worker, tmp_path, bar, min_items, code, verdict
):
    worker()
    report = tmp_path / "report.md"
    result = gate(
        "--candidate", "fam:v2", "--wait", *CLEAN_ONLY,
        "--policy-override", f"clean_accuracy_min={bar}",
        "--policy-override", f"clean_min_items={min_items}",
        "--report-md", str(report),
        token=token, server=live_server.url,
    )  # fmt: skip
    assert result.returncode == code, result.stdout + result.stderr
    run = GateRun.objects.get()
    layer = run.layers.get()
    assert (run.verdict, layer.verdict) == (verdict, verdict)
    out = result.stdout
    assert f"gate run {run.pk} started: {live_server.url}/api/v1/gate-runs/{run.pk}/" in out
    assert f"gate run {run.pk}: queued 0% (no run ahead of it: waiting for a gpu worker" in out
    assert f"gate run {run.pk}: succeeded 100%" in out
    assert "\r" not in out  # not a terminal: one line per change
    assert f"gate run {run.pk}: fam:v2 vs fam:v1, suite fam@1, policy default (succeeded)" in out
    line = (
        f"  clean_accuracy   {verdict:<6} {layer.estimate:.3f}  [{layer.ci_low:.3f}, {layer.ci_high:.3f}]"
        f"  threshold {float(bar)}"
    )
    assert line in out.splitlines(), out
    assert layer.reasons[0]["code"] == EXPECTED_CODE[verdict]
    with translation.override("en"):
        assert f"      {reason_words(layer.reasons[0])}" in out.splitlines(), out
    reasons = "" if verdict == "pass" else f" (clean_accuracy: {verdict})"
    assert f"VERDICT: {verdict}{reasons}\nrun: {live_server.url}/api/v1/gate-runs/{run.pk}/" in out
    # Without the report endpoint (it is newer than the CLI) a warning, and the verdict decides the exit.
    if report.exists():
        assert "fam:v2" in report.read_text() and f"report saved to {report}" in result.stderr
    else:
        assert "no Markdown report for gate run" in result.stderr


def test_start_without_wait_then_attach_with_json(live_server, token, family, worker):
    started = gate("--candidate", "fam:v2", *CLEAN_ONLY, token=token, server=live_server.url)
    assert started.returncode == 0, started.stderr
    run = GateRun.objects.get()
    assert run.status == "queued" and f"gate run {run.pk} started" in started.stdout

    worker()
    attached = gate("--attach", str(run.pk), "--json", token=token, server=live_server.url)
    assert attached.returncode == 1, attached.stderr  # the default bar, 0.8, is out of this model's reach
    body = json.loads(attached.stdout)
    assert (body["id"], body["status"], body["verdict"]) == (run.pk, "succeeded", "fail")
    assert body["layers"][0]["layer"] == "clean_accuracy"
    assert f"gate run {run.pk}: succeeded 100%" in attached.stderr


def test_timeout_says_the_run_is_still_going(live_server, token, family):
    began = time.monotonic()
    result = gate("--candidate", "fam:v2", "--wait", "--timeout", "3", token=token, server=live_server.url)
    assert result.returncode == 2
    run = GateRun.objects.get()
    assert "timed out after 3 s" in result.stderr and "still queued" in result.stderr
    assert f"/api/v1/gate-runs/{run.pk}/" in result.stderr and f"--attach {run.pk}" in result.stderr
    assert time.monotonic() - began < 15


def test_http_problems_exit_2_with_the_reason(live_server, token, family):
    bad_token = gate("--candidate", "fam:v2", "--wait", token="nope", server=live_server.url)
    assert bad_token.returncode == 2
    assert "error: the server refused the token (401): Invalid or revoked token." in bad_token.stderr

    unknown = gate("--candidate", "fam:v9", "--wait", token=token, server=live_server.url)
    assert unknown.returncode == 2
    assert "error: the server answered 404 not_found: No model version 'fam:v9'." in unknown.stderr
    assert re.search(r"^  candidate: .*fam:v9", unknown.stderr, re.M), unknown.stderr

    override = gate(
        "--candidate",
        "fam:v2",
        "--policy-override",
        "clean_accuracy_min=3",
        token=token,
        server=live_server.url,
    )
    assert override.returncode == 2
    assert "  policy_overrides.clean_accuracy_min: must be between 0.0 and 1.0" in override.stderr

    # Sent only when given; an experiment that does not exist is refused by name.
    experiment = gate("--candidate", "fam:v2", "--experiment", "nope", token=token, server=live_server.url)
    assert experiment.returncode == 2 and re.search(r"^  experiment: ", experiment.stderr, re.M)

    missing = gate("--attach", "999999", token=token, server=live_server.url)
    assert missing.returncode == 2 and "404 not_found: No gate run 999999" in missing.stderr
    assert not GateRun.objects.exists()


def test_no_token_server_down_and_usage_errors():
    down = f"http://127.0.0.1:{port_free()}"
    began = time.monotonic()
    result = gate("--candidate", "fam:v2", "--wait", token="t", server=down)
    assert result.returncode == 2 and f"error: cannot reach the server at {down}" in result.stderr
    assert time.monotonic() - began < 10
    result = gate("--candidate", "fam:v2", token=None, server=down)
    assert result.returncode == 2 and "EVALHUB_TOKEN" in result.stderr
    result = gate("--attach", "1", "--candidate", "fam:v2", token="t", server=down)
    assert result.returncode == 2 and "cannot be combined with --candidate" in result.stderr


def test_the_server_defaults_to_evalhub_server_then_the_local_one(monkeypatch):
    monkeypatch.delenv("EVALHUB_SERVER", raising=False)
    assert cli.parser_build()[0].parse_args(["gate", "--candidate", "x"]).server == "http://127.0.0.1:8000"
    monkeypatch.setenv("EVALHUB_SERVER", "https://evalhub.example.com")
    assert (
        cli.parser_build()[0].parse_args(["gate", "--candidate", "x"]).server == "https://evalhub.example.com"
    )


def test_without_evalhub_token_a_local_server_gets_the_demo_ci_token(monkeypatch, tmp_path):
    monkeypatch.delenv("EVALHUB_TOKEN", raising=False)
    monkeypatch.setenv("EVALHUB_VAR_DIR", str(tmp_path))
    (tmp_path / "demo-credentials.txt").write_text(
        "admin user:     admin\nci token:       c1\napp token:      a1\n"
    )
    err = io.StringIO()
    assert cli.token_find("http://127.0.0.1:8000", err=err) == "c1"
    assert cli.token_find("http://localhost:8123/", err=err) == "c1"
    assert f"using the ci token in {tmp_path / 'demo-credentials.txt'}" in err.getvalue()
    with pytest.raises(cli.CliError, match="no API token: set EVALHUB_TOKEN"):
        cli.token_find("https://evalhub.example.com", err=err)  # never sent to another machine
    monkeypatch.setenv("EVALHUB_TOKEN", "mine")
    assert cli.token_find("https://evalhub.example.com", err=err) == "mine"
    monkeypatch.delenv("EVALHUB_TOKEN")
    (tmp_path / "demo-credentials.txt").unlink()
    with pytest.raises(cli.CliError, match="make run` writes one to"):
        cli.token_find("http://127.0.0.1:8000", err=err)


def test_a_queued_run_says_what_it_waits_for():
    def runs(status, ids):
        return {"count": len(ids), "results": [{"id": i, "status": status, "progress": 40} for i in ids]}

    def reply(request):
        status = request.url.params["status"]
        return httpx.Response(200, json=runs(status, {"running": [6], "queued": [5, 7, 8]}[status]))

    api = cli.Api(server="http://evalhub.test", token="t")
    api.client = httpx.Client(base_url=api.server, transport=httpx.MockTransport(reply))
    assert api.queue_hint({"id": 7}) == "2 runs ahead on the gpu queue: #6 running 40%"
    api.client = httpx.Client(
        base_url=api.server, transport=httpx.MockTransport(lambda r: httpx.Response(200, json=runs("x", [])))
    )
    assert api.queue_hint({"id": 7}).startswith("no run ahead of it: waiting for a gpu worker")
    api.client = httpx.Client(
        base_url=api.server, transport=httpx.MockTransport(lambda r: httpx.Response(403))
    )
    assert api.queue_hint({"id": 7}) == ""


def test_imports_neither_django_nor_the_project():
    code = "import sys, evalhub.cli; print(sorted(m for m in sys.modules if m.split('.')[0] in "
    code += "('django', 'rest_framework', 'celery', 'torch', 'evalhub', 'canary', 'workers')))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "['evalhub', 'evalhub.cli']"


def test_polling_retries_transient_failures_but_not_4xx(monkeypatch):
    answers = iter(
        [
            httpx.Response(503),
            httpx.ConnectError("refused"),
            httpx.Response(502, text="<html>bad gateway</html>"),
            httpx.Response(200, json={"id": 1, "status": "running"}),
            httpx.Response(400, json={"error": {"code": "invalid", "message": "no", "fields": {}}}),
        ]
    )

    def reply(request):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(cli.time, "sleep", lambda seconds: None)
    api = cli.Api(server="http://evalhub.test", token="t")
    api.client = httpx.Client(base_url=api.server, transport=httpx.MockTransport(reply))
    err = io.StringIO()
    assert api.run_get(1, deadline=time.monotonic() + 60, err=err)["status"] == "running"
    assert err.getvalue().count("retrying") == 3
    with pytest.raises(cli.CliError, match="400 invalid: no"):
        api.run_get(1, deadline=time.monotonic() + 60, err=err)


def test_progress_rewrites_one_line_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    progress = cli.ProgressLine(stream)
    for status, percent in [("queued", 0), ("running", 37), ("running", 37), ("succeeded", 100)]:
        progress.show({"id": 42, "status": status, "progress": percent})  # no hint: only for queued runs
    progress.end()
    assert stream.getvalue() == (
        "\rgate run 42: queued 0%\rgate run 42: running 37%\rgate run 42: succeeded 100%\n"
    )


def test_a_server_without_the_report_endpoint_is_a_warning(tmp_path):
    not_found = {"error": {"code": "not_found", "message": "No API endpoint.", "fields": {}}}
    api = cli.Api(server="http://evalhub.test", token="t")
    api.client = httpx.Client(
        base_url=api.server,
        transport=httpx.MockTransport(lambda request: httpx.Response(404, json=not_found)),
    )
    err = io.StringIO()
    api.report_save(7, str(tmp_path / "r.md"), err=err)
    assert "no Markdown report for gate run 7 (404)" in err.getvalue() and not (tmp_path / "r.md").exists()
