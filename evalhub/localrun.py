"""`make run`'s processes (`bin/run-local`): the web server on 127.0.0.1:EVALHUB_PORT (8000), a Celery
worker per queue (the cpu one runs beat too) and the demo versions' model servers on
EVALHUB_DEMO_SERVE_PORTS (8101,8102), on whatever DATABASE_URL / CELERY_BROKER_URL say.

It refuses to start, before starting anything, when one of its ports is taken, with one line that
says what holds it. While it runs it watches what it started: a worker or model server that exits
(killed from outside) is reported on the console with its exit code and log file, and the web server
keeps serving (the pages then show that no worker consumes that queue). When the web server exits,
or on Ctrl-C / SIGTERM, everything stops.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

import psutil

from evalhub.devstack import WEB_THREADS, WEB_WORKERS

ROOT = Path(__file__).resolve().parent.parent
WEB = "web server"


@dataclass(frozen=True, kw_only=True)
class Spec:
    name: str
    argv: list[str]
    log: Path | None  # None: the console


def port_holder(*, port: int, host: str = "127.0.0.1") -> str | None:
    """None when `port` can be listened on; else one line saying what holds it."""
    with socket.socket() as sock:
        # As gunicorn binds: a port left in TIME_WAIT by a stopped server is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            return None
        except OSError:
            pass
    with contextlib.suppress(psutil.Error, OSError):
        # Another user's process shows no pid: then only the port is named. Of a server's processes
        # sharing the socket (gunicorn's), the oldest: its master.
        pids = [
            conn.pid
            for conn in psutil.net_connections(kind="inet")
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid
        ]
        if pids:
            holder = min((psutil.Process(pid) for pid in pids), key=lambda process: process.create_time())
            command = " ".join(" ".join(holder.cmdline()).split())
            return f"port {port} is in use by pid {holder.pid} ({command[:160]})"
    return f"port {port} is in use"


def exit_text(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


class Stack:
    """The processes of one `make run`, each in a session of its own (so Ctrl-C on the console reaches
    only this supervisor, which stops them in order) and logging to its own file."""

    def __init__(self, specs: list[Spec], *, env: dict[str, str], say: Callable[[str], None] = print):
        self.specs = specs
        self.env = env
        self.say = say
        self.started: dict[str, subprocess.Popen[bytes]] = {}
        self.running: dict[str, subprocess.Popen[bytes]] = {}  # started and not seen to exit
        self.logs: list[IO[bytes]] = []

    def start(self) -> None:
        for spec in self.specs:
            out: IO[bytes] | None = None
            if spec.log is not None:
                out = open(spec.log, "ab")  # noqa: SIM115 (closed in stop)
                self.logs.append(out)
            self.started[spec.name] = self.running[spec.name] = subprocess.Popen(
                spec.argv,
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT if out else None,
                start_new_session=True,
            )

    def pid(self, name: str) -> int:
        return self.started[name].pid

    def watch(self) -> int | None:
        """Report each process that has exited since the last call, once; the web server's exit code
        when it is the one that exited (then the stack should stop), else None."""
        web_code = None
        for spec in self.specs:
            process = self.running.get(spec.name)
            if process is None or (code := process.poll()) is None:
                continue
            del self.running[spec.name]
            where = f"; log: {spec.log}" if spec.log else ""
            self.say(f"{spec.name} (pid {process.pid}) {exit_text(code)}{where}")
            if spec.name == WEB:
                web_code = code
        return web_code

    def stop(self, timeout: float = 10) -> None:
        for process in self.running.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in self.running.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.running.clear()
        for log in self.logs:
            log.close()


def stack_specs(
    *, python: str, var_dir: Path, port: int, serve_ports: list[int], log_requests: bool
) -> list[Spec]:
    bin_dir = Path(python).parent
    celery = [
        str(bin_dir / "celery"),
        "-q",
        "-A",
        "workers",
        "worker",
        "--concurrency",
        "1",
        "--loglevel",
        "INFO",
    ]
    web_log = ["--log-level", "info", "--access-logfile", "-"] if log_requests else ["--log-level", "warning"]
    servers = var_dir / "model-servers.log"
    return [
        Spec(
            name="gpu worker",
            argv=[*celery, "-Q", "gpu", "--hostname", "gpu@%h"],
            log=var_dir / "worker-gpu.log",
        ),
        Spec(
            name="cpu worker",
            argv=[
                *celery,
                "-Q",
                "cpu",
                "--hostname",
                "cpu@%h",
                "-B",
                "--schedule",
                str(var_dir / "celerybeat-schedule"),
            ],
            log=var_dir / "worker-cpu.log",
        ),
        *(
            Spec(
                name=f"model server {ref}",
                argv=[python, "manage.py", "serve_model", ref, "--port", str(serve_port)],
                log=servers,
            )
            for ref, serve_port in zip(
                ("contract-assistant:v3", "contract-assistant:v4"), serve_ports, strict=False
            )
        ),
        Spec(
            name=WEB,
            argv=[
                str(bin_dir / "gunicorn"),
                "evalhub.wsgi:application",
                "--bind",
                f"127.0.0.1:{port}",
                # A stream holds a thread for its whole answer: see devstack.WEB_THREADS.
                *("--workers", str(WEB_WORKERS), "--threads", str(WEB_THREADS), "--graceful-timeout", "5"),
                *web_log,
            ],
            log=None,
        ),
    ]


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def stack_ports() -> tuple[int, list[int]]:
    """The web server's port and the demo model servers' ports."""
    serve_ports = os.environ.get("EVALHUB_DEMO_SERVE_PORTS", "8101,8102")
    return int(os.environ.get("EVALHUB_PORT", 8000)), [int(p) for p in serve_ports.split(",")]


def ports_taken() -> str | None:
    """The first of `make run`'s ports that another process holds, as one line; None when all are free."""
    port, serve_ports = stack_ports()
    return next(filter(None, (port_holder(port=p) for p in (port, *serve_ports))), None)


def main(argv: list[str]) -> int:
    """Start and watch the stack; with `--check-ports` only say whether its ports are free (`make run`
    asks before it migrates and installs the demo, so a second one touches nothing)."""
    if taken := ports_taken():
        print(f"make run: not starting: {taken}", file=sys.stderr)
        return 1
    if argv == ["--check-ports"]:
        return 0
    python = os.environ.get("PYTHON") or sys.executable
    var_dir = Path(os.environ.get("EVALHUB_VAR_DIR", "var"))
    port, serve_ports = stack_ports()
    var_dir.mkdir(parents=True, exist_ok=True)
    log_requests = os.environ.get("EVALHUB_LOG_REQUESTS", "0").lower() in ("1", "true", "yes", "on")
    specs = stack_specs(
        python=python, var_dir=var_dir, port=port, serve_ports=serve_ports, log_requests=log_requests
    )
    stack = Stack(specs, env=dict(os.environ), say=lambda line: print(line, file=sys.stderr, flush=True))

    stopping: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    stack.start()
    try:
        return _serve(stack, port=port, var_dir=var_dir, stopping=stopping)
    finally:
        stack.stop()


def _serve(stack: Stack, *, port: int, var_dir: Path, stopping: list[int]) -> int:
    # No deadline: a loaded machine starts gunicorn slowly, and its exit is noticed here.
    while not _answers(port):
        if (code := stack.watch()) is not None:
            return code or 1
        if stopping:
            return 1
        time.sleep(0.5)
    print(
        f"EvalHub on http://127.0.0.1:{port}/ (sign in: /login/, API docs: /api/docs/); "
        f"workers: gpu pid {stack.pid('gpu worker')}, cpu pid {stack.pid('cpu worker')}"
    )
    print(
        f"logs: {var_dir}/worker-gpu.log, {var_dir}/worker-cpu.log, {var_dir}/model-servers.log "
        "(EVALHUB_LOG_REQUESTS=1: a line per request and per task)"
    )
    credentials = var_dir / "demo-credentials.txt"
    if credentials.exists():
        print(f"credentials ({credentials}):")
        for line in credentials.read_text().splitlines():
            print(f"  {line}")
    sys.stdout.flush()
    while not stopping:
        if (code := stack.watch()) is not None:
            return code
        time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
