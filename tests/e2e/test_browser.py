"""A release manager's day in a real browser (Selenium driving Debian's headless chromium and
chromium-driver): signed in without staff rights, they start a gate run from the form, watch its
progress change without reloading, see the charts drawn with data, approve with a reason, and create,
start, ramp and roll back a canary. Screenshots go to var/browser/ (artefacts).

Skipped with the reason where chromium or chromium-driver is missing; with
EVALHUB_TEST_REQUIRE_SERVICES=1 (CI, `.ci/run` installs them) a missing browser fails instead.

Sign-in: through EvalHub's own sign-in page (`/login/`), with the user name and password typed in,
as a person would (`browser_sign_in`). Each walk-through runs in English and in Chinese (zh-hans,
the browser's language)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone, translation

from canary.models import Experiment
from engines.demo.dataset import demo_dataset_build
from evalhub.terms import term_label
from gate.layers.registry import gate_policy_parse
from gate.models import Decision, GateRun
from gate.services import gate_runs as gate_runs_service
from registry.actors import SYSTEM
from registry.models import ModelVersion
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_register
from tests.evalhub.views.test_canary import experiment, traffic  # noqa: F401 (fixtures)
from tests.lifecycle import incumbent_register

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = shutil.which("chromium") and "/usr/lib/chromium/chromium"
DRIVER = shutil.which("chromedriver")
# The languages the walk-through runs in (the browser asks for each; the page ids stay the same).
LANGUAGES = ["en", "zh-hans"]
PASSWORD = "a-long-test-passphrase-7"
SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "browser"
WAIT = 60  # seconds any one step may take on a loaded two-core machine


def _browser_missing() -> str:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed"
    if not (CHROMIUM and os.path.exists(CHROMIUM) and DRIVER):
        return "browser tests need Debian's chromium and chromium-driver (apt-get install them)"
    return ""


@pytest.fixture
def browser(request):
    missing = _browser_missing()
    if missing:
        if settings.REQUIRE_SERVICES:
            pytest.fail(f"EVALHUB_TEST_REQUIRE_SERVICES is set but {missing}")
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    language = request.node.callspec.params["language"]
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(flag)
    options.add_argument(f"--lang={language}")
    options.add_experimental_option("prefs", {"intl.accept_languages": language})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def browser_sign_in(driver, live_server, user, next_url: str = "/") -> None:
    """EvalHub's sign-in page: user name and password typed in, then on to the page asked for."""
    from selenium.webdriver.common.by import By

    driver.get(f"{live_server.url}/login/" + (f"?next={next_url}" if next_url else ""))
    driver.find_element(By.NAME, "username").send_keys(user.get_username())
    driver.find_element(By.NAME, "password").send_keys(PASSWORD)
    driver.find_element(By.CSS_SELECTOR, "form[action='/login/'] button[type=submit]").click()
    wait_for(lambda: driver.find_elements(By.ID, "sign-out"), what="signed in (the sign-out button)")


def shot(driver, name: str, language: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(height, 800), 4000))
    driver.save_screenshot(str(SCREENSHOTS / f"{language}-{name}.png"))
    driver.set_window_size(1280, 1000)


def wait_for(condition, *, timeout: float = WAIT, what: str = ""):
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except (NoSuchElementException, StaleElementReferenceException):
            # The page refreshes its figures in place: an element read between its lookup and the
            # swap is gone, not wrong. Look again.
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what or condition}")


@pytest.fixture
def family(small_bow):
    """fam:v3 (promoted) and fam:v4 on a small real model, and a suite of 120 demo items."""
    items = demo_dataset_build(seed=0).eval[:120]
    records = [{"id": i.id, "input": i.input, "label": i.label, "tags": list(i.tags)} for i in items]
    eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)
    backend = {"backend_kind": "builtin", "backend_config": {"path": str(small_bow)}}
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **backend)
    v4 = model_version_register(family="fam", label="v4", baseline=v3, actor=SYSTEM, **backend)
    return v3, v4


@pytest.fixture
def release_manager():
    user = get_user_model().objects.create_user(username="rm2", password=PASSWORD)
    user_role_grant(user=user, role="release_manager")
    assert not user.is_staff
    return user


def execute_in_background(run_id: int, monkeypatch) -> threading.Thread:
    """A gpu worker's part, in a thread of this process: the run, reporting each batch and each report
    slowed, so a person (and the page's 3 s poll) sees it move."""
    from gate.layers.base import Progress

    monkeypatch.setattr(Progress, "REPORT_SECONDS", 0.0)  # a report per batch, not one a second
    original = gate_runs_service.gate_run_heartbeat

    def slow(**kwargs):
        time.sleep(0.4)
        original(**kwargs)

    monkeypatch.setattr(gate_runs_service, "gate_run_heartbeat", slow)

    def work():
        try:
            gate_runs_service.gate_run_execute(gate_run_id=run_id, worker="browser-test-worker")
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_release_manager_gates_approves_and_runs_a_canary_in_the_browser(
    browser, live_server, family, release_manager, sent_tasks, monkeypatch, language
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.expected_conditions import staleness_of
    from selenium.webdriver.support.ui import Select, WebDriverWait

    v3, v4 = family
    driver = browser
    browser_sign_in(driver, live_server, release_manager)

    # Start a gate run from the version's page and its form.
    driver.get(f"{live_server.url}/versions/fam:v4/")
    driver.find_element(By.ID, "start-gate-run").click()
    wait_for(lambda: driver.find_elements(By.ID, "work-form"), what="the gate run form")
    assert (
        Select(driver.find_element(By.NAME, "candidate")).first_selected_option.get_attribute("value")
        == "fam:v4"
    )
    overrides = driver.find_element(By.NAME, "policy_overrides")
    overrides.send_keys('{"required_layers": ["clean_accuracy"], "clean_accuracy_min": 0, "batch_size": 10}')
    shot(driver, "gate-run-form", language)
    driver.find_element(By.CSS_SELECTOR, "#work-form button[type=submit]").click()
    wait_for(lambda: "/gate-runs/" in driver.current_url, what="the gate run page")
    run = GateRun.objects.get()
    assert run.created_by == release_manager and run.status == "queued"
    with translation.override(language):
        queued, running = str(term_label("queued")), str(term_label("running"))
    assert driver.find_element(By.ID, "live-status").text == queued
    assert "gpu" in driver.find_element(By.ID, "live-waiting").text  # why it waits

    # The worker takes it; the page follows without a reload (a marker set in the page survives).
    driver.execute_script("window.evalhubNotReloaded = true")
    execute_in_background(run.pk, monkeypatch)
    seen = wait_for(
        lambda: driver.execute_script(
            "var c = document.querySelector('#live-layer-clean_accuracy .live-count');"
            "return window.evalhubNotReloaded && c && /^[1-9][0-9]* \\/ 240$/.test(c.textContent)"
            f" && document.getElementById('live-status').textContent === '{running}' ? c.textContent : null"
        ),
        what="progress on the page without a reload",
    )
    assert (
        driver.find_element(By.CSS_SELECTOR, "#live-layer-clean_accuracy").get_attribute("data-state")
        == "running"
    )
    shot(driver, "gate-run-running", language)
    assert int(seen.split(" / ")[0]) < 240

    # When it finishes the page reloads once and draws the charts with the run's numbers.
    wait_for(lambda: GateRun.objects.get(pk=run.pk).status == "succeeded", what="the run to finish")
    wait_for(
        lambda: (
            driver.find_elements(By.ID, "chart-clean-by-tag")
            and int(driver.find_element(By.ID, "chart-clean-by-tag").get_attribute("data-points") or 0) > 0
        ),
        what="the chart drawn",
    )
    chart = driver.find_element(By.ID, "chart-clean-by-tag")
    tags = len(GateRun.objects.get(pk=run.pk).layers.get().details["candidate"]["by_tag"])
    assert int(chart.get_attribute("data-points")) == 2 * tags  # candidate and baseline per tag
    assert len(chart.find_elements(By.CSS_SELECTOR, "svg path")) >= 2 * tags
    assert len(driver.find_elements(By.CSS_SELECTOR, "#wrong-answers tr")) <= 51
    shot(driver, "gate-run-finished", language)

    # The full gate (all four layers, canary data included) passed later; approve with a reason.
    GateRun.objects.create(
        candidate=v4,
        baseline=v3,
        suite=run.suite,
        status=GateRun.Status.SUCCEEDED,
        verdict=GateRun.Verdict.PASS,
        policy_config=gate_policy_parse({}).as_dict(),
        progress=100,
        finished_at=timezone.now(),
    )
    ModelVersion.objects.filter(pk=v4.pk).update(status=ModelVersion.Status.GATE_PASSED)
    driver.get(f"{live_server.url}/versions/fam:v4/")
    Select(driver.find_element(By.NAME, "action")).select_by_value("approve")
    driver.find_element(By.NAME, "reason").send_keys("Full gate passed; clean accuracy by tag reviewed.")
    driver.find_element(By.CSS_SELECTOR, "form[action$='/decide/'] button[type=submit]").click()
    approvals = Decision.objects.filter(action="approve")  # (v3's incumbent declaration is two more)
    wait_for(lambda: approvals.exists(), what="the decision")
    decision = approvals.get()
    assert (decision.action, decision.decided_by, decision.reason) == (
        "approve",
        release_manager,
        "Full gate passed; clean accuracy by tag reviewed.",
    )

    # A canary: create it from the form, then start, ramp and roll back on its page.
    driver.get(f"{live_server.url}/canary/")
    driver.find_element(By.ID, "create-experiment").click()
    driver.find_element(By.NAME, "name").send_keys("fam-canary")
    Select(driver.find_element(By.NAME, "baseline")).select_by_value("fam:v3")
    Select(driver.find_element(By.NAME, "candidate")).select_by_value("fam:v4")
    driver.find_element(By.NAME, "ramp").send_keys("1, 5, 25")
    driver.find_element(By.CSS_SELECTOR, "#work-form button[type=submit]").click()
    wait_for(lambda: driver.current_url.endswith("/canary/fam-canary/"), what="the experiment page")

    def act(action: str, reason: str) -> None:
        form = driver.find_element(By.CSS_SELECTOR, f"form[action$='/{action}/']")
        form.find_element(By.NAME, "reason").send_keys(reason)
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        # The page after the action's redirect (the form was on the page before it).
        WebDriverWait(driver, WAIT).until(staleness_of(form))
        wait_for(lambda: driver.find_elements(By.ID, "history"), what=f"the page after {action}")

    act("start", "Gate passed: 1 % first.")
    act("ramp", "Guardrails green.")
    canary = Experiment.objects.get(name="fam-canary")
    assert (canary.status, canary.traffic_percent) == ("running", 5.0)
    assert driver.find_elements(By.CSS_SELECTOR, "#chart-traffic-share")
    shot(driver, "canary-ramped", language)
    act("rollback", "Rolling back to check the alerting path.")
    canary.refresh_from_db()
    assert (canary.status, canary.traffic_percent) == ("rolled_back", 0.0)
    history = driver.find_element(By.ID, "history").text
    for reason in (
        "Gate passed: 1 % first.",
        "Guardrails green.",
        "Rolling back to check the alerting path.",
    ):
        assert reason in history
    shot(driver, "canary-rolled-back", language)


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_canary_dashboard_draws_its_figures_and_refreshes_them(
    browser,
    live_server,
    experiment,  # noqa: F811
    traffic,  # noqa: F811
    release_manager,
    language,
):
    """Three days of traffic on both arms: the charts are drawn from it, and the page refreshes its
    figures in place (the per-arm table shows new traffic without a reload)."""
    from selenium.webdriver.common.by import By

    from canary.services.events import events_ingest
    from canary.services.plans import experiment_unblind
    from tests.canary.traffic import user_on
    from tests.evalhub.views.test_canary import unblinder

    # Layer 2 has no look yet: its chart is drawn once someone with the permission unblinds.
    experiment_unblind(experiment=experiment, actor=unblinder(), reason="the dashboard's screenshot")
    driver = browser
    browser_sign_in(driver, live_server, release_manager)
    driver.get(f"{live_server.url}/canary/exp/")
    for chart in ("follow-up-over-time", "metric-review_hours", "lift-review_hours", "traffic-share"):
        wait_for(
            lambda chart=chart: int(
                driver.find_element(By.ID, f"chart-{chart}").get_attribute("data-points") or 0
            ),
            what=f"chart {chart} drawn",
        )
    follow_up = driver.find_element(By.ID, "chart-follow-up-over-time")
    assert int(follow_up.get_attribute("data-points")) == 24  # 12 points per arm
    shot(driver, "canary-dashboard", language)

    driver.execute_script("window.evalhubNotReloaded = true")
    users = driver.find_element(By.CSS_SELECTOR, "tr.current-window[data-arm=candidate] .users").text
    when = experiment.share_since + timedelta(hours=1)
    events_ingest(
        events=[
            {
                "type": "turn",
                "experiment": "exp",
                "event_id": "late-1",
                "arm": "candidate",
                "session_id": "late-session",
                "user_id": user_on(experiment, "candidate", "late-user"),
                "turn_index": 0,
                "role": "user",
                "text": "And the deposit clause?",
                "timestamp": when.isoformat(),
            }
        ],
        actor=SYSTEM,
    )
    wait_for(
        lambda: (
            driver.execute_script("return window.evalhubNotReloaded === true")
            and driver.find_element(By.CSS_SELECTOR, "tr.current-window[data-arm=candidate] .users").text
            == str(int(users) + 1)
        ),
        timeout=WAIT,
        what="the new user counted without a reload",
    )


@pytest.mark.parametrize("language", LANGUAGES)
def test_an_annotator_signs_in_lands_on_the_review_queue_and_labels_a_turn(
    browser,
    live_server,
    experiment,  # noqa: F811
    traffic,  # noqa: F811
    language,
):
    """The annotator's own sign-in: the form, then the review queue (the only pages of the role), a
    turn labelled from the keyboard, and a 403 on the versions page."""
    from selenium.webdriver.common.by import By

    from canary.models import FollowUpReview

    annotator = get_user_model().objects.create_user(username="ann", password=PASSWORD)
    user_role_grant(user=annotator, role="annotator")
    driver = browser
    browser_sign_in(driver, live_server, annotator, next_url="")
    wait_for(lambda: driver.current_url.endswith("/review/"), what="the review queue after signing in")
    header = driver.find_element(By.TAG_NAME, "header").text
    with translation.override(language):
        assert str(translation.gettext("Review")) in header
        assert str(translation.gettext("Canaries")) not in header
    driver.find_element(By.CSS_SELECTOR, "a[href='/review/exp/']").click()
    wait_for(lambda: driver.find_elements(By.ID, "review-form"), what="a turn to label")
    shot(driver, "annotator-review-queue", language)
    driver.find_element(By.TAG_NAME, "body").send_keys("1")  # the keyboard shortcut for follow-up
    wait_for(lambda: FollowUpReview.objects.filter(reviewer=annotator).exists(), what="the label stored")
    assert FollowUpReview.objects.get(reviewer=annotator).label == "follow_up"
    driver.get(f"{live_server.url}/versions/fam:v4/")
    with translation.override(language):
        assert driver.find_element(By.TAG_NAME, "h1").text == str(translation.gettext("Not allowed"))
    assert not driver.find_elements(By.ID, "start-gate-run")
