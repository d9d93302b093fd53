"""Which version serves a unit of an experiment (see `engines.routing` for the bucketing)."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from canary.models import Experiment
from canary.services.experiments import qa_token_hash
from engines.input_checks import text_problem
from engines.routing import BASELINE, CANDIDATE, Assignment, arm_assign
from registry.errors import ApplicationError
from registry.models import ModelVersion


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
            raise ApplicationError(f"{field} {problem}.", fields={field: [problem]})
    if user_id:
        return f"user:{user_id}"
    if session_id:
        return f"session:{session_id}"
    raise ApplicationError(
        "A user_id or a session_id is needed to assign an arm.",
        fields={"user_id": ["user_id or session_id required"]},
    )


def _candidate_buckets(experiment: Experiment) -> int:
    """Running: the share; promoted: everyone; draft, paused, rolled back: nobody."""
    if experiment.status == Experiment.Status.RUNNING:
        return experiment.traffic_buckets
    return experiment.traffic_buckets if experiment.status == Experiment.Status.PROMOTED else 0


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
                f"Unknown arm {force_arm!r}.", fields={"force_arm": [f"one of {BASELINE}, {CANDIDATE}"]}
            )
        presented = qa_token_hash(qa_token or "")
        if not qa_token or not any(hmac.compare_digest(presented, h) for h in experiment.qa_token_hashes):
            raise ApplicationError(
                "Forcing an arm needs a QA token on the experiment's allow-list.",
                code="permission_denied",
                fields={"qa_token": ["not on the allow-list"]},
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
