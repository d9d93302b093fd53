from cryptography.fernet import Fernet, MultiFernet
from django.conf import settings
from django.db import migrations, models


def _fernet() -> MultiFernet:
    # As registry.secrets at the time of writing: the first key encrypts, any decrypts.
    return MultiFernet([Fernet(key.strip()) for key in settings.EVALHUB_SECRETS_KEY.split(",") if key.strip()])


def encrypt_keys(apps, schema_editor):
    """API keys stored in plain text until now become Fernet tokens."""
    version_model = apps.get_model("evalhub", "ModelVersion")
    versions = version_model.objects.exclude(api_key_encrypted="")
    if not versions.exists():
        return
    fernet = _fernet()
    for version in versions:
        version.api_key_encrypted = fernet.encrypt(version.api_key_encrypted.encode()).decode()
        version.save(update_fields=["api_key_encrypted"])


def decrypt_keys(apps, schema_editor):
    version_model = apps.get_model("evalhub", "ModelVersion")
    versions = version_model.objects.exclude(api_key_encrypted="")
    if not versions.exists():
        return
    fernet = _fernet()
    for version in versions:
        version.api_key_encrypted = fernet.decrypt(version.api_key_encrypted.encode()).decode()
        version.save(update_fields=["api_key_encrypted"])


class Migration(migrations.Migration):

    dependencies = [
        ("evalhub", "0010_audit_rows_immutable_and_untruncatable"),
    ]

    operations = [
        migrations.RenameField(model_name="modelversion", old_name="api_key", new_name="api_key_encrypted"),
        migrations.AlterField(
            model_name="modelversion",
            name="api_key_encrypted",
            field=models.CharField(blank=True, max_length=1000),
        ),
        migrations.RunPython(encrypt_keys, decrypt_keys),
    ]
