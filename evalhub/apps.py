from axes.apps import AppConfig as AxesAppConfig
from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class EvalhubConfig(AppConfig):
    """The entry points (admin, management commands, pages, API); it owns no models."""

    name = "evalhub"
    label = "web"
    verbose_name = "EvalHub"

    def ready(self) -> None:
        from axes.signals import user_locked_out

        from engines.stats import comparisons  # noqa: F401 (its reason wordings: pages and API show stored analyses)
        from evalhub import throttle
        from evalhub.api import schema  # noqa: F401 (registers the token scheme with drf-spectacular)

        user_locked_out.connect(throttle.signin_lockout_audit, dispatch_uid="evalhub.signin_lockout_audit")


class SignInThrottleConfig(AxesAppConfig):
    """django-axes (failed sign-ins per account and per address) under a name the admin shows in
    the reader's language; its models keep axes' own label."""

    verbose_name = _("Sign-in throttle")
