from django.apps import AppConfig


class GateConfig(AppConfig):
    name = "gate"
    verbose_name = "Gate"
    default_auto_field = "django.db.models.BigAutoField"
