from django import forms
from django.contrib import admin

from evalhub.admin.base import ReadOnlyAdmin
from gate.layers.registry import gate_policy_parse
from gate.models import Decision, GatePolicy, GateRun, LayerResult, ModelOutput, SampleResult
from gate.policy import PolicyError
from gate.services.policies import gate_policy_save


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    """Decisions are taken through the service (API or version page), never edited here."""

    list_display = ["created_at", "version", "action", "gate_verdict", "decided_by", "reason"]
    list_filter = ["action", "gate_verdict"]
    list_select_related = ["version", "decided_by"]
    search_fields = ["version__family", "version__label", "reason", "decided_by__username"]
    fields = [
        "version",
        "action",
        "gate_run",
        "gate_verdict",
        "confirms",
        "decided_by",
        "created_at",
        "reason",
    ]


class GatePolicyForm(forms.ModelForm):
    class Meta:
        model = GatePolicy
        fields = ["name", "description", "config"]

    def clean_config(self):
        config = self.cleaned_data["config"]
        if not isinstance(config, dict):
            raise forms.ValidationError("must be an object of policy keys")
        try:
            gate_policy_parse(config)
        except PolicyError as exc:
            raise forms.ValidationError(str(exc)) from None
        return config


@admin.register(GatePolicy)
class GatePolicyAdmin(admin.ModelAdmin):
    """Policies are checked as a run would read them: an unknown key or a bad value is refused here.
    Saving goes through the audited service; a policy is not deleted (runs name it)."""

    form = GatePolicyForm
    list_display = ["name", "updated_at"]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def get_readonly_fields(self, request, obj=None):
        return ["name"] if obj is not None else []

    def save_model(self, request, obj, form, change) -> None:
        saved = gate_policy_save(
            name=obj.name, config=obj.config, description=obj.description, actor=request.user
        )
        obj.pk = saved.pk


class LayerResultInline(admin.StackedInline):
    model = LayerResult
    extra = 0
    can_delete = False
    readonly_fields = [f.name for f in LayerResult._meta.fields]


@admin.register(GateRun)
class GateRunAdmin(ReadOnlyAdmin):
    list_display = ["id", "candidate", "baseline", "suite", "status", "progress", "verdict", "created_at"]
    list_filter = ["status", "verdict"]
    list_select_related = ["candidate", "baseline", "suite"]  # one query for the list, not three a row
    inlines = [LayerResultInline]


@admin.register(SampleResult)
class SampleResultAdmin(ReadOnlyAdmin):
    list_display = ["layer_result", "version", "item", "output_label", "correct", "latency_ms"]
    list_filter = ["correct"]


@admin.register(ModelOutput)
class ModelOutputAdmin(ReadOnlyAdmin):
    list_display = ["version", "input_hash", "label", "latency_ms", "created_at"]
    list_filter = ["version"]
