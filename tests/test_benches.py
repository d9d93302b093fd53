"""Every benchmark still runs: each script is run to its end with tiny sizes (a smoke run, not a
measurement), so a benchmark that no longer runs fails CI. A new script in bench/ needs its row in
SMOKE, or in RUN_ELSEWHERE when a test of its own already runs it (`test_every_bench_has_a_smoke_run`)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # each script starts its stack (torch, gunicorn, workers) in a child process
MODEL_DIR = os.environ.get("EVALHUB_TEST_MODEL_DIR", str(Path.home() / ".cache" / "evalhub" / "test-models"))
PG, REDIS = "postgres", "redis"

# script -> (its tiny arguments, the services it needs)
SMOKE = {
    "ab_false_positives.py": (
        "--runs 20 --power-runs 20 --users 40 --looks 3 --rerun-runs 20 --horizon 30 --reruns 2",
        (),
    ),
    "adversarial_workers.py": ("--workers 1 --samples 4", (PG, REDIS)),
    "adversary.py": ("--smoke --version v3", ()),
    "follow_up_detector.py": ("--pairs 64 --batch 32", ()),
    "gate_clean.py": ("--stack embedded --repeat 1 --versions contract-assistant:v3", ()),
    "hard_label.py": ("--items 2 --budget 20", ()),
    "mcnemar.py": ("--pairs 2000 --repeat 1 --reference-pairs 200", ()),
    "record.py": ("--docs-dir {tmp} bench/mcnemar.py -- --pairs 200 --repeat 1 --reference-pairs 50", ()),
    "review_queue.py": (
        "--sessions 500 --reviewed 50 --repeat 1 --regenerate --database bench_load_smoke_review",
        (PG,),
    ),
    "robustness.py": ("--items 2 --repeats 1 --budget 20 --noise-samples 10 --endpoint --concurrency 2", ()),
    "robustness_gate.py": ("--samples 4", ()),
    "router.py": ("--smoke --database bench_load_smoke_router --telemetry-redis {redis}", (PG, REDIS)),
    "shift.py": ("--turns 2000 --suite 40 --sample 100 --workers 1", ()),
    "stats.py": (
        "--sessions 2000 --repeat 1 --warmup 0 --regenerate --chunk 1000 --database bench_load_smoke_stats",
        (PG,),
    ),
}
# script -> the test module that runs it whole (with small sizes) and checks its table
RUN_ELSEWHERE = {"stream_load.py": "tests/canary/services/test_stream_load.py"}


def test_every_bench_has_a_smoke_run():
    assert sorted([*SMOKE, *RUN_ELSEWHERE]) == sorted(p.name for p in (ROOT / "bench").glob("*.py"))
    for script, module in RUN_ELSEWHERE.items():
        assert f'"bench/{script}"' in (ROOT / module).read_text(), f"{module} does not run bench/{script}"


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_bench_script_runs_with_tiny_sizes(script, tmp_path):
    arguments, needs = SMOKE[script]
    if (PG in needs and not settings.POSTGRES_UP) or (REDIS in needs and not settings.REDIS_UP):
        pytest.skip(f"needs {' and '.join(needs)} on 127.0.0.1")
    argv = arguments.format(tmp=tmp_path, redis=settings.REDIS_URL).split()
    # A bench picks its own settings, as when run by hand (not the test settings pytest exported).
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["EVALHUB_MODEL_DIR"] = MODEL_DIR  # the demo models the test suite trains
    result = subprocess.run(
        [sys.executable, f"bench/{script}", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    assert result.stdout.strip()
