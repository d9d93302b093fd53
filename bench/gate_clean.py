"""Clean-accuracy gate cost: the whole pipeline vs the same work done in this process.

For demo V3 and V4 on the demo suite, in one run, interleaved (pipeline, direct, pipeline, ...):
  * pipeline: POST /api/v1/gate-runs/ -> broker -> Celery worker -> DB, until the run's finished_at
    (real gunicorn and worker processes; also printed: when a client polling every 0.25 s saw it);
  * direct: the same gate run started and executed in this process (`gate_run_start`, then
    `gate_run_execute`: the worker's code, on the same database: backend, batches, scoring, rows),
    with no HTTP, broker or polling.
Both are warmed by one run first (the worker's and this process's model caches). Prints the median
seconds of --repeat runs each and the time ratio pipeline / direct (goal <= 1.3).

    python bench/gate_clean.py [--stack services|embedded] [--repeat 3]

`services` (default when they are up) uses PostgreSQL and Redis on 127.0.0.1 with a scratch
database; `embedded` uses SQLite and the filesystem broker in a scratch folder.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings.local")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from evalhub.devstack import demo_client, gate_run_wait, manage, port_free, web_start, worker_start  # noqa: E402


def reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


OVERRIDES = {
    "run_baseline": False,
    "required_layers": ["clean_accuracy"],
    "output_cache": False,  # every run asks the model
}


def pipeline_seconds(*, client: httpx.Client, ref: str, watch) -> tuple[float, float]:
    """(seconds from the POST to the run's `finished_at`, seconds until a poll every 0.25 s saw it). The
    first is the pipeline's own time (a faster poll would steal the worker's CPU on a small machine);
    the second is what a polling client waits."""
    from datetime import datetime

    posted = time.time()
    started = time.perf_counter()
    response = client.post("/api/v1/gate-runs/", json={"candidate": ref, "policy_overrides": OVERRIDES})
    response.raise_for_status()
    run = gate_run_wait(client=client, run_id=response.json()["id"], timeout=900, watch=watch)
    seen = time.perf_counter() - started
    if run["status"] != "succeeded":
        raise RuntimeError(f"gate run failed: {run}")
    return datetime.fromisoformat(run["finished_at"]).timestamp() - posted, seen


def direct_seconds(*, ref: str) -> float:
    from evalhub.demo import demo_suite_get
    from gate.models import GateRun
    from gate.services.gate_runs import gate_run_execute, gate_run_start
    from registry.actors import SYSTEM
    from registry.selectors.versions import model_version_get

    started = time.perf_counter()
    run = gate_run_start(
        candidate=model_version_get(ref=ref), suite=demo_suite_get(), actor=SYSTEM, policy_overrides=OVERRIDES
    )
    run = gate_run_execute(gate_run_id=run.pk, worker="bench-direct")
    if run is None or run.status != GateRun.Status.SUCCEEDED:
        raise RuntimeError(f"direct gate run failed: {run}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    services_up = reachable(5432) and reachable(6379)
    parser.add_argument(
        "--stack", choices=["services", "embedded"], default="services" if services_up else "embedded"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--versions",
        default="contract-assistant:v3,contract-assistant:v4",
        help="comma-separated (the test suite's smoke run: v3 alone, a few seconds a run)",
    )
    parser.add_argument(
        "--model-dir", type=Path, default=Path(os.environ.get("EVALHUB_MODEL_DIR", ROOT / "var" / "models"))
    )
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="evalhub-bench-"))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(EVALHUB_VAR_DIR=str(scratch), EVALHUB_MODEL_DIR=str(args.model_dir), PYTHONUNBUFFERED="1")
    database = None
    if args.stack == "services":
        import psycopg

        database = f"evalhub_bench_{os.getpid()}"
        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')
        env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{database}"
        env["CELERY_BROKER_URL"] = "redis://127.0.0.1:6379/14"
    print(
        f"stack: {args.stack}; scratch {scratch}; setting up the demo (trains models if missing) ...",
        flush=True,
    )
    manage("migrate", "--noinput", env=env)
    manage("demo_setup", env=env, timeout=1800)
    port = port_free()
    worker = worker_start(env=env, log_dir=scratch)
    web = web_start(env=env, log_dir=scratch, port=port)
    # The direct path runs here, on the same database; its enqueue goes to an in-memory broker
    # nobody reads (the stack's worker must not take the direct runs).
    os.environ.update({**env, "CELERY_BROKER_URL": "memory://localhost/"})
    import django

    django.setup()
    try:
        client = demo_client(port=port, var_dir=scratch)
        n = client.get("/api/v1/eval-suites/contract-assistant/items/?limit=1").json()["count"]
        print(f"demo suite: {n} items; median of {args.repeat} runs each, interleaved, after one warm-up\n")
        header = ("version", "pipeline s", "direct s", "pipeline/direct", "seen by polling s")
        print("{:<26}{:>12}{:>10}{:>17}{:>19}".format(*header))
        for ref in args.versions.split(","):
            times: dict[str, list[float]] = {"pipeline": [], "direct": [], "seen": []}
            for index in range(args.repeat + 1):
                pipeline, seen = pipeline_seconds(client=client, ref=ref, watch=(worker, web))
                direct = direct_seconds(ref=ref)
                if index:  # the first pair warms the model caches
                    times["pipeline"].append(pipeline)
                    times["direct"].append(direct)
                    times["seen"].append(seen)
            p, d, seen = (statistics.median(times[k]) for k in ("pipeline", "direct", "seen"))
            print(f"{ref:<26}{p:>12.2f}{d:>10.2f}{p / d:>17.2f}{seen:>19.2f}", flush=True)
            for key, values in times.items():
                print(f"  {key} runs: {' '.join(f'{v:.2f}' for v in values)}")
        print(f"\n{n} items a run. pipeline: from the POST to the run's finished_at (API -> broker -> worker")
        print("-> DB); direct: gate_run_start + gate_run_execute in this process; seen by polling: until a")
        print("client polling every 0.25 s saw the run finished. Goal pipeline/direct <= 1.3.")
    finally:
        web.stop()
        worker.stop()
        if database:
            import psycopg

            with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


if __name__ == "__main__":
    main()
