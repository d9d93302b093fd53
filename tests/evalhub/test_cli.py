"""`evalhub gate` (`python -m evalhub.cli gate`) as CI runs it: a real child process without Django
settings, talking HTTP to a live server, with a thread in the role of the Celery worker executing the
queued runs through the real service on a small real model. Each exit code (docs/cli.md) is checked
with the one line it prints; the few a live server cannot give on demand (a 500, an errored verdict)
come from a stand-in HTTP server."""

import importlib
import importlib.metadata
import io
import json
import os
import re
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


def gate(
    *args: str, token: str | None, server: str | None = None, python: tuple[str, ...] = ("-m", "evalhub.cli")
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "EVALHUB_"))}
    if token is not None:
        env["EVALHUB_TOKEN"] = token
    argv = [sys.executable, *python, "gate", "--poll", "0.2"]
    argv += ["--server", server] if server else []
    return subprocess.run([*argv, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


@contextmanager
def stand_in_server(status: int, body: dict | str) -> Iterator[str]:
    """An HTTP server on loopback answering every request with `status` and `body`."""

    class Handler(BaseHTTPRequestHandler):
        def answer(self):
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html" if isinstance(body, str) else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = answer

        def log_message(self, *args):  # quiet test output
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def finished_run(*, status: str, verdict: str, server: str) -> dict:
    return {
        "id": 7, "status": status, "verdict": verdict, "progress": 100, "candidate": "fam:v2",
        "baseline": "fam:v1", "suite": "fam@1", "policy": "default", "experiment": None, "layers": [],
        "error_message": "the backend did not answer", "verdict_reasons": [],
        "url": f"{server}/api/v1/gate-runs/7/",
    }  # fmt: skip


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
    assert f"gate run {run.pk}: queued 0% (next on the gpu queue: waiting for a gpu worker" in out
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
    # A verdict is no error: only "no decision" adds a line saying what to do.
    if verdict == "insufficient_data":
        assert last_line(result.stderr).startswith("no decision: a layer had too little data")
    else:
        assert "no decision" not in result.stderr


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
    assert result.returncode == cli.EXIT_TIMEOUT == 4
    run = GateRun.objects.get()
    assert "timed out after 3 s" in result.stderr and "still queued" in result.stderr
    assert f"/api/v1/gate-runs/{run.pk}/" in result.stderr and f"--attach {run.pk}" in result.stderr
    assert time.monotonic() - began < 15


def test_refusals_exit_as_authentication_or_usage_errors_with_the_reason(live_server, token, family):
    bad_token = gate("--candidate", "fam:v2", "--wait", token="nope", server=live_server.url)
    assert bad_token.returncode == cli.EXIT_AUTH == 7
    assert "error: the server refused the token (401): Invalid or revoked token." in bad_token.stderr

    # A request the server refuses as given is a usage error: the arguments need fixing.
    unknown = gate("--candidate", "fam:v9", "--wait", token=token, server=live_server.url)
    assert unknown.returncode == cli.EXIT_USAGE == 5
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
    assert override.returncode == 5
    assert "  policy_overrides.clean_accuracy_min: must be between 0.0 and 1.0" in override.stderr

    # Sent only when given; an experiment that does not exist is refused by name.
    experiment = gate("--candidate", "fam:v2", "--experiment", "nope", token=token, server=live_server.url)
    assert experiment.returncode == 5 and re.search(r"^  experiment: ", experiment.stderr, re.M)

    missing = gate("--attach", "999999", token=token, server=live_server.url)
    assert missing.returncode == 5 and "404 not_found: No gate run '999999'" in missing.stderr
    assert not GateRun.objects.exists()


def test_no_token_server_down_and_usage_errors():
    down = f"http://127.0.0.1:{port_free()}"
    began = time.monotonic()
    result = gate("--candidate", "fam:v2", "--wait", token="t", server=down)
    assert result.returncode == cli.EXIT_CONNECTION == 6
    assert last_line(result.stderr).startswith(f"error: cannot reach the server at {down}")
    assert "is it running? `make run` starts one here" in result.stderr
    assert time.monotonic() - began < 10
    result = gate("--candidate", "fam:v2", token=None, server=down)
    assert result.returncode == cli.EXIT_AUTH and last_line(result.stderr).startswith("error: no API token")
    # argparse's own errors, and the checks after it, exit 5 (argparse's 2 is insufficient data here).
    result = gate("--attach", "1", "--candidate", "fam:v2", token="t", server=down)
    assert result.returncode == cli.EXIT_USAGE and "cannot be combined with --candidate" in result.stderr
    for args in (("--no-such-option",), ("--timeout", "soon"), ()):
        result = gate(*args, token="t", server=down)
        assert result.returncode == cli.EXIT_USAGE, (args, result.stderr)
        assert re.search(r"error: .* \(see evalhub( gate)? --help\)$", last_line(result.stderr))


def test_each_refusal_status_has_its_exit_code():
    statuses = (400, 401, 403, 404, 409, 413, 429, 500, 502)
    assert [cli.status_exit_code(status) for status in statuses] == [5, 7, 7, 5, 5, 5, 7, 8, 8]


def test_a_server_error_exits_8():
    error = {"error": {"code": "error", "message": "A server error occurred.", "fields": {}}}
    with stand_in_server(500, error) as server:
        result = gate("--candidate", "fam:v2", "--wait", token="t", server=server)
    assert result.returncode == cli.EXIT_SERVER == 8
    assert last_line(result.stderr) == (
        "error: the server answered 500 error: A server error occurred. (see the server's log)"
    )
    with stand_in_server(200, "<html>not EvalHub</html>") as server:
        result = gate("--candidate", "fam:v2", token="t", server=server)
    assert result.returncode == 8 and "no JSON body (is --server an EvalHub?)" in result.stderr


@pytest.mark.parametrize(("status", "verdict"), [("succeeded", "error"), ("error", "error"), ("failed", "")])
def test_a_run_that_errored_exits_3(status, verdict):
    with stand_in_server(202, finished_run(status=status, verdict=verdict, server="http://x")) as server:
        result = gate("--candidate", "fam:v2", "--wait", token="t", server=server)
    assert result.returncode == cli.EXIT_RUN_ERROR == 3, result.stderr
    assert "  error: the backend did not answer" in result.stdout
    assert last_line(result.stderr).startswith("no decision: the run ended in error")


def test_a_python_without_httpx_exits_9_saying_how_to_fix_it():
    # The module imported as a Python without httpx would import it; the command still starts.
    no_httpx = (
        "import runpy, sys; sys.modules['httpx'] = None; runpy.run_module('evalhub.cli', run_name='__main__')"
    )
    result = gate("--candidate", "fam:v2", token="t", python=("-c", no_httpx))
    assert result.returncode == cli.EXIT_MISSING_DEPENDENCY == 9
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(
        f"error: {sys.executable} cannot import httpx"
    )
    assert "`make install` puts in .venv/bin" in result.stderr


def test_ctrl_c_exits_130_and_says_the_run_goes_on(monkeypatch, capsys):
    def interrupted(args, *, out, err):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "gate", interrupted)
    assert cli.main(["gate", "--candidate", "fam:v2"]) == cli.EXIT_INTERRUPTED == 130
    assert "a started gate run goes on on the server" in capsys.readouterr().err


def test_evalhub_is_the_projects_console_script():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"evalhub": "evalhub.cli:main"}
    module, _, name = scripts["evalhub"].partition(":")
    assert getattr(importlib.import_module(module), name) is cli.main
    # Where the project is installed (`make install`, CI), the installed command is this one.
    installed = importlib.metadata.entry_points(group="console_scripts", name="evalhub")
    assert all(entry.value == scripts["evalhub"] for entry in installed)


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


def test_a_queued_run_says_what_it_waits_for_as_the_server_says():
    api = cli.Api(server="http://evalhub.test", token="t")
    waiting = {
        "id": 7,
        "live": {"where": "no_worker", "waiting_reason": "no worker is consuming the gpu queue"},
    }
    assert api.queue_hint(waiting) == "no worker is consuming the gpu queue"
    assert api.queue_hint({"id": 7}) == ""  # a server that does not say


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


def test_cancel_a_queued_run_then_attach_exits_as_no_decision(live_server, token, family):
    started = gate("--candidate", "fam:v2", *CLEAN_ONLY, token=token, server=live_server.url)
    run = GateRun.objects.get()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "EVALHUB_"))}

    def cancel(*args: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "evalhub.cli", "cancel", "--server", live_server.url, *args]
        return subprocess.run(
            argv, cwd=ROOT, env={**env, "EVALHUB_TOKEN": token}, capture_output=True, text=True, timeout=60
        )

    assert started.returncode == cli.EXIT_PASS
    first = cancel(str(run.pk), "--reason", "wrong suite")
    assert first.returncode == cli.EXIT_PASS, first.stderr
    assert (
        first.stdout.strip() == f"gate run {run.pk} cancelled: {live_server.url}/api/v1/gate-runs/{run.pk}/"
    )
    again = cancel(str(run.pk))
    assert again.returncode == cli.EXIT_USAGE
    assert f"409 conflict: gate run {run.pk} is cancelled: only a queued or running run" in again.stderr
    attached = gate("--attach", str(run.pk), token=token, server=live_server.url)
    assert attached.returncode == cli.EXIT_RUN_ERROR
    assert "VERDICT: error (cancelled by ci-bot: wrong suite)" in attached.stdout
    assert last_line(attached.stderr) == cli.NO_DECISION_CANCELLED
