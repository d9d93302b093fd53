"""`make run`'s start script (bin/run-local → evalhub.localrun): it refuses a taken port before starting
anything, and it reports a process it started that dies while the others keep running."""

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from evalhub.localrun import WEB, Spec, Stack, port_holder

ROOT = Path(__file__).resolve().parents[2]


def listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_a_free_port_has_no_holder():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert port_holder(port=port) is None


def test_a_taken_port_names_the_process_holding_it():
    with listening() as sock:
        port = sock.getsockname()[1]
        holder = port_holder(port=port)
    assert holder is not None and holder.startswith(f"port {port} is in use by pid {os.getpid()} (")
    assert "pytest" in holder  # this process's command line


def run_local(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bin/run-local", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable, "EVALHUB_VAR_DIR": str(tmp_path / "var"), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_run_local_refuses_a_taken_web_port_with_one_line(tmp_path):
    with listening() as sock:
        port = sock.getsockname()[1]
        result = run_local(tmp_path, EVALHUB_PORT=str(port), EVALHUB_DEMO_SERVE_PORTS="0,0")
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"make run: not starting: port {port} is in use by pid {os.getpid()} (")
    assert not (tmp_path / "var").exists()  # nothing was started


def test_the_port_check_alone_says_nothing_when_the_ports_are_free(tmp_path):
    # `make run` checks first, before it migrates and installs the demo.
    result = run_local(tmp_path, "--check-ports", EVALHUB_PORT="0", EVALHUB_DEMO_SERVE_PORTS="0,0")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert not (tmp_path / "var").exists()


def test_run_local_refuses_a_taken_model_server_port(tmp_path):
    with socket.socket() as free, listening() as sock:
        free.bind(("127.0.0.1", 0))
        web, taken = free.getsockname()[1], sock.getsockname()[1]
        free.close()
        result = run_local(tmp_path, EVALHUB_PORT=str(web), EVALHUB_DEMO_SERVE_PORTS=f"0,{taken}")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert f"port {taken} is in use" in result.stderr
    assert "EvalHub on" not in result.stdout


def sleeper(name: str, log: Path | None) -> Spec:
    return Spec(name=name, argv=[sys.executable, "-c", "import time; time.sleep(60)"], log=log)


def test_a_worker_killed_from_outside_is_reported_once_and_the_rest_keeps_running(tmp_path):
    said: list[str] = []
    stack = Stack(
        [sleeper("gpu worker", tmp_path / "worker-gpu.log"), sleeper(WEB, None)],
        env=dict(os.environ),
        say=said.append,
    )
    stack.start()
    try:
        assert stack.watch() is None and said == []
        gpu = stack.pid("gpu worker")
        os.kill(gpu, signal.SIGKILL)
        stack.started["gpu worker"].wait(timeout=10)
        assert stack.watch() is None  # the web server keeps serving
        assert said == [f"gpu worker (pid {gpu}) was killed by SIGKILL; log: {tmp_path / 'worker-gpu.log'}"]
        assert stack.watch() is None and len(said) == 1
        assert list(stack.running) == [WEB]
    finally:
        stack.stop()
    assert stack.running == {}


def test_the_web_server_exiting_is_reported_with_its_code(tmp_path):
    said: list[str] = []
    web = Spec(name=WEB, argv=[sys.executable, "-c", "raise SystemExit(3)"], log=None)
    stack = Stack(
        [sleeper("cpu worker", tmp_path / "worker-cpu.log"), web], env=dict(os.environ), say=said.append
    )
    stack.start()
    try:
        stack.started[WEB].wait(timeout=30)
        assert stack.watch() == 3
        assert said == [f"web server (pid {stack.pid(WEB)}) exited with code 3"]
    finally:
        stack.stop()
