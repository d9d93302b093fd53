"""Canary experiments and their telemetry.

An experiment sends a sticky share of units (users, or sessions without a user) to the
candidate; `engines.routing` decides who. Events are stored as sent by the chat app (or by the
proxy), idempotent by (experiment, event_id), and indexed for per-arm aggregation in SQL.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from engines.routing import ARMS, BUCKETS
from registry.models import ModelVersion, slug_validator

ARM_CHOICES = [(arm, arm) for arm in ARMS]


# The ramp plan's shadow step (its first, if any): see `Experiment.ramp`.
SHADOW_STEP = "shadow"


def _salt() -> str:
    return secrets.token_hex(8)


class Experiment(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        RUNNING = "running"
        PAUSED = "paused"
        PROMOTED = "promoted"
        ROLLED_BACK = "rolled_back"

    ACTIVE = (Status.RUNNING, Status.PAUSED)

    name = models.CharField(max_length=100, unique=True, validators=[slug_validator])
    family = models.CharField(max_length=100, db_index=True)
    baseline = models.ForeignKey(ModelVersion, on_delete=models.PROTECT, related_name="+")
    candidate = models.ForeignKey(ModelVersion, on_delete=models.PROTECT, related_name="+")
    # The candidate's share in buckets of 10 000 (100 = 1 %, 1 = 0.01 %).
    traffic_buckets = models.PositiveIntegerField(default=100)
    salt = models.CharField(max_length=64, default=_salt)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT)
    # Ramp plan: shares in percent, increasing; `ramp_step` is the index of the current one. The first
    # step may be "shadow" (`SHADOW_STEP`): every user on the baseline, `shadow_percent` of the
    # questions mirrored to the candidate (canary.services.shadow).
    ramp = models.JSONField(default=list, blank=True)
    ramp_step = models.PositiveIntegerField(default=0)
    shadow_percent = models.FloatField(default=100.0)
    # Whether leaving the shadow step for the first user step needs a passing shadow window.
    require_clean_shadow = models.BooleanField(default=False)
    # Whether a passing analysis may move to the next ramp step without a release manager.
    ramp_auto = models.BooleanField(default=False)
    guardrails = models.JSONField(default=dict, blank=True)
    # sha256 of the QA tokens that may force an arm (the tokens themselves are never stored).
    qa_token_hashes = models.JSONField(default=list, blank=True)
    end_reason = models.TextField(blank=True)
    # Made by the bundled demo's installer (SYNTHETIC traffic), not by a person.
    is_demo = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # When the candidate's share last changed (start, resume, ramp) and what it became: a unit's arm
    # is stable only since then, so the gate's traffic layers read their window from here and check
    # the split against `window_buckets` (a rollback or promotion ends the window, not this share).
    share_since = models.DateTimeField(null=True, blank=True)
    window_buckets = models.PositiveIntegerField(default=0)
    # While paused everyone is on the baseline: the window ends here until the experiment resumes.
    paused_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # Layer 3's fixed horizon, registered once when the experiment starts (gate.services.horizons): the
    # metric, the units per arm (null when none could be sized, with the reason) and how it was sized.
    business_horizon = models.JSONField(default=dict, blank=True)
    # Layer 2's plan, registered with layer 3's (gate.services.horizons): its frozen settings, the
    # answered questions per arm of its horizon, and its one look once taken.
    follow_up_horizon = models.JSONField(default=dict, blank=True)
    # Before their looks the traffic layers are blind; a person with `canary.unblind_experiment` may
    # unblind them (canary.services.plans.experiment_unblind), shown beside every number after it.
    unblinded_at = models.DateTimeField(null=True, blank=True)
    unblinded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    unblinded_by_name = models.CharField(max_length=150, blank=True)
    unblind_reason = models.TextField(blank=True)

    class Meta:
        verbose_name = _("experiment")
        verbose_name_plural = _("experiments")
        permissions = [("unblind_experiment", "Can unblind an experiment's traffic layers before their look")]
        constraints = [
            models.UniqueConstraint(
                fields=["family"],
                condition=Q(status__in=["running", "paused"]),
                name="canary_one_active_experiment_per_family",
            ),
            models.CheckConstraint(
                condition=Q(traffic_buckets__lte=BUCKETS), name="canary_traffic_at_most_all_buckets"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def traffic_percent(self) -> float:
        return self.traffic_buckets * 100 / BUCKETS

    @property
    def has_shadow_step(self) -> bool:
        return bool(self.ramp) and self.ramp[0] == SHADOW_STEP

    @property
    def in_shadow(self) -> bool:
        """At the plan's shadow step: users on the baseline, questions mirrored to the candidate."""
        return self.has_shadow_step and self.ramp_step == 0 and self.traffic_buckets == 0


class TrafficShareChange(models.Model):
    """One change of the candidate's share of an experiment's units, written by the lifecycle service
    that made it, in the transaction of its audit row: the dashboard's share history reads these rows,
    never the audit log."""

    class Cause(models.TextChoices):
        START = "start"
        RAMP = "ramp"
        PAUSE = "pause"
        RESUME = "resume"
        ROLLBACK = "rollback"
        PROMOTE = "promote"

    # The causes that open a traffic window (a stretch at one share); the others close one.
    OPENING = (Cause.START, Cause.RESUME, Cause.RAMP)

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="share_changes")
    cause = models.CharField(max_length=20, choices=Cause.choices)
    # The share in force from `at` on, in buckets of 10 000: 0 while paused and after a rollback (everyone
    # on the baseline), all of them after a promotion.
    buckets = models.PositiveIntegerField(validators=[MaxValueValidator(BUCKETS)])
    at = models.DateTimeField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, help_text="User name, or the system part.")

    class Meta:
        verbose_name = _("traffic share change")
        verbose_name_plural = _("traffic share changes")
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["experiment", "at"])]

    def __str__(self) -> str:
        return f"{self.experiment_id}:{self.cause} {self.percent:g} %@{self.at:%Y-%m-%d %H:%M}"

    @property
    def percent(self) -> float:
        return self.buckets * 100 / BUCKETS


class TurnEvent(models.Model):
    """One chat turn: a user question or an assistant answer, on one arm."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"

    class Source(models.TextChoices):
        CLIENT = "client"  # sent by the chat app to /api/v1/events
        PROXY = "proxy"  # recorded by the router's proxy
        PROBE = "probe"  # stress probe traffic: never counted as user behaviour

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="turns")
    event_id = models.CharField(max_length=100)
    session_id = models.CharField(max_length=200)
    user_id = models.CharField(max_length=200, blank=True)
    arm = models.CharField(max_length=10, choices=ARM_CHOICES)
    version = models.ForeignKey(
        ModelVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    turn_index = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=Role.choices)
    text = models.TextField(blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    # A streamed answer (proxy only): when its first text reached the proxy (ms after the request came
    # in), how many tokens it had (the upstream's usage, else its chunks of text), and whether the
    # client went away before it ended (the answer stored is what had been sent).
    streamed = models.BooleanField(default=False)
    first_token_ms = models.FloatField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    abandoned = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    # The candidate failed and the baseline answered instead (proxy only).
    fallback = models.BooleanField(default=False)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.CLIENT)
    # User turns only, set by the follow-up detector (`engines.follow_up.detector.KINDS`); null until judged.
    follow_up_kind = models.CharField(max_length=12, null=True, blank=True)
    # Set when the trained detector judged the turn (not by a rule such as a session's first turn): the
    # pair's language ("en"/"zh"), whose measured error rates layer 2 corrects for, and the detector.
    follow_up_language = models.CharField(max_length=10, null=True, blank=True)
    follow_up_detector = models.CharField(max_length=40, blank=True)
    occurred_at = models.DateTimeField()
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("turn event")
        verbose_name_plural = _("turn events")
        constraints = [
            models.UniqueConstraint(fields=["experiment", "event_id"], name="canary_turn_event_once"),
        ]
        indexes = [
            models.Index(fields=["experiment", "arm", "role", "occurred_at"], name="canary_turn_arm_role"),
            models.Index(fields=["experiment", "session_id", "turn_index"], name="canary_turn_session"),
            # The detector's queue: user turns not judged yet.
            models.Index(
                fields=["experiment", "occurred_at"],
                condition=Q(role="user", follow_up_kind__isnull=True),
                name="canary_turn_unjudged",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.experiment_id}:{self.event_id}"


class FollowUpDetectorConfig(models.Model):
    """A family's follow-up detector thresholds (`engines.follow_up.detector.FollowUpThresholds`); a family
    without a row uses the defaults tuned on the bundled labelled set."""

    family = models.CharField(max_length=100, unique=True)
    thresholds = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("follow-up detector config")
        verbose_name_plural = _("follow-up detector configs")

    def __str__(self) -> str:
        return f"follow-up detector of {self.family}"


class OutcomeEvent(models.Model):
    """A business outcome of one unit (e.g. review hours for one contract) on one arm."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="outcomes")
    event_id = models.CharField(max_length=100)
    unit_id = models.CharField(max_length=200)
    user_id = models.CharField(max_length=200, blank=True)
    arm = models.CharField(max_length=10, choices=ARM_CHOICES)
    metric = models.CharField(max_length=100)
    value = models.FloatField()
    occurred_at = models.DateTimeField()
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("outcome event")
        verbose_name_plural = _("outcome events")
        constraints = [
            models.UniqueConstraint(fields=["experiment", "event_id"], name="canary_outcome_event_once"),
        ]
        indexes = [
            models.Index(fields=["experiment", "metric", "arm"], name="canary_outcome_metric_arm"),
            # CUPED's pre-period: a user's outcomes of a metric before their first exposure.
            models.Index(fields=["user_id", "metric", "occurred_at"], name="canary_outcome_user_metric"),
        ]

    def __str__(self) -> str:
        return f"{self.experiment_id}:{self.event_id}"


class ProbeSet(models.Model):
    """Stress probes: inputs aimed at a family's known weaknesses, each with its expected label."""

    name = models.CharField(max_length=100, unique=True, validators=[slug_validator])
    family = models.CharField(max_length=100, db_index=True)
    description = models.TextField(blank=True)
    is_demo = models.BooleanField(default=False, help_text="SYNTHETIC probes of the bundled demo.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("probe set")
        verbose_name_plural = _("probe sets")

    def __str__(self) -> str:
        return self.name


class Probe(models.Model):
    probe_set = models.ForeignKey(ProbeSet, on_delete=models.CASCADE, related_name="probes")
    external_id = models.CharField(max_length=200)
    weakness = models.CharField(max_length=100)
    input = models.TextField()
    expected_label = models.CharField(max_length=200)
    language = models.CharField(max_length=10)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = _("probe")
        verbose_name_plural = _("probes")
        constraints = [models.UniqueConstraint(fields=["probe_set", "external_id"], name="canary_probe_once")]

    def __str__(self) -> str:
        return self.external_id


class ProbeRun(models.Model):
    """Every probe of a set through both versions of an experiment, paired per probe."""

    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="probe_runs")
    probe_set = models.ForeignKey(ProbeSet, on_delete=models.PROTECT, related_name="runs")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    report = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("probe run")
        verbose_name_plural = _("probe runs")

    def __str__(self) -> str:
        return f"{self.experiment_id}:{self.probe_set_id}:{self.pk}"


class ProbeResult(models.Model):
    probe_run = models.ForeignKey(ProbeRun, on_delete=models.CASCADE, related_name="results")
    probe = models.ForeignKey(Probe, on_delete=models.CASCADE, related_name="+")
    arm = models.CharField(max_length=10, choices=ARM_CHOICES)
    version = models.ForeignKey(ModelVersion, on_delete=models.PROTECT, related_name="+")
    output_label = models.CharField(max_length=200, blank=True)
    output_text = models.TextField(blank=True)
    correct = models.BooleanField()
    latency_ms = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        verbose_name = _("probe result")
        verbose_name_plural = _("probe results")
        constraints = [
            models.UniqueConstraint(fields=["probe_run", "probe", "arm"], name="canary_probe_result_once")
        ]

    def __str__(self) -> str:
        return f"{self.probe_run_id}:{self.probe_id}:{self.arm}"


class CanaryAnalysis(models.Model):
    """One comparison of the candidate with the baseline on an experiment's traffic so far."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="analyses")
    verdict = models.CharField(max_length=20)  # pass / marginal / fail / insufficient_data
    reasons = models.JSONField(default=list)
    metrics = models.JSONField(default=list)  # one result per metric, with its numbers
    action = models.CharField(max_length=50, blank=True)  # rolled_back, ramped, waiting_for_release_manager
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        verbose_name = _("canary analysis")
        verbose_name_plural = _("canary analyses")

    def __str__(self) -> str:
        return f"{self.experiment_id}:{self.verdict}@{self.created_at:%Y-%m-%d %H:%M}"


class FollowUpReview(models.Model):
    """A person's label of one live user turn (the follow-up review queue): what the turn really is,
    to measure the follow-up detector on live traffic and to grow its labelled set. One label per
    reviewer and turn; the first label of a turn is the one that counts (agreement, export), later
    ones are second opinions."""

    class Label(models.TextChoices):
        FOLLOW_UP = "follow_up", _("follow-up")
        DEEPENING = "deepening", _("deepening")
        OTHER = "new", _("other")  # the detector's "new": another matter, a closing, a greeting

    turn = models.ForeignKey(TurnEvent, on_delete=models.CASCADE, related_name="reviews")
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="follow_up_reviews")
    label = models.CharField(max_length=12, choices=Label.choices)
    # The turn's kind from the detector when it was labelled (a turn is judged once), kept here so
    # agreement is counted from this table alone.
    detector_kind = models.CharField(max_length=12)
    is_first = models.BooleanField(default=True)
    # The reviewer's expected answer to the turn's question (the user turn two before it), optional: a
    # clause-type label of the family's suite and/or a reference text. A first label with one makes the
    # question a candidate item of a suite built from live questions (canary.services.live_suite).
    # A database default too: rows written without them (a release before this one during a rolling
    # deploy, bulk SQL such as bench/review_queue.py's) are reviews without an expected answer.
    expected_label = models.CharField(max_length=200, blank=True, db_default="")
    expected_reference = models.TextField(blank=True, db_default="")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="follow_up_reviews"
    )
    reviewer_name = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("follow-up review")
        verbose_name_plural = _("follow-up reviews")
        constraints = [
            models.UniqueConstraint(fields=["turn", "reviewer_name"], name="canary_follow_up_review_once"),
            models.UniqueConstraint(
                fields=["turn"], condition=Q(is_first=True), name="canary_follow_up_review_one_first"
            ),
        ]
        indexes = [
            # Layer 2's agreement: the first labels of an experiment, grouped by (label, kind).
            models.Index(
                fields=["experiment", "label", "detector_kind"],
                condition=Q(is_first=True),
                name="canary_review_first",
            )
        ]

    def __str__(self) -> str:
        return f"{self.turn_id}:{self.label} by {self.reviewer_name}"


class ShadowAnswer(models.Model):
    """The candidate's answer to a question mirrored from a baseline answer during the shadow step.
    Never user traffic: it lives in its own table, which no user-traffic query reads. The baseline's
    answer is its turn event `baseline_event_id` (an id, not a foreign key: turn events may reach the
    store later, through the telemetry stream). A mirror dropped because the queue was full is a row
    with `dropped` and nothing else, so the window counts its drops."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="shadow_answers")
    baseline_event_id = models.CharField(max_length=100)
    version = models.ForeignKey(ModelVersion, on_delete=models.PROTECT, related_name="+")
    streamed = models.BooleanField(default=False)
    text = models.TextField(blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    first_token_ms = models.FloatField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    dropped = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("shadow answer")
        verbose_name_plural = _("shadow answers")
        constraints = [
            models.UniqueConstraint(
                fields=["experiment", "baseline_event_id"], name="canary_shadow_answer_once"
            )
        ]
        indexes = [models.Index(fields=["experiment", "created_at"], name="canary_shadow_window")]

    def __str__(self) -> str:
        return f"{self.experiment_id}:shadow:{self.baseline_event_id}"
