"""Which version serves a unit of an experiment (see `engines.routing` for the bucketing)."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from canary.models import Experiment
from canary.services.experiments import qa_token_hash
from engines.input_checks import text_problem
from engines.reasons import gettext_noop, reason, wordings_register
from engines.routing import ARMS, BASELINE, CANDIDATE, Assignment, arm_assign, bucket_of
from registry.errors import ApplicationError, CommonCode
from registry.models import ModelVersion


class AssignmentCode(StrEnum):
    NO_UNIT = "assignment.no_unit"
    NO_UNIT_NOTE = "assignment.no_unit_note"
    UNKNOWN_ARM = "assignment.unknown_arm"
    QA_TOKEN_REQUIRED = "assignment.qa_token_required"
    NOT_ALLOWED_NOTE = "assignment.not_allowed_note"


wordings_register(
    {
        AssignmentCode.NO_UNIT: gettext_noop("A user_id or a session_id is needed to assign an arm."),
        AssignmentCode.NO_UNIT_NOTE: gettext_noop("user_id or session_id required"),
        AssignmentCode.UNKNOWN_ARM: gettext_noop("Unknown arm '{arm}'."),
        AssignmentCode.QA_TOKEN_REQUIRED: gettext_noop(
            "Forcing an arm needs a QA token on the experiment's allow-list."
        ),
        AssignmentCode.NOT_ALLOWED_NOTE: gettext_noop("not on the allow-list"),
    }
)


@dataclass(frozen=True)
class Routing:
    assignment: Assignment
    unit_id: str
    version: ModelVersion


def unit_id_of(*, user_id: str | None, session_id: str | None) -> str:
    """The sticky unit: the user where there is one, else the session."""
    for field, value in (("user_id", user_id), ("session_id", session_id)):
        problem = text_problem(value) if value else None
        if problem:  # it would be stored with the unit's events, or fail to hash
            raise ApplicationError(
                reason(CommonCode.FIELD_PROBLEM, field=field, problem=problem), fields={field: [problem]}
            )
    if user_id:
        return f"user:{user_id}"
    if session_id:
        return f"session:{session_id}"
    raise ApplicationError(
        reason(AssignmentCode.NO_UNIT), fields={"user_id": [reason(AssignmentCode.NO_UNIT_NOTE)]}
    )


def _candidate_buckets(experiment: Experiment) -> int:
    """Running: the share; promoted: everyone; draft, paused, rolled back: nobody."""
    if experiment.status == Experiment.Status.RUNNING:
        return experiment.traffic_buckets
    return experiment.traffic_buckets if experiment.status == Experiment.Status.PROMOTED else 0


def qa_token_allowed(*, experiment: Experiment, qa_token: str | None) -> bool:
    """Whether `qa_token` is on the experiment's allow-list (tokens that may force an arm)."""
    presented = qa_token_hash(qa_token or "")
    return bool(qa_token) and any(hmac.compare_digest(presented, h) for h in experiment.qa_token_hashes)


def experiment_assign(
    *,
    experiment: Experiment,
    user_id: str | None = None,
    session_id: str | None = None,
    force_arm: str | None = None,
    qa_token: str | None = None,
) -> Routing:
    """The arm and version for a user (or session). `force_arm` needs an allow-listed `qa_token`."""
    unit_id = unit_id_of(user_id=user_id, session_id=session_id)
    if force_arm is not None:
        if force_arm not in (BASELINE, CANDIDATE):
            raise ApplicationError(
                reason(AssignmentCode.UNKNOWN_ARM, arm=force_arm),
                fields={"force_arm": [reason(CommonCode.ONE_OF, choices=[BASELINE, CANDIDATE])]},
            )
        if not qa_token_allowed(experiment=experiment, qa_token=qa_token):
            raise ApplicationError(
                reason(AssignmentCode.QA_TOKEN_REQUIRED),
                code="permission_denied",
                fields={"qa_token": [reason(AssignmentCode.NOT_ALLOWED_NOTE)]},
                status_code=403,
            )
    assignment = arm_assign(
        salt=experiment.salt,
        unit_id=unit_id,
        candidate_buckets=_candidate_buckets(experiment),
        forced_arm=force_arm,
    )
    version = experiment.candidate if assignment.arm == CANDIDATE else experiment.baseline
    return Routing(assignment=assignment, unit_id=unit_id, version=version)


Segment = tuple[datetime | None, datetime | None, frozenset[str]]  # from, until (None: open), arms
ON_BASELINE, ON_CANDIDATE, EITHER = frozenset({BASELINE}), frozenset({CANDIDATE}), frozenset(ARMS)


@dataclass(frozen=True)
class ArmHistory:
    """Which arms the router gave a unit over an experiment's life, as far as the experiment's
    stored share history tells (`experiment_arm_history`); QA overrides aside."""

    salt: str
    window_buckets: int
    inside: tuple[Segment, ...]  # units whose bucket is below the window's share
    outside: tuple[Segment, ...]

    def arms_at(self, *, unit_id: str, at: datetime, skew: timedelta) -> frozenset[str]:
        """The arms the router may have given `unit_id` at some instant within `skew` of `at`."""
        inside = bucket_of(salt=self.salt, unit_id=unit_id) < self.window_buckets
        earliest, latest = at - skew, at + skew
        arms: frozenset[str] = frozenset()
        for since, until, on in self.inside if inside else self.outside:
            if (since is None or since <= latest) and (until is None or until > earliest):
                arms |= on
        return arms


def experiment_arm_history(*, experiment: Experiment) -> ArmHistory:
    """The router's arms over the experiment's life. It stores its last share change (`share_since`,
    the window's share `window_buckets`), its start, pause and end, not every earlier step, so:
    - before the start (draft) everyone was on the baseline;
    - from the start to `share_since` the share rose to at most the window's (a share only grows
      while an experiment lives) and pauses sent everyone to the baseline, in steps not stored: a
      unit inside the window's share may have been on either arm, one outside it on the baseline;
    - from `share_since`, the window's share decides, until a pause (then the baseline) or the end;
    - after the end, the baseline (rolled back) or the candidate (promoted)."""
    start = experiment.started_at
    if start is None:
        return ArmHistory(experiment.salt, 0, (), ((None, None, ON_BASELINE),))
    since = experiment.share_since or start
    pause, end = experiment.paused_at, experiment.ended_at

    def segments(before: frozenset[str], window: frozenset[str]) -> tuple[Segment, ...]:
        out: list[Segment] = [(None, start, ON_BASELINE), (start, since, before)]
        if pause is not None:  # a ramp while paused moves `share_since` past the pause
            out += [(since, max(pause, since), window), (max(pause, since), end, ON_BASELINE)]
        else:
            out.append((since, end, window))
        if end is not None:
            promoted = experiment.status == Experiment.Status.PROMOTED
            out.append((end, None, ON_CANDIDATE if promoted else ON_BASELINE))
        return tuple(out)

    return ArmHistory(
        salt=experiment.salt,
        window_buckets=experiment.window_buckets,
        inside=segments(EITHER, ON_CANDIDATE),
        outside=segments(ON_BASELINE, ON_BASELINE),
    )
