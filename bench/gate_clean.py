"""Clean-accuracy gate throughput: the whole pipeline vs bare batched model calls.

For demo V3 and V4 on the demo suite, in one run:
  * pipeline: POST /api/v1/gate-runs/ -> broker -> Celery worker -> DB -> poll until done
    (real gunicorn and worker processes; the worker's model cache is warmed by one run first);
  * direct: the same backend called in-process on the same items in the same batches.
Prints items/s for each (median of --repeat runs) and the ratio pipeline / direct.

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


def direct_items_per_second(
    *, version: dict, items: list[str], batch_size: int, model_dir: Path, repeat: int
):
    from engines.backends import backend_build

    config = {**version["backend_config"], "path": str(model_dir / version["backend_config"]["path"])}
    backend = backend_build(kind=version["backend_kind"], config=config)
    backend.predict(items[:batch_size])  # warm-up
    rates = []
    for _ in range(repeat):
        started = time.perf_counter()
        for start in range(0, len(items), batch_size):
            backend.predict(items[start : start + batch_size])
        rates.append(len(items) / (time.perf_counter() - started))
    return statistics.median(rates)


def pipeline_items_per_second(*, client: httpx.Client, ref: str, batch_size: int, n: int, repeat: int, watch):
    overrides = {
        "run_baseline": False,
        "batch_size": batch_size,
        "required_layers": ["clean_accuracy"],
        "output_cache": False,  # every run asks the model
    }
    rates, worker_rates = [], []
    for index in range(repeat + 1):  # the first run warms the worker's model cache
        started = time.perf_counter()
        response = client.post("/api/v1/gate-runs/", json={"candidate": ref, "policy_overrides": overrides})
        response.raise_for_status()
        run = gate_run_wait(client=client, run_id=response.json()["id"], timeout=900, watch=watch)
        elapsed = time.perf_counter() - started
        if run["status"] != "succeeded":
            raise RuntimeError(f"gate run failed: {run}")
        if index:
            rates.append(n / elapsed)
            worker_rates.append(run["layers"][0]["details"]["candidate"]["items_per_second"])
    return statistics.median(rates), statistics.median(worker_rates)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    services_up = reachable(5432) and reachable(6379)
    parser.add_argument(
        "--stack", choices=["services", "embedded"], default="services" if services_up else "embedded"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
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
    try:
        client = demo_client(port=port, var_dir=scratch)
        items = client.get("/api/v1/eval-suites/contract-assistant/items/?limit=100000").json()["results"]
        inputs = [item["input"] for item in items]
        print(f"demo suite: {len(items)} items; batch size {args.batch_size}; median of {args.repeat} runs\n")
        header = ("version", "direct items/s", "pipeline items/s", "worker items/s", "pipeline/direct")
        print("{:<26}{:>16}{:>18}{:>16}{:>17}".format(*header))
        for ref in ("contract-assistant:v3", "contract-assistant:v4"):
            version = client.get(f"/api/v1/model-versions/{ref}/").json()
            direct = direct_items_per_second(
                version=version,
                items=inputs,
                batch_size=args.batch_size,
                model_dir=args.model_dir,
                repeat=args.repeat,
            )
            pipeline, in_worker = pipeline_items_per_second(
                client=client,
                ref=ref,
                batch_size=args.batch_size,
                n=len(items),
                repeat=args.repeat,
                watch=(worker, web),
            )
            print(
                f"{ref:<26}{direct:>16.1f}{pipeline:>18.1f}{in_worker:>16.1f}{pipeline / direct:>17.2f}",
                flush=True,
            )
        print("\npipeline: wall time from POST to a finished run seen by polling (every 0.25 s),")
        print("including queueing and DB writes;")
        print(
            "worker: inference time measured inside the worker; direct: the backend called in this process."
        )
    finally:
        web.stop()
        worker.stop()
        if database:
            import psycopg

            with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


if __name__ == "__main__":
    main()
