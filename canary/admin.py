from django.contrib import admin, messages

from canary.models import Experiment, OutcomeEvent, TurnEvent
from canary.services.experiments import experiment_pause, experiment_rollback
from evalhub.admin import ReadOnlyAdmin
from evalhub.errors import ApplicationError


@admin.register(Experiment)
class ExperimentAdmin(ReadOnlyAdmin):
    """Read-only: experiments change through the API and these actions, which audit each step."""

    list_display = ["name", "family", "baseline", "candidate", "status", "traffic_percent", "created_at"]
    list_filter = ["family", "status"]
    search_fields = ["name", "family"]
    actions = ["pause", "roll_back"]

    def _each(self, request, queryset, change, done: str) -> None:
        for experiment in queryset:
            try:
                change(experiment=experiment, actor=request.user)
                self.message_user(request, f"{experiment.name}: {done}")
            except ApplicationError as exc:
                self.message_user(request, f"{experiment.name}: {exc.message}", level=messages.ERROR)

    @admin.action(description="Pause (everyone back on the baseline until resumed)")
    def pause(self, request, queryset):
        self._each(request, queryset, lambda **kw: experiment_pause(**kw, reason="admin action"), "paused")

    @admin.action(description="Roll back (ends the experiment)")
    def roll_back(self, request, queryset):
        self._each(
            request,
            queryset,
            lambda **kw: experiment_rollback(**kw, reason="rolled back from the admin"),
            "rolled back",
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
        "occurred_at",
    ]
    list_filter = ["experiment", "arm", "role", "source", "fallback"]
    search_fields = ["event_id", "session_id", "user_id"]


@admin.register(OutcomeEvent)
class OutcomeEventAdmin(ReadOnlyAdmin):
    list_display = ["event_id", "experiment", "arm", "unit_id", "metric", "value", "occurred_at"]
    list_filter = ["experiment", "arm", "metric"]
    search_fields = ["event_id", "unit_id", "user_id"]
