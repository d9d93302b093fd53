from django.apps import AppConfig


class EvalhubConfig(AppConfig):
    """The entry points (admin, management commands, pages, API); it owns no models."""

    name = "evalhub"
    label = "web"
    verbose_name = "EvalHub"

    def ready(self) -> None:
        from evalhub.api import schema  # noqa: F401 (registers the token scheme with drf-spectacular)
