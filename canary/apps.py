from django.apps import AppConfig


class CanaryConfig(AppConfig):
    name = "canary"
    verbose_name = "Canary sandbox"
    default_auto_field = "django.db.models.BigAutoField"
