import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from evalhub.services.tokens import api_token_create, user_role_grant


@pytest.fixture
def make_client(db):
    """An API client authenticated with a real token of a user holding `role` (or none)."""

    def make(role: str | None = "ci", username: str | None = None) -> APIClient:
        user = get_user_model().objects.create_user(username=username or f"user-{role}-{make.count}")
        make.count += 1
        if role:
            user_role_grant(user=user, role=role)
        _, key = api_token_create(user=user)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        client.user = user
        return client

    make.count = 0
    return make


@pytest.fixture
def ci_client(make_client):
    return make_client("ci")


@pytest.fixture(scope="session")
def demo_model_dir() -> Path:
    """Where the demo checkpoints live for tests. `demo_install` trains them there only when
    they are missing or stale, so a cache outside the clone saves the training on reruns."""
    path = Path(os.environ.get("EVALHUB_TEST_MODEL_DIR", Path.home() / ".cache" / "evalhub" / "test-models"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def demo(db, settings, demo_model_dir):
    """The bundled demo installed in the test database: versions v3/v4 and the golden suite."""
    from evalhub.services.demo import demo_install

    settings.EVALHUB_MODEL_DIR = demo_model_dir
    return demo_install(log=lambda *args: None)


@pytest.fixture(scope="session")
def small_bow(tmp_path_factory) -> Path:
    """A real bag-of-words model, trained on part of the demo training split in ~1 s."""
    from evalhub.demo.dataset import demo_dataset_build
    from workers.training import bow_train

    out_dir = tmp_path_factory.mktemp("bow")
    bow_train(items=demo_dataset_build(seed=0).train[::3], out_dir=out_dir, seed=0, epochs=10)
    return out_dir
