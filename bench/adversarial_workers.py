"""Layer 1's attack spread over gpu workers: the same gate run with one gpu worker and with two.

For each worker count in --workers, in one run: a scratch PostgreSQL database, the demo, N Celery
workers on the gpu queue and gunicorn; then the family's layer 1 (`textfooler-v2`, adaptive, V4 with
V3 as baseline) on --samples items through the API, timed from the POST to the finished run. Prints
each version's attack time and whether the run's worker found its set already attacked (by the
other worker), and the time ratio one worker / two. Needs PostgreSQL and Redis on 127.0.0.1 (the
workers share them); Redis db 11, flushed first.

    python bench/adversarial_workers.py [--workers 1,2] [--samples 160]

Models come from EVALHUB_MODEL_DIR (default var/models; `make run` trains them there).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evalhub.devstack import demo_client, gate_run_wait, manage, port_free, web_start, worker_start  # noqa: E402

BROKER = "redis://127.0.0.1:6379/11"


def run_with(*, workers: int, samples: int, model_dir: str) -> float:
    import psycopg
    import redis

    redis.Redis.from_url(BROKER).flushdb()
    scratch = Path(tempfile.mkdtemp(prefix="evalhub-bench-workers-"))
    database = f"evalhub_bench_workers_{os.getpid()}_{workers}"
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="evalhub.settings.local",
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{database}",
        CELERY_BROKER_URL=BROKER,
        EVALHUB_VAR_DIR=str(scratch),
        EVALHUB_MODEL_DIR=model_dir,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TQDM_DISABLE="1",
        PYTHONUNBUFFERED="1",
    )
    processes = []
    try:
        manage("migrate", "--noinput", env=env)
        manage("demo_setup", env=env, timeout=1800)
        processes = [
            worker_start(env=env, log_dir=scratch, queues="gpu", name=f"gpu{k}") for k in range(workers)
        ]
        port = port_free()
        processes.append(web_start(env=env, log_dir=scratch, port=port))
        time.sleep(5)  # the workers connect to the broker
        client = demo_client(port=port, var_dir=scratch)
        overrides = {
            "required_layers": ["robustness"],
            "robustness_samples": samples,
            "robustness_min_samples": samples,
        }
        started = time.perf_counter()
        response = client.post(
            "/api/v1/gate-runs/", json={"candidate": "contract-assistant:v4", "policy_overrides": overrides}
        )
        response.raise_for_status()
        run = gate_run_wait(client=client, run_id=response.json()["id"], timeout=3600, watch=tuple(processes))
        seconds = time.perf_counter() - started
        attacks = run["layers"][0]["details"]["adversarial"]
        cells = "; ".join(
            f"{ref} {r['seconds']:.1f} s" + (" (found attacked)" if r["cached"] else "")
            for ref, r in attacks.items()
        )
        print(f"{workers} gpu worker(s): run {run['status']} in {seconds:.1f} s; {cells}", flush=True)
        return seconds
    finally:
        for process in processes:
            process.stop()
        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--samples", type=int, default=160)
    parser.add_argument(
        "--model-dir", default=os.environ.get("EVALHUB_MODEL_DIR", str(ROOT / "var" / "models"))
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    seconds = {n: run_with(workers=n, samples=args.samples, model_dir=args.model_dir) for n in counts}
    if 1 in seconds and len(seconds) > 1:
        for n in (n for n in counts if n != 1):
            print(f"one worker / {n} workers: {seconds[1] / seconds[n]:.2f}")
    print(f"({os.cpu_count()} CPU cores; workers on one machine share them)")


if __name__ == "__main__":
    main()
