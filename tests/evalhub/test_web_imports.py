"""The web process must never import the model stack (slow, memory-hungry, GPU-bound)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ["torch", "transformers", "textattack", "bert_score", "flair", "sentence_transformers", "scipy"]

SCRIPT = r"""
import json, sys
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import api_token_create, user_role_grant
from evalhub.wsgi import application  # noqa: F401  (what gunicorn loads)
import workers  # the Celery app, as the web process uses it to enqueue
from registry.actors import SYSTEM

user = get_user_model().objects.create_superuser("root", password="pw")
_, key = api_token_create(user=user)
eval_suite_import(name="fam", items=suite_items_parse(records=[{"input": "q", "label": "a"}]), actor=SYSTEM)
client = Client(HTTP_AUTHORIZATION=f"Token {key}")
statuses = [
    client.post("/api/v1/model-versions/", {"family": "fam", "label": "v1", "backend_kind": "hf",
                "backend_config": {"path": "placeholder"}}, content_type="application/json").status_code,
    client.post("/api/v1/gate-runs/", {"candidate": "fam:v1"}, content_type="application/json").status_code,
    client.get("/api/v1/gate-runs/1/").status_code,
    client.get("/api/schema/").status_code,
    client.post("/api/v1/model-versions/", {"family": "fam", "label": "v2", "backend_kind": "hf",
                "backend_config": {"path": "placeholder"}}, content_type="application/json").status_code,
    client.post("/api/v1/canary/experiments/", {"name": "exp", "baseline": "fam:v1", "candidate": "fam:v2"},
                content_type="application/json").status_code,
    client.post("/api/v1/canary/experiments/exp/start", {}, content_type="application/json").status_code,
    client.post("/api/v1/canary/exp/assign", {"user_id": "u1"}, content_type="application/json").status_code,
    client.post("/api/v1/events", {"events": [{"type": "outcome", "event_id": "e1", "experiment": "exp",
                "unit_id": "c1", "arm": "baseline", "metric": "hours", "value": 1.0,
                "timestamp": timezone.now().isoformat()}]}, content_type="application/json").status_code,
    client.get("/api/v1/canary/experiments/exp/").status_code,
    client.get("/api/v1/gate-runs/1/report/").status_code,
    client.get("/api/v1/gate-runs/1/report/?format=md").status_code,
    client.get("/api/v1/decisions/").status_code,
]
client.force_login(user)
statuses += [client.get("/").status_code, client.get("/gate-runs/1/").status_code,
             client.get("/admin/evalhub/modelversion/").status_code,
             client.get("/admin/canary/experiment/").status_code, client.get("/canary/").status_code]
print(json.dumps({"statuses": statuses, "heavy": [m for m in HEAVY if m in sys.modules]}))
"""


def test_web_process_never_imports_the_model_stack(tmp_path):
    (tmp_path / "models" / "placeholder").mkdir(parents=True)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "evalhub.settings.test",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'web.sqlite3'}",
        "CELERY_BROKER_URL": "memory://",
        "EVALHUB_MODEL_DIR": str(tmp_path / "models"),
    }
    script = f"HEAVY = {HEAVY!r}\n{SCRIPT}"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    # The A/B dashboard of one experiment (/canary/<name>/) computes intervals with scipy: it loads
    # scipy on first view, as the gate layers do in workers; the pages and APIs above do not.
    assert report["statuses"] == [201, 202, 200, 200, 201, 201, 200, 200, 201, 200] + [200] * 3 + [200] * 5
    assert report["heavy"] == []
