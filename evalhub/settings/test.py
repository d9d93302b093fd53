"""Tests: the real PostgreSQL and Redis when they are reachable (always in CI), else the
embedded defaults. `EVALHUB_TEST_REQUIRE_SERVICES=1` turns a missing server into an error."""

import os
import socket

from .base import *  # noqa: F403
from .base import database_config, env_bool, fernet_key_derive

POSTGRES_URL = os.environ.get("EVALHUB_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/evalhub")
REDIS_URL = os.environ.get("EVALHUB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
REQUIRE_SERVICES = env_bool("EVALHUB_TEST_REQUIRE_SERVICES", False)


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


POSTGRES_UP = reachable("127.0.0.1", 5432)
REDIS_UP = reachable("127.0.0.1", 6379)
if REQUIRE_SERVICES and not (POSTGRES_UP and REDIS_UP):
    raise RuntimeError(
        f"EVALHUB_TEST_REQUIRE_SERVICES is set but PostgreSQL up={POSTGRES_UP}, Redis up={REDIS_UP}"
    )

SECRET_KEY = "evalhub-test-key"
EVALHUB_SECRETS_KEY = fernet_key_derive(SECRET_KEY)
# Tests run model servers and webhook receivers on loopback; tests of the guard set their own
# strict policy (no networks, a fake resolver).
EVALHUB_OUTBOUND_ALLOW_NETWORKS = ["127.0.0.0/8", "::1/128"]
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": database_config(os.environ["DATABASE_URL"])}
elif POSTGRES_UP:
    DATABASES = {"default": database_config(POSTGRES_URL)}
# Live-server tests answer requests on short-lived threads: a connection kept open for reuse
# would outlive its thread and hold the test database open at teardown.
DATABASES["default"]["CONN_MAX_AGE"] = 0
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["ENGINE"] = "evalhub.testing.postgresql"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Unit tests never reach a broker; end-to-end tests start a real worker on REDIS_URL.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or "memory://"
CELERY_BROKER_TRANSPORT_OPTIONS = {}
# No worker listens to a unit test's broadcast: asking would only wait out the timeout.
EVALHUB_WORKER_INSPECT_SECONDS = float(os.environ.get("EVALHUB_WORKER_INSPECT_SECONDS", 0))
EVALHUB_TELEMETRY_REDIS_URL = os.environ.get("EVALHUB_TELEMETRY_REDIS_URL", "")
EVALHUB_TELEMETRY_STREAM = "evalhub:test:canary:turns"
# Tests sign in a lot: throttles far above what any test does, so none locks another out (the
# throttle tests set their own limits); the bad-token counts in this process's memory, not in Redis.
AXES_FAILURE_LIMIT = 1000
EVALHUB_TOKEN_FAILURE_LIMIT = 1000
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# Tests change tokens, roles and experiments between requests: no reuse (tested on its own).
EVALHUB_AUTH_CACHE_SECONDS = 0
EVALHUB_CANARY_CACHE_SECONDS = 0
EVALHUB_MAX_UPLOAD_BYTES = 200_000
DATA_UPLOAD_MAX_MEMORY_SIZE = EVALHUB_MAX_UPLOAD_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = EVALHUB_MAX_UPLOAD_BYTES
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Tests of traffic statistics run canaries at 30-50 %: the cap that needs an offline gate pass first is
# tested on its own (tests/canary/services/test_promotion.py sets the production default back).
EVALHUB_CANARY_UNGATED_MAX_PERCENT = 100.0
