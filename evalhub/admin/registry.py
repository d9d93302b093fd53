from django import forms
from django.contrib import admin
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from evalhub.admin.base import ReadOnlyAdmin
from evalhub.permissions import error_fields_words, error_text
from registry.actors import actor_require_role
from registry.errors import ApplicationError
from registry.models import ApiToken, AuditLog, EvalItem, EvalSuite, ModelVersion
from registry.roles import WRITE_ROLES
from registry.selectors.suites import eval_suite_is_locked
from registry.services.tokens import api_token_revoke
from registry.services.versions import (
    model_version_config_check,
    model_version_delete,
    model_version_edit,
    model_version_edit_check,
    model_version_history,
    model_version_register,
)


class ModelVersionForm(forms.ModelForm):
    """The registration's checks (config schema, outbound policy, checkpoint inside
    EVALHUB_MODEL_DIR, api_key_env prefix) and, on an edit, none of what an evaluation covered."""

    # Write-only: the field never shows the stored key; leaving it blank keeps it. Stored encrypted.
    api_key = forms.CharField(required=False, max_length=500, widget=forms.PasswordInput(render_value=False))
    actor = None  # the request's user, set by ModelVersionAdmin.get_form

    class Meta:
        model = ModelVersion
        fields = [
            "family",
            "label",
            "description",
            "backend_kind",
            "backend_config",
            "api_key",
            "baseline",
            "is_demo",
        ]

    def clean(self):
        cleaned = super().clean()
        if "backend_kind" not in cleaned or "backend_config" not in cleaned:
            return cleaned
        try:
            if self.instance.pk:
                cleaned["backend_config"] = model_version_edit_check(
                    version=self.instance,
                    actor=self.actor,
                    backend_kind=cleaned["backend_kind"],
                    backend_config=cleaned["backend_config"],
                    baseline=cleaned.get("baseline"),
                )
            else:
                actor_require_role(self.actor, WRITE_ROLES, action="register a model version")
                cleaned["backend_config"] = model_version_config_check(
                    backend_kind=cleaned["backend_kind"], backend_config=cleaned["backend_config"]
                )
        except ApplicationError as exc:
            for key, messages_ in (error_fields_words(exc) or {"__all__": [error_text(exc)]}).items():
                head = key.split(".")[0]
                field = head if head in self.fields else None
                self.add_error(
                    field, "; ".join(messages_) if field == key else f"{key}: {' '.join(messages_)}"
                )
        return cleaned


@admin.register(ModelVersion)
class ModelVersionAdmin(admin.ModelAdmin):
    """Registering, editing and deleting go through the audited services: an evaluated version's
    backend and baseline stay as evaluated, and only a version nothing has used can be deleted."""

    form = ModelVersionForm
    list_display = ["ref", "backend_kind", "baseline", "status", "is_demo", "created_at"]
    list_filter = ["family", "status", "backend_kind", "is_demo"]
    search_fields = ["family", "label", "description"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"actor": request.user})

    def get_readonly_fields(self, request, obj=None):
        # Status moves only through the lifecycle services; the ref names the version for good.
        fixed = ["status", "created_by", "created_at", "updated_at"]
        return fixed if obj is None else ["family", "label", *fixed]

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # one at a time, each checked for history
        return actions

    def has_delete_permission(self, request, obj=None) -> bool:
        return super().has_delete_permission(request, obj) and (
            obj is None or not model_version_history(version=obj)
        )

    def save_model(self, request, obj, form, change) -> None:
        data = form.cleaned_data
        common = {
            "backend_kind": data["backend_kind"],
            "backend_config": data["backend_config"],
            "baseline": data.get("baseline"),
            "description": data.get("description", ""),
            "is_demo": data.get("is_demo", False),
            "actor": request.user,
        }
        if change:
            model_version_edit(version=obj, api_key=data.get("api_key") or None, **common)
        else:
            obj.pk = model_version_register(
                family=data["family"], label=data["label"], api_key=data.get("api_key", ""), **common
            ).pk

    def delete_model(self, request, obj) -> None:
        model_version_delete(version=obj, actor=request.user, reason="deleted in the admin")


@admin.register(AuditLog)
class AuditLogAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "actor_name", "action", "target_repr", "reason"]
    list_filter = ["action", "target_type"]
    search_fields = ["target_repr", "actor_name", "reason"]


class EvalItemInline(admin.TabularInline):
    model = EvalItem
    extra = 0
    fields = ["external_id", "input", "label", "language", "tags"]
    show_change_link = True

    def has_change_permission(self, request, obj=None):
        return obj is None or not eval_suite_is_locked(suite=obj)

    has_delete_permission = has_add_permission = has_change_permission


@admin.register(EvalSuite)
class EvalSuiteAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "item_count", "is_demo", "content_hash", "created_at"]
    list_filter = ["is_demo"]
    readonly_fields = ["content_hash", "item_count", "created_by", "created_at"]
    inlines = [EvalItemInline]

    def has_change_permission(self, request, obj=None):
        return obj is None or not eval_suite_is_locked(suite=obj)

    has_delete_permission = has_change_permission


@admin.register(EvalItem)
class EvalItemAdmin(admin.ModelAdmin):
    list_display = ["suite", "external_id", "label", "language", "tags"]
    list_filter = ["suite", "language"]
    search_fields = ["external_id", "input"]

    def has_change_permission(self, request, obj=None):
        return obj is None or not eval_suite_is_locked(suite=obj.suite)

    has_delete_permission = has_change_permission


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """Keys are created by `manage.py create_api_token` (shown once) and revoked here or by
    `manage.py revoke_api_token`, through the audited service; a token is never edited or deleted."""

    list_display = ["key_prefix", "user", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["key_prefix", "user__username", "name"]
    fields = ["user", "name", "key_prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    @admin.action(description=_("Revoke (the token stops working; it cannot be undone)"))
    def revoke(self, request, queryset):
        for token in queryset:
            api_token_revoke(token=token, actor=request.user, reason="revoked from the admin")
        self.message_user(
            request,
            ngettext("%(n)d token revoked.", "%(n)d tokens revoked.", queryset.count())
            % {"n": queryset.count()},
        )
