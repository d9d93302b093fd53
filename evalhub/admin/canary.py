from django import forms
from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _

from canary.models import (
    Experiment,
    FollowUpDetectorConfig,
    FollowUpReview,
    OutcomeEvent,
    TrafficShareChange,
    TurnEvent,
)
from canary.services.experiments import experiment_pause, experiment_promote, experiment_rollback
from canary.services.follow_ups import follow_up_thresholds_set
from engines.follow_up.detector import FollowUpThresholds
from evalhub.admin.base import ReadOnlyAdmin
from evalhub.permissions import error_text
from registry.errors import ApplicationError


@admin.register(Experiment)
class ExperimentAdmin(ReadOnlyAdmin):
    """Read-only: experiments change through the API and these actions, which audit each step."""

    list_display = ["name", "family", "baseline", "candidate", "status", "traffic_percent", "created_at"]
    list_filter = ["family", "status"]
    search_fields = ["name", "family"]
    actions = ["pause", "roll_back", "promote"]

    def _each(self, request, queryset, change, done: str) -> None:
        for experiment in queryset:
            try:
                change(experiment=experiment, actor=request.user)
                self.message_user(request, f"{experiment.name}: {done}")
            except ApplicationError as exc:
                self.message_user(request, f"{experiment.name}: {error_text(exc)}", level=messages.ERROR)

    @admin.action(description=_("Pause (everyone back on the baseline until resumed)"))
    def pause(self, request, queryset):
        self._each(
            request,
            queryset,
            lambda **kw: experiment_pause(**kw, reason="admin action"),
            _("paused"),
        )

    @admin.action(description=_("Promote (the candidate takes all traffic; it must be approved)"))
    def promote(self, request, queryset):
        self._each(
            request,
            queryset,
            lambda **kw: experiment_promote(**kw, reason="promoted from the admin"),
            _("promoted"),
        )

    @admin.action(description=_("Roll back (ends the experiment)"))
    def roll_back(self, request, queryset):
        self._each(
            request,
            queryset,
            lambda **kw: experiment_rollback(**kw, reason="rolled back from the admin"),
            _("rolled back"),
        )


@admin.register(TurnEvent)
class TurnEventAdmin(ReadOnlyAdmin):
    list_display = [
        "event_id",
        "experiment",
        "arm",
        "role",
        "session_id",
        "turn_index",
        "source",
        "follow_up_kind",
        "occurred_at",
    ]
    list_filter = ["experiment", "arm", "role", "source", "fallback", "follow_up_kind"]
    search_fields = ["event_id", "session_id", "user_id"]


@admin.register(OutcomeEvent)
class OutcomeEventAdmin(ReadOnlyAdmin):
    list_display = ["event_id", "experiment", "arm", "unit_id", "metric", "value", "occurred_at"]
    list_filter = ["experiment", "arm", "metric"]
    search_fields = ["event_id", "unit_id", "user_id"]


@admin.register(TrafficShareChange)
class TrafficShareChangeAdmin(ReadOnlyAdmin):
    list_display = ["experiment", "cause", "percent", "at", "actor_name"]
    list_filter = ["experiment", "cause"]


@admin.register(FollowUpReview)
class FollowUpReviewAdmin(ReadOnlyAdmin):
    """Read-only: labels are given in the review queue (`/review/`), which audits each."""

    list_display = ["turn", "experiment", "label", "detector_kind", "is_first", "reviewer_name", "created_at"]
    list_filter = ["experiment", "label", "detector_kind", "is_first"]
    search_fields = ["reviewer_name", "turn__event_id"]
    list_select_related = ["turn", "experiment"]


class FollowUpDetectorConfigForm(forms.ModelForm):
    class Meta:
        model = FollowUpDetectorConfig
        fields = ["family", "thresholds"]
        help_texts = {
            "thresholds": "Keys of engines.follow_up.detector.FollowUpThresholds; missing keys keep "
            "their defaults: " + ", ".join(f"{k}={v}" for k, v in FollowUpThresholds().as_dict().items())
        }

    def clean_thresholds(self):
        try:
            FollowUpThresholds.from_dict(self.cleaned_data["thresholds"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        return self.cleaned_data["thresholds"]


@admin.register(FollowUpDetectorConfig)
class FollowUpDetectorConfigAdmin(admin.ModelAdmin):
    """A family's follow-up detector thresholds; each change is audited."""

    form = FollowUpDetectorConfigForm
    list_display = ["family", "thresholds", "updated_at"]

    def save_model(self, request, obj, form, change):
        saved = follow_up_thresholds_set(family=obj.family, thresholds=obj.thresholds, actor=request.user)
        obj.pk = saved.pk

    def get_readonly_fields(self, request, obj=None):
        return ["family"] if obj else []

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
