import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FERNET_KEY = "x" * 43 + "="  # 32 bytes in url-safe base64: a well-formed Fernet key


def settings_of(module: str, script: str | None = None, **env) -> subprocess.CompletedProcess:
    script = script or (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.DATABASES['default']['ENGINE'], s.DATABASES['default']['NAME'], "
        "s.CELERY_BROKER_URL, s.CELERY_BROKER_TRANSPORT_OPTIONS, s.DEBUG, s.ALLOWED_HOSTS]))"
    )
    own = ("DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY", "EVALHUB_SECRETS_KEY")
    clean = {k: v for k, v in os.environ.items() if k not in own and not k.startswith("EVALHUB_OUTBOUND_")}
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": module, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_embedded_defaults_need_no_server(tmp_path):
    import json

    result = settings_of("evalhub.settings.local", EVALHUB_VAR_DIR=str(tmp_path))
    engine, name, broker, options, debug, _ = json.loads(result.stdout)
    assert engine == "django.db.backends.sqlite3" and name == str(tmp_path / "evalhub.sqlite3")
    assert broker == "filesystem://"
    assert options["data_folder_in"] == options["data_folder_out"] == str(tmp_path / "broker" / "queue")
    assert debug is False  # `make run` never shows a traceback
    debug = json.loads(
        settings_of("evalhub.settings.local", EVALHUB_VAR_DIR=str(tmp_path), DEBUG="1").stdout
    )[4]
    assert debug is True


def test_servers_from_the_environment():
    import json

    result = settings_of(
        "evalhub.settings.local",
        DATABASE_URL="postgres://u@db.example:5433/evalhub",
        CELERY_BROKER_URL="redis://cache:6379/2",
        DEBUG="0",
        ALLOWED_HOSTS="a.example, b.example",
    )
    engine, name, broker, options, debug, hosts = json.loads(result.stdout)
    assert (engine, name, broker) == ("django.db.backends.postgresql", "evalhub", "redis://cache:6379/2")
    assert "visibility_timeout" in options
    assert debug is False and hosts == ["a.example", "b.example"]


def test_production_refuses_to_start_without_secret_key():
    result = settings_of("evalhub.settings.production", EVALHUB_SECRETS_KEY=FERNET_KEY)
    assert result.returncode != 0 and "SECRET_KEY must be set" in result.stderr
    assert (
        settings_of(
            "evalhub.settings.production", SECRET_KEY="s" * 50, EVALHUB_SECRETS_KEY=FERNET_KEY
        ).returncode
        == 0
    )


@pytest.mark.parametrize("key", [None, "not-a-fernet-key"])
def test_production_refuses_to_start_without_a_secrets_key(key):
    env = {"SECRET_KEY": "s" * 50, **({"EVALHUB_SECRETS_KEY": key} if key else {})}
    result = settings_of("evalhub.settings.production", **env)
    assert result.returncode != 0 and "EVALHUB_SECRETS_KEY" in result.stderr


def test_production_refuses_unsigned_webhooks():
    keys = {"SECRET_KEY": "s" * 50, "EVALHUB_SECRETS_KEY": FERNET_KEY}
    unsigned = settings_of("evalhub.settings.production", **keys, EVALHUB_WEBHOOK_URL="http://x/h")
    assert unsigned.returncode != 0 and "EVALHUB_WEBHOOK_SECRET" in unsigned.stderr
    signed = settings_of(
        "evalhub.settings.production",
        **keys,
        EVALHUB_WEBHOOK_URL="http://x/h",
        EVALHUB_WEBHOOK_SECRET="w" * 32,
    )
    assert signed.returncode == 0
    ftp = settings_of(
        "evalhub.settings.production",
        **keys,
        EVALHUB_WEBHOOK_URL="ftp://x/h",
        EVALHUB_WEBHOOK_SECRET="w" * 32,
    )
    assert ftp.returncode != 0 and "http(s)" in ftp.stderr


OUTBOUND = (
    "import django, json; django.setup(); from django.conf import settings as s; "
    "print(json.dumps([s.EVALHUB_OUTBOUND_ALLOW_HOSTS, s.EVALHUB_OUTBOUND_ALLOW_NETWORKS, "
    "bool(s.EVALHUB_SECRETS_KEY), s.EVALHUB_BACKEND_SECRET_ENV_PREFIX]))"
)


def test_outbound_defaults_strict_in_production_loopback_for_the_local_demo():
    import json

    production = settings_of(
        "evalhub.settings.production", OUTBOUND, SECRET_KEY="s" * 50, EVALHUB_SECRETS_KEY=FERNET_KEY
    )
    assert json.loads(production.stdout) == [[], [], True, "EVALHUB_BACKEND_SECRET_"]
    local = settings_of("evalhub.settings.local", OUTBOUND)
    assert json.loads(local.stdout) == [[], ["127.0.0.0/8", "::1/128"], True, "EVALHUB_BACKEND_SECRET_"]
    allowed = settings_of(
        "evalhub.settings.production",
        OUTBOUND,
        SECRET_KEY="s" * 50,
        EVALHUB_SECRETS_KEY=FERNET_KEY,
        EVALHUB_OUTBOUND_ALLOW_HOSTS="models.internal, vllm.internal",
        EVALHUB_OUTBOUND_ALLOW_NETWORKS="10.8.0.0/16",
    )
    assert json.loads(allowed.stdout)[:2] == [["models.internal", "vllm.internal"], ["10.8.0.0/16"]]


@pytest.mark.parametrize(("forced", "expected"), [("cuda:1", "cuda:1"), ("", None)])
def test_device_chosen_at_run_time(monkeypatch, forced, expected):
    from engines.device import device_select

    monkeypatch.setenv("EVALHUB_DEVICE", forced)
    if expected is None:
        import torch

        expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert device_select() == expected
