"""Streams through the canary proxy under load and faults: lost or duplicated turn events, and what the
proxy adds to the time to the first token.

The stack is the production one on loopback: the web app under gunicorn (gthread, --workers x
--threads; a stream holds a thread for its whole answer), a scratch PostgreSQL database, the proxy's
turn events through a Redis stream on a redis-server of the bench's own (--redis-port, append-only
file as in docker-compose.yml) drained by a thread of this process every half second as a cpu worker
would, and two reference model servers (`manage.py serve_model`, bag of words) for the baseline and
the candidate, streaming token by token --token-delay-ms apart. The experiment runs at 10 % (the
share an ungated candidate may have).

Phases, each with its own users (one user id per request, so every request's two turn events, the
question and the answer, are known) and its own expected outcome:
  load        --clients streams at once for --seconds, new users (10 % on the candidate), with
              --direct-clients streams straight to the baseline server beside them: time to the first
              content chunk (TTFB) through the proxy vs direct, overhead p50 and p99 (targets <= 5 ms
              and <= 20 ms); every stream done, its two events stored once.
  redis       as load, and the telemetry Redis is stopped (SIGTERM) half-way and started again
              --redis-down-seconds later: the proxy writes to PostgreSQL meanwhile; nothing lost or
              stored twice.
  disconnect  every client goes away after --disconnect-after content chunks: each answer stored as
              abandoned, cut short (its latency well under a whole answer's: the upstream was closed).
  kill        candidate-arm users through the official `openai` SDK; the candidate's server is killed
              (SIGKILL) half-way: the streams it was answering end with an error event the SDK raises,
              stored as failed answers (not fallbacks); requests after it fall back to the baseline.

    python bench/stream_load.py [--clients 64] [--seconds 60] [--fault-clients 16]
                                [--fault-seconds 10] [--workers 2] [--threads 32]
    python bench/stream_load.py --smoke      # tiny: 4 clients, 2 s a phase (the test suite's run)

Exits 1 when a phase lost or duplicated an event or missed its expected outcome (the TTFB targets
are reported, not enforced: a shared machine makes them noisy). Needs PostgreSQL (--postgres; the
scratch database --database is dropped at the end) and redis-server on PATH.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.router import (  # noqa: E402
    bow_checkpoint,
    percentile,
    scratch_database_create,
    scratch_database_drop,
    setup_django,
)
from evalhub.devstack import BIN, Process, RedisServer, port_free, url_wait  # noqa: E402

FAMILY = "bench-stream"
EXPERIMENT = "bench-stream"
QUESTIONS = (
    "The Buyer shall pay each invoice within 30 days of receipt.",
    "Either party may terminate this agreement on ninety days written notice.",
    "Neither party is liable for indirect or consequential losses.",
    "The Recipient shall keep the Discloser's information secret.",
)


@dataclass
class Outcome:
    """One stream as its client saw it."""

    user: str
    status: int | str = 0  # HTTP status, or the transport error's name
    ttfb: float | None = None  # seconds to the first content chunk
    total: float | None = None
    chunks: int = 0
    done: bool = False  # read up to [DONE]
    left: bool = False  # the client went away before the end
    raised: str = ""  # the error event (or the SDK's exception)
    version: str = ""  # X-EvalHub-Model-Version (through the proxy)
    fallback: bool = False


def _content(chunk: dict) -> str:
    choices = chunk.get("choices") or []
    delta = choices[0].get("delta") if choices else None
    return (delta or {}).get("content") or ""


def sse_stream(
    client: httpx.Client,
    url: str,
    body: dict,
    *,
    leave_after: int = 0,
    answering: threading.Event | None = None,
) -> Outcome:
    """One streamed chat completion read by hand (server-sent events over httpx); `answering` is set
    once its second content chunk arrives (a stream is mid-answer)."""
    outcome = Outcome(user=body.get("user", ""))
    started = time.perf_counter()
    try:
        with client.stream("POST", url, json=body) as response:
            outcome.status = response.status_code
            outcome.version = response.headers.get("X-EvalHub-Model-Version", "")
            outcome.fallback = response.headers.get("X-EvalHub-Fallback") == "1"
            if response.status_code != 200:
                outcome.raised = response.read().decode(errors="replace")[:200]
                return outcome
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    outcome.done = True
                    break
                chunk = json.loads(data)
                if chunk.get("error"):
                    outcome.raised = str(chunk["error"].get("message"))
                    continue
                if _content(chunk):
                    outcome.chunks += 1
                    outcome.ttfb = outcome.ttfb or time.perf_counter() - started
                    if answering is not None and outcome.chunks == 2:
                        answering.set()
                    if leave_after and outcome.chunks >= leave_after:
                        outcome.left = True  # leaving the block closes the connection mid-answer
                        break
    except httpx.HTTPError as exc:
        outcome.status = type(exc).__name__
    outcome.total = time.perf_counter() - started
    return outcome


def sdk_stream(client, body: dict, *, answering: threading.Event | None = None) -> Outcome:
    """One streamed chat completion through the official SDK, which raises the error event; `answering`
    as in `sse_stream`."""
    import openai

    outcome = Outcome(user=body["user"])
    started = time.perf_counter()
    try:
        stream = client.chat.completions.create(**body, stream=True)
        outcome.status = 200
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                outcome.chunks += 1
                outcome.ttfb = outcome.ttfb or time.perf_counter() - started
                if answering is not None and outcome.chunks == 2:
                    answering.set()
        outcome.done = True
    except openai.APIStatusError as exc:
        outcome.status, outcome.raised = exc.status_code, str(exc)[:200]
    except openai.APIError as exc:  # the error event after the first chunk (or a broken connection)
        outcome.raised = f"{type(exc).__name__}: {exc}"[:200]
    outcome.total = time.perf_counter() - started
    return outcome


# ---------------------------------------------------------------------------------------------
# The stack
# ---------------------------------------------------------------------------------------------
def fixtures_create(*, checkpoint: Path, ports: dict[str, int]) -> dict:
    """Migrate; two versions served at `ports`; an `app` token; the experiment running at 10 %."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from canary.services.experiments import experiment_create, experiment_start
    from registry.actors import SYSTEM
    from registry.roles import APP
    from registry.services.tokens import api_token_create, user_role_grant
    from registry.services.versions import model_version_register

    call_command("migrate", verbosity=0)
    versions = {
        arm: model_version_register(
            family=FAMILY,
            label=arm,
            backend_kind="builtin",
            backend_config={"path": str(checkpoint)},
            serving_url=f"http://127.0.0.1:{ports[arm]}/v1",
            actor=SYSTEM,
        )
        for arm in ("baseline", "candidate")
    }
    user = get_user_model().objects.create_user("bench-stream-app")
    user_role_grant(user=user, role=APP)
    _, token = api_token_create(user=user, name="bench-stream")
    experiment = experiment_create(name=EXPERIMENT, actor=SYSTEM, traffic_percent=10, **versions)
    experiment = experiment_start(experiment=experiment, actor=SYSTEM, reason="bench")
    return {"token": token, "experiment": experiment, "versions": versions}


def model_server_start(*, env: dict, log_dir: Path, arm: str, port: int, delay_ms: float) -> Process:
    argv = [sys.executable, "manage.py", "serve_model", f"{FAMILY}:{arm}", "--port", str(port)]
    argv += ["--token-delay-ms", str(delay_ms)]
    process = Process(name=f"model-{arm}", argv=argv, env=env, log_dir=log_dir)
    url_wait(f"http://127.0.0.1:{port}/health", process=process, timeout=120)
    return process


def web_server_start(*, env: dict, log_dir: Path, port: int, server: str, workers: int, threads: int):
    """The web app as in production: gunicorn gthread, or uvicorn (ASGI) when asked and installed."""
    if server == "uvicorn":
        argv = [str(BIN / "uvicorn"), "evalhub.asgi:application", "--workers", str(workers)]
        argv += ["--host", "127.0.0.1", "--port", str(port), "--no-access-log"]
    else:
        argv = [str(BIN / "gunicorn"), "evalhub.wsgi:application", "--bind", f"127.0.0.1:{port}"]
        argv += ["--workers", str(workers), "--threads", str(threads)]
    process = Process(name="web", argv=argv, env=env, log_dir=log_dir)
    url_wait(f"http://127.0.0.1:{port}/api/schema/", process=process, timeout=120)
    return process


class Drainer:
    """What a cpu worker does: drain the telemetry stream every half second (a drain that fails while
    Redis is down is retried at the next tick, as the periodic task would be)."""

    def __init__(self):
        self.stop = threading.Event()
        self.failures = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        import redis
        from django.db import connection

        from canary.services.telemetry import turn_stream_drain

        try:
            while not self.stop.wait(0.5):
                try:
                    turn_stream_drain()
                except redis.RedisError:
                    self.failures += 1
        finally:
            connection.close()

    def finish(self) -> None:
        """Stop the ticks; then drain to the end, claiming what a failed drain left pending."""
        from canary.services.telemetry import turn_stream_drain, turn_stream_pending

        self.stop.set()
        self.thread.join()
        for _ in range(100):
            if not (turn_stream_drain(claim_idle_ms=0) or turn_stream_pending()):
                return
        raise RuntimeError(f"the telemetry stream still holds {turn_stream_pending()} events")


# ---------------------------------------------------------------------------------------------
# The phases
# ---------------------------------------------------------------------------------------------
@dataclass
class Phase:
    name: str
    clients: int
    seconds: float
    arm: str | None = None  # only users of this arm (None: as the router assigns them)
    direct: int = 0  # clients streaming straight to the baseline's server beside
    leave_after: int = 0  # content chunks each client reads before it goes away (0: all)
    sdk: bool = False  # the official openai SDK instead of httpx
    fault: Callable[[], None] | None = None  # done half-way, once a stream is mid-answer
    answering: threading.Event = field(default_factory=threading.Event)
    outcomes: list[Outcome] = field(default_factory=list)
    directs: list[Outcome] = field(default_factory=list)


@dataclass
class Stack:
    web_url: str
    token: str
    experiment: object
    baseline_url: str
    baseline_ref: str


def user_ids(*, stack: Stack, prefix: str, arm: str | None):
    """Fresh user ids, one per request, on `arm` when given (the router's own assignment)."""
    from canary.services.assignment import experiment_assign

    n = 0
    while True:
        n += 1
        unit = f"{prefix}-{n}"
        if arm is None or experiment_assign(experiment=stack.experiment, user_id=unit).assignment.arm == arm:
            yield unit


def _body(user: str, n: int) -> dict:
    return {"model": "any", "messages": [{"role": "user", "content": QUESTIONS[n % 4]}], "user": user}


def _client_loop(phase: Phase, stack: Stack, index: int, stop_at: float) -> None:
    import openai

    path = f"/api/v1/canary/{EXPERIMENT}/v1"
    sdk = openai.OpenAI(base_url=stack.web_url + path, api_key=stack.token, max_retries=0, timeout=60)
    headers = {"Authorization": f"Token {stack.token}"}
    with httpx.Client(base_url=stack.web_url, headers=headers, timeout=60) as client:
        for n, user in enumerate(user_ids(stack=stack, prefix=f"{phase.name}-{index}", arm=phase.arm)):
            if time.perf_counter() >= stop_at:
                break
            if phase.sdk:
                outcome = sdk_stream(sdk, _body(user, n), answering=phase.answering)
            else:
                url = f"{path}/chat/completions"
                body = {**_body(user, n), "stream": True}
                outcome = sse_stream(
                    client, url, body, leave_after=phase.leave_after, answering=phase.answering
                )
            phase.outcomes.append(outcome)
    sdk.close()


def _direct_loop(phase: Phase, stack: Stack, index: int, stop_at: float) -> None:
    with httpx.Client(base_url=stack.baseline_url, timeout=60) as client:
        n = 0
        while time.perf_counter() < stop_at:
            n += 1
            body = {**_body(f"direct-{index}-{n}", n), "model": stack.baseline_ref, "stream": True}
            phase.directs.append(sse_stream(client, "/chat/completions", body))


def phase_run(phase: Phase, *, stack: Stack) -> None:
    stop_at = time.perf_counter() + phase.seconds
    threads = [
        threading.Thread(target=_client_loop, args=(phase, stack, i, stop_at), daemon=True)
        for i in range(phase.clients)
    ]
    threads += [
        threading.Thread(target=_direct_loop, args=(phase, stack, i, stop_at), daemon=True)
        for i in range(phase.direct)
    ]
    for thread in threads:
        thread.start()
    if phase.fault is not None:
        # Half-way, and then at the next second chunk of any stream: a fault timed by the clock alone
        # can fall between two answers on a quiet machine, where nothing is cut.
        time.sleep(phase.seconds / 2)
        phase.answering.clear()
        phase.answering.wait(timeout=phase.seconds / 2)
        phase.fault()
    for thread in threads:
        thread.join(timeout=phase.seconds + 120)
    if any(thread.is_alive() for thread in threads):
        raise RuntimeError(f"phase {phase.name}: a client is still streaming two minutes after the end")


# ---------------------------------------------------------------------------------------------
# What was stored, against what each phase expects
# ---------------------------------------------------------------------------------------------
@dataclass
class Tally:
    streams: int
    expected: int
    stored: int
    lost: int
    duplicated: int
    ttfb: dict[str, float]
    outcome: str
    problems: list[str]


def _ms(values: list[float], q: float) -> float:
    return percentile(values, q) * 1000 if values else float("nan")


def _ttfb(phase: Phase, stack: Stack) -> dict[str, float]:
    """TTFB of the streams the baseline answered through the proxy, and of those straight to it."""
    proxied = [
        o.ttfb for o in phase.outcomes if o.ttfb and o.version == stack.baseline_ref and not o.fallback
    ]
    direct = [o.ttfb for o in phase.directs if o.ttfb]
    out = {
        f"{name} p{q}": _ms(values, q)
        for name, values in (("proxy", proxied), ("direct", direct))
        for q in (50, 99)
    }
    for q in (50, 99):
        out[f"overhead p{q}"] = out[f"proxy p{q}"] - out[f"direct p{q}"]
    return out


def phase_tally(phase: Phase, *, stack: Stack, whole_answer_ms: float) -> Tally:
    from canary.models import TurnEvent

    rows = list(
        TurnEvent.objects.filter(
            experiment=stack.experiment, user_id__startswith=f"{phase.name}-"
        ).values_list("user_id", "role", "error", "fallback", "abandoned", "latency_ms")
    )
    began = {o.user: o for o in phase.outcomes if o.status == 200}  # the proxy began an answer
    per_key = Counter((user, role) for user, role, *_ in rows)
    stored = sum(1 for user, _ in per_key if user in began)
    problems = [f"{o.user}: {o.status} {o.raised}" for o in phase.outcomes if o.status != 200][:3]
    stray = {user for user, _ in per_key} - set(began)
    if stray:
        problems.append(f"events of {len(stray)} requests that got no answer, e.g. {sorted(stray)[:2]}")
    answers = {user: rest for user, role, *rest in rows if role == "assistant"}
    check = CHECKS.get(phase.name, _all_done)
    outcome, more = check(phase, answers, whole_answer_ms)
    return Tally(
        streams=len(phase.outcomes),
        expected=2 * len(began),
        stored=stored,
        lost=2 * len(began) - stored,
        duplicated=sum(count - 1 for count in per_key.values()),
        ttfb=_ttfb(phase, stack),
        outcome=outcome,
        problems=problems + more,
    )


def _all_done(phase: Phase, answers: dict, whole_answer_ms: float) -> tuple[str, list[str]]:
    bad = [o for o in phase.outcomes if not o.done or o.raised]
    failed = [user for user, (error, *_) in answers.items() if error]
    problems = [f"{len(bad)} streams not done, e.g. {bad[0]}"] if bad else []
    problems += [f"{len(failed)} answers stored as failed, e.g. {failed[0]}"] if failed else []
    return f"{len(phase.outcomes) - len(bad)} done", problems


def _abandoned(phase: Phase, answers: dict, whole_answer_ms: float) -> tuple[str, list[str]]:
    left = {o.user for o in phase.outcomes if o.left}
    marked = {user for user, (_, _, abandoned, _) in answers.items() if abandoned}
    latency = [answers[user][3] for user in left & marked]
    cut = percentile(latency, 50) if latency else float("nan")
    problems = [] if left else ["no client went away before its answer's end"]
    if left != marked:
        problems.append(f"{len(left)} clients went away, {len(marked)} answers stored as abandoned")
    if whole_answer_ms == whole_answer_ms and not cut < 0.8 * whole_answer_ms:  # nan: no load phase
        problems.append(f"abandoned answers took {cut:.0f} ms, a whole one {whole_answer_ms:.0f} ms")
    return f"{len(marked)}/{len(left)} abandoned, at p50 {cut:.0f} of {whole_answer_ms:.0f} ms", problems


def _killed(phase: Phase, answers: dict, whole_answer_ms: float) -> tuple[str, list[str]]:
    raised = {o.user for o in phase.outcomes if o.raised and o.status == 200}
    failed = {user for user, (error, fallback, *_) in answers.items() if error and not fallback}
    fell_back = {user for user, (_, fallback, *_) in answers.items() if fallback}
    done = {o.user for o in phase.outcomes if o.done}
    problems = [] if raised else ["no stream was cut by the kill"]
    if raised != failed:
        problems.append(f"{len(raised)} streams raised in the SDK, {len(failed)} answers stored as failed")
    if not fell_back or not fell_back <= done:
        problems.append(f"{len(fell_back)} fallbacks, {len(fell_back - done)} of them not done")
    return f"{len(raised)} raised = {len(failed)} failed, {len(fell_back)} fell back", problems


CHECKS = {"disconnect": _abandoned, "kill": _killed}
DIRECT_WRITE = "telemetry stream unavailable"  # the proxy's warning when it writes PostgreSQL itself


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------
HEADER = (
    f"{'phase':11}{'clients':>8}{'streams':>8}{'events stored/expected':>24}{'lost':>6}{'dup':>5}"
    f"{'TTFB proxy p50/p99':>20}{'direct p50/p99':>16}{'overhead p50/p99 (ms)':>23}  outcome"
)


def tally_line(phase: Phase, tally: Tally) -> str:
    t = tally.ttfb
    pair = lambda a, b: f"{t[a]:.1f}/{t[b]:.1f}" if t[a] == t[a] else "-"  # noqa: E731 (nan: none)
    return (
        f"{phase.name:11}{phase.clients:>8}{tally.streams:>8}{f'{tally.stored}/{tally.expected}':>24}"
        f"{tally.lost:>6}{tally.duplicated:>5}{pair('proxy p50', 'proxy p99'):>20}"
        f"{pair('direct p50', 'direct p99'):>16}{pair('overhead p50', 'overhead p99'):>23}  {tally.outcome}"
    )


def phases_build(args, *, redis: RedisServer, candidate: list[Process]) -> list[Phase]:
    def redis_restart() -> None:
        redis.stop()
        time.sleep(args.redis_down_seconds)
        redis.start()

    built = {
        "load": Phase("load", args.clients, args.seconds, direct=args.direct_clients),
        "redis": Phase(
            "redis", args.clients, args.fault_seconds, direct=args.direct_clients, fault=redis_restart
        ),
        "disconnect": Phase(
            "disconnect", args.fault_clients, args.fault_seconds, leave_after=args.disconnect_after
        ),
        "kill": Phase(
            "kill",
            args.fault_clients,
            args.fault_seconds,
            arm="candidate",
            sdk=True,
            fault=lambda: candidate[0].kill(),
        ),
    }
    return [built[name] for name in args.phases.split(",")]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--clients", type=int, default=64, help="streams at once in the load and redis phases"
    )
    parser.add_argument("--seconds", type=float, default=60, help="the load phase's length")
    parser.add_argument(
        "--direct-clients", type=int, default=16, help="streams straight to the baseline beside"
    )
    parser.add_argument(
        "--fault-clients", type=int, default=16, help="streams at once in disconnect and kill"
    )
    parser.add_argument("--fault-seconds", type=float, default=10, help="each fault phase's length")
    parser.add_argument("--phases", default="load,redis,disconnect,kill", help="which, in this order")
    parser.add_argument("--token-delay-ms", type=float, default=50, help="the model servers' pause per token")
    parser.add_argument("--disconnect-after", type=int, default=3, help="content chunks read before leaving")
    parser.add_argument("--redis-down-seconds", type=float, default=1.0)
    parser.add_argument("--server", choices=["gunicorn", "uvicorn"], default="gunicorn")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=32, help="gunicorn threads per worker")
    parser.add_argument(
        "--port-base",
        type=int,
        default=8730,
        help="web, baseline, candidate: this and the next two (0: free ones)",
    )
    parser.add_argument(
        "--redis-port", type=int, default=6391, help="the bench's own redis-server (0: a free port)"
    )
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432", help="server URL")
    parser.add_argument("--database", default="bench_load_stream", help="scratch database (dropped)")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny: 4 clients, 2 s a phase (a test that it runs)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.clients = args.fault_clients = 4
        args.direct_clients, args.seconds, args.fault_seconds = 2, 2.0, 2.0
        args.token_delay_ms = min(args.token_delay_ms, 30)
    return args


def stack_env(args, *, scratch: Path, redis_port: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL", "EVALHUB_WEBHOOK_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="evalhub.settings.local",
        DEBUG="0",
        DATABASE_URL=f"{args.postgres.rstrip('/')}/{args.database}".replace(
            "postgresql://", "postgres://", 1
        ),
        EVALHUB_VAR_DIR=str(scratch),
        EVALHUB_MODEL_DIR=str(scratch / "models"),
        EVALHUB_TELEMETRY_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
        EVALHUB_TELEMETRY_STREAM=f"evalhub:bench-stream:{secrets.token_hex(6)}",
        PYTHONUNBUFFERED="1",
    )
    return env


def main() -> int:
    args = arguments()
    print(f"stream load and faults: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    scratch = Path(tempfile.mkdtemp(prefix="bench-load-stream-"))
    redis_port = args.redis_port or port_free()
    env = stack_env(args, scratch=scratch, redis_port=redis_port)
    admin_url = f"{args.postgres.rstrip('/')}/postgres"
    scratch_database_create(admin_url=admin_url, name=args.database)
    processes: list[Process] = []
    redis = RedisServer(port=redis_port, scratch=scratch)
    try:
        redis.start()
        setup_django(env=env)
        logging.getLogger("httpx2").setLevel(logging.WARNING)  # the openai SDK's own httpx: a line a request
        base = args.port_base
        ports = {
            name: base + i if base else port_free() for i, name in enumerate(("web", "baseline", "candidate"))
        }
        fixtures = fixtures_create(
            checkpoint=bow_checkpoint(out_dir=scratch / "models" / "bow", every=3), ports=ports
        )
        for arm in ("baseline", "candidate"):
            processes.append(
                model_server_start(
                    env=env, log_dir=scratch, arm=arm, port=ports[arm], delay_ms=args.token_delay_ms
                )
            )
        web = web_server_start(
            env=env,
            log_dir=scratch,
            port=ports["web"],
            server=args.server,
            workers=args.workers,
            threads=args.threads,
        )
        processes.append(web)
        stack = Stack(
            web_url=f"http://127.0.0.1:{ports['web']}",
            token=fixtures["token"],
            experiment=fixtures["experiment"],
            baseline_url=f"http://127.0.0.1:{ports['baseline']}/v1",
            baseline_ref=fixtures["versions"]["baseline"].ref,
        )
        server = (
            f"gunicorn gthread {args.workers} x {args.threads}"
            if args.server == "gunicorn"
            else f"uvicorn {args.workers} workers"
        )
        print(
            f"web: {server}; PostgreSQL {args.database}; telemetry redis-server :{redis_port}; "
            f"model servers {args.token_delay_ms:g} ms a token; experiment at 10 %; logs in {scratch}\n"
        )
        return phases_report(args, stack=stack, redis=redis, candidate=[processes[1]], web=web)
    finally:
        for process in reversed(processes):
            process.stop()
        redis.stop()
        from django.db import connections

        connections.close_all()
        scratch_database_drop(admin_url=admin_url, name=args.database)
        if not os.environ.get("KEEP"):
            shutil.rmtree(scratch, ignore_errors=True)


def warm_up(*, stack: Stack, clients: int) -> None:
    """Unmeasured streams first: each web worker's first requests import and check what they use."""
    phase = Phase("warm", clients, 1.0)
    phase_run(phase, stack=stack)
    bad = [o for o in phase.outcomes if not o.done]
    if bad:
        raise RuntimeError(f"the warm-up streams failed, e.g. {bad[0]}")


def phases_report(args, *, stack: Stack, redis: RedisServer, candidate: list[Process], web: Process) -> int:
    whole_answer_ms = float("nan")
    warm_up(stack=stack, clients=min(args.clients, 2 * args.workers))
    print(HEADER, flush=True)
    failed = False
    for phase in phases_build(args, redis=redis, candidate=candidate):
        drainer = Drainer()
        direct_writes = web.tail(10**9).count(DIRECT_WRITE)
        phase_run(phase, stack=stack)
        # A client that left is seen by the proxy at its next write: a token later.
        time.sleep(max(0.5, 5 * args.token_delay_ms / 1000))
        drainer.finish()
        if phase.name in ("load", "redis") and whole_answer_ms != whole_answer_ms:
            whole_answer_ms = _ms([o.total for o in phase.outcomes if o.done], 50)
        tally = phase_tally(phase, stack=stack, whole_answer_ms=whole_answer_ms)
        if phase.fault is not None and phase.name == "redis":
            tally.outcome += (
                f", {web.tail(10**9).count(DIRECT_WRITE) - direct_writes} answers stored directly"
            )
        print(tally_line(phase, tally), flush=True)
        for problem in (
            tally.problems
            + ([f"{tally.lost} lost"] if tally.lost else [])
            + ([f"{tally.duplicated} stored twice"] if tally.duplicated else [])
        ):
            failed = True
            print(f"    problem: {problem}", flush=True)
        if not web.alive():
            raise RuntimeError(f"the web server died:\n{web.tail()}")
    print(f"\ntargets: overhead p50 <= 5 ms, p99 <= 20 ms; load average {os.getloadavg()[0]:.2f} at the end")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
