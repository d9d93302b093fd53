"""API keys at rest: Fernet tokens under EVALHUB_SECRETS_KEY, key rotation, and the migration
that encrypted the keys stored in plain text before."""

import importlib

import pytest
from cryptography.fernet import Fernet
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured

from registry.actors import SYSTEM
from registry.models import ModelVersion
from registry.secrets import SecretUnreadableError, secret_decrypt, secret_encrypt
from registry.services.versions import model_version_api_key, model_version_register

migration = importlib.import_module("registry.migrations.0011_modelversion_api_key_encrypted")


def test_round_trip_and_never_the_plain_text():
    token = secret_encrypt(plain="sk-123")
    assert token != "sk-123" and "sk-123" not in token
    assert secret_decrypt(token=token) == "sk-123"
    assert secret_encrypt(plain="sk-123") != token  # a fresh IV each time
    assert secret_encrypt(plain="") == "" and secret_decrypt(token="") == ""


def test_rotation_first_key_encrypts_any_decrypts(settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.EVALHUB_SECRETS_KEY = old
    token = secret_encrypt(plain="sk-old")
    settings.EVALHUB_SECRETS_KEY = f"{new},{old}"
    assert secret_decrypt(token=token) == "sk-old"
    settings.EVALHUB_SECRETS_KEY = new
    with pytest.raises(SecretUnreadableError):
        secret_decrypt(token=token)


@pytest.mark.parametrize("key", ["", "not-a-fernet-key"])
def test_a_missing_or_malformed_key_is_a_configuration_error(settings, key):
    settings.EVALHUB_SECRETS_KEY = key
    with pytest.raises(ImproperlyConfigured, match="EVALHUB_SECRETS_KEY"):
        secret_encrypt(plain="sk")


@pytest.mark.django_db
def test_the_migration_encrypts_plain_keys_and_its_reverse_decrypts_them():
    version = model_version_register(
        family="fam",
        label="v1",
        backend_kind="openai",
        backend_config={"base_url": "http://127.0.0.1:9/v1", "model": "m"},
        actor=SYSTEM,
    )
    ModelVersion.objects.filter(pk=version.pk).update(
        api_key_encrypted="sk-legacy-plain"
    )  # as 0008 stored it
    migration.encrypt_keys(apps, None)
    version.refresh_from_db()
    assert version.api_key_encrypted != "sk-legacy-plain"
    assert model_version_api_key(version=version) == "sk-legacy-plain"
    migration.decrypt_keys(apps, None)
    version.refresh_from_db()
    assert version.api_key_encrypted == "sk-legacy-plain"
