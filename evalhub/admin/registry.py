from django import forms
from django.contrib import admin

from evalhub.admin.base import ReadOnlyAdmin
from registry.errors import ApplicationError
from registry.models import ApiToken, AuditLog, EvalItem, EvalSuite, ModelVersion
from registry.secrets import secret_encrypt
from registry.selectors.suites import eval_suite_is_locked
from registry.services.tokens import api_token_revoke
from registry.services.versions import model_version_config_check


class ModelVersionForm(forms.ModelForm):
    # Write-only: the field never shows the stored key; leaving it blank keeps it. Stored encrypted.
    api_key = forms.CharField(required=False, max_length=500, widget=forms.PasswordInput(render_value=False))

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
        """The same checks as registration through the API: the config's schema, its `base_url`
        (outbound policy), checkpoint `path` (inside EVALHUB_MODEL_DIR) and `api_key_env`."""
        cleaned = super().clean()
        if "backend_kind" in cleaned and "backend_config" in cleaned:
            try:
                cleaned["backend_config"] = model_version_config_check(
                    backend_kind=cleaned["backend_kind"], backend_config=cleaned["backend_config"]
                )
            except ApplicationError as exc:
                self.add_error(
                    "backend_config", "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.fields.items())
                )
        return cleaned

    def save(self, commit=True):
        if self.cleaned_data.get("api_key"):
            self.instance.api_key_encrypted = secret_encrypt(plain=self.cleaned_data["api_key"])
        return super().save(commit=commit)


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
