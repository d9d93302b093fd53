from __future__ import annotations

from enum import StrEnum, unique

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

# \Z, not $: a `$` would let a trailing newline through.
slug_validator = RegexValidator(
    r"^[a-z0-9][a-z0-9._-]*\Z", "Use lowercase letters, digits, '.', '_' and '-'."
)


class ModelVersionQuerySet(models.QuerySet):
    """Bulk writes skip `save()` and its `pre_save` check (`gate.services.clearance`): they never set a
    status that clears a version for production. Only a release decision does, one version at a time."""

    def _refuse_clearing(self, statuses) -> None:
        cleared = sorted({str(s) for s in statuses if s in ModelVersion.CLEARED_STATUSES})
        if cleared or any(not isinstance(s, str) for s in statuses):
            raise ValueError(
                f"A bulk write may not set a version's status to {', '.join(cleared) or 'an expression'}: "
                "only a release decision clears a version for production."
            )

    def update(self, **kwargs):
        if "status" in kwargs:
            self._refuse_clearing([kwargs["status"]])
        return super().update(**kwargs)

    def bulk_create(self, objs, *args, **kwargs):
        objs = list(objs)
        self._refuse_clearing([obj.status for obj in objs if obj.status != ModelVersion.Status.REGISTERED])
        return super().bulk_create(objs, *args, **kwargs)

    def bulk_update(self, objs, fields, *args, **kwargs):
        objs = list(objs)
        if "status" in fields:
            self._refuse_clearing([obj.status for obj in objs])
        return super().bulk_update(objs, fields, *args, **kwargs)


class ModelVersion(models.Model):
    """One version of a model family, how to reach it, and where it is in its release."""

    class Status(models.TextChoices):
        REGISTERED = "registered"
        EVALUATING = "evaluating"
        GATE_PASSED = "gate_passed"
        GATE_FAILED = "gate_failed"
        APPROVED = "approved"
        REJECTED = "rejected"
        CANARY = "canary"
        PROMOTED = "promoted"
        ROLLED_BACK = "rolled_back"
        # Was serving production, until another version of its family was promoted.
        RETIRED = "retired"

    # Cleared for production: only a release decision puts a version here (`gate.services.clearance`).
    CLEARED_STATUSES = frozenset({Status.APPROVED, Status.CANARY, Status.PROMOTED})

    class BackendKind(models.TextChoices):
        OPENAI = "openai", _("OpenAI-compatible chat endpoint")
        HF = "hf", _("Local transformers checkpoint")
        BUILTIN = "builtin", _("Bundled demo model")

    family = models.CharField(max_length=100, validators=[slug_validator])
    label = models.CharField(max_length=100, validators=[slug_validator])
    description = models.TextField(blank=True)
    backend_kind = models.CharField(max_length=20, choices=BackendKind.choices)
    backend_config = models.JSONField(default=dict, blank=True)
    # The backend's API key as a Fernet token (`registry.secrets`), never the key itself: written
    # through the API and admin, never shown back, decrypted only where the endpoint is called.
    api_key_encrypted = models.CharField(max_length=1000, blank=True)
    # Where live traffic reaches this version: an OpenAI-compatible base URL (".../v1") that the
    # canary proxy forwards to. Empty: the `openai` backend's base_url; other backends are not
    # served until it is set (e.g. by `manage.py serve_model`).
    serving_url = models.URLField(max_length=500, blank=True)
    baseline = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="challengers"
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.REGISTERED)
    # The latest gate run (under its family's policy, not weakened) whose offline layers, clean
    # accuracy and robustness, both passed: what a canary needs to go above its ungated share.
    offline_gate_run_id = models.PositiveBigIntegerField(null=True, blank=True)
    offline_gate_passed_at = models.DateTimeField(null=True, blank=True)
    is_demo = models.BooleanField(default=False, help_text="Part of the synthetic demo.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ModelVersionQuerySet.as_manager()

    class Meta:
        verbose_name = _("model version")
        verbose_name_plural = _("model versions")
        ordering = ["family", "-created_at"]
        constraints = [models.UniqueConstraint(fields=["family", "label"], name="model_version_family_label")]
        indexes = [models.Index(fields=["family", "status"])]

    def __str__(self) -> str:
        return self.ref

    @property
    def ref(self) -> str:
        return f"{self.family}:{self.label}"


@unique
class AuditAction(StrEnum):
    """Every action an audit row records, one member each: services pass a member, never a string, so
    a reader can filter on a member and trust that nothing else was written (`<noun>.<verb>`)."""

    API_TOKEN_ADDRESS_LOCKED_OUT = "api_token.address_locked_out"
    API_TOKEN_CREATE = "api_token.create"
    API_TOKEN_REVOKE = "api_token.revoke"
    DECISION_APPROVE = "decision.approve"
    DECISION_INCUMBENT_CONFIRM = "decision.incumbent_confirm"
    DECISION_INCUMBENT_REQUEST = "decision.incumbent_request"
    DECISION_OVERRIDE_CONFIRM = "decision.override_confirm"
    DECISION_OVERRIDE_REQUEST = "decision.override_request"
    DECISION_REJECT = "decision.reject"
    EVAL_SUITE_IMPORT = "eval_suite.import"
    # A suite version built from reviewed live questions (canary.services.live_suite).
    EVAL_SUITE_FROM_REVIEWS = "eval_suite.from_reviews"
    EXPERIMENT_CREATE = "experiment.create"
    EXPERIMENT_HORIZON_REGISTER = "experiment.horizon_register"
    EXPERIMENT_LOOK = "experiment.look"
    EXPERIMENT_PAUSED = "experiment.paused"
    EXPERIMENT_PLAN_REPLACE = "experiment.plan_replace"
    EXPERIMENT_PROMOTED = "experiment.promoted"
    EXPERIMENT_RAMP = "experiment.ramp"
    # A ramp the lifecycle refused and keeps a record of (leaving the shadow step without a clean window).
    EXPERIMENT_RAMP_REFUSED = "experiment.ramp_refused"
    EXPERIMENT_ROLLED_BACK = "experiment.rolled_back"
    # A start (from draft) or a resume (from paused): the row's `before` status tells which.
    EXPERIMENT_RUNNING = "experiment.running"
    EXPERIMENT_UNBLIND = "experiment.unblind"
    FOLLOW_UP_DETECTOR_THRESHOLDS_SET = "follow_up_detector.thresholds_set"
    FOLLOW_UP_REVIEW_RECORD = "follow_up_review.record"
    GATE_POLICY_CHANGE = "gate_policy.change"
    GATE_POLICY_CREATE = "gate_policy.create"
    GATE_RUN_CANCEL = "gate_run.cancel"
    GATE_RUN_FAIL = "gate_run.fail"
    GATE_RUN_FINISH = "gate_run.finish"
    GATE_RUN_REQUEUE = "gate_run.requeue"
    GATE_RUN_START = "gate_run.start"
    MODEL_VERSION_DELETE = "model_version.delete"
    MODEL_VERSION_EDIT = "model_version.edit"
    MODEL_VERSION_OFFLINE_GATE_PASSED = "model_version.offline_gate_passed"
    MODEL_VERSION_REGISTER = "model_version.register"
    MODEL_VERSION_SERVING_SET = "model_version.serving_set"
    MODEL_VERSION_TRANSITION = "model_version.transition"
    PROBE_SET_IMPORT = "probe_set.import"
    SIGN_IN_ACCOUNT_LOCKED_OUT = "sign_in.account_locked_out"
    SIGN_IN_ADDRESS_LOCKED_OUT = "sign_in.address_locked_out"
    USER_PASSWORD_SET = "user.password_set"
    USER_ROLE_GRANT = "user.role_grant"
    USER_ROLES_SET = "user.roles_set"


class AuditLog(models.Model):
    """Append-only record of every state change that matters."""

    # Who acted stays who acted: a user with audit rows is deactivated, not deleted.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_name = models.CharField(max_length=150, help_text="User name, or the system part.")
    action = models.CharField(max_length=100)
    target_type = models.CharField(max_length=100)
    target_id = models.CharField(max_length=100)
    target_repr = models.CharField(max_length=300)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        verbose_name = _("audit log entry")
        verbose_name_plural = _("audit log")
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["target_type", "target_id"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_name} {self.action} {self.target_repr}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("Audit rows are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValueError("Audit rows are append-only.")


class EvalSuite(models.Model):
    """A versioned set of golden items. Immutable once a gate run has used it."""

    name = models.CharField(max_length=100, validators=[slug_validator])
    version = models.PositiveIntegerField()
    description = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64)
    item_count = models.PositiveIntegerField()
    is_demo = models.BooleanField(default=False, help_text="Synthetic demo data.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Set when a gate run first uses the suite (`eval_suite_lock`); a locked suite is never edited.
    locked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("eval suite")
        verbose_name_plural = _("eval suites")
        ordering = ["name", "-version"]
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="eval_suite_name_version")]

    def __str__(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def locked(self) -> bool:
        return self.locked_at is not None


class EvalItem(models.Model):
    suite = models.ForeignKey(EvalSuite, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    external_id = models.CharField(max_length=200)
    input = models.TextField()
    label = models.CharField(max_length=200, blank=True)
    reference = models.TextField(blank=True)
    language = models.CharField(max_length=10, blank=True)
    tags = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = _("eval item")
        verbose_name_plural = _("eval items")
        ordering = ["suite", "position"]
        constraints = [models.UniqueConstraint(fields=["suite", "external_id"], name="eval_item_suite_id")]

    def __str__(self) -> str:
        return f"{self.suite}#{self.external_id}"


class ApiToken(models.Model):
    """A bearer token for CI. Only a hash of the key is stored; the key is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    key_prefix = models.CharField(max_length=8)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")

    def __str__(self) -> str:
        return f"{self.key_prefix}… ({self.user})"
