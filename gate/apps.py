from django.apps import AppConfig
from django.db.models.signals import pre_save
from django.utils.translation import gettext_lazy as _


class GateConfig(AppConfig):
    name = "gate"
    verbose_name = _("Gate")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from gate.models import Decision
        from gate.services.clearance import decision_pre_save, model_version_pre_save
        from registry.models import ModelVersion

        # Only a release decision clears a version for production, whoever saves it.
        pre_save.connect(model_version_pre_save, sender=ModelVersion, dispatch_uid="gate.version_clearance")
        pre_save.connect(decision_pre_save, sender=Decision, dispatch_uid="gate.decision_not_loaded")
