from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CanaryConfig(AppConfig):
    name = "canary"
    verbose_name = _("Canary sandbox")
    default_auto_field = "django.db.models.BigAutoField"
