"""`make run`'s stack (bin/run-local) as a user starts it: the gate's model work has a worker of its
own, so the canary's guardrail analysis (the automatic rollback) keeps its schedule while a gate run
holds the gpu queue."""

import sys
import time
from datetime import UTC, datetime

import pytest

from evalhub.devstack import Process, demo_client, gate_run_wait, manage, port_free, url_wait

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ANALYSIS_SECONDS = 2
WINDOW_SECONDS = 30


def test_the_guardrail_analysis_runs_on_time_during_a_gate_run(stack_env, tmp_path):
    port, v3_port, v4_port = port_free(), port_free(), port_free()
    env, var_dir = stack_env(
        embedded=True,
        EVALHUB_PORT=port,
        EVALHUB_DEMO_SERVE_PORTS=f"{v3_port},{v4_port}",
        EVALHUB_CANARY_ANALYSIS_SECONDS=ANALYSIS_SECONDS,
    )
    manage("migrate", "--noinput", env=env)
    manage("demo_setup", env=env)
    stack = Process(
        name="run-local",
        argv=["bin/run-local"],
        env={**env, "PYTHON": sys.executable},
        log_dir=tmp_path,
    )
    try:
        url_wait(f"http://127.0.0.1:{port}/api/schema/", process=stack, timeout=120)
        client = demo_client(port=port, var_dir=var_dir)
        started = client.post("/api/v1/gate-runs/", json={"candidate": "contract-assistant:v4"})
        assert started.status_code == 202, started.text
        run_id = started.json()["id"]
        gate_run_wait(client=client, run_id=run_id, until=lambda b: b["status"] == "running", watch=(stack,))
        began = datetime.now(UTC)
        time.sleep(WINDOW_SECONDS)
        ended = datetime.now(UTC)
        # The demo's gate run takes minutes on a CPU: it held the gpu worker the whole window.
        assert client.get(f"/api/v1/gate-runs/{run_id}/").json()["status"] == "running"

        experiment = client.get("/api/v1/canary/experiments/").raise_for_status().json()[0]
        analyses = client.get(f"/api/v1/canary/experiments/{experiment['name']}/analyses/").json()
        during = sorted(
            t for t in (datetime.fromisoformat(a["created_at"]) for a in analyses) if began <= t <= ended
        )
        gaps = [(b - a).total_seconds() for a, b in zip([began, *during], [*during, ended], strict=True)]
        # Beat fires every 2 s and the cpu worker answers within a few seconds even on a busy machine.
        # With one worker for both queues, the first analysis would wait for the end of the gate run.
        assert len(during) >= WINDOW_SECONDS / ANALYSIS_SECONDS / 3, (gaps, stack.tail())
        assert max(gaps) < 5 * ANALYSIS_SECONDS, (gaps, stack.tail())
    finally:
        stack.stop()
