from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from registry.models import EvalItem, EvalSuite, ModelVersion, slug_validator


class GatePolicy(models.Model):
    """Named thresholds and sample sizes; a run keeps a snapshot of the config it used."""

    name = models.CharField(max_length=100, unique=True, validators=[slug_validator])
    description = models.TextField(blank=True)
    config = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("gate policy")
        verbose_name_plural = _("gate policies")

    def __str__(self) -> str:
        return self.name


class GateRun(models.Model):
    """One evaluation of a candidate against its baseline under a policy.

    `status` is how the execution went; `verdict` is what the evaluation concluded:
    succeeded = every layer was computed; failed = a model could not be run (bad checkpoint,
    endpoint refusing); error = the infrastructure gave up (worker lost, time limit, a bug).
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        ERROR = "error"
        CANCELLED = "cancelled"  # by a person: a queued run never starts, a running one stops

    class Verdict(models.TextChoices):
        PENDING = "pending"
        PASS = "pass"
        FAIL = "fail"
        INSUFFICIENT_DATA = "insufficient_data"
        ERROR = "error"

    candidate = models.ForeignKey(ModelVersion, on_delete=models.PROTECT, related_name="gate_runs")
    baseline = models.ForeignKey(
        ModelVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    suite = models.ForeignKey(EvalSuite, on_delete=models.PROTECT, related_name="gate_runs")
    policy = models.ForeignKey(GatePolicy, null=True, blank=True, on_delete=models.SET_NULL)
    policy_config = models.JSONField(default=dict)
    # What the run changed from its named policy (a weakened gate is not a pass to approve on).
    policy_overrides = models.JSONField(default=dict, blank=True)
    # The canary experiment whose traffic feeds the follow-up and business layers.
    experiment = models.ForeignKey(
        "canary.Experiment", null=True, blank=True, on_delete=models.PROTECT, related_name="gate_runs"
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)
    # The worker's last report: each layer's units done of total, the current layer and the ETA.
    progress_detail = models.JSONField(default=dict, blank=True)
    verdict = models.CharField(max_length=20, choices=Verdict.choices, default=Verdict.PENDING)
    verdict_reasons = models.JSONField(default=list, blank=True)
    # Why the run ended in error or failed, in English (logs, the CLI); `error_reason` the same as a
    # reason's JSON, worded for each reader (runs from before codes have only the sentence).
    error_message = models.TextField(blank=True)
    error_reason = models.JSONField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("gate run")
        verbose_name_plural = _("gate runs")
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "heartbeat_at"])]

    def __str__(self) -> str:
        return f"gate run {self.pk} of {self.candidate_id}"

    @property
    def is_finished(self) -> bool:
        return self.status in {
            self.Status.SUCCEEDED,
            self.Status.FAILED,
            self.Status.ERROR,
            self.Status.CANCELLED,
        }


class LayerResult(models.Model):
    gate_run = models.ForeignKey(GateRun, on_delete=models.CASCADE, related_name="layers")
    # A layer's name in `gate.layers.registry` (which says what its details hold).
    layer = models.CharField(max_length=30)
    verdict = models.CharField(max_length=20, choices=GateRun.Verdict.choices)
    metric = models.CharField(max_length=100)
    estimate = models.FloatField(null=True, blank=True)
    ci_low = models.FloatField(null=True, blank=True)
    ci_high = models.FloatField(null=True, blank=True)
    threshold = models.FloatField(null=True, blank=True)
    reasons = models.JSONField(default=list, blank=True)
    details = models.JSONField(default=dict, blank=True)
    wall_seconds = models.FloatField(default=0.0)
    device = models.CharField(max_length=50, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("layer result")
        verbose_name_plural = _("layer results")
        ordering = ["gate_run", "id"]
        constraints = [models.UniqueConstraint(fields=["gate_run", "layer"], name="layer_result_run_layer")]

    def __str__(self) -> str:
        return f"{self.layer} of run {self.gate_run_id}: {self.verdict}"


class SampleResult(models.Model):
    """One model output on one input within a layer, kept for drill-down."""

    layer_result = models.ForeignKey(LayerResult, on_delete=models.CASCADE, related_name="samples")
    version = models.ForeignKey(ModelVersion, on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey(EvalItem, null=True, on_delete=models.CASCADE, related_name="+")
    # Position in the layer's generated input set (perturbed samples); None for suite items.
    sample_index = models.PositiveIntegerField(null=True, blank=True)
    # Which of the item's repeated answers (clean accuracy's `repeats`, from 0); 0 when asked once.
    repeat = models.PositiveSmallIntegerField(default=0)
    perturbation = models.CharField(max_length=50, blank=True)
    diff = models.TextField(blank=True)
    input_text = models.TextField()
    output_label = models.CharField(max_length=200, blank=True)
    output_text = models.TextField(blank=True)
    correct = models.BooleanField(null=True)
    latency_ms = models.FloatField(default=0.0)
    error = models.TextField(blank=True)

    class Meta:
        verbose_name = _("sample result")
        verbose_name_plural = _("sample results")
        ordering = ["layer_result", "id"]
        indexes = [models.Index(fields=["layer_result", "version", "correct"])]
        constraints = [
            models.UniqueConstraint(
                fields=["layer_result", "version", "sample_index"],
                condition=models.Q(sample_index__isnull=False),
                name="sample_result_unique_index",
            )
        ]

    def __str__(self) -> str:
        return f"{self.version_id} on item {self.item_id}: {self.output_label or self.error}"


class ModelOutput(models.Model):
    """A version's answer to one exact input, reused across runs and after a worker crash."""

    version = models.ForeignKey(ModelVersion, on_delete=models.CASCADE, related_name="+")
    input_hash = models.CharField(max_length=64)
    label = models.CharField(max_length=200, blank=True)
    text = models.TextField(blank=True)
    latency_ms = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("model output")
        verbose_name_plural = _("model outputs")
        constraints = [
            models.UniqueConstraint(fields=["version", "input_hash"], name="model_output_version_input")
        ]

    def __str__(self) -> str:
        return f"{self.version_id}:{self.input_hash[:12]} -> {self.label}"


# The decisions that confirm another release manager's request (and must name it).
CONFIRMING = ["override_confirm", "incumbent_confirm"]


class Decision(models.Model):
    """A release manager's decision on a version. Immutable: a change of mind is a new decision.

    approve / reject: final, they move the version's status. Approving a version whose latest gate
    run did not pass is an override: one release manager files `override_request`, a second one
    files `override_confirm` pointing at it, and only then is the version approved. The version that
    already serves production when its family starts (the incumbent) is declared the same way:
    `incumbent_request`, then another release manager's `incumbent_confirm`, and it is `promoted`."""

    class Action(models.TextChoices):
        APPROVE = "approve"
        REJECT = "reject"
        OVERRIDE_REQUEST = "override_request"
        OVERRIDE_CONFIRM = "override_confirm"
        INCUMBENT_REQUEST = "incumbent_request"
        INCUMBENT_CONFIRM = "incumbent_confirm"

    # The second signature of a two-person act, and the request it confirms.
    CONFIRMS = {
        Action.OVERRIDE_CONFIRM: Action.OVERRIDE_REQUEST,
        Action.INCUMBENT_CONFIRM: Action.INCUMBENT_REQUEST,
    }

    version = models.ForeignKey(ModelVersion, on_delete=models.PROTECT, related_name="decisions")
    gate_run = models.ForeignKey(
        GateRun, null=True, blank=True, on_delete=models.PROTECT, related_name="decisions"
    )
    # The gate run's verdict when the decision was taken.
    gate_verdict = models.CharField(max_length=20, blank=True)
    action = models.CharField(max_length=20, choices=Action.choices)
    reason = models.TextField()
    confirms = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="confirmation"
    )
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("release decision")
        verbose_name_plural = _("release decisions")
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(action__in=CONFIRMING, confirms__isnull=False)
                | (~models.Q(action__in=CONFIRMING) & models.Q(confirms__isnull=True)),
                name="decision_confirm_points_at_request",
            )
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.version_id} by {self.decided_by_id}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("Decisions are immutable.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValueError("Decisions are immutable.")


class AdversarialSet(models.Model):
    """The word-level attack of one version on a seeded draw of a suite's items (layer 1, adversarial
    modes): each drawn item's outcome and final text, appended chunk by chunk as the attack runs. It
    is the cache (an unchanged version is not attacked again), the resume point after a crash, and, in
    transfer mode, the fixed set on which later candidates are scored."""

    suite = models.ForeignKey(EvalSuite, on_delete=models.PROTECT, related_name="+")
    version = models.ForeignKey(ModelVersion, on_delete=models.PROTECT, related_name="+")
    # What the version was when attacked: its backend config's hash (a changed checkpoint is new).
    version_config_hash = models.CharField(max_length=64)
    recipe = models.CharField(max_length=50)
    seed = models.PositiveIntegerField()
    samples = models.PositiveIntegerField()
    query_budget = models.PositiveIntegerField()
    # What the search read of the version: "scores" (class probabilities, the score-based search) or
    # "labels" (the answer's label alone, the hard-label search): two different sets.
    access = models.CharField(max_length=10, default="scores")
    # The drawn item ids, in order, and one entry per attacked item so far (same order).
    item_ids = models.JSONField(default=list)
    examples = models.JSONField(default=list)
    seconds = models.FloatField(default=0.0)
    # The tokens the attack's queries spent, as its endpoint counted them; None for a model run here,
    # and for a set begun before they were counted.
    tokens_in = models.PositiveBigIntegerField(null=True, blank=True)
    tokens_out = models.PositiveBigIntegerField(null=True, blank=True)
    # The lease of the worker attacking it now ("" when none): a gate run's other versions are attacked
    # by other gpu workers at the same time, and a worker that stops beating loses the lease.
    worker = models.CharField(max_length=300, blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "suite",
                    "version",
                    "version_config_hash",
                    "recipe",
                    "seed",
                    "samples",
                    "query_budget",
                    "access",
                ],
                name="adversarial_set_unique_access",
            )
        ]

    def __str__(self) -> str:
        return f"{self.recipe} seed {self.seed} against {self.version_id} on suite {self.suite_id}"

    @property
    def complete(self) -> bool:
        return len(self.examples) == len(self.item_ids)
