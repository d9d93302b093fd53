"""Only a release decision makes production: every write path of the project, enumerated from the
URLconf, the admin site and the management commands, is tried with data that would make a version
`promoted` (or otherwise clear it for production: `approved`, `canary`), by a ci user and by a
superuser (who holds every role). After each path, every version that is cleared must rest on a
release decision that kept the rules: an approval of a passing gate, an override or an incumbent
declaration confirmed by a second release manager.

A new path with no row in the tables below fails the coverage tests (say what it does to a version's
status); a new path that reaches `promoted` without a decision fails the attack tests, whatever its
row says. Each path is tried on a fresh world, inside a savepoint rolled back afterwards.

The world: family `fam` has no production version yet; v3 and v4 are registered, v4's gate failed;
a release manager has filed an override request on v4 and an incumbent request on v3 (so a second
release manager could legitimately confirm either: the check must accept that); an experiment v3 → v4
is running."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from canary.probes_gen import ProbeSpec
from canary.services.experiments import experiment_create, experiment_start
from canary.services.probes import probe_set_import
from engines.demo.dataset import demo_dataset_build
from gate.models import Decision
from gate.services.decisions import decision_record
from registry.actors import SYSTEM
from registry.models import ModelVersion
from registry.roles import RELEASE_MANAGER, user_roles
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import api_token_create, user_role_grant
from registry.services.versions import model_version_register
from tests.evalhub.test_roles import api_methods
from tests.lifecycle import gate_run_record

pytestmark = pytest.mark.django_db
Action = Decision.Action
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}

# Every URL that takes a write: what it may do to a version's status. Every one is attacked anyway.
URL_WRITES: dict[str, str] = {
    "api:model-version-list": "registers a version, always `registered`: registration takes no status",
    "api:model-version-transition": "moves a status along TRANSITIONS; never into approved, and "
    "promoted only from approved or canary",
    "api:model-version-serving": "sets where a version serves (before it is evaluated); no status",
    "api:eval-suite-list": "uploads a suite",
    "api:eval-suite-from-reviews": "builds a suite version from reviewed live questions; no status",
    "api:gate-run-list": "starts a gate run: registered/gate_* -> evaluating",
    "api:gate-run-cancel": "cancels a gate run: evaluating -> registered once no other run is active",
    "api:decision-list": "records a decision: approve, reject, override and incumbent (two people)",
    "api:experiment-list": "creates an experiment",
    "api:experiment-action": "start ... promote: promotion needs an approved candidate",
    "api:experiment-analyses": "analyses an experiment; may roll back or ramp (promote: as above)",
    "api:experiment-probe-runs": "runs probes",
    "api:probe-set-list": "imports a probe set",
    "api:experiment-reviews": "labels a live turn",
    "api:experiment-plan": "registers the traffic layers' plans again (horizons); no status",
    "api:experiment-unblind": "unblinds an experiment's traffic layers (a permission); no status",
    "api:canary-assign": "assigns a user to an arm",
    "api:canary-proxy": "answers a chat completion",
    "api:events": "stores telemetry",
    "api:not-found": "404",
    "version-decide": "the version page's decisions (the same service as api:decision-list)",
    "canary:experiment-action": "the experiment page's lifecycle buttons (the API's services)",
    "canary:experiment-probes": "runs probes",
    "canary:experiment-unblind": "the experiment page's Unblind button (the API's service)",
    "review-queue": "labels a live turn",
    "review-suite-build": "builds a suite version from reviewed live questions; no status",
    "version-new": "registers a version (no status)",
    "suite-new": "uploads a suite",
    "gate-run-new": "starts a gate run",
    "gate-run-cancel": "the run page's Cancel button (the API's service)",
    "experiment-new": "creates an experiment",
    "login": "signs in",
    "logout": "signs out",
    "set_language": "remembers a language",
    # Pages that only read (they answer a POST as a GET, or 405): attacked all the same.
    "home": "reads",
    "version-detail": "reads",
    "suite-detail": "reads",
    "gate-run-detail": "reads",
    "canary:experiment-list": "reads",
    "canary:experiment-detail": "reads",
    "review-list": "reads",
    "review-export": "reads",
}
# Our management commands: how each one is tried (a callable taking the world), or why it is not run.
OWN_COMMANDS: dict[str, str] = {
    "create_api_token": "run: makes a token",
    "revoke_api_token": "run: revokes a token",
    "set_password": "run: sets a password",
    "import_suite": "run: imports a suite",
    "import_probes": "run: imports a probe set",
    "export_follow_up_reviews": "run: writes a file",
    "suite_from_reviews": "run: builds a suite version from reviewed live questions (none here: refused)",
    "export_adversarial": "run: writes a file",
    "export_shift_examples": "run: writes a file",
    "demo_v5": "run: registers contract-assistant:v5 through model_version_register (no demo here: refused)",
    "demo_setup": "run (test_demo_setup_declares_its_incumbent_through_two_release_managers): "
    "declares V3 through two release managers",
    "followup_train": "not run: trains the follow-up detector from files; no registry write",
    "followup_eval": "not run: scores the follow-up detector on a file; reads versions only",
    "serve_model": "not run: serves a version over HTTP until stopped; reads it only",
    "simulate_traffic": "not run: sends traffic to a running server through the API (attacked above)",
}
# Commands of Django and the third-party apps know nothing of versions; of them only `loaddata`
# writes arbitrary rows (tried below) and `shell`/`dbshell` run what a person types (the model check
# and, on PostgreSQL, the trigger hold there too: tests/gate/services/test_clearance.py).
OUR_APPS = ("evalhub", "registry", "canary", "gate", "workers")


@pytest.fixture
def people(django_user_model):
    def make(username: str, role: str | None = None, superuser: bool = False):
        if superuser:
            user = django_user_model.objects.create_superuser(username=username, password="pw")
        else:
            user = django_user_model.objects.create_user(username=username, password="pw")
        if role:
            user_role_grant(user=user, role=role)
        return get_user_model().objects.get(pk=user.pk)

    return {
        "filer": make("rm-filer", RELEASE_MANAGER),
        "ci": make("attacker-ci", "ci"),
        "root": make("attacker-root", superuser=True),
    }


def world_build(filer) -> dict:
    v3 = model_version_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    run = gate_run_record(v4, "fail")
    eval_suite_import(
        name="fam", items=suite_items_parse(records=[{"input": "q", "label": "a"}]), actor=SYSTEM
    )
    experiment_start(
        experiment=experiment_create(name="exp", baseline=v3, candidate=v4, actor=SYSTEM), actor=SYSTEM
    )
    probe = ProbeSpec(id="p1", weakness="w", input="q", expected_label="a", language="en")
    probe_set_import(name="ps", family="fam", probes=[probe], actor=SYSTEM)
    override = decision_record(version=v4, action=Action.OVERRIDE_REQUEST, reason="flaky layer", actor=filer)
    incumbent = decision_record(version=v3, action=Action.INCUMBENT_REQUEST, reason="serves", actor=filer)
    return {
        "refs": ["fam:v3", "fam:v4"],
        "run": run.pk,
        "name": "exp",
        "requests": [override.pk, incumbent.pk],
    }


def clearance_violations() -> list[str]:
    """Every cleared version without the release decision that clears it, kept by the rules."""
    wrong = []
    for version in ModelVersion.objects.filter(status__in=ModelVersion.CLEARED_STATUSES):
        basis = []
        for decision in Decision.objects.filter(version=version).select_related("confirms", "gate_run"):
            if RELEASE_MANAGER not in user_roles(decision.decided_by):
                continue
            if decision.action == Action.APPROVE and decision.gate_verdict == "pass":
                basis.append(Action.APPROVE)
            elif (
                decision.action in Decision.CONFIRMS
                and decision.confirms.decided_by_id != decision.decided_by_id
            ):
                basis.append(decision.action)
        needed = {Action.APPROVE, Action.OVERRIDE_CONFIRM}
        if version.status == ModelVersion.Status.PROMOTED:
            needed.add(Action.INCUMBENT_CONFIRM)
        if not needed & set(basis):
            wrong.append(f"{version.ref} is {version.status} without a release decision")
    return wrong


def attack_bodies(world: dict) -> list[dict]:
    """Requests that would clear a version if a path let them: a status in a registration or a
    transition, a share of 100 %, and every decision (confirmations of the open requests first,
    rejections last, since a rejection ends a version)."""
    bodies: list[dict] = [
        {"family": "fam", "label": "minted", "status": "promoted", **BUILTIN},
        {"status": "promoted", "reason": "attack"},
        {"status": "approved", "reason": "attack"},
        {"status": "canary", "reason": "attack"},
        {"reason": "attack", "traffic_percent": 100},
    ]
    actions = sorted(Action.values, key=lambda action: (action not in Decision.CONFIRMS, action == "reject"))
    for action in actions:
        for ref in world["refs"]:
            confirms = world["requests"] if action in Decision.CONFIRMS else [None]
            for request in confirms:
                body = {"version": ref, "action": action, "reason": "attack"}
                bodies.append({**body, "confirms": request} if request else body)
    return bodies


def url_writes() -> dict[tuple[str, str], URLPattern]:
    """(name, method) of every named URL that takes a write: an API view's write handlers, and POST to
    every page (a page answers a POST however it likes). The Django admin is tried on its own."""
    found: dict[tuple[str, str], URLPattern] = {}

    def walk(resolver: URLResolver, namespace: str) -> None:
        for entry in resolver.url_patterns:
            if isinstance(entry, URLResolver):
                if entry.app_name == "admin":
                    continue
                walk(entry, f"{namespace}{entry.namespace}:" if entry.namespace else namespace)
            elif isinstance(entry, URLPattern) and entry.name:
                handlers = api_methods(entry.callback)
                methods = [m for m in WRITE_METHODS if m in handlers] if handlers else ["POST"]
                for method in methods:
                    found[(f"{namespace}{entry.name}", method)] = entry

    walk(get_resolver(), "")
    return found


def urls_of(name: str, pattern: URLPattern, world: dict) -> list[str]:
    """The URL with each value the pattern takes: every version for `ref`, every action for `action`."""
    regex = pattern.pattern.regex
    actions = re.search(r"\(\?P<action>([a-z|]+)\)", regex.pattern)
    values = {
        "ref": world["refs"],
        "pk": [world["run"]],
        "name": [world["name"]],
        "action": actions.group(1).split("|") if actions else [],
    }
    combos: list[dict] = [{}]
    for key in regex.groupindex:
        combos = [{**combo, key: value} for combo in combos for value in values[key]]
    return [reverse(name, kwargs=combo) for combo in combos]


def page_data(body: dict) -> dict:
    return {k: json.dumps(v) if isinstance(v, dict) else v for k, v in body.items()}


@contextmanager
def fresh_world(people) -> Iterator[dict]:
    with transaction.atomic():
        yield world_build(people["filer"])
        transaction.set_rollback(True)


def clients_of(people) -> dict[str, tuple[APIClient, Client]]:
    made = {}
    for who in ("ci", "root"):
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=people[who])[1]}")
        page = Client()
        page.force_login(people[who])
        made[who] = (api, page)
    return made


def test_every_url_that_takes_a_write_has_a_row():
    names = {name for name, _ in url_writes()}
    assert sorted(names - set(URL_WRITES)) == [], (
        "write paths without a row in URL_WRITES: say what they may do to a version's status"
    )
    assert sorted(set(URL_WRITES) - names) == [], "rows for paths that are gone"


def test_no_url_clears_a_version_without_a_release_decision(people):
    by_who = clients_of(people)
    wrong, confirmed = [], {}
    for (name, method), pattern in sorted(url_writes().items()):
        with fresh_world(people) as world:
            bodies = attack_bodies(world)
            is_api = name.startswith("api:")
            for url in urls_of(name, pattern, world):
                for who, (api, page) in by_who.items():
                    for body in bodies:
                        if is_api:
                            getattr(api, method.lower())(url, body, format="json")
                        else:
                            page.post(url, page_data(body))
                            page.force_login(people[who])  # after a sign-out
            wrong += [f"{method} {name}: {problem}" for problem in clearance_violations()]
            confirmations = Decision.objects.filter(action__in=Decision.CONFIRMS, decided_by=people["root"])
            confirmed[name] = sorted(confirmations.values_list("version__label", "action"))
    assert wrong == []
    # The attacks reach the services: where a second release manager (the superuser) may confirm the
    # filer's requests, they do (v3 promoted as the incumbent, v4 approved, then rejected by a later
    # attack), and the check accepts those decisions. Nowhere else is a request confirmed.
    both = [("v3", "incumbent_confirm"), ("v4", "override_confirm")]
    assert confirmed.pop("api:decision-list") == confirmed.pop("version-decide") == both
    assert {name: got for name, got in confirmed.items() if got} == {}


# ---------------------------------------------------------------------------------------------
# The admin: every registered ModelAdmin's add and change forms, and every action
# ---------------------------------------------------------------------------------------------
def form_data(form) -> dict:
    """What a browser would post back for `form` unchanged."""
    data = {}
    for name in form.fields:
        value = form[name].value()
        if value in (None, False, ""):
            continue
        data[name] = [str(v) for v in value] if isinstance(value, list | tuple) else str(value)
    return data


def admin_attempts(client: Client, model_admin, request) -> dict[str, int]:
    """Post every add and change form (with `status` promoted) and run every action; the answers."""
    model = model_admin.model
    base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
    promote = {"status": "promoted", **page_data({"family": "fam", "label": "minted", **BUILTIN})}
    objects = list(model._default_manager.all()[:20])
    answers = {}
    if model_admin.has_add_permission(request):
        answers["add"] = client.post(f"{base}add/", promote).status_code
    for obj in objects:
        if model_admin.has_change_permission(request, obj):
            form = model_admin.get_form(request, obj)(instance=obj)
            data = {**form_data(form), "status": "promoted"}
            for inline in model_admin.get_inline_instances(request, obj):
                prefix = inline.get_formset(request, obj).get_default_prefix()
                data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
            answers[f"change {obj.pk}"] = client.post(f"{base}{obj.pk}/change/", data).status_code
    for action in model_admin.get_actions(request):
        selected = {"action": action, "_selected_action": [o.pk for o in objects], "post": "yes"}
        answers[action] = client.post(base, selected).status_code
    return answers


def test_no_admin_form_or_action_clears_a_version_without_a_release_decision(people, rf):
    client = Client()
    client.force_login(people["root"])
    request = rf.get("/admin/")
    request.user = people["root"]
    wrong, answers = [], {}
    for model, model_admin in admin.site._registry.items():
        with fresh_world(people):
            answers[model] = admin_attempts(client, model_admin, request)
            wrong += [f"admin {model._meta.label}: {problem}" for problem in clearance_violations()]
    assert len(answers) == len(admin.site._registry) and wrong == []
    # The version forms were taken whole (saved: 302), `status: promoted` and all; the status stayed.
    assert set(answers[ModelVersion].values()) == {302} and len(answers[ModelVersion]) == 3


def test_the_admin_shows_a_versions_status_read_only(people, rf):
    request = rf.get("/admin/")
    request.user = people["root"]
    version_admin = admin.site._registry[ModelVersion]
    with fresh_world(people):
        version = ModelVersion.objects.get(label="v3")
        assert "status" in version_admin.get_readonly_fields(request, version)
        assert "status" in version_admin.get_readonly_fields(request, None)
        assert "status" not in version_admin.get_form(request, version)().fields


# ---------------------------------------------------------------------------------------------
# Management commands
# ---------------------------------------------------------------------------------------------
def own_commands() -> dict[str, str]:
    return {name: app for name, app in get_commands().items() if app.split(".")[0] in OUR_APPS}


def test_every_command_of_ours_has_a_row():
    assert sorted(set(own_commands()) - set(OWN_COMMANDS)) == [], (
        "commands without a row in OWN_COMMANDS: say how they are tried, or why they cannot clear a version"
    )
    assert sorted(set(OWN_COMMANDS) - set(own_commands())) == []


def command_runs(tmp_path: Path) -> dict[str, Callable[[], object]]:
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps({"input": "q", "label": "a", "status": "promoted"}) + "\n")
    probes = tmp_path / "probes.jsonl"
    probes.write_text(json.dumps({"id": "p", "weakness": "w", "input": "q", "expected_label": "a"}) + "\n")
    return {
        "create_api_token": lambda: call_command("create_api_token", "bot", "--create-user", "--role", "ci"),
        "revoke_api_token": lambda: call_command("revoke_api_token", "00000000"),
        "set_password": lambda: call_command(
            "set_password",
            "bot2",
            "--password-stdin",
            "--create-user",
            stdin=io.StringIO("long passphrase 42\n"),
        ),
        "import_suite": lambda: call_command("import_suite", str(suite), "--name", "fam"),
        "import_probes": lambda: call_command(
            "import_probes", str(probes), "--name", "p2", "--family", "fam"
        ),
        "export_follow_up_reviews": lambda: call_command(
            "export_follow_up_reviews", "--experiment", "exp", "--out", str(tmp_path / "out.jsonl")
        ),
        "export_adversarial": lambda: call_command(
            "export_adversarial", "1", "--out", str(tmp_path / "adv.jsonl")
        ),
        "suite_from_reviews": lambda: call_command(
            "suite_from_reviews", "--suite", "fam", "--experiment", "exp", stdout=io.StringIO()
        ),
        "export_shift_examples": lambda: call_command(
            "export_shift_examples", "1", "--out", str(tmp_path / "shift.jsonl")
        ),
        "demo_v5": lambda: call_command("demo_v5", "1", stdout=io.StringIO()),
    }


def fixtures(world: dict, people) -> list[list[dict]]:
    """Fixtures that would promote: a new version promoted; v3 (registered) promoted; v3 promoted
    after a made-up confirmation of the open incumbent request."""
    v3 = ModelVersion.objects.get(label="v3")
    fields = {
        "family": "fam",
        "label": "v3",
        "backend_kind": "builtin",
        "backend_config": {"path": "placeholder"},
        "status": "promoted",
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
    }
    made_up = {
        "version": v3.pk,
        "action": "incumbent_confirm",
        "reason": "made up",
        "confirms": world["requests"][1],
        "decided_by": people["root"].pk,
        "gate_verdict": "",
        "created_at": "2026-01-01T00:00:00Z",
    }
    return [
        [{"model": "evalhub.modelversion", "pk": 99001, "fields": {**fields, "label": "loaded"}}],
        [{"model": "evalhub.modelversion", "pk": v3.pk, "fields": fields}],
        [
            {"model": "gate.decision", "pk": 99002, "fields": made_up},
            {"model": "evalhub.modelversion", "pk": v3.pk, "fields": fields},
        ],
    ]


def test_demo_setup_declares_its_incumbent_through_two_release_managers(settings, demo_model_dir, tmp_path):
    from evalhub.demo import DEMO_RELEASE_MANAGERS

    settings.EVALHUB_MODEL_DIR, settings.VAR_DIR = demo_model_dir, tmp_path
    call_command("demo_setup", stdout=io.StringIO())
    v3 = ModelVersion.objects.get(family="contract-assistant", label="v3")
    assert v3.status == ModelVersion.Status.PROMOTED and clearance_violations() == []
    decisions = Decision.objects.filter(version=v3).order_by("pk")
    assert [(d.action, d.decided_by.username) for d in decisions] == [
        ("incumbent_request", DEMO_RELEASE_MANAGERS[0]),
        ("incumbent_confirm", DEMO_RELEASE_MANAGERS[1]),
    ]
    assert not any(d.decided_by.has_usable_password() for d in decisions)
    # The same checkpoints as chat endpoints behind their model servers, with the labels layer 1
    # reads class scores for.
    chat = {
        v.label: v for v in ModelVersion.objects.filter(family="contract-assistant", label__endswith="-chat")
    }
    assert sorted(chat) == ["v3-chat", "v4-chat"] and chat["v4-chat"].baseline == chat["v3-chat"]
    assert {v.backend_kind for v in chat.values()} == {"openai"}
    assert chat["v4-chat"].backend_config["base_url"] == ModelVersion.objects.get(label="v4").serving_url
    assert chat["v3-chat"].backend_config["labels"] == sorted(
        {i.label for i in demo_dataset_build(seed=0).train}
    )
    call_command("demo_setup", stdout=io.StringIO())  # again: nothing new
    assert Decision.objects.filter(version=v3).count() == 2
    assert ModelVersion.objects.filter(family="contract-assistant").count() == 4


def test_no_command_clears_a_version_without_a_release_decision(people, tmp_path):
    runs = command_runs(tmp_path)
    assert set(runs) == {name for name, how in OWN_COMMANDS.items() if how.startswith("run:")}
    wrong = []
    for name, run in runs.items():
        with fresh_world(people):
            with suppress(Exception):  # a refusal is fine: only what it changed matters
                run()
            wrong += [f"manage.py {name}: {problem}" for problem in clearance_violations()]
    refusals = []
    for index in range(3):
        with fresh_world(people) as world:
            path = tmp_path / f"fixture-{index}.json"
            path.write_text(json.dumps(fixtures(world, people)[index]))
            try:
                call_command("loaddata", str(path), verbosity=0)
            except Exception as exc:  # loaddata wraps the refusal in its own error
                refusals.append(str(exc))
            wrong += [f"manage.py loaddata #{index}: {problem}" for problem in clearance_violations()]
    assert wrong == []
    assert len(refusals) == 3 and all("release decision" in refusal for refusal in refusals), refusals
