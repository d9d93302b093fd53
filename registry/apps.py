from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class RegistryConfig(AppConfig):
    name = "registry"
    # The label the tables and the migration history were created under, before the split.
    label = "evalhub"
    verbose_name = _("Registry")
    default_auto_field = "django.db.models.BigAutoField"
