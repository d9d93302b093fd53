"""The API against its own published schema, fuzzed by schemathesis (the library): every operation,
with a ci token and a release_manager token, valid and invalid requests (positive and negative
generation), over real HTTP to a live server on the real database. All of schemathesis' checks run:
no 5xx, status codes, content types, headers and bodies as documented, invalid data refused, valid
data not refused with an undocumented code. Seeded, so CI repeats the same requests."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

import hypothesis
import pytest
import requests
import schemathesis
from django.contrib.auth import get_user_model
from django.test import Client
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from canary.services.experiments import experiment_create, experiment_start
from registry.actors import SYSTEM
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import api_token_create, user_role_grant
from tests.canary.traffic import experiment_backdate

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SEED = 20261201
EXAMPLES = 12  # per operation, token and generation mode: about 1 400 requests in all
MIN_REQUESTS = 1000
# Valid by the schema yet refused with 400, by rules that OpenAPI 3.0 cannot state. For these operations
# schemathesis' positive_data_acceptance is replaced by the same check that lets a 400 through only
# when every field it names is one of these (any other 400 still fails):
BEYOND_THE_SCHEMA = {
    # the rows inside an uploaded file, each checked (tests/evalhub/api/test_bad_input.py)
    "eval_suite_upload": ("file", "items"),
    "probe_set_upload": ("file",),
    # the last message must be the user's; who asks may come from a header instead of `user`
    "canary_chat_completions": ("messages", "user"),
    # a checkpoint must exist in EVALHUB_MODEL_DIR; URLs must pass the operator's outbound policy;
    # label_regex must compile with a group `label`
    "model_version_register": (
        "backend_config.path",
        "backend_config.base_url",
        "backend_config.label_regex",
        "serving_url",
    ),
    # a review's expected label must be a clause type of the family's suite
    "v1_canary_experiments_reviews_create": ("expected_label",),
    # URLs must pass the outbound policy; an openai version's must be its base_url
    "model_version_serving_set": ("serving_url",),
}


def names_only(field: str, allowed: tuple[str, ...]) -> bool:
    return any(field == a or field.startswith((f"{a}.", f"{a}[", f"{a}:")) for a in allowed)


def positive_data_accepted_but_for(allowed: tuple[str, ...]):
    """positive_data_acceptance, except for a 400 whose fields are all in `allowed`."""

    def check(ctx, response, case):
        if response.status_code == 400 and case.meta.generation.mode.is_positive:
            fields = response.json()["error"]["fields"]
            assert fields and all(names_only(f, allowed) for f in fields), (
                f"Schema-valid data refused for {sorted(fields)}: {response.text[:500]}"
            )
        elif response.status_code != 400:
            positive_data_acceptance(ctx, response, case)

    return check


@pytest.fixture
def world(small_bow, serve_versions):
    """Objects the fuzzer's requests can reach: a family's baseline and candidate behind real model
    servers (so the proxy answers), a suite, a running experiment. Half of the generated requests
    name them instead of random refs."""
    v3, v4 = serve_versions({"v3": small_bow, "v4": small_bow}, family="fam")
    items = suite_items_parse(
        records=[{"id": f"i{i}", "input": f"clause {i}", "label": "payment"} for i in range(3)]
    )
    eval_suite_import(name="fam", items=items, actor=SYSTEM)
    experiment = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=5, actor=SYSTEM)
    experiment_backdate(experiment_start(experiment=experiment, actor=SYSTEM), started=timedelta(hours=1))
    return {"ref": "fam:v4", "name": "exp", "id": 1}


def token_of(role: str) -> str:
    user = get_user_model().objects.create_user(username=f"fuzz-{role}")
    user_role_grant(user=user, role=role)
    return api_token_create(user=user)[1]


def fuzzer(*, strategy, call, counter):
    """A seeded Hypothesis test of `call` on cases drawn from `strategy` (generation only: no
    shrinking, so a failure is reported as found)."""

    @hypothesis.seed(SEED)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[hypothesis.Phase.generate],
    )
    @hypothesis.given(case=strategy)
    def check(case):
        counter()
        call(case)

    return check


def test_schemathesis_finds_nothing(live_server, world):
    reader = get_user_model().objects.create_user(username="schema-reader")
    user_role_grant(user=reader, role="viewer")
    browser = Client()
    browser.force_login(reader)
    document = browser.get("/api/schema/?format=json")
    assert document.status_code == 200
    schema = schemathesis.openapi.from_dict(json.loads(document.content))
    # The API refuses NUL in any string (PostgreSQL cannot store it; README, "Bad input"), so strings
    # with NUL are not valid data.
    schema.config.generation.update(allow_x00=False)
    tokens = {role: token_of(role) for role in ("ci", "release_manager")}
    session = requests.Session()
    sent: Counter[str] = Counter()
    failures: dict[str, str] = {}

    for result in schema.get_all_operations():
        operation = result.ok()
        for role, key in tokens.items():
            headers = {"Authorization": f"Token {key}"}
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                real = {k: v for k, v in world.items() if k in operation.path_parameters}
                strategies = [operation.as_strategy(generation_mode=mode)]
                if real:
                    strategies.append(operation.as_strategy(generation_mode=mode, path_parameters=real))

                allowed = BEYOND_THE_SCHEMA.get(operation.definition.raw["operationId"])
                excluded = [positive_data_acceptance] if allowed else []
                extra = [positive_data_accepted_but_for(allowed)] if allowed else []
                check = fuzzer(
                    strategy=hypothesis.strategies.one_of(strategies),
                    call=lambda case, headers=headers, excluded=excluded, extra=extra: case.call_and_validate(
                        base_url=live_server.url,
                        session=session,
                        headers=headers,
                        excluded_checks=excluded,
                        additional_checks=extra,
                    ),
                    counter=lambda label=operation.label: sent.update([label]),
                )

                try:
                    check()
                except (Exception, BaseExceptionGroup) as exc:  # each operation's failure is reported below
                    failures[f"{operation.label} as {role} ({mode.value})"] = str(exc)[:1500]

    report = "\n\n".join(f"{where}:\n{problem}" for where, problem in failures.items())
    assert not failures, f"{len(failures)} failing operation(s):\n\n{report}"
    assert sum(sent.values()) >= MIN_REQUESTS, sent
    assert len(sent) == len(list(schema.get_all_operations())), sent
