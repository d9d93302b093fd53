"""The admin's version form: the registration checks, the key write-only and stored encrypted."""

import pytest

from evalhub.admin.registry import ModelVersionForm
from registry.models import ModelVersion
from registry.services.versions import model_version_api_key

pytestmark = pytest.mark.django_db


def form(instance=None, **data):
    fields = {"family": "fam", "label": "v1", "backend_kind": "openai", "description": "", **data}
    return ModelVersionForm(data=fields, instance=instance)


@pytest.mark.parametrize(
    "config",
    [
        '{"base_url": "http://169.254.169.254/v1", "model": "m"}',
        '{"base_url": "http://[::ffff:169.254.169.254]/v1", "model": "m"}',
        '{"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "SECRET_KEY"}',
    ],
)
def test_refused_configs_are_form_errors(config, settings):
    settings.EVALHUB_OUTBOUND_ALLOW_NETWORKS = []
    bound = form(backend_config=config)
    assert not bound.is_valid() and "backend_config" in bound.errors


def test_a_refused_checkpoint_path_is_a_form_error():
    bound = form(backend_kind="builtin", backend_config='{"path": "../../../../etc"}')
    assert not bound.is_valid() and "backend_config.path" in bound.errors["backend_config"][0]


def test_the_key_is_stored_encrypted_kept_when_left_blank_and_never_rendered():
    config = '{"base_url": "http://127.0.0.1:9/v1", "model": "m"}'
    created = form(backend_config=config, api_key="sk-admin-secret")
    assert created.is_valid(), created.errors
    version = created.save()
    assert version.api_key_encrypted and "sk-admin-secret" not in version.api_key_encrypted
    assert version.backend_config["max_retries"] == 3  # defaults filled, as registration does
    edited = form(instance=version, backend_config=config, description="edited", api_key="")
    assert edited.is_valid(), edited.errors
    edited.save()
    version = ModelVersion.objects.get(pk=version.pk)
    assert model_version_api_key(version=version) == "sk-admin-secret"
    rendered = str(form(instance=version, backend_config=config))
    assert "sk-admin-secret" not in rendered and version.api_key_encrypted not in rendered
