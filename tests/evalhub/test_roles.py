"""Every endpoint × role against one table, generated from the URLconf: a new endpoint (or a new method
of an API view) without a row fails the test. The roles are the README's: `viewer` reads, `ci`
registers, uploads and starts runs, `release_manager` also decides releases and runs canaries, `app`
(the chat app) only assigns, proxies and sends events, `annotator` only labels turns in the follow-up
review queue (with release managers); the anonymous get nothing but the login."""

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient
from rest_framework.views import APIView

from canary.probes_gen import ProbeSpec
from canary.services.experiments import experiment_create, experiment_start
from canary.services.probes import probe_set_import
from gate.models import Decision
from gate.services.gate_runs import gate_run_start
from registry.actors import SYSTEM
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import api_token_create, user_role_grant
from registry.services.versions import model_version_register
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db

ANONYMOUS, VIEWER, CI, APP, RM, ANNOTATOR = "anonymous", "viewer", "ci", "app", "release_manager", "annotator"
ROLES = (ANONYMOUS, VIEWER, CI, APP, RM, ANNOTATOR)
READERS = frozenset({VIEWER, CI, RM})
WRITERS = frozenset({CI, RM})
RELEASE = frozenset({RM})
CHAT = frozenset({APP, CI, RM})
REVIEWERS = frozenset({RM, ANNOTATOR})

# url name -> method -> the roles it lets through (they may still get a 4xx for what they send).
TABLE: dict[str, dict[str, frozenset[str]]] = {
    "api:model-version-list": {"GET": READERS, "POST": WRITERS},
    "api:model-version-detail": {"GET": READERS},
    "api:model-version-transition": {"POST": RELEASE},
    "api:model-version-serving": {"POST": RELEASE},
    "api:eval-suite-list": {"GET": READERS, "POST": WRITERS},
    "api:eval-suite-detail": {"GET": READERS},
    "api:eval-suite-items": {"GET": READERS},
    "api:eval-suite-from-reviews": {"POST": RELEASE},
    "api:gate-run-list": {"GET": READERS, "POST": WRITERS},
    "api:gate-run-detail": {"GET": READERS},
    "api:gate-run-samples": {"GET": READERS},
    "api:gate-run-report": {"GET": READERS},
    "api:gate-run-adversarial": {"GET": READERS},
    "api:gate-run-shift-examples": {"GET": READERS},
    # And the ci user who started the run (tests/gate/services/test_gate_run_cancel.py).
    "api:gate-run-cancel": {"POST": RELEASE},
    "api:decision-list": {"GET": READERS, "POST": RELEASE},
    "api:decision-detail": {"GET": READERS},  # immutable: PUT, PATCH and DELETE are 405 for all
    "api:experiment-list": {"GET": READERS, "POST": RELEASE},
    "api:experiment-detail": {"GET": READERS},
    "api:experiment-action": {"POST": RELEASE},
    "api:experiment-plan": {"POST": RELEASE},
    # A permission (canary.unblind_experiment), not a role, lets a user unblind: no role alone may.
    "api:experiment-unblind": {"POST": frozenset()},
    "api:experiment-analyses": {"GET": READERS, "POST": RELEASE},
    "api:experiment-probe-runs": {"GET": READERS, "POST": RELEASE},
    "api:probe-set-list": {"GET": READERS, "POST": WRITERS},
    "api:experiment-reviews": {"GET": READERS | REVIEWERS, "POST": REVIEWERS},
    "api:experiment-reviews-next": {"GET": REVIEWERS},
    "api:experiment-reviews-export": {"GET": REVIEWERS},
    "api:canary-assign": {"POST": CHAT},
    "api:canary-proxy": {"POST": CHAT},
    "api:canary-models": {"GET": CHAT},
    "api:events": {"POST": frozenset({APP})},
    # Any other path under /api/v1/: a 404 for everyone, whatever the method.
    "api:not-found": {method: frozenset(ROLES) for method in ("GET", "POST", "PUT", "PATCH", "DELETE")},
    "schema": {"GET": READERS},
    "api-docs": {"GET": READERS},
    "api-redoc": {"GET": READERS},
    "home": {"GET": READERS},
    "version-detail": {"GET": READERS},
    "suite-detail": {"GET": READERS},
    "version-decide": {"POST": RELEASE},
    "gate-run-detail": {"GET": READERS},
    "gate-run-cancel": {"POST": RELEASE},  # and the run's starter, as the API's
    "canary:experiment-list": {"GET": READERS},
    "canary:experiment-detail": {"GET": READERS},
    "canary:experiment-action": {"POST": RELEASE},
    "canary:experiment-unblind": {"POST": frozenset()},  # the permission, not a role
    "review-list": {"GET": REVIEWERS},
    "review-queue": {"GET": REVIEWERS, "POST": REVIEWERS},
    "review-export": {"GET": REVIEWERS},
    "review-suite-build": {"POST": RELEASE},
    # Signing in and out and the language switch are for everyone (a signed-in visitor of the sign-in
    # page is sent on to the pages).
    "login": {"GET": frozenset(ROLES), "POST": frozenset(ROLES)},
    "logout": {"POST": frozenset(ROLES)},
    "set_language": {"POST": frozenset(ROLES)},
    "canary:experiment-probes": {"GET": RELEASE, "POST": RELEASE},
    "version-new": {"GET": WRITERS, "POST": WRITERS},
    "suite-new": {"GET": WRITERS, "POST": WRITERS},
    "gate-run-new": {"GET": WRITERS, "POST": WRITERS},
    "experiment-new": {"GET": RELEASE, "POST": RELEASE},
}
HANDLERS = ("get", "post", "put", "patch", "delete")
NOT_IN_THE_TABLE = ("admin:",)  # the Django admin is for staff, checked by Django itself


def endpoints(resolver: URLResolver = None, namespace: str = "") -> dict[str, object]:
    """Every named URL of the project: name (with namespace) -> its view callback."""
    found = {}
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            found.update(endpoints(entry, inner))
        elif isinstance(entry, URLPattern) and entry.name:
            found[f"{namespace}{entry.name}"] = entry.callback
    return {name: view for name, view in found.items() if not name.startswith(NOT_IN_THE_TABLE)}


def api_methods(view) -> set[str]:
    view_class = getattr(view, "cls", None)
    if view_class is None or not issubclass(view_class, APIView):
        return set()
    return {m.upper() for m in HANDLERS if hasattr(view_class, m) and getattr(view_class, m) is not None}


@pytest.fixture
def world(approve):
    """One of everything an endpoint can name."""
    v3 = incumbent_register(
        family="fam",
        label="v3",
        actor=SYSTEM,
        backend_kind="builtin",
        backend_config={"path": "placeholder"},
    )
    v4 = model_version_register(
        family="fam",
        label="v4",
        actor=SYSTEM,
        baseline=v3,
        backend_kind="builtin",
        backend_config={"path": "placeholder"},
    )
    suite, _ = eval_suite_import(
        name="fam", items=suite_items_parse(records=[{"input": "q", "label": "a"}]), actor=SYSTEM
    )
    approve(v4)
    run = gate_run_start(candidate=v4, suite=suite, actor=SYSTEM)
    experiment_start(
        experiment=experiment_create(name="exp", baseline=v3, candidate=v4, actor=SYSTEM), actor=SYSTEM
    )
    probe = ProbeSpec(id="p1", weakness="w", input="q", expected_label="a", language="en")
    probe_set_import(name="ps", family="fam", probes=[probe], actor=SYSTEM)
    return {"ref": "fam:v4", "run": run.pk, "decision": Decision.objects.latest("pk").pk, "name": "exp"}


def url_of(name: str, world: dict) -> str:
    pattern_kwargs = {
        "ref": world["ref"],
        "pk": world["decision"] if name == "api:decision-detail" else world["run"],
        "name": world["name"],
        "action": "pause",
    }
    for keys in (("pk",), ("ref",), ("name", "action"), ("name",), ()):
        try:
            return reverse(name, kwargs={k: pattern_kwargs[k] for k in keys})
        except Exception:
            continue
    raise AssertionError(f"cannot build a URL for {name}")


def clients() -> dict[str, tuple[APIClient, Client]]:
    """Per role: an API client with that role's token and a page client signed in as that user."""
    made = {ANONYMOUS: (APIClient(), Client())}
    for role in ROLES[1:]:
        user = get_user_model().objects.create_user(username=f"role-{role}")
        user_role_grant(user=user, role=role)
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
        page = Client()
        page.force_login(user)
        made[role] = (api, page)
    return made


def test_the_table_covers_every_endpoint_and_method():
    found = endpoints()
    assert sorted(set(found) - set(TABLE)) == [], "endpoints without a row in TABLE"
    assert sorted(set(TABLE) - set(found)) == [], "rows for endpoints that are gone"
    for name, view in found.items():
        methods = api_methods(view)
        if methods:
            assert methods == set(TABLE[name]), f"{name}: the view answers {sorted(methods)}"


def test_every_endpoint_answers_each_role_as_the_table_says(world):
    by_role = clients()
    login = settings.LOGIN_URL if settings.LOGIN_URL.startswith("/") else reverse(settings.LOGIN_URL)
    wrong = []
    for name, rows in TABLE.items():
        url = url_of(name, world)
        is_api = name.startswith("api") or name in ("schema", "api-docs", "api-redoc")
        for method, allowed in rows.items():
            for role in ROLES:
                api, page = by_role[role]
                if is_api:
                    response = getattr(api, method.lower())(url, {}, format="json")
                else:
                    response = getattr(page, method.lower())(url, {})
                    if name == "logout" and role != ANONYMOUS:
                        page.force_login(get_user_model().objects.get(username=f"role-{role}"))
                status = response.status_code
                to_login = status == 302 and response["Location"].startswith(login)
                if role in allowed:
                    ok = status < 500 and status not in (401, 403) and not to_login
                elif is_api:
                    ok = status == (401 if role == ANONYMOUS else 403)
                else:
                    ok = to_login if role == ANONYMOUS else status == 403
                if not ok:
                    wrong.append(f"{method} {url} as {role}: {status}")
    assert wrong == []
