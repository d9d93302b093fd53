from django.apps import AppConfig


class EvalhubConfig(AppConfig):
    name = "evalhub"
    verbose_name = "EvalHub registry and gate"
    default_auto_field = "django.db.models.BigAutoField"
