import os
from pathlib import Path

import pytest
from django.conf import settings as django_settings


@pytest.fixture
def services_required() -> None:
    if not (django_settings.POSTGRES_UP and django_settings.REDIS_UP):
        pytest.skip("end-to-end tests need PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379")


@pytest.fixture
def stack_env(tmp_path, demo_model_dir):
    """Environment for child processes (web, worker, manage.py) as a user would set it."""

    def make(*, embedded: bool, **extra) -> tuple[dict, Path]:
        var_dir = tmp_path / "var"
        var_dir.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
        env.update(
            DJANGO_SETTINGS_MODULE="evalhub.settings.local",
            EVALHUB_VAR_DIR=str(var_dir),
            EVALHUB_MODEL_DIR=str(demo_model_dir),
            PYTHONUNBUFFERED="1",
        )
        if not embedded:
            from django.db import connection

            db = connection.settings_dict
            env["DATABASE_URL"] = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
            env["CELERY_BROKER_URL"] = django_settings.REDIS_URL
        env.update({k: str(v) for k, v in extra.items()})
        return env, var_dir

    return make


@pytest.fixture
def redis_clean():
    """An empty test database in Redis (db 15), so no message of an earlier run is left."""
    if not django_settings.REDIS_UP:
        yield
        return
    import redis

    client = redis.Redis.from_url(django_settings.REDIS_URL)
    client.flushdb()
    yield
    client.flushdb()
