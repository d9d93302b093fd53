from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class GateConfig(AppConfig):
    name = "gate"
    verbose_name = _("Gate")
    default_auto_field = "django.db.models.BigAutoField"
