from django import forms
from django.contrib import admin

from evalhub.admin.base import ReadOnlyAdmin
from registry.models import ApiToken, AuditLog, EvalItem, EvalSuite, ModelVersion
from registry.selectors.suites import eval_suite_is_locked
from registry.services.tokens import api_token_revoke


class ModelVersionForm(forms.ModelForm):
    # Write-only: the field never shows the stored key; leaving it blank keeps it.
    api_key = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False))

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

    def clean_api_key(self):
        return self.cleaned_data["api_key"] or (self.instance.api_key if self.instance.pk else "")


@admin.register(ModelVersion)
class ModelVersionAdmin(admin.ModelAdmin):
    form = ModelVersionForm
    list_display = ["ref", "backend_kind", "baseline", "status", "is_demo", "created_at"]
    list_filter = ["family", "status", "backend_kind", "is_demo"]
    search_fields = ["family", "label", "description"]
    # Status moves only through the lifecycle services, which audit each step.
    readonly_fields = ["status", "created_by", "created_at", "updated_at"]


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

    @admin.action(description="Revoke (the token stops working; it cannot be undone)")
    def revoke(self, request, queryset):
        for token in queryset:
            api_token_revoke(token=token, actor=request.user, reason="revoked from the admin")
        self.message_user(request, f"{queryset.count()} token(s) revoked.")
