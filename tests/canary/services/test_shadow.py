"""Shadow traffic over real HTTP: a live Django server, real model servers, the official `openai` client.
At the shadow step every user gets the baseline's answer and the candidate answers the same questions
in the background, stored apart from user traffic."""

import socket
import time

import openai
import pytest

from canary.models import CanaryAnalysis, Experiment, ShadowAnswer, TurnEvent
from canary.selectors.listings import experiments_live
from canary.selectors.shadow import shadow_window_compare
from canary.services.analysis import experiment_analyze
from canary.services.experiments import (
    experiment_create,
    experiment_ramp,
    experiment_rollback,
    experiment_shadow_bars,
    experiment_start,
)
from canary.services.shadow import shadow_queue_join
from engines.reasons import Term
from registry.actors import SYSTEM
from registry.errors import ApplicationError
from registry.models import AuditLog
from registry.services.tokens import api_token_create, user_role_grant
from tests.canary.traffic import user_on

pytestmark = pytest.mark.django_db(transaction=True)
QUESTIONS = [
    "The Buyer shall pay each invoice within 30 days of receipt.",
    "The Supplier's liability is capped at the fees paid in the last twelve months.",
    "Either party may terminate this agreement on 90 days' written notice.",
    "买方应在收到发票后三十日内付款。",
]
PLAN = ["shadow", 1, 10, 100]


@pytest.fixture
def token(django_user_model):
    user = django_user_model.objects.create_user("chat-app")
    user_role_grant(user=user, role="app")
    return api_token_create(user=user, name="app")[1]


@pytest.fixture(autouse=True)
def mirrors_stored():
    yield
    shadow_queue_join()  # nothing of this test's mirrors is written after it


def shadowing(versions, name="shadowed", **options):
    v3, v4 = versions
    experiment = experiment_create(name=name, baseline=v3, candidate=v4, ramp=PLAN, actor=SYSTEM, **options)
    return experiment_start(experiment=experiment, actor=SYSTEM)


def client_for(live_server, token, name):
    return openai.OpenAI(base_url=f"{live_server.url}/api/v1/canary/{name}/v1", api_key=token, max_retries=0)


def ask(client, user, question, *, stream=False):
    """The user's answer as the client reads it, its arm, and the seconds it took."""
    started = time.perf_counter()
    messages = [{"role": "user", "content": question}]
    if stream:
        chunks = client.chat.completions.create(model="m", messages=messages, user=user, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        return text, None, time.perf_counter() - started
    raw = client.chat.completions.with_raw_response.create(model="m", messages=messages, user=user)
    return raw.parse().choices[0].message.content, raw.headers["X-EvalHub-Arm"], time.perf_counter() - started


def arm_answers(experiment):
    arms = experiments_live(experiments=[experiment])[0].arms
    return {arm: (figures.answers, figures.questions) for arm, figures in arms.items()}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_users_get_the_baseline_answer_unchanged_and_the_mirror_is_not_user_traffic(
    live_server, small_bow, serve_versions, token, stream
):
    versions = serve_versions({"v3": small_bow, "v4": small_bow}, family="fam")
    # Without shadowing: the users on the baseline of a 1 % canary.
    plain = experiment_start(
        experiment=experiment_create(
            name="plain", baseline=versions[0], candidate=versions[1], ramp=[1, 10], actor=SYSTEM
        ),
        actor=SYSTEM,
    )
    users = [user_on(plain, "baseline", f"u{i}") for i in range(len(QUESTIONS))]
    before = [
        ask(client_for(live_server, token, "plain"), u, q, stream=stream)[0]
        for u, q in zip(users, QUESTIONS, strict=True)
    ]
    experiment_rollback(experiment=plain, actor=SYSTEM, reason="next: the shadowed one")

    shadowed = shadowing(versions)
    client = client_for(live_server, token, "shadowed")
    answers = [ask(client, u, q, stream=stream) for u, q in zip(users, QUESTIONS, strict=True)]
    assert [text for text, _, _ in answers] == before
    if not stream:
        assert {arm for _, arm, _ in answers} == {"baseline"}
    shadow_queue_join()

    mirrors = ShadowAnswer.objects.filter(experiment=shadowed)
    assert mirrors.count() == len(QUESTIONS) and not mirrors.filter(dropped=True).exists()
    baseline_answers = TurnEvent.objects.filter(experiment=shadowed, role="assistant")
    assert set(mirrors.values_list("baseline_event_id", flat=True)) == set(
        baseline_answers.values_list("event_id", flat=True)
    )
    for mirror in mirrors:
        answer = baseline_answers.get(event_id=mirror.baseline_event_id)
        assert mirror.version == versions[1] and mirror.error == "" and mirror.latency_ms > 0
        assert mirror.text == answer.text  # the same checkpoint behind both: the same answer
        assert mirror.streamed is stream and (mirror.first_token_ms is not None) is stream
        if stream:
            assert mirror.output_tokens > 0
    # User traffic: every turn on the baseline, the mirrors nowhere in it.
    assert set(TurnEvent.objects.filter(experiment=shadowed).values_list("arm", flat=True)) == {"baseline"}
    assert arm_answers(shadowed) == {"baseline": (4, 4), "candidate": (0, 0)}
    window = shadow_window_compare(experiment=shadowed, bars=experiment_shadow_bars(experiment=shadowed))
    assert (window.comparison.pairs, window.comparison.agreement, window.comparison.similarity) == (
        4,
        1.0,
        1.0,
    )


def test_a_slow_candidate_never_delays_the_user(live_server, small_bow, serve_versions, token, settings):
    (v3,) = serve_versions({"v3": small_bow}, family="fam")
    (v4,) = serve_versions({"v4": small_bow}, family="fam", token_delay=0.25)
    plain = experiment_start(
        experiment=experiment_create(name="plain", baseline=v3, candidate=v4, ramp=[1, 10], actor=SYSTEM),
        actor=SYSTEM,
    )
    users = [user_on(plain, "baseline", f"u{i}") for i in range(3)]
    without = [ask(client_for(live_server, token, "plain"), u, QUESTIONS[0], stream=True)[2] for u in users]
    experiment_rollback(experiment=plain, actor=SYSTEM, reason="next: the shadowed one")

    shadowed = shadowing((v3, v4))
    client = client_for(live_server, token, "shadowed")
    with_shadow = [ask(client, u, QUESTIONS[0], stream=True)[2] for u in users]
    shadow_queue_join()
    mirrors = list(ShadowAnswer.objects.filter(experiment=shadowed))
    slowest_mirror = max(m.latency_ms for m in mirrors) / 1000
    assert len(mirrors) == 3 and slowest_mirror > 2  # ~10 tokens, 0.25 s apart
    # Each user's answer took as long as without shadowing, far below the candidate's time.
    assert max(with_shadow) < max(without) + 0.5 < slowest_mirror, (with_shadow, without)


def test_a_full_queue_drops_the_mirror_and_counts_it(live_server, small_bow, serve_versions, token, settings):
    settings.EVALHUB_SHADOW_WORKERS, settings.EVALHUB_SHADOW_QUEUE = 1, 1
    (v3,) = serve_versions({"v3": small_bow}, family="fam")
    (v4,) = serve_versions({"v4": small_bow}, family="fam", token_delay=0.2)
    shadowed = shadowing((v3, v4))
    client = client_for(live_server, token, "shadowed")
    for i in range(5):  # the first mirror busy for ~2 s, the second waiting, the rest dropped
        ask(client, f"user-{i}", QUESTIONS[1], stream=True)
    shadow_queue_join()
    mirrors = ShadowAnswer.objects.filter(experiment=shadowed)
    assert mirrors.count() == 5 and mirrors.filter(dropped=False).count() == 2
    window = shadow_window_compare(experiment=shadowed, bars=experiment_shadow_bars(experiment=shadowed))
    assert (window.comparison.pairs, window.comparison.dropped) == (2, 3)


def test_an_unreachable_candidate_is_recorded_as_a_shadow_error_and_the_window_fails(
    live_server, small_bow, serve_versions, token
):
    v3, v4 = serve_versions({"v3": small_bow, "v4": small_bow}, family="fam")
    shadowed = shadowing((v3, v4), guardrails={"min_shadow_pairs": 3})
    v4.serving_url = "http://127.0.0.1:9/v1"  # nothing listens there
    v4.save(update_fields=["serving_url"])
    client = client_for(live_server, token, "shadowed")
    for i in range(3):
        assert ask(client, f"user-{i}", QUESTIONS[i])[1] == "baseline"
    shadow_queue_join()
    assert all("fam:v4 unreachable" in m.error for m in ShadowAnswer.objects.all())
    analysis = experiment_analyze(experiment=Experiment.objects.get(name="shadowed"))
    # A failing shadow window rolls the experiment back: no user was on the candidate.
    assert (analysis.verdict, analysis.action, analysis.metrics[0]["metric"]) == (
        "fail",
        "rolled_back",
        "shadow",
    )
    assert analysis.reasons[0]["code"] == "shadow.errors_up"
    shadowed.refresh_from_db()
    assert shadowed.status == "rolled_back" and "shadow window failed" in shadowed.end_reason


def test_a_hanging_candidate_does_not_delay_a_plain_answer(live_server, small_bow, serve_versions, token):
    v3, v4 = serve_versions({"v3": small_bow, "v4": small_bow}, family="fam")
    hanging = socket.socket()  # accepts connections and never answers
    hanging.bind(("127.0.0.1", 0))
    hanging.listen(16)
    v4.serving_url = f"http://127.0.0.1:{hanging.getsockname()[1]}/v1"
    v4.save(update_fields=["serving_url"])
    shadowing((v3, v4))
    client = client_for(live_server, token, "shadowed")
    try:
        took = [ask(client, f"user-{i}", QUESTIONS[0])[2] for i in range(3)]
        assert max(took) < 2, took
        assert not ShadowAnswer.objects.exists()  # the mirrors still wait for the candidate
    finally:
        hanging.close()  # the mirrors fail now
    shadow_queue_join()
    assert ShadowAnswer.objects.count() == 3 and all(m.error for m in ShadowAnswer.objects.all())


def test_leaving_the_shadow_step_needs_a_clean_window_when_required(
    live_server, small_bow, serve_versions, token
):
    versions = serve_versions({"v3": small_bow, "v4": small_bow}, family="fam")
    guardrails = {"min_shadow_pairs": 4, "max_shadow_latency_ratio": 50}
    shadowed = shadowing(versions, require_clean_shadow=True, guardrails=guardrails, shadow_percent=100)
    assert (shadowed.traffic_percent, shadowed.ramp, shadowed.in_shadow) == (
        0,
        ["shadow", 1.0, 10.0, 100.0],
        True,
    )
    with pytest.raises(ApplicationError) as refused:
        experiment_ramp(experiment=shadowed, actor=SYSTEM, reason="too early")
    assert (refused.value.status_code, refused.value.code) == (409, "shadow_required")
    assert refused.value.reason.params["verdict"] == Term("insufficient_data")
    audit = AuditLog.objects.get(action="experiment.ramp_refused")
    assert audit.after == {"refused": "shadow_required", "shadow_verdict": "insufficient_data", "pairs": 0}
    shadowed.refresh_from_db()
    assert (shadowed.ramp_step, shadowed.traffic_percent) == (0, 0)

    client = client_for(live_server, token, "shadowed")
    for i, question in enumerate(QUESTIONS):
        ask(client, f"user-{i}", question)
    shadow_queue_join()
    ramped = experiment_ramp(experiment=shadowed, actor=SYSTEM, reason="clean shadow window")
    assert (ramped.ramp_step, ramped.traffic_percent, ramped.in_shadow) == (1, 1, False)
    assert list(ramped.share_changes.values_list("cause", "buckets")) == [("start", 0), ("ramp", 100)]
    # Past the shadow step nothing is mirrored any more.
    ask(client, user_on(ramped, "baseline", "later"), QUESTIONS[0])
    shadow_queue_join()
    assert ShadowAnswer.objects.count() == 4


def test_the_analysis_at_the_shadow_step_ramps_a_clean_window_where_the_plan_ramps_itself(
    live_server, small_bow, serve_versions, token
):
    versions = serve_versions({"v3": small_bow, "v4": small_bow}, family="fam")
    guardrails = {"min_shadow_pairs": 4, "max_shadow_latency_ratio": 50}
    shadowed = shadowing(versions, ramp_auto=True, guardrails=guardrails, shadow_percent=100)
    waiting = experiment_analyze(experiment=shadowed)
    assert (waiting.verdict, waiting.action) == ("insufficient_data", "")
    client = client_for(live_server, token, "shadowed")
    for i, question in enumerate(QUESTIONS):
        ask(client, f"user-{i}", question)
    shadow_queue_join()
    analysis = experiment_analyze(experiment=Experiment.objects.get(pk=shadowed.pk))
    assert (analysis.verdict, analysis.action) == ("pass", "ramped")
    assert analysis.metrics[0]["pairs"] == 4 and analysis.metrics[0]["agreement"] == 1.0
    assert Experiment.objects.get(pk=shadowed.pk).traffic_percent == 1
    assert CanaryAnalysis.objects.count() == 2


def test_shadow_percent_mirrors_a_share_of_the_questions(live_server, small_bow, serve_versions, token):
    versions = serve_versions({"v3": small_bow, "v4": small_bow}, family="fam")
    shadowing(versions, shadow_percent=50)
    client = client_for(live_server, token, "shadowed")
    for i in range(40):
        ask(client, f"user-{i}", QUESTIONS[0])
    shadow_queue_join()
    assert 8 <= ShadowAnswer.objects.count() <= 32  # binomial(40, 0.5): outside with p < 1e-4
