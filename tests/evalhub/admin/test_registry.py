"""The admin's version pages: the registration's checks, the key write-only and stored encrypted, an
evaluated version's model unchangeable, deletion only without history, every write audited."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from evalhub.admin.registry import ModelVersionForm
from registry.actors import SystemActor
from registry.models import AuditLog, ModelVersion
from registry.services.versions import model_version_api_key, model_version_register, model_version_transition
from tests.lifecycle import version_to

pytestmark = pytest.mark.django_db

ENDPOINT = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
URL = "/admin/evalhub/modelversion/"


@pytest.fixture
def root():
    return get_user_model().objects.create_superuser(username="root", password="pw")


@pytest.fixture
def admin_client(root):
    client = Client()
    client.force_login(root)
    return client


def form(actor, instance=None, **data):
    fields = {"family": "fam", "label": "v1", "backend_kind": "openai", "description": "", **data}
    return type("Form", (ModelVersionForm,), {"actor": actor})(data=fields, instance=instance)


def post_data(version: ModelVersion | None = None, **changes) -> dict:
    data = {"family": "fam", "label": "v1", "backend_kind": "openai", "description": "", "api_key": ""}
    if version is not None:
        data.update(
            backend_kind=version.backend_kind,
            description=version.description,
            baseline=version.baseline_id or "",
        )
        data["backend_config"] = version.backend_config
    data.update(changes)
    data["backend_config"] = json.dumps(data.get("backend_config", ENDPOINT))
    return data


@pytest.mark.parametrize(
    "config",
    [
        '{"base_url": "http://169.254.169.254/v1", "model": "m"}',
        '{"base_url": "http://[::ffff:169.254.169.254]/v1", "model": "m"}',
        '{"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "SECRET_KEY"}',
    ],
)
def test_refused_configs_are_form_errors(config, settings, root):
    settings.EVALHUB_OUTBOUND_ALLOW_NETWORKS = []
    bound = form(root, backend_config=config)
    assert not bound.is_valid() and "backend_config" in bound.errors


def test_a_refused_checkpoint_path_is_a_form_error(root):
    bound = form(root, backend_kind="builtin", backend_config='{"path": "../../../../etc"}')
    assert not bound.is_valid() and "backend_config.path" in bound.errors["backend_config"][0]


def test_a_user_without_a_writing_role_cannot_register_here():
    viewer = get_user_model().objects.create_user(username="staff", is_staff=True)
    bound = form(viewer, backend_config=json.dumps(ENDPOINT))
    assert not bound.is_valid() and "Only a ci or release_manager" in str(bound.errors)


def test_the_key_is_stored_encrypted_kept_when_left_blank_never_shown_or_audited(admin_client):
    assert admin_client.post(f"{URL}add/", post_data(api_key="sk-admin-secret")).status_code == 302
    version = ModelVersion.objects.get()
    assert version.api_key_encrypted and "sk-admin-secret" not in version.api_key_encrypted
    assert version.backend_config["max_retries"] == 3  # defaults filled, as registration does
    assert AuditLog.objects.filter(action="model_version.register", actor__username="root").exists()

    change = f"{URL}{version.pk}/change/"
    assert admin_client.post(change, post_data(version, description="edited")).status_code == 302
    version.refresh_from_db()
    assert version.description == "edited" and model_version_api_key(version=version) == "sk-admin-secret"
    assert admin_client.post(change, post_data(version, api_key="sk-rotated")).status_code == 302
    assert model_version_api_key(version=ModelVersion.objects.get()) == "sk-rotated"
    edits = [(r.before, r.after) for r in AuditLog.objects.filter(action="model_version.edit").order_by("id")]
    assert edits == [({"description": ""}, {"description": "edited"}), ({}, {"api_key": "changed"})]

    page = admin_client.get(change).content.decode()
    stored = ModelVersion.objects.get().api_key_encrypted
    assert "sk-rotated" not in page and stored not in page
    assert not any("sk-" in json.dumps([r.before, r.after]) for r in AuditLog.objects.all())


@pytest.mark.parametrize("status", ["approved", "promoted"])
def test_an_evaluated_versions_model_and_baseline_cannot_change(admin_client, status):
    actor = SystemActor("test")
    baseline = model_version_register(
        family="fam", label="v0", backend_kind="openai", backend_config=ENDPOINT, actor=actor
    )
    version = model_version_register(
        family="fam",
        label="v1",
        backend_kind="openai",
        backend_config=ENDPOINT,
        actor=actor,
        baseline=baseline,
    )
    version_to(version, status)
    change = f"{URL}{version.pk}/change/"
    other = {**ENDPOINT, "model": "a-different-model"}
    for changes, field in (({"backend_config": other}, "backend_config"), ({"baseline": ""}, "baseline")):
        response = admin_client.post(change, post_data(version, **changes))
        assert response.status_code == 200, field
        errors = response.context["adminform"].form.errors
        assert "cannot change once the version is evaluated" in str(errors[field])
    version.refresh_from_db()
    assert version.backend_config["model"] == "m" and version.baseline == baseline
    assert not AuditLog.objects.filter(action="model_version.edit").exists()
    # What the approval did not cover still changes, audited.
    assert admin_client.post(change, post_data(version, description="notes")).status_code == 302
    assert AuditLog.objects.get(action="model_version.edit").after == {"description": "notes"}


def test_only_a_version_without_history_is_deleted_and_the_deletion_audited(admin_client):
    actor = SystemActor("test")
    unused = model_version_register(
        family="fam", label="typo", backend_kind="openai", backend_config=ENDPOINT, actor=actor
    )
    used = model_version_register(
        family="fam", label="v1", backend_kind="openai", backend_config=ENDPOINT, actor=actor
    )
    model_version_transition(version=used, to_status="evaluating", actor=actor)
    assert admin_client.post(f"{URL}{used.pk}/delete/", {"post": "yes"}).status_code == 403
    assert admin_client.get(URL).context["action_form"] is None  # no bulk delete
    assert admin_client.post(f"{URL}{unused.pk}/delete/", {"post": "yes"}).status_code == 302
    assert list(ModelVersion.objects.values_list("label", flat=True)) == ["v1"]
    deleted = AuditLog.objects.get(action="model_version.delete")
    assert deleted.actor.username == "root" and deleted.before["backend_kind"] == "openai"
