"""Blind before the horizon: a gate run on an experiment whose traffic layers have not reached their
registered horizons shows counts, the sample-ratio check and the progress, and no number a reader could
act on. This test renders every output of such a run (the run API's detail and list, the report as JSON
and Markdown, the run page in English and Chinese, the webhook, the canary dashboard page and its API,
the analyses and the review export) and searches them for the hidden numbers, which it computes itself
from the traffic it created: each arm's review hours per contract and follow-up rate, the improvement,
its interval, its p-value and lift, the rates' Wilson intervals and their Newcombe difference. Once the
experiment is unblinded the same search finds them (the search is not blind itself)."""

import json
import random
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from canary.models import Experiment, OutcomeEvent, TurnEvent
from canary.services.experiments import experiment_create
from canary.services.plans import experiment_unblind
from engines.stats.effects import ratio_effect
from engines.stats.sufficient import RatioStats
from gate.services.gate_runs import gate_run_execute, gate_run_start
from gate.services.horizons import experiment_start_registered
from gate.services.policies import gate_policy_save
from registry.actors import SYSTEM
from registry.dispatch import Task
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_register
from tests.canary.traffic import experiment_backdate, user_on
from tests.evalhub.views.test_zh_hans import data_names, untranslated
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
USERS = 300
HOURS = {"baseline": 3.1, "candidate": 2.45}
FOLLOW_UP = {"baseline": 0.13, "candidate": 0.27}
# Horizons far above the traffic: 2 000 users and 2 000 answered questions per arm.
POLICY = {
    "required_layers": ["follow_up_rate", "business_value"],
    "business_metric": "review_hours",
    "business_min_effect": 0.05,
    "business_mde": 0.15,
    "business_planning_sd": 0.5,
    "business_min_units": 2000,
    "follow_up_planning_rate": 0.11,
    "follow_up_min_answered": 2000,
    "follow_up_correction": "none",
}


@pytest.fixture
def experiment():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    gate_policy_save(name="fam", config=POLICY, actor=SYSTEM)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    started = experiment_start_registered(experiment=created, actor=SYSTEM)
    backdated = experiment_backdate(started, started=timedelta(hours=3))
    counted = backdated.started_at.isoformat()
    Experiment.objects.filter(pk=started.pk).update(
        business_horizon={**backdated.business_horizon, "counted_from": counted},
        follow_up_horizon={**backdated.follow_up_horizon, "counted_from": counted},
    )
    return Experiment.objects.get(pk=started.pk)


@pytest.fixture
def traffic(experiment):
    """Per arm, USERS users: a question, its answer and sometimes a follow-up with its answer; one to
    three contracts' review hours. Returns what the test computes the hidden numbers from."""
    turns, outcomes = [], []
    sums = {arm: [] for arm in HOURS}
    followed = dict.fromkeys(HOURS, 0)
    for arm in HOURS:
        rng = random.Random(f"blind-{arm}")
        for u in range(USERS):
            user = user_on(experiment, arm, f"{arm}-{u}")
            at = experiment.share_since + timedelta(minutes=2, seconds=25 * u)
            script = [("user", "new"), ("assistant", None)]
            if rng.random() < FOLLOW_UP[arm]:
                script += [("user", "follow_up"), ("assistant", None)]
                followed[arm] += 1
            turns += [
                TurnEvent(
                    experiment=experiment,
                    event_id=f"{user}-t{i}",
                    session_id=f"s-{user}",
                    user_id=user,
                    arm=arm,
                    turn_index=i,
                    role=role,
                    text="q" if role == "user" else "[payment] a",
                    follow_up_kind=kind,
                    occurred_at=at + timedelta(seconds=5 * i),
                )
                for i, (role, kind) in enumerate(script)
            ]
            values = [max(0.2, rng.gauss(HOURS[arm], 0.7)) for _ in range(rng.randint(1, 3))]
            sums[arm].append((sum(values), len(values)))
            outcomes += [
                OutcomeEvent(
                    experiment=experiment,
                    event_id=f"{user}-o{c}",
                    unit_id=f"{user}-c{c}",
                    user_id=user,
                    arm=arm,
                    metric="review_hours",
                    value=value,
                    occurred_at=at + timedelta(seconds=30),
                )
                for c, value in enumerate(values)
            ]
    TurnEvent.objects.bulk_create(turns)
    OutcomeEvent.objects.bulk_create(outcomes)
    return {"sums": sums, "followed": followed}


def hidden_numbers(traffic) -> dict[str, float]:
    """What blindness hides, computed here from the traffic: per arm the metric and the follow-up rate
    with its Wilson interval, the improvement with its 90 % interval, p-value and lift, and the
    rates' difference with Newcombe's interval."""
    control = RatioStats.of(traffic["sums"]["baseline"])
    treatment = RatioStats.of(traffic["sums"]["candidate"])
    effect = ratio_effect(control=control, treatment=treatment, confidence=0.9)
    numbers = {
        "baseline hours": control.ratio,
        "candidate hours": treatment.ratio,
        "improvement": -effect.estimate,
        "improvement low": -effect.ci_high,
        "improvement high": -effect.ci_low,
        "p-value": effect.p_value,
        "lift": effect.relative,
    }
    answered = {arm: USERS + traffic["followed"][arm] for arm in HOURS}
    for arm in HOURS:
        rate = traffic["followed"][arm] / answered[arm]
        low, high = proportion_confint(traffic["followed"][arm], answered[arm], method="wilson")
        numbers |= {f"{arm} rate": rate, f"{arm} rate low": low, f"{arm} rate high": high}
    low, high = confint_proportions_2indep(
        traffic["followed"]["candidate"],
        answered["candidate"],
        traffic["followed"]["baseline"],
        answered["baseline"],
        method="newcomb",
    )
    numbers |= {
        "difference": numbers["candidate rate"] - numbers["baseline rate"],
        "difference low": low,
        "difference high": high,
    }
    return numbers


NUMBER = re.compile(r"(?<![\w.])[-−+]?\d+\.\d+(?:e[-+]?\d+)?")


def shown_as(token: str, value: float) -> bool:
    """Whether `token`, a number as some output printed it, is `value` rounded to the digits it shows
    (or, for a full float, equal to it up to the last digits' arithmetic): 3 significant digits at least,
    2 in exponent form, so that a 0.18 bar or a 0.05 alpha is never taken for a hidden number."""
    mantissa, _, exponent = token.lstrip("-−+").partition("e")
    digits = len(mantissa.replace(".", "").lstrip("0"))
    if digits < (2 if exponent else 3):
        return False
    decimals = len(mantissa.split(".")[1])
    half = 0.5 * 10 ** ((int(exponent) if exponent else 0) - decimals)
    return abs(float(token.replace("−", "-").lstrip("+")) - abs(value)) <= max(half, 1e-9 * abs(value))


def leaks(text: str, numbers: dict[str, float]) -> list[str]:
    """Each hidden number that some number in `text` shows, in any rounding."""
    tokens = {token.lstrip("-−+") for token in NUMBER.findall(text)}
    return sorted(
        f"{name} {value!r} as {token!r}"
        for token in tokens
        for name, value in numbers.items()
        if shown_as(token, abs(value))
    )


def outputs(run, *, api, page, zh_page, webhook_bodies) -> dict[str, str]:
    """Every output of the run and of its experiment, by name."""
    got = {
        "run API detail": api.get(f"/api/v1/gate-runs/{run.pk}/"),
        "run API list": api.get("/api/v1/gate-runs/"),
        "report JSON": api.get(f"/api/v1/gate-runs/{run.pk}/report/"),
        "report Markdown": api.get(f"/api/v1/gate-runs/{run.pk}/report/?format=md"),
        "run page (en)": page.get(f"/gate-runs/{run.pk}/"),
        "run page (zh-hans)": zh_page.get(f"/gate-runs/{run.pk}/"),
        "canary page (en)": page.get("/canary/exp/"),
        "canary page (zh-hans)": zh_page.get("/canary/exp/"),
        "canary API detail": api.get("/api/v1/canary/experiments/exp/"),
        "canary API list": api.get("/api/v1/canary/experiments/"),
        "canary analyses API": api.get("/api/v1/canary/experiments/exp/analyses/"),
        "review export": api.get("/api/v1/canary/experiments/exp/reviews/export/"),
    }
    for name, response in got.items():
        assert response.status_code == 200, (name, response.status_code)
    texts = {
        name: b"".join(response.streaming_content).decode()
        if response.streaming
        else response.content.decode()
        for name, response in got.items()
    }
    texts |= {f"webhook {i}": body for i, body in enumerate(webhook_bodies)}
    return texts


def test_no_output_of_a_run_before_its_horizon_shows_a_hidden_number(
    experiment, traffic, make_client, settings, sent_tasks, django_capture_on_commit_callbacks
):
    from canary.services.analysis import experiment_analyze

    settings.EVALHUB_WEBHOOK_URL = "http://127.0.0.1:9/hook"
    suite = eval_suite_import(
        name="fam",
        items=suite_items_parse(records=[{"id": "a", "input": "x", "label": "payment"}]),
        actor=SYSTEM,
    )[0]
    with django_capture_on_commit_callbacks(execute=True):
        run = gate_run_start(candidate=experiment.candidate, suite=suite, actor=SYSTEM)
        run = gate_run_execute(gate_run_id=run.pk, worker="test")
    experiment_analyze(experiment=experiment, act=False)
    layers = {layer.layer: layer for layer in run.layers.all()}
    assert {name: layer.verdict for name, layer in layers.items()} == {
        "follow_up_rate": "insufficient_data",
        "business_value": "insufficient_data",
    }
    webhooks = [args[1] for name, args in sent_tasks if name == Task.WEBHOOK_DELIVER]
    assert webhooks and json.loads(webhooks[0])["data"]["gate_run"] == run.pk
    manager = get_user_model().objects.create_user(username="rm")
    user_role_grant(user=manager, role="release_manager")
    page, zh_page = Client(), Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    page.force_login(manager)
    zh_page.force_login(manager)
    api = make_client("release_manager")
    numbers = hidden_numbers(traffic)

    texts = outputs(run, api=api, page=page, zh_page=zh_page, webhook_bodies=webhooks)
    found = {name: leaks(text, numbers) for name, text in texts.items()}
    assert {name: hits for name, hits in found.items() if hits} == {}
    # What the outputs do show: the counts per arm and the progress to the horizon.
    assert "2000" in texts["run page (en)"] and "300" in texts["run page (en)"]
    assert "Blind until the one look" in texts["canary page (en)"]
    for name in ("run page (zh-hans)", "canary page (zh-hans)"):
        assert untranslated(texts[name], data_names()) == [], name

    # Unblinded, the same search finds the numbers: it would have seen a leak.
    user = get_user_model().objects.create_user(username="statistician")
    user.user_permissions.add(Permission.objects.get(codename="unblind_experiment"))
    experiment_unblind(
        experiment=experiment, actor=get_user_model().objects.get(pk=user.pk), reason="safety review"
    )
    with django_capture_on_commit_callbacks(execute=True):
        again = gate_run_start(candidate=experiment.candidate, suite=suite, actor=SYSTEM)
        again = gate_run_execute(gate_run_id=again.pk, worker="test")
    assert {layer.verdict for layer in again.layers.all()} == {"insufficient_data"}
    texts = outputs(again, api=api, page=page, zh_page=zh_page, webhook_bodies=[])
    for name in ("run API detail", "report JSON", "run page (en)", "canary page (en)"):
        shown = leaks(texts[name], numbers)
        assert any(hit.startswith("candidate hours") for hit in shown), (name, shown)
        assert any(hit.startswith("candidate rate") for hit in shown), (name, shown)
    assert "unblinded by statistician" in texts["run page (en)"].lower()
    assert "safety review" in texts["canary page (en)"]
