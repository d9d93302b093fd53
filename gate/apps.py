from django.apps import AppConfig
from django.core.signals import setting_changed
from django.db.models.signals import pre_save
from django.utils.translation import gettext_lazy as _


class GateConfig(AppConfig):
    name = "gate"
    verbose_name = _("Gate")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from gate.models import Decision, GatePolicy
        from gate.services.clearance import decision_pre_save, model_version_pre_save
        from gate.services.policies import gate_policy_pre_save
        from registry.models import ModelVersion

        # Only a release decision clears a version for production, whoever saves it.
        pre_save.connect(model_version_pre_save, sender=ModelVersion, dispatch_uid="gate.version_clearance")
        pre_save.connect(decision_pre_save, sender=Decision, dispatch_uid="gate.decision_not_loaded")
        # A policy names the layers it requires: installing a layer never changes existing verdicts.
        pre_save.connect(gate_policy_pre_save, sender=GatePolicy, dispatch_uid="gate.policy_layers")
        # The layers are the installed apps': collected again when a test changes those.
        setting_changed.connect(_layers_forget, dispatch_uid="gate.layers_forget")


def _layers_forget(*, setting: str, **kwargs: object) -> None:
    if setting == "INSTALLED_APPS":
        from gate.layers.registry import gate_layers_forget

        gate_layers_forget()
