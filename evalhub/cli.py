"""EvalHub from CI: start a gate run, wait for it, exit by its verdict.

    EVALHUB_TOKEN=... evalhub gate --server URL --candidate family:label --wait

`evalhub` is this module's console script (pyproject.toml; `make install` puts it in .venv/bin);
`python -m evalhub.cli` is the same command. The server is --server, else $EVALHUB_SERVER, else the
local one (http://127.0.0.1:8000). The token is $EVALHUB_TOKEN, else, for a local server, the CI token
`make run` wrote to var/demo-credentials.txt.

Exit codes (docs/cli.md): 0 pass, 1 fail, 2 insufficient data, 3 a run that errored, 4 a timeout,
5 a usage error, 6 a connection error, 7 an authentication error, 8 a server error, 9 a missing
dependency; each but 0 and 1 with one line on stderr saying what to do.

Only the standard library and httpx: CI machines need not install Django or the project.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TextIO
from urllib.parse import urlsplit

# A Python without httpx gets exit code 9 and how to fix it, not a traceback that exits 1 ("failed").
MISSING_DEPENDENCY: ImportError | None = None
try:
    import httpx
except ImportError as exc:
    MISSING_DEPENDENCY = exc

# Exit codes: a broken setup never reads as a verdict (docs/cli.md has the table).
EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_INSUFFICIENT_DATA = 2  # what 2 ("no decision") meant most often before the codes below
EXIT_RUN_ERROR = 3
EXIT_TIMEOUT = 4
EXIT_USAGE = 5
EXIT_CONNECTION = 6
EXIT_AUTH = 7
EXIT_SERVER = 8
EXIT_MISSING_DEPENDENCY = 9
EXIT_INTERRUPTED = 130  # the shell's code for Ctrl-C
VERDICT_EXIT = {"pass": EXIT_PASS, "fail": EXIT_FAIL, "insufficient_data": EXIT_INSUFFICIENT_DATA}
FINISHED = ("succeeded", "failed", "error", "cancelled")
TRANSIENT_STATUS = (502, 503, 504)
MAX_BACKOFF_S = 60.0
DEFAULT_SERVER = "http://127.0.0.1:8000"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
# Where `make run` (manage.py demo_setup) keeps the demo's tokens: the project's var/ folder.
PROJECT_DIR = Path(__file__).resolve().parent.parent


class CliError(Exception):
    """A problem that ends the command with `exit_code` and this message on stderr."""

    def __init__(self, message: str, *, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def status_exit_code(status: int) -> int:
    """401/403 (and 429, an address paused for sending bad tokens): the token; 5xx: the server; any
    other refusal: the request as given (usage)."""
    if status in (401, 403, 429):
        return EXIT_AUTH
    return EXIT_SERVER if status >= 500 else EXIT_USAGE


def unreachable_text(server: str, exc: Exception) -> str:
    return (
        f"cannot reach the server at {server}: {type(exc).__name__}: {exc} (is it running? `make run` "
        "starts one here; --server or EVALHUB_SERVER names another)"
    )


# ---------------------------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------------------------
def api_error_text(response: httpx.Response) -> str:
    """One line naming the problem, then the fields at fault (from the API's error shape)."""
    status = response.status_code
    try:
        error = response.json()["error"]
        code, message, fields = error.get("code", ""), error.get("message", ""), error.get("fields") or {}
    except (ValueError, KeyError, TypeError, AttributeError):
        code, message, fields = "", " ".join(response.text.split())[:200], {}
    if status == 401:
        head = f"the server refused the token (401): {message} (check EVALHUB_TOKEN)"
    elif status == 403:
        head = f"the token may not do this (403): {message} (starting gate runs needs the ci role)"
    elif status >= 500:
        head = f"the server answered {status}{' ' + code if code else ''}: {message} (see the server's log)"
    else:
        head = f"the server answered {status}{' ' + code if code else ''}: {message}"
    lines = [head] + [f"  {field}: {'; '.join(map(str, msgs))}" for field, msgs in fields.items()]
    return "\n".join(lines)


class Api:
    def __init__(self, *, server: str, token: str, request_timeout: float = 30.0):
        self.server = server.rstrip("/")
        self.client = httpx.Client(
            base_url=self.server,
            headers={"Authorization": f"Bearer {token}", "User-Agent": "evalhub-cli"},
            timeout=request_timeout,
        )

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; a connection problem becomes a CliError."""
        try:
            return self.client.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise CliError(unreachable_text(self.server, exc), exit_code=EXIT_CONNECTION) from None

    def json_or_fail(self, response: httpx.Response) -> dict:
        if response.status_code >= 400:
            raise CliError(api_error_text(response), exit_code=status_exit_code(response.status_code))
        try:
            return response.json()
        except ValueError:
            raise CliError(
                f"the server answered {response.status_code} with no JSON body (is --server an EvalHub?)",
                exit_code=EXIT_SERVER,
            ) from None

    def run_start(self, body: dict) -> dict:
        # Not retried: a POST that reached the server may have started a run already.
        return self.json_or_fail(self.send("POST", "/api/v1/gate-runs/", json=body))

    def run_cancel(self, run_id: int, *, why: str) -> dict:
        return self.json_or_fail(
            self.send("POST", f"/api/v1/gate-runs/{run_id}/cancel/", json={"reason": why})
        )

    def run_get(self, run_id: int, *, deadline: float, err: TextIO) -> dict:
        """Poll once, retrying connection errors and 502/503/504 with backoff until `deadline`."""
        delay = 1.0
        while True:
            try:
                response = self.client.get(f"/api/v1/gate-runs/{run_id}/")
                if response.status_code not in TRANSIENT_STATUS:
                    return self.json_or_fail(response)
                problem, code = f"the server answered {response.status_code}", EXIT_SERVER
            except httpx.TransportError as exc:
                problem, code = unreachable_text(self.server, exc), EXIT_CONNECTION
            left = deadline - time.monotonic()
            if left <= 0:
                raise CliError(
                    f"{problem}; gave up at the timeout (gate run {run_id} may still be running)",
                    exit_code=code,
                )
            wait = min(delay, left)
            print(f"warning: {problem}; retrying in {wait:.0f} s", file=err, flush=True)
            time.sleep(wait)
            delay = min(delay * 2, MAX_BACKOFF_S)

    def queue_hint(self, run: dict) -> str:
        """Why a queued run waits, as the server says it: behind other runs, or on a queue that no live
        worker consumes ("" when the server does not say)."""
        live = run.get("live")
        return str(live.get("waiting_reason") or "") if isinstance(live, dict) else ""

    def report_save(self, run_id: int, path: str, *, err: TextIO) -> None:
        """Save the Markdown report; a missing report is a warning, never a failed command."""
        try:
            response = self.client.get(f"/api/v1/gate-runs/{run_id}/report/", params={"format": "md"})
        except httpx.TransportError as exc:
            print(f"warning: could not fetch the Markdown report: {type(exc).__name__}: {exc}", file=err)
            return
        if response.status_code == 404:
            print(
                f"warning: the server has no Markdown report for gate run {run_id} (404); {path} not written",
                file=err,
            )
            return
        if response.status_code >= 400:
            print(f"warning: could not fetch the Markdown report: {api_error_text(response)}", file=err)
            return
        try:
            with open(path, "w", encoding="utf-8") as out:
                out.write(response.text)
        except OSError as exc:
            print(f"warning: could not write the Markdown report to {path}: {exc}", file=err)
            return
        print(f"report saved to {path}", file=err)


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------
class ProgressLine:
    """On a terminal one line rewritten in place; elsewhere (CI logs) a line per change."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.tty = stream.isatty()
        self.last: tuple[str, int, str] | None = None
        self.width = 0

    def show(self, run: dict, hint: str = "") -> None:
        state = (run["status"], run.get("progress") or 0, hint)
        if state == self.last:
            return
        self.last = state
        text = f"gate run {run['id']}: {state[0]} {state[1]}%" + (f" ({hint})" if hint else "")
        if self.tty:
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def end(self) -> None:
        if self.tty and self.last is not None:
            self.stream.write("\n")
            self.stream.flush()


def number(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def layer_line(layer: dict) -> str:
    interval = f"[{number(layer.get('ci_low'))}, {number(layer.get('ci_high'))}]"
    line = f"  {layer['layer']:<16} {layer['verdict']:<6} {number(layer.get('estimate'))}  {interval}"
    if layer.get("threshold") is not None:
        line += f"  threshold {float(layer['threshold'])}"
    return line


def reason_message(reason: dict | str) -> str:
    """A reason as the API gives it (`code`, `params`, `message` in the asked language); a server from
    before reason codes gave the sentence alone."""
    return reason["message"] if isinstance(reason, dict) else str(reason)


def summary_text(run: dict) -> str:
    baseline = run.get("baseline") or "no baseline"
    lines = [
        f"gate run {run['id']}: {run['candidate']} vs {baseline}, suite {run.get('suite')}, "
        f"policy {run.get('policy') or 'default'}"
        + (f", experiment {run['experiment']}" if run.get("experiment") else "")
        + f" ({run['status']})"
    ]
    for layer in run.get("layers") or []:
        lines.append(layer_line(layer))
        lines += [f"      {reason_message(reason)}" for reason in layer.get("reasons") or []]
    if run.get("error_message"):
        lines.append(f"  error: {run['error_message']}")
    reasons = "; ".join(reason_message(reason) for reason in run.get("verdict_reasons") or [])
    lines.append(f"VERDICT: {run['verdict']}" + (f" ({reasons})" if reasons else ""))
    lines.append(f"run: {run['url']}")
    if run.get("html_url"):
        lines.append(f"page: {run['html_url']}")
    return "\n".join(lines)


def exit_code(run: dict) -> int:
    """By the verdict; a run that failed, errored or was cancelled, or a verdict this CLI does not know,
    is an error."""
    if run["status"] in ("failed", "error", "cancelled"):
        return EXIT_RUN_ERROR
    return VERDICT_EXIT.get(run["verdict"], EXIT_RUN_ERROR)


# What to do about a finished run that decided nothing: one line on stderr, after the summary.
NO_DECISION_HINTS = {
    EXIT_INSUFFICIENT_DATA: "no decision: a layer had too little data (its reasons above say how much); "
    "run the gate again once the canary has more traffic",
    EXIT_RUN_ERROR: "no decision: the run ended in error (the error above, and the run's page, say why); "
    "fix the cause and start a new run",
}
NO_DECISION_CANCELLED = "no decision: the run was cancelled (who and why above); start a new run when ready"


# ---------------------------------------------------------------------------------------------
# The gate command
# ---------------------------------------------------------------------------------------------
def override(text: str) -> tuple[str, Any]:
    """KEY=VALUE with VALUE as JSON (a bare word that is not JSON is taken as a string)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=JSON, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


def start_body(args: argparse.Namespace) -> dict:
    body: dict[str, Any] = {"candidate": args.candidate}
    for name in ("baseline", "suite", "policy", "experiment"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    if args.policy_override:
        body["policy_overrides"] = dict(args.policy_override)
    return body


def wait(api: Api, run: dict, *, timeout: float, poll: float, progress: ProgressLine, err: TextIO) -> dict:
    deadline = time.monotonic() + timeout
    try:
        while True:
            progress.show(run, api.queue_hint(run) if run["status"] == "queued" else "")
            if run["status"] in FINISHED:
                return run
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(poll, left))
            run = api.run_get(run["id"], deadline=deadline, err=err)
    finally:
        progress.end()
    raise CliError(
        f"timed out after {timeout:g} s: gate run {run['id']} is still {run['status']} "
        f"({run.get('progress') or 0}%); it goes on at {run['url']} "
        f"(wait again with --attach {run['id']})",
        exit_code=EXIT_TIMEOUT,
    )


def credentials_file() -> Path:
    return Path(os.environ.get("EVALHUB_VAR_DIR") or PROJECT_DIR / "var") / "demo-credentials.txt"


def token_find(server: str, *, err: TextIO) -> str:
    """$EVALHUB_TOKEN; else, for a server on this machine, the demo's CI token from `make run`."""
    token = os.environ.get("EVALHUB_TOKEN", "").strip()
    if token:
        return token
    path = credentials_file()
    if urlsplit(server).hostname in LOCAL_HOSTS and path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("ci token:"):
                print(f"using the ci token in {path} (set EVALHUB_TOKEN for another)", file=err)
                return line.split(":", 1)[1].strip()
    raise CliError(
        "no API token: set EVALHUB_TOKEN (a token of a user with the ci role; for a local server "
        f"`make run` writes one to {path})",
        exit_code=EXIT_AUTH,
    )


def gate(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    api = Api(server=args.server, token=token_find(args.server, err=err))
    info = err if args.json else out  # with --json, stdout carries only the run JSON
    if args.attach is not None:
        run = api.run_get(args.attach, deadline=time.monotonic() + args.timeout, err=err)
    else:
        run = api.run_start(start_body(args))
        print(f"gate run {run['id']} started: {run['url']}", file=info, flush=True)
        if not args.wait:
            if args.json:
                print(json.dumps(run, indent=2), file=out)
            return EXIT_PASS
    run = wait(api, run, timeout=args.timeout, poll=args.poll, progress=ProgressLine(info), err=err)
    if args.report_md:
        api.report_save(run["id"], args.report_md, err=err)
    print(json.dumps(run, indent=2) if args.json else summary_text(run), file=out, flush=True)
    code = exit_code(run)
    if run["status"] == "cancelled":
        print(NO_DECISION_CANCELLED, file=err)
    elif code in NO_DECISION_HINTS:
        print(NO_DECISION_HINTS[code], file=err)
    return code


def cancel(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    """Cancel a queued or running gate run: 0 once the server has cancelled it."""
    api = Api(server=args.server, token=token_find(args.server, err=err))
    run = api.run_cancel(args.run_id, why=args.reason)
    print(f"gate run {run['id']} cancelled: {run['url']}", file=out, flush=True)
    return EXIT_PASS


class Parser(argparse.ArgumentParser):
    """argparse's parser with its own exit code for usage errors (argparse's 2 is a verdict here)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def parser_build() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The whole parser, and the `gate` subcommand's (for its usage errors)."""
    parser = Parser(
        prog="evalhub",
        description="EvalHub from CI. The API token comes from the EVALHUB_TOKEN environment variable "
        "(for a local server, else from var/demo-credentials.txt).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    gate_parser = commands.add_parser(
        "gate",
        help="run the release gate on a candidate",
        description="Start a gate run (or --attach to one) and exit 0 on pass, 1 on fail, 2 on "
        "insufficient data, 3 on a run that errored; 4 to 9 for a timeout and for usage, connection, "
        "authentication, server and missing-dependency errors (docs/cli.md).",
    )
    server_argument_add(gate_parser)
    start = gate_parser.add_argument_group("starting a run")
    start.add_argument("--candidate", metavar="FAMILY:LABEL", help="the version to gate (required)")
    start.add_argument("--baseline", metavar="FAMILY:LABEL", help="default: the candidate's baseline")
    start.add_argument(
        "--suite", metavar="NAME[@VERSION]", help="default: the latest suite named as the family"
    )
    start.add_argument(
        "--policy", metavar="NAME", help="gate policy (default: the family's own policy if any, else default)"
    )
    start.add_argument(
        "--experiment",
        metavar="NAME",
        help="canary experiment whose traffic feeds the follow-up and business layers "
        "(default: the server picks the candidate's latest)",
    )
    start.add_argument(
        "--policy-override",
        metavar="KEY=JSON",
        type=override,
        action="append",
        default=[],
        help="override one policy key, e.g. clean_accuracy_min=0.9 (repeatable)",
    )
    start.add_argument(
        "--wait", action="store_true", help="wait for the verdict (else print the run and exit 0)"
    )
    gate_parser.add_argument(
        "--attach", metavar="RUN_ID", type=int, help="wait for an existing run instead of starting one"
    )
    gate_parser.add_argument("--timeout", type=float, default=3600, metavar="SECONDS", help="default 3600")
    gate_parser.add_argument("--poll", type=float, default=5, metavar="SECONDS", help="default 5")
    gate_parser.add_argument("--report-md", metavar="PATH", help="save the run's Markdown report to PATH")
    gate_parser.add_argument(
        "--json", action="store_true", help="print the final run as JSON on stdout (progress on stderr)"
    )
    cancel_parser = commands.add_parser(
        "cancel",
        help="cancel a queued or running gate run",
        description="Cancel a gate run (its starter or a release manager): a queued run never starts, a "
        "running one stops at the end of the model call in flight. Exits 0 once cancelled.",
    )
    server_argument_add(cancel_parser)
    cancel_parser.add_argument("run_id", metavar="RUN_ID", type=int, help="the gate run to cancel")
    cancel_parser.add_argument("--reason", default="", help="why (kept in the audit log)")
    return parser, gate_parser


def server_argument_add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server",
        default=os.environ.get("EVALHUB_SERVER") or DEFAULT_SERVER,
        help=f"EvalHub base URL (default: $EVALHUB_SERVER, else {DEFAULT_SERVER})",
    )


def missing_dependency_text(exc: ImportError) -> str:
    return (
        f"{sys.executable} cannot import {exc.name or 'a package'} ({exc}): run the `evalhub` command "
        "that `make install` puts in .venv/bin, or install httpx into this Python (`python -m pip install "
        "httpx`)"
    )


def main(argv: list[str] | None = None) -> int:
    if MISSING_DEPENDENCY is not None:
        print(f"error: {missing_dependency_text(MISSING_DEPENDENCY)}", file=sys.stderr)
        return EXIT_MISSING_DEPENDENCY
    parser, gate_parser = parser_build()
    args = parser.parse_args(argv)
    if args.command == "cancel":
        return _command_run(cancel, args)
    if args.attach is not None:
        starting = [
            f"--{name}"
            for name in ("candidate", "baseline", "suite", "policy", "experiment")
            if getattr(args, name) is not None
        ]
        if args.policy_override:
            starting.append("--policy-override")
        if starting:
            gate_parser.error(
                f"--attach waits for an existing run; it cannot be combined with {', '.join(starting)}"
            )
    elif not args.candidate:
        gate_parser.error("--candidate is required (or --attach RUN_ID)")
    if not (0 < args.timeout < math.inf and 0 < args.poll < math.inf):  # also refuses nan
        gate_parser.error("--timeout and --poll must be positive numbers of seconds")
    return _command_run(gate, args)


def _command_run(command: Callable[..., int], args: argparse.Namespace) -> int:
    try:
        return command(args, out=sys.stdout, err=sys.stderr)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(
            "interrupted (a started gate run goes on on the server; --attach RUN_ID waits again)",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
