"""Start EvalHub's real processes (gunicorn, Celery worker) for end-to-end tests and benchmarks, or
set this process up on a scratch demo database.

Every process gets its own log file and its own process group, so that stopping it (or killing
it with SIGKILL, as the crash tests do) takes its children along.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# gunicorn's gthread workers x threads, as bin/run-local and docker-compose.yml run it: a streamed
# answer holds its thread until the last chunk, so 2 x 32 holds 64 streams at once on two cores
# (bench/stream_load.py measures it); a request beyond that waits for a thread to free.
WEB_WORKERS, WEB_THREADS = 2, 32


def port_free() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Process:
    def __init__(self, *, name: str, argv: list[str], env: dict, log_dir: Path):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self.log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop)
        self.popen = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole group: no chance to clean up, as when a machine dies."""
        self._signal(signal.SIGKILL)
        self.popen.wait(timeout=10)

    def stop(self, timeout: float = 15) -> None:
        if self.alive():
            self._signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()

    def tail(self, chars: int = 4000) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-chars:]

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)


class RedisServer:
    """A redis-server of one's own on `port` (a bench's, a test's: never the shared one), append-only
    as in docker-compose.yml, so that it can be stopped and started again with its data."""

    def __init__(self, *, port: int, scratch: Path):
        self.port, self.dir = port, scratch / "redis"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.process: Process | None = None

    def start(self) -> None:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir)]
        argv += ["--appendonly", "yes", "--save", ""]
        self.process = Process(name="redis", argv=argv, env=dict(os.environ), log_dir=self.dir)
        import redis

        deadline = time.monotonic() + 20
        while True:
            try:
                redis.Redis(port=self.port).ping()
                return
            except redis.RedisError:
                if time.monotonic() > deadline or not self.process.alive():
                    raise RuntimeError(f"redis-server did not start:\n{self.process.tail()}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()  # SIGTERM: redis writes its append-only file and exits


def worker_start(
    *, env: dict, log_dir: Path, queues: str = "gpu,cpu", beat: bool = False, name: str = "worker"
) -> Process:
    argv = [
        str(BIN / "celery"),
        "-A",
        "workers",
        "worker",
        "-Q",
        queues,
        "--concurrency",
        "1",
        "--loglevel",
        "INFO",
        "--hostname",
        f"{name}@%h",
        "--without-gossip",
        "--without-mingle",
    ]
    if beat:
        argv += ["-B", "--schedule", str(log_dir / f"{name}-beat-schedule")]
    return Process(name=name, argv=argv, env=env, log_dir=log_dir)


def web_start(
    *, env: dict, log_dir: Path, port: int, workers: int = WEB_WORKERS, threads: int = WEB_THREADS
) -> Process:
    argv = [
        str(BIN / "gunicorn"),
        "evalhub.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--threads",
        str(threads),
    ]
    process = Process(name="web", argv=argv, env=env, log_dir=log_dir)
    url_wait(f"http://127.0.0.1:{port}/api/schema/", process=process)
    return process


def url_wait(url: str, *, process: Process, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process.alive():
            raise RuntimeError(f"{process.name} exited:\n{process.tail()}")
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer in {timeout} s:\n{process.tail()}")


def manage(*args: str, env: dict, timeout: float = 600) -> str:
    """Run `manage.py <args>` in a child process; return its output or raise with it."""
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"manage.py {' '.join(args)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
        )
    return result.stdout


def demo_token(*, var_dir: Path, role: str = "ci") -> str:
    """A token that `demo_setup` wrote for the demo: the CI one, or the chat app's (`role="app"`)."""
    for line in (var_dir / "demo-credentials.txt").read_text().splitlines():
        if line.startswith(f"{role} token:"):
            return line.split(":", 1)[1].strip()
    raise RuntimeError(f"no {role} token in demo-credentials.txt")


def demo_client(*, port: int, var_dir: Path) -> httpx.Client:
    """An HTTP client for the server on `port`, authenticated with the demo's CI token."""
    return httpx.Client(
        base_url=f"http://127.0.0.1:{port}",
        headers={"Authorization": f"Token {demo_token(var_dir=var_dir)}"},
        timeout=60,
    )


def gate_run_wait(
    *, client: httpx.Client, run_id: int, timeout: float = 600, until=None, watch: tuple[Process, ...] = ()
) -> dict:
    """Poll a gate run until it is finished (or `until(body)` holds); fail at once if a
    watched process has died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in watch:
            if not process.alive():
                raise RuntimeError(f"{process.name} exited while waiting for run {run_id}:\n{process.tail()}")
        body = client.get(f"/api/v1/gate-runs/{run_id}/").raise_for_status().json()
        if (until or (lambda b: b["status"] in ("succeeded", "failed", "error")))(body):
            return body
        time.sleep(0.25)
    raise TimeoutError(f"gate run {run_id} not done in {timeout} s: {body}")


def demo_in_process(*, model_dir: str, prefix: str) -> Path:
    """Set Django up in this process on a scratch SQLite database and install the demo (its models
    from `model_dir`, trained there when missing), for benchmarks that call the services directly.
    Returns the scratch folder."""
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ.update(
        DJANGO_SETTINGS_MODULE="evalhub.settings.local",
        EVALHUB_VAR_DIR=str(scratch),
        EVALHUB_MODEL_DIR=model_dir,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    import django

    django.setup()
    from django.core.management import call_command

    from evalhub.demo import demo_install

    call_command("migrate", verbosity=0)
    demo_install(log=lambda *a: None)
    return scratch
