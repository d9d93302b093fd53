from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"
    # The label the tables and the migration history were created under, before the split.
    label = "evalhub"
    verbose_name = "Registry"
    default_auto_field = "django.db.models.BigAutoField"
