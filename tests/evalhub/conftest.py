"""Fixtures for release decisions: users by role, and versions whose latest gate run passed or failed."""

import itertools

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from evalhub.gate.policy import gate_policy_parse
from evalhub.models import GateRun, ModelVersion
from evalhub.services.suites import eval_suite_import, suite_items_parse
from evalhub.services.tokens import user_role_grant
from evalhub.services.versions import model_version_register, model_version_transition

GATE_STATUS = {"pass": ModelVersion.Status.GATE_PASSED, "fail": ModelVersion.Status.GATE_FAILED}


@pytest.fixture
def decision_user(db):
    """`decision_user("release_manager")` -> a user holding that role (None: no role)."""
    counter = itertools.count()

    def make(role: str | None = "release_manager"):
        user = get_user_model().objects.create_user(username=f"{role or 'nobody'}-{next(counter)}")
        if role:
            user_role_grant(user=user, role=role)
        return user

    return make


@pytest.fixture
def gate_run_finished(db):
    """`gate_run_finished(version, "fail")`: a succeeded gate run of `version` with that verdict,
    finished now, and the version settled as the gate service would (gate_passed / gate_failed)."""
    items = suite_items_parse(records=[{"input": "q", "label": "payment"}])
    suite = eval_suite_import(name="decisions", items=items, actor=None)[0]

    def finish(version: ModelVersion, verdict: str, *, policy_overrides: dict | None = None) -> GateRun:
        run = GateRun.objects.create(
            candidate=version,
            suite=suite,
            status=GateRun.Status.SUCCEEDED,
            verdict=verdict,
            policy_config=gate_policy_parse({**(policy_overrides or {})}).as_dict(),
            policy_overrides=policy_overrides or {},
            progress=100,
            finished_at=timezone.now(),
        )
        model_version_transition(version=version, to_status=ModelVersion.Status.EVALUATING, actor=None)
        model_version_transition(version=version, to_status=GATE_STATUS[verdict], actor=None, system="gate")
        return run

    return finish


@pytest.fixture
def version_gated(gate_run_finished):
    """`version_gated("pass", registered_by=user)` -> (version, its latest gate run)."""
    counter = itertools.count(1)

    def make(verdict: str, *, registered_by=None) -> tuple[ModelVersion, GateRun]:
        version = model_version_register(
            family="fam",
            label=f"v{next(counter)}",
            backend_kind="builtin",
            backend_config={"path": "x"},
            actor=registered_by,
        )
        return version, gate_run_finished(version, verdict)

    return make
