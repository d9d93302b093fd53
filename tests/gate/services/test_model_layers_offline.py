"""Layer 1, attack mode included, runs with the network blocked: no hub, no S3, no NLTK downloader."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow  # textattack and the models load in a child process

SCRIPT = r"""
import socket

attempts = []
real_connect = socket.socket.connect


def guarded(self, address):
    local = isinstance(address, tuple) and address[0] in ("127.0.0.1", "::1", "localhost")
    if self.family == socket.AF_UNIX or local:
        return real_connect(self, address)
    attempts.append(address)
    raise OSError(f"network blocked: {address}")


socket.socket.connect = guarded

import json, sys
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from engines.demo.dataset import demo_dataset_build
from gate.services.gate_runs import gate_run_execute, gate_run_start
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_register
from registry.actors import SYSTEM

items = demo_dataset_build(seed=0).eval[::8]
records = [{"id": i.id, "input": i.input, "label": i.label, "language": i.language} for i in items]
suite, _ = eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)
version = model_version_register(family="fam", label="v1", backend_kind="builtin",
                                 backend_config={"path": sys.argv[1]}, actor=SYSTEM)
overrides = {"required_layers": ["robustness"], "robustness_samples": 120, "robustness_min_samples": 100,
             "attack_recipe": "deepwordbug", "attack_items": 8}
run = gate_run_start(candidate=version, suite=suite, actor=SYSTEM, policy_overrides=overrides)
run = gate_run_execute(gate_run_id=run.pk, worker="offline")
layer = run.layers.get(layer="robustness")
attacked = layer.details["attack"]["versions"][version.ref]["items_sampled"]
print(json.dumps({"status": run.status, "n": layer.details["candidate"]["n"], "attempts": attempts,
                  "textattack": "textattack" in sys.modules, "attacked": attacked}))
"""


def test_robustness_layer_runs_with_the_network_blocked(small_bow, tmp_path):
    env = {
        **{
            k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "NLTK_DATA")
        },
        "DJANGO_SETTINGS_MODULE": "evalhub.settings.local",
        "EVALHUB_VAR_DIR": str(tmp_path),
        "EVALHUB_MODEL_DIR": str(small_bow.parent),
        "HOME": str(tmp_path),  # no ~/nltk_data, no hub cache
        "HF_HUB_OFFLINE": "1",
    }
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(small_bow)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"status": "succeeded", "n": 120, "attempts": [], "textattack": True, "attacked": 8}
