"""EvalHub from CI: start a gate run, wait for it, exit by its verdict.

    EVALHUB_TOKEN=... python -m evalhub.cli gate --server URL --candidate family:label --wait

The server is --server, else $EVALHUB_SERVER, else the local one (http://127.0.0.1:8000). The token is
$EVALHUB_TOKEN, else, for a local server, the CI token `make run` wrote to var/demo-credentials.txt.

Exit codes: 0 pass, 1 fail, 2 anything else (insufficient data, a run that errored, a timeout,
an HTTP, token or connection problem; argparse's own usage errors are 2 as well).

Only the standard library and httpx: CI machines need not install Django or the project.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import httpx

EXIT_PASS, EXIT_FAIL, EXIT_OTHER = 0, 1, 2
FINISHED = ("succeeded", "failed", "error")
TRANSIENT_STATUS = (502, 503, 504)
MAX_BACKOFF_S = 60.0
DEFAULT_SERVER = "http://127.0.0.1:8000"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
# Where `make run` (manage.py demo_setup) keeps the demo's tokens: the project's var/ folder.
PROJECT_DIR = Path(__file__).resolve().parent.parent


class CliError(Exception):
    """A problem that ends the command with exit code 2 and this message on stderr."""


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
            raise CliError(f"cannot reach the server at {self.server}: {type(exc).__name__}: {exc}") from None

    def json_or_fail(self, response: httpx.Response) -> dict:
        if response.status_code >= 400:
            raise CliError(api_error_text(response))
        try:
            return response.json()
        except ValueError:
            raise CliError(f"the server answered {response.status_code} with no JSON body") from None

    def run_start(self, body: dict) -> dict:
        # Not retried: a POST that reached the server may have started a run already.
        return self.json_or_fail(self.send("POST", "/api/v1/gate-runs/", json=body))

    def run_get(self, run_id: int, *, deadline: float, err: TextIO) -> dict:
        """Poll once, retrying connection errors and 502/503/504 with backoff until `deadline`."""
        delay = 1.0
        while True:
            try:
                response = self.client.get(f"/api/v1/gate-runs/{run_id}/")
                if response.status_code not in TRANSIENT_STATUS:
                    return self.json_or_fail(response)
                problem = f"the server answered {response.status_code}"
            except httpx.TransportError as exc:
                problem = f"cannot reach the server at {self.server}: {type(exc).__name__}: {exc}"
            left = deadline - time.monotonic()
            if left <= 0:
                raise CliError(f"{problem}; gave up at the timeout (gate run {run_id} may still be running)")
            wait = min(delay, left)
            print(f"warning: {problem}; retrying in {wait:.0f} s", file=err, flush=True)
            time.sleep(wait)
            delay = min(delay * 2, MAX_BACKOFF_S)

    def queue_hint(self, run: dict) -> str:
        """Why a queued run waits: the runs ahead of it on the workers ("" when that is unknown)."""
        try:
            running = self.client.get("/api/v1/gate-runs/", params={"status": "running", "limit": 50})
            queued = self.client.get("/api/v1/gate-runs/", params={"status": "queued", "limit": 200})
            running.raise_for_status()
            queued.raise_for_status()
            active = running.json()["results"]
            ahead = [r for r in queued.json()["results"] if r["id"] < run["id"]]
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return ""
        if not active and not ahead:
            return "no run ahead of it: waiting for a gpu worker to take it (is one running?)"
        count = len(active) + len(ahead)
        doing = ", ".join(f"#{r['id']} running {r.get('progress') or 0}%" for r in active)
        return f"{count} run{'s' if count > 1 else ''} ahead on the gpu queue" + (
            f": {doing}" if doing else ""
        )

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
    if run["status"] in ("failed", "error"):
        return EXIT_OTHER
    return {"pass": EXIT_PASS, "fail": EXIT_FAIL}.get(run["verdict"], EXIT_OTHER)


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
        f"(wait again with --attach {run['id']})"
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
        f"`make run` writes one to {path})"
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
    return exit_code(run)


def parser_build() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The whole parser, and the `gate` subcommand's (for its usage errors)."""
    parser = argparse.ArgumentParser(
        prog="python -m evalhub.cli",
        description="EvalHub from CI. The API token comes from the EVALHUB_TOKEN environment variable "
        "(for a local server, else from var/demo-credentials.txt).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    gate_parser = commands.add_parser(
        "gate",
        help="run the release gate on a candidate",
        description="Start a gate run (or --attach to one) and exit 0 on pass, 1 on fail, 2 otherwise.",
    )
    gate_parser.add_argument(
        "--server",
        default=os.environ.get("EVALHUB_SERVER") or DEFAULT_SERVER,
        help=f"EvalHub base URL (default: $EVALHUB_SERVER, else {DEFAULT_SERVER})",
    )
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
    return parser, gate_parser


def main(argv: list[str] | None = None) -> int:
    parser, gate_parser = parser_build()
    args = parser.parse_args(argv)
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
    try:
        return gate(args, out=sys.stdout, err=sys.stderr)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_OTHER
    except KeyboardInterrupt:
        print("interrupted (a started gate run goes on on the server)", file=sys.stderr)
        return EXIT_OTHER


if __name__ == "__main__":
    sys.exit(main())
