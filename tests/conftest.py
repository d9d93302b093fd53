import itertools
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from django.utils import timezone, translation
from rest_framework.test import APIClient

from engines.model_server import model_server_create
from gate.layers.registry import gate_policy_parse
from gate.models import GateRun
from registry.actors import SYSTEM, SystemActor
from registry.models import ModelVersion
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import api_token_create, user_role_grant
from registry.services.versions import (
    model_version_backend,
    model_version_config_hash,
    model_version_register,
    model_version_serving_set,
    model_version_transition,
)

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    """Compile the translation catalogues as `make messages` does, so a plain `pytest` renders the
    pages in Chinese too (without msgfmt the zh-hans tests fail saying so)."""
    if shutil.which("msgfmt") and shutil.which("make"):
        subprocess.run(["make", "-s", "messages"], cwd=ROOT, check=True)


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
def test_model_dir(tmp_path_factory) -> Path:
    """EVALHUB_MODEL_DIR for every test: registration refuses a checkpoint path outside it or
    missing, so the tests' checkpoints live here. `placeholder/` is an empty checkpoint folder for
    versions whose model never runs."""
    path = tmp_path_factory.mktemp("models")
    (path / "placeholder").mkdir()
    return path


@pytest.fixture(autouse=True)
def model_dir_setting(test_model_dir):
    # override_settings, not the `settings` fixture: some tests take a parameter named `settings`.
    with override_settings(EVALHUB_MODEL_DIR=test_model_dir):
        yield test_model_dir


@pytest.fixture(autouse=True)
def default_language():
    # A page request leaves its language active in the thread (LocaleMiddleware activates, nothing
    # deactivates): each test starts in the default language, whatever the one before it read.
    with translation.override(None):
        yield


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
    from evalhub.demo import demo_install

    settings.EVALHUB_MODEL_DIR = demo_model_dir
    return demo_install(log=lambda *args: None)


@pytest.fixture(scope="session")
def small_bow(test_model_dir) -> Path:
    """A real bag-of-words model, trained on part of the demo training split in ~1 s."""
    from engines.demo.dataset import demo_dataset_build
    from engines.training import bow_train

    out_dir = test_model_dir / "bow"
    bow_train(items=demo_dataset_build(seed=0).train[::3], out_dir=out_dir, seed=0, epochs=10)
    return out_dir


@pytest.fixture
def serve_versions():
    """Registers versions behind real model servers (threads in this process) and points their
    serving_url at them: `serve_versions({"v3": checkpoint, "v4": checkpoint})` -> [v3, v4].
    `serve_versions.servers[label]` is the server, e.g. to stop a candidate mid-test;
    `first_token_delay={"v4": 0.05}` gives a version a slow prefill (seconds)."""
    servers = {}

    def serve(
        checkpoints: dict,
        *,
        family: str = "contract-assistant",
        token_delay: float = 0.0,
        first_token_delay: dict[str, float] | None = None,
    ) -> list:
        versions = []
        for label, path in checkpoints.items():
            version = model_version_register(
                family=family,
                label=label,
                backend_kind="builtin",
                backend_config={"path": str(path)},
                actor=SYSTEM,
            )
            server = model_server_create(
                backend=model_version_backend(version=version, cached=False),
                model_name=version.ref,
                config_hash=model_version_config_hash(version=version),
                port=0,
                token_delay=token_delay,
                first_token_delay=(first_token_delay or {}).get(label, 0.0),
            )
            threading.Thread(target=server.serve_forever, daemon=True).start()
            url = f"http://127.0.0.1:{server.server_port}/v1"
            model_version_serving_set(version=version, serving_url=url, actor=SYSTEM)
            servers[label] = server
            versions.append(version)
        return versions

    serve.servers = servers
    yield serve
    for server in servers.values():
        server.shutdown()
        server.server_close()


GATE_STATUS = {"pass": ModelVersion.Status.GATE_PASSED, "fail": ModelVersion.Status.GATE_FAILED}


@pytest.fixture
def decision_user(db):
    """`decision_user("release_manager")` -> a user holding that role (None: no role)."""
    counter = itertools.count()

    def make(role: str | None = "release_manager"):
        user = get_user_model().objects.create_user(username=f"{role or 'nobody'}-{next(counter)}")
        if role:
            user_role_grant(user=user, role=role)
        return user

    return make


@pytest.fixture
def gate_run_finished(db):
    """`gate_run_finished(version, "fail")`: a succeeded gate run of `version` with that verdict,
    finished now, and the version settled as the gate service would (gate_passed / gate_failed)."""
    items = suite_items_parse(records=[{"input": "q", "label": "payment"}])
    suite = eval_suite_import(name="decisions", items=items, actor=SYSTEM)[0]

    def finish(version: ModelVersion, verdict: str, *, policy_overrides: dict | None = None) -> GateRun:
        run = GateRun.objects.create(
            candidate=version,
            suite=suite,
            status=GateRun.Status.SUCCEEDED,
            verdict=verdict,
            policy_config=gate_policy_parse({**(policy_overrides or {})}).as_dict(),
            policy_overrides=policy_overrides or {},
            progress=100,
            finished_at=timezone.now(),
        )
        model_version_transition(version=version, to_status=ModelVersion.Status.EVALUATING, actor=SYSTEM)
        model_version_transition(version=version, to_status=GATE_STATUS[verdict], actor=SystemActor("gate"))
        return run

    return finish


@pytest.fixture
def version_gated(gate_run_finished):
    """`version_gated("pass", registered_by=user)` -> (version, its latest gate run)."""
    counter = itertools.count(1)

    def make(verdict: str, *, registered_by=None) -> tuple[ModelVersion, GateRun]:
        version = model_version_register(
            family="fam",
            label=f"v{next(counter)}",
            backend_kind="builtin",
            backend_config={"path": "placeholder"},
            actor=registered_by or SYSTEM,
        )
        return version, gate_run_finished(version, verdict)

    return make


@pytest.fixture
def sent_tasks(monkeypatch) -> list[tuple[str, list]]:
    """Tasks handed to the broker, as (task name, args), captured instead of sent."""
    from registry import dispatch

    sent: list[tuple[str, list]] = []
    monkeypatch.setattr(
        dispatch.app, "send_task", lambda name, args=(), **options: sent.append((name, list(args)))
    )
    return sent


@pytest.fixture
def approve(gate_run_finished, decision_user):
    """`approve(version)`: a passing gate run and a release manager's approval, as the release rules
    want before a promotion."""
    from gate.services.decisions import decision_record

    def make(version: ModelVersion) -> None:
        gate_run_finished(version, "pass")
        decision_record(version=version, action="approve", reason="the gate passed", actor=decision_user())
        version.refresh_from_db()

    return make
