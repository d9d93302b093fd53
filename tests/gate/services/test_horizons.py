"""Layer 3's fixed horizon, registered when an experiment starts: sized from the family's history in SQL
or from the policy, stored on the experiment once, audited, through the API as through the service."""

import math
from datetime import timedelta

import pytest
from django.utils import timezone

from canary.models import Experiment, OutcomeEvent
from canary.services.experiments import experiment_create, experiment_horizon_register
from engines.stats.sufficient import RatioStats
from gate.judges.business_value import BusinessValuePolicy, fixed_horizon_units
from gate.judges.plan import settings_differences
from gate.services.horizons import experiment_start_registered
from gate.services.policies import gate_policy_save
from registry.actors import SYSTEM
from registry.errors import ApplicationError
from registry.models import AuditLog
from registry.roles import RELEASE_MANAGER
from registry.services.versions import model_version_register
from tests.lifecycle import incumbent_register
from tests.wordings import english

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
POLICY = {"business_metric": "review_hours", "business_min_effect": 0.2, "business_min_units": 30}


@pytest.fixture
def versions():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    return v3, v4


def draft(versions, name="exp"):
    return experiment_create(name=name, baseline=versions[0], candidate=versions[1], actor=SYSTEM)


def history(experiment, users: int, days_ago: float):
    """Outcomes of `users` users (1–3 contracts, hours growing with the user) `days_ago` days back."""
    at = timezone.now() - timedelta(days=days_ago)
    rows, per_user = [], []
    for u in range(users):
        values = [1.0 + (u % 7) * 0.3 + 0.1 * c for c in range(1 + u % 3)]
        per_user.append((sum(values), len(values)))
        rows += [
            OutcomeEvent(
                experiment=experiment,
                event_id=f"{days_ago}-{u}-{c}",
                unit_id=f"c-{u}-{c}",
                user_id=f"user-{u}",
                arm="baseline",
                metric="review_hours",
                value=value,
                occurred_at=at,
            )
            for c, value in enumerate(values)
        ]
    OutcomeEvent.objects.bulk_create(rows)
    return RatioStats.of(per_user)


def test_the_horizon_is_sized_from_the_familys_history_before_the_start(versions):
    gate_policy_save(name="fam", config=POLICY, actor=SYSTEM)
    earlier = draft(versions, "earlier")
    expected = history(earlier, users=60, days_ago=3)
    history(earlier, users=500, days_ago=30)  # before the 14-day pre-window: not counted
    started = experiment_start_registered(experiment=draft(versions), actor=SYSTEM, reason="go")

    sd = math.sqrt(expected.ratio_variance * expected.n)
    plan = started.business_horizon
    assert plan["units_per_arm"] == fixed_horizon_units(sd=sd, min_effect=0.2, mde=0.4, alpha=0.05, power=0.8)
    assert plan["sd"] == pytest.approx(sd, rel=1e-9)
    assert english([plan["basis"]])[0].startswith(
        f"sd {sd:.4g} measured over 60 units of review_hours in the 14 days"
    )
    assert (plan["metric"], plan["per"], plan["policy"], plan["mde"]) == ("review_hours", "user", "fam", 0.4)
    row = AuditLog.objects.get(action="experiment.horizon_register")
    assert row.after == {**plan, "follow_up": started.follow_up_horizon} and row.target_id == str(started.pk)
    assert AuditLog.objects.filter(action="experiment.running", target_id=str(started.pk)).exists()
    assert Experiment.objects.get(pk=started.pk).business_horizon == plan


def test_without_history_the_policys_planning_sd_sizes_it_and_else_none_is_registered(versions):
    gate_policy_save(name="fam", config={**POLICY, "business_planning_sd": 0.5}, actor=SYSTEM)
    started = experiment_start_registered(experiment=draft(versions), actor=SYSTEM)
    plan = started.business_horizon
    assert plan["units_per_arm"] == 78  # 2 · 0.5² · 2.486475² / (0.4 − 0.2)² = 77.3
    assert "business_planning_sd" in english([plan["basis"]])[0]
    # The plan froze every setting of layer 3's section, and counts units from the start on.
    section = BusinessValuePolicy.parse({**POLICY, "business_planning_sd": 0.5})
    assert plan["settings"] == section.as_dict() and plan["counted_from"] == started.started_at.isoformat()
    assert settings_differences(plan=plan, effective=section.as_dict()) == []
    # A run judging another metric does not judge the registered test.
    other = BusinessValuePolicy.parse({**POLICY, "business_planning_sd": 0.5, "business_metric": "x"})
    [difference] = settings_differences(plan=plan, effective=other.as_dict())
    assert (difference.key, difference.registered, difference.effective) == (
        "business_metric",
        "review_hours",
        "x",
    )


def test_the_horizon_is_at_least_the_policys_minimum_of_units(versions):
    # 2 · 0.5² · 2.486475² / (0.4 − 0.2)² = 77.3 → 78 units, below a business_min_units of 120.
    gate_policy_save(
        name="fam", config={**POLICY, "business_planning_sd": 0.5, "business_min_units": 120}, actor=SYSTEM
    )
    started = experiment_start_registered(experiment=draft(versions), actor=SYSTEM)
    assert started.business_horizon["units_per_arm"] == 120
    assert english([started.business_horizon["basis"]])[0].endswith("; raised from 78 to business_min_units")


def test_a_policy_that_sizes_nothing_registers_why(versions):
    started = experiment_start_registered(experiment=draft(versions), actor=SYSTEM)  # the default policy
    assert started.business_horizon["units_per_arm"] is None
    assert english([started.business_horizon["basis"]])[0] == "policy 'default' names no business_metric"
    assert AuditLog.objects.filter(action="experiment.horizon_register").count() == 1


def test_a_horizon_is_registered_once(versions):
    started = experiment_start_registered(experiment=draft(versions), actor=SYSTEM)
    with pytest.raises(ApplicationError) as raised:
        experiment_horizon_register(experiment=started, horizon={"units_per_arm": 1}, actor=SYSTEM)
    assert raised.value.status_code == 409


def test_the_api_start_registers_the_horizon(versions, make_client):
    gate_policy_save(name="fam", config={**POLICY, "business_planning_sd": 0.5}, actor=SYSTEM)
    draft(versions)
    manager = make_client(RELEASE_MANAGER)
    response = manager.post("/api/v1/canary/experiments/exp/start/", {"reason": "go"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["business_horizon"]["units_per_arm"] == 78
    experiment = Experiment.objects.get(name="exp")
    assert experiment.status == "running" and experiment.business_horizon["units_per_arm"] == 78
    assert AuditLog.objects.get(action="experiment.horizon_register").actor == manager.user


def test_the_plan_reports_the_size_cuped_needs_and_the_policy_chooses_which_registers(versions):
    """A history whose users carry their speed over from their pre-period: CUPED's variance reduction
    measured there (each user's review hours 3 days before the start, adjusted by their own 16 days
    before) shrinks the horizon; the plain size stays the default."""
    from engines.stats.effects import ratio_cuped_adjust
    from engines.stats.sufficient import RatioCupedStats

    earlier = draft(versions, "earlier")
    start = timezone.now()
    rows, per_user = [], []
    for u in range(120):
        speed = 1.0 + (u % 9) * 0.25
        hours = [speed + 0.1 * (u % 4) + 0.05 * c for c in range(1 + u % 3)]
        pre = [speed * 0.9 + 0.2 * (u % 5)] if u % 3 else []  # a third of the users are new
        per_user.append((sum(hours), len(hours), sum(pre), len(pre)))
        for k, (value, days) in enumerate([(h, 3) for h in hours] + [(p, 16) for p in pre]):
            rows.append(
                OutcomeEvent(
                    experiment=earlier,
                    event_id=f"h-{u}-{k}",
                    unit_id=f"c-{u}-{k}",
                    user_id=f"user-{u}",
                    arm="baseline",
                    metric="review_hours",
                    value=value,
                    occurred_at=start - timedelta(days=days, minutes=k),
                )
            )
    OutcomeEvent.objects.bulk_create(rows)
    history = RatioCupedStats.of(per_user)
    reduction = ratio_cuped_adjust(control=history, treatment=history).variance_reduction
    assert 0.2 < reduction < 0.95

    policy = {**POLICY, "business_min_units": 30}
    gate_policy_save(name="fam", config=policy, actor=SYSTEM)
    plain = experiment_start_registered(experiment=draft(versions), actor=SYSTEM).business_horizon
    sizes = plain["sizes"]
    assert sizes["variance_reduction"] == pytest.approx(reduction, rel=1e-9)
    assert sizes["cuped"] == math.ceil(sizes["plain"] * (1 - reduction)) < sizes["plain"]
    assert sizes["pre_units"] == 80 and plain["units_per_arm"] == sizes["plain"]
    assert english([sizes["cuped_basis"]])[0].startswith(
        f"variance reduction {reduction:.3g} measured over 120 users"
    )

    Experiment.objects.filter(name="exp").update(status="rolled_back")
    gate_policy_save(name="fam", config={**policy, "business_horizon_sizing": "cuped"}, actor=SYSTEM)
    cuped = experiment_start_registered(
        experiment=draft(versions, "exp-cuped"), actor=SYSTEM
    ).business_horizon
    assert cuped["units_per_arm"] == sizes["cuped"]
    assert (
        f"; {sizes['plain']} units shrunk by the CUPED variance reduction {reduction:.3g}"
        in english([cuped["basis"]])[0]
    )
