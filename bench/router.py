"""Canary router cost: assignment, the decision API, the proxy (plain and streamed) and event ingestion.

In one run (figures from one run on one machine, so the ratios are fair on a noisy one):
  1. assignment in-process: µs per `engines.routing.arm_assign` decision over --assign-ids ids
     (target <= 20 µs), with `bucket_of` alone and `experiment_assign` (a loaded experiment) beside it;
  2. decision API: POST /api/v1/canary/<name>/assign under a real gunicorn (workers x threads as
     bin/run-local) on loopback, --decision-threads client threads with keep-alive for
     --decision-seconds; decisions/s (target >= 1500 on 2 cores), p50/p99 latency, and where the
     CPU went (this client, gunicorn, the rest: mostly PostgreSQL);
  3. proxy overhead: the same chat completions straight to a reference model server
     (`manage.py serve_model`, a bag-of-words model) and through the canary proxy to it (users
     chosen on the baseline arm of the 10 % experiment, so both paths reach the same server), plain
     and streamed (`stream: true`), interleaved: total time and, streamed, the time to the first
     content chunk (TTFB), p50/p99, and proxy / direct; overhead = proxy p50 - direct p50 (target
     <= 5 ms);
  4. event ingestion: turn events via POST /api/v1/events in batches vs `events_ingest` called
     in-process vs a raw COPY (psycopg 3) of the same rows into the same table, one transaction
     per batch each; rows/s and API / COPY (target >= 25 %).

    python bench/router.py [--decision-seconds 15] [--decision-threads 16]
                           [--proxy-requests 300] [--proxy-concurrency 1]
                           [--events-batch 1000] [--events-batches 5]
    python bench/router.py --smoke      # tiny sizes, a few seconds: the test suite's run

Runs against PostgreSQL at --postgres (default postgres@127.0.0.1:5432) in a scratch database
(--database, dropped at the end). The web server runs with DEBUG off; as in production, the proxy
appends its turn events to a Redis stream (--telemetry-redis, default redis://127.0.0.1:6379/12)
under a key unique to this run, deleted at the end, so other stacks on that Redis never see them;
the bench drains it before counting. --telemetry-redis '' writes them to PostgreSQL inside each
request instead (the embedded default). Default total run time: about 1 to 2 minutes.
For streams under load and faults, see bench/stream_load.py.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import secrets
import shutil
import socket
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evalhub.devstack import WEB_THREADS, WEB_WORKERS, Process, port_free, url_wait, web_start  # noqa: E402
from registry.actors import SYSTEM  # noqa: E402

EXPERIMENT = "bench-router"
EVENTS_EXPERIMENT = "bench-router-events"
FAMILY = "bench-router"


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of `values`."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[rank]


class CpuMeter:
    """CPU seconds used by this process, by a process tree, and by the whole machine, over a window."""

    def __init__(self, *, trees: dict[str, int]):
        self.trees = trees  # name -> root pid

    @staticmethod
    def _tree_seconds(pid: int) -> float:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0.0
        total = 0.0
        for proc in procs:
            try:
                times = proc.cpu_times()
                total += times.user + times.system
            except psutil.NoSuchProcess:
                pass
        return total

    def _snapshot(self) -> dict[str, float]:
        machine = psutil.cpu_times()
        me = psutil.Process().cpu_times()
        return {
            "wall": time.perf_counter(),
            "machine": machine.user + machine.system + machine.nice + getattr(machine, "softirq", 0.0),
            "client (this process)": me.user + me.system,
            **{name: self._tree_seconds(pid) for name, pid in self.trees.items()},
        }

    def __enter__(self):
        self.start = self._snapshot()
        return self

    def __exit__(self, *exc):
        self.end = self._snapshot()

    def report(self) -> str:
        wall = self.end["wall"] - self.start["wall"]
        used = {k: self.end[k] - self.start[k] for k in self.start if k != "wall"}
        machine = used.pop("machine")
        parts = [f"{name} {seconds / wall:.2f}" for name, seconds in used.items()]
        rest = machine - sum(used.values())
        parts.append(f"rest (PostgreSQL, others) {rest / wall:.2f}")
        return (
            f"CPU cores busy over the window: machine {machine / wall:.2f} of {psutil.cpu_count()}: "
            + ", ".join(parts)
        )


def scratch_database_create(*, admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def scratch_database_drop(*, admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ---------------------------------------------------------------------------------------------
# 1. Assignment in-process
# ---------------------------------------------------------------------------------------------
def bench_assign(*, n: int, repeat: int = 3) -> dict:
    from engines.routing import CANDIDATE, arm_assign, bucket_of

    salt = secrets.token_hex(8)
    ids = [f"user:{i:08d}" for i in range(n)]
    best_assign = best_bucket = float("inf")
    on_candidate = 0
    for _ in range(repeat):
        started = time.perf_counter()
        for unit in ids:
            bucket_of(salt=salt, unit_id=unit)
        best_bucket = min(best_bucket, time.perf_counter() - started)
        started = time.perf_counter()
        on_candidate = 0
        for unit in ids:
            if arm_assign(salt=salt, unit_id=unit, candidate_buckets=5000).arm == CANDIDATE:
                on_candidate += 1
        best_assign = min(best_assign, time.perf_counter() - started)
    return {
        "assign_us": best_assign / n * 1e6,
        "bucket_us": best_bucket / n * 1e6,
        "candidate_share": on_candidate / n,
    }


def bench_experiment_assign(*, experiment, n: int) -> float:
    """µs per `experiment_assign` on an experiment already loaded (no database query)."""
    from canary.services.assignment import experiment_assign

    ids = [f"{i:08d}" for i in range(n)]
    started = time.perf_counter()
    for unit in ids:
        experiment_assign(experiment=experiment, user_id=unit)
    return (time.perf_counter() - started) / n * 1e6


# ---------------------------------------------------------------------------------------------
# 2. Decision API
# ---------------------------------------------------------------------------------------------
class HttpxPoster:
    """One keep-alive httpx client: POST a JSON body, return (status, parsed body)."""

    def __init__(self, *, base_url: str, token: str):
        self.client = httpx.Client(base_url=base_url, headers={"Authorization": f"Token {token}"}, timeout=30)

    def post(self, path: str, body: dict) -> tuple[int, dict]:
        response = self.client.post(path, json=body)
        return response.status_code, response.json()

    def close(self) -> None:
        self.client.close()


class RawPoster:
    """The least client CPU: one keep-alive socket, HTTP/1.1 written and read by hand."""

    def __init__(self, *, base_url: str, token: str):
        self.host, self.port = httpx.URL(base_url).host, httpx.URL(base_url).port
        self.head = f"Host: {self.host}:{self.port}\r\nAuthorization: Token {token}\r\n"
        self.sock = None

    def _connect(self) -> None:
        self.sock = socket.create_connection((self.host, self.port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def post(self, path: str, body: dict) -> tuple[int, dict]:
        if self.sock is None:
            self._connect()
        payload = json.dumps(body).encode()
        self.sock.sendall(
            f"POST {path} HTTP/1.1\r\n{self.head}Content-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        while b"\r\n\r\n" not in self.buffer:
            self._read()
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", 0))
        while len(rest) < length:
            rest += self._read(into_buffer=False)
        self.buffer = rest[length:]
        if headers.get("connection", "").lower() == "close":
            self.close()
        return int(lines[0].split()[1]), json.loads(rest[:length])

    def _read(self, into_buffer: bool = True) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        if into_buffer:
            self.buffer += chunk
        return chunk

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def bench_decisions(
    *, base_url: str, token: str, threads: int, seconds: float, warmup: float, meter_trees, client: str
):
    path = f"/api/v1/canary/{EXPERIMENT}/assign"
    poster_class = RawPoster if client == "raw" else HttpxPoster
    latencies: list[list[float]] = [[] for _ in range(threads)]
    errors = [0] * threads
    arms = [{"baseline": 0, "candidate": 0} for _ in range(threads)]
    barrier = threading.Barrier(threads + 1)
    phase = {"measure_from": None, "stop_at": None}

    def client_loop(index: int) -> None:
        poster = poster_class(base_url=base_url, token=token)
        try:
            poster.post(path, {"user_id": f"warm-{index}"})
            barrier.wait()
            i = 0
            while time.perf_counter() < phase["stop_at"]:
                i += 1
                started = time.perf_counter()
                try:
                    status, body = poster.post(path, {"user_id": f"t{index}-{i}"})
                except (OSError, ValueError, httpx.HTTPError):
                    status, body = 0, None
                    poster.close()
                    poster = poster_class(base_url=base_url, token=token)
                elapsed = time.perf_counter() - started
                if started < phase["measure_from"]:
                    continue
                if status == 200:
                    latencies[index].append(elapsed)
                    arms[index][body["arm"]] += 1
                else:
                    errors[index] += 1
        finally:
            poster.close()

    workers = [threading.Thread(target=client_loop, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    now = time.perf_counter()
    phase["measure_from"] = now + warmup
    phase["stop_at"] = now + warmup + seconds
    barrier.wait()
    time.sleep(max(0.0, phase["measure_from"] - time.perf_counter()))
    with CpuMeter(trees=meter_trees) as meter:
        for worker in workers:
            worker.join()
    window = meter.end["wall"] - meter.start["wall"]
    flat = [x for per in latencies for x in per]
    return {
        "n": len(flat),
        "errors": sum(errors),
        "window": window,
        "per_second": len(flat) / seconds,
        "p50_ms": percentile(flat, 50) * 1000,
        "p99_ms": percentile(flat, 99) * 1000,
        "candidate_share": sum(a["candidate"] for a in arms) / max(1, len(flat)),
        "cpu": meter.report(),
        "cpu_client": (meter.end["client (this process)"] - meter.start["client (this process)"]),
        "cpu_web": meter.end["gunicorn"] - meter.start["gunicorn"],
    }


# ---------------------------------------------------------------------------------------------
# 3. Proxy overhead
# ---------------------------------------------------------------------------------------------
def baseline_users(*, experiment, n: int) -> list[str]:
    from engines.routing import BASELINE, arm_assign

    users, i = [], 0
    while len(users) < n:
        i += 1
        unit = f"proxy-user-{i}"
        arm = arm_assign(
            salt=experiment.salt, unit_id=f"user:{unit}", candidate_buckets=experiment.traffic_buckets
        )
        if arm.arm == BASELINE:
            users.append(unit)
    return users


def _first_content(response: httpx.Response, started: float) -> tuple[float | None, bool]:
    """Read a streamed answer to its end: (seconds to the first content chunk, whether it ended with
    [DONE] and no error event)."""
    first, done = None, False
    for line in response.iter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            break
        chunk = json.loads(data)
        if chunk.get("error"):
            return first, False
        choices = chunk.get("choices") or []
        if first is None and choices and (choices[0].get("delta") or {}).get("content"):
            first = time.perf_counter() - started
    return first, done


def _timed(client: httpx.Client, path: str, body: dict) -> tuple[httpx.Response, float, float | None]:
    """POST `body`; (response, total seconds, seconds to the first content chunk when streamed)."""
    started = time.perf_counter()
    if not body.get("stream"):
        response = client.post(path, json=body)
        return response, time.perf_counter() - started, None
    with client.stream("POST", path, json=body) as response:
        first, done = _first_content(response, started) if response.status_code == 200 else (None, True)
        if not done:
            raise RuntimeError(f"{path}: a stream ended without [DONE]")
    return response, time.perf_counter() - started, first


def bench_proxy(
    *,
    web_url: str,
    model_url: str,
    model_name: str,
    token: str,
    questions: list[str],
    users: list[str],
    concurrency: int,
    warmup: int,
) -> dict:
    """Each question four ways, interleaved: plain and streamed (`stream: true`), straight to the model
    server and through the proxy. Returns {(kind, path): {"total": [...], "ttfb": [...]}}."""
    n = len(users)
    times: dict[tuple[str, str], dict[str, list[float]]] = {
        (kind, path): {"total": [], "ttfb": []}
        for kind in ("plain", "streamed")
        for path in ("direct", "proxy")
    }
    problems: list[str] = []
    proxy_path = f"/api/v1/canary/{EXPERIMENT}/v1/chat/completions"
    lock = threading.Lock()

    def loop(index: int) -> None:
        with (
            httpx.Client(base_url=model_url, timeout=30) as to_model,
            httpx.Client(base_url=web_url, headers={"Authorization": f"Token {token}"}, timeout=30) as to_web,
        ):
            for j in range(-warmup, n):
                if j >= 0 and j % concurrency != index:
                    continue
                for kind in ("plain", "streamed") if j % 2 == 0 else ("streamed", "plain"):
                    body = {
                        "model": model_name,
                        "messages": [{"role": "user", "content": questions[j % len(questions)]}],
                        "user": users[j % n],
                        **({"stream": True} if kind == "streamed" else {}),
                    }
                    for path in ("direct", "proxy") if j % 4 < 2 else ("proxy", "direct"):
                        client, url = (
                            (to_model, "/chat/completions") if path == "direct" else (to_web, proxy_path)
                        )
                        response, total, first = _timed(client, url, body)
                        if response.status_code != 200:
                            problems.append(f"{kind} {path} HTTP {response.status_code}")
                            continue
                        version = response.headers.get("X-EvalHub-Model-Version")
                        if path == "proxy" and version != model_name:
                            problems.append(f"proxy answered by {version}")
                        if j >= 0:
                            with lock:
                                times[kind, path]["total"].append(total)
                                if first is not None:
                                    times[kind, path]["ttfb"].append(first)

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if problems:
        raise RuntimeError(f"{len(problems)} proxy bench problem(s), e.g. {problems[:3]}")
    return times


def proxy_report(*, times: dict, log) -> dict:
    """The table of 3.: p50 / p99 of each way, and proxy / direct. Returns the overheads (ms)."""
    ms = {
        key: {m: (percentile(v, 50) * 1000, percentile(v, 99) * 1000) for m, v in d.items() if v}
        for key, d in times.items()
    }
    header = f"{'':20}{'total p50':>10}{'p99':>8}{'TTFB p50':>10}{'p99':>8}"
    log(f"   {header}   (ms; TTFB: to the first content chunk)")
    for kind in ("plain", "streamed"):
        for path in ("direct", "proxy"):
            row = ms[kind, path]
            ttfb = f"{row['ttfb'][0]:>10.2f}{row['ttfb'][1]:>8.2f}" if "ttfb" in row else f"{'-':>10}{'-':>8}"
            log(f"   {kind + ' ' + path:20}{row['total'][0]:>10.2f}{row['total'][1]:>8.2f}{ttfb}")
    out = {}
    for kind, measure in (("plain", "total"), ("streamed", "total"), ("streamed", "ttfb")):
        (dp50, dp99), (pp50, pp99) = ms[kind, "direct"][measure], ms[kind, "proxy"][measure]
        out[kind, measure] = pp50 - dp50
        log(
            f"   {kind} {measure:5}: proxy / direct p50 {pp50 / dp50:.2f}, p99 {pp99 / dp99:.2f}; "
            f"overhead p50 {pp50 - dp50:.2f} ms, p99 {pp99 - dp99:.2f} ms"
        )
    return out


def model_server_start(*, env: dict, log_dir: Path, version: str, port: int) -> Process:
    argv = [sys.executable, "manage.py", "serve_model", version, "--port", str(port)]
    process = Process(name=f"model-{version.replace(':', '-')}", argv=argv, env=env, log_dir=log_dir)
    url_wait(f"http://127.0.0.1:{port}/health", process=process, timeout=120)
    return process


# ---------------------------------------------------------------------------------------------
# 4. Event ingestion
# ---------------------------------------------------------------------------------------------
def events_build(
    *, batches: int, size: int, questions: list[str], tag: str, started: datetime
) -> list[list[dict]]:
    """Turn events from `started` on, 1 ms apart. Ingestion checks each arm against the router: the
    events experiment is a draft (its family already runs one), so every unit is on the baseline."""
    out = []
    for b in range(batches):
        batch = []
        for j in range(size):
            k = b * size + j
            user = k % 2 == 0
            batch.append(
                {
                    "type": "turn",
                    "experiment": EVENTS_EXPERIMENT,
                    "event_id": f"{tag}-{b}-{j}",
                    "arm": "baseline",
                    "timestamp": (started + timedelta(milliseconds=k)).isoformat(),
                    "session_id": f"session-{k // 8}",
                    "user_id": f"user-{k // 16}",
                    "turn_index": (k // 2) % 4 * 2 + (0 if user else 1),
                    "role": "user" if user else "assistant",
                    "text": questions[k % len(questions)]
                    if user
                    else f"[termination] {questions[k % 7][:80]}",
                    **({} if user else {"latency_ms": 12.5 + k % 50}),
                }
            )
        out.append(batch)
    return out


def turn_rows_delete(*, conn, experiment_id: int) -> int:
    deleted = conn.execute("DELETE FROM canary_turnevent WHERE experiment_id = %s", (experiment_id,)).rowcount
    conn.execute("VACUUM canary_turnevent")
    return deleted


def bench_events_api(*, base_url: str, token: str, batches: list[list[dict]]) -> dict:
    bodies = [json.dumps({"events": batch}).encode() for batch in batches]
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    per_batch = []
    with httpx.Client(base_url=base_url, headers=headers, timeout=120) as client:
        warm = client.post("/api/v1/events", content=json.dumps({"events": []}).encode())
        assert warm.status_code == 400, warm.text  # connection and token warmed, nothing stored
        started = time.perf_counter()
        for body in bodies:
            t0 = time.perf_counter()
            response = client.post("/api/v1/events", content=body)
            per_batch.append(time.perf_counter() - t0)
            if response.status_code != 201:
                raise RuntimeError(f"events API: HTTP {response.status_code}: {response.text[:500]}")
        elapsed = time.perf_counter() - started
    rows = sum(len(b) for b in batches)
    return {"rows": rows, "seconds": elapsed, "per_second": rows / elapsed, "batch_ms": per_batch}


def bench_events_inprocess(*, batches: list[list[dict]]) -> dict:
    from canary.services.events import events_ingest

    started = time.perf_counter()
    for batch in batches:
        result = events_ingest(events=batch, actor=SYSTEM)
        assert result.accepted == len(batch), result
    elapsed = time.perf_counter() - started
    rows = sum(len(b) for b in batches)
    return {"rows": rows, "seconds": elapsed, "per_second": rows / elapsed}


def events_split(*, batch: list[dict]) -> dict:
    """The steps of `events_ingest` on one batch, timed one by one (ms)."""
    from django.db import transaction

    from canary.models import Experiment, TurnEvent
    from canary.services import events as ingest

    times = {}
    started = time.perf_counter()
    experiments = Experiment.objects.filter(name=EVENTS_EXPERIMENT).select_related("baseline", "candidate")
    checks = ingest._Checks({x.name: x for x in experiments})
    errors = ingest._Errors()
    rows = [ingest._parse(event, index, checks, errors) for index, event in enumerate(batch)]
    assert not errors.fields, errors.fields
    times["validation"] = time.perf_counter() - started
    with transaction.atomic():
        started = time.perf_counter()
        ingest._rows_insert(TurnEvent, rows)
        times["insert (COPY to staging + INSERT ... ON CONFLICT)"] = time.perf_counter() - started
        started = time.perf_counter()
    times["commit"] = time.perf_counter() - started
    return {k: v * 1000 for k, v in times.items()}


def request_lookups(*, token: str, n: int = 200) -> dict:
    """CPU ms per call of the three lookups an API request makes when nothing is reused (the web
    process reuses a checked token for EVALHUB_AUTH_CACHE_SECONDS and an experiment for
    EVALHUB_CANARY_CACHE_SECONDS; this measures the misses)."""
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory

    from canary.selectors.experiments import experiment_get
    from evalhub.api.authentication import ApiTokenAuthentication
    from registry.roles import user_roles

    request = RequestFactory().post("/", HTTP_AUTHORIZATION=f"Token {token}")
    user = get_user_model().objects.get(username="bench-router-app")
    auth = ApiTokenAuthentication()

    def roles():
        user.__dict__.pop("_evalhub_roles", None)
        user_roles(user)

    calls = {
        "token": lambda: auth.authenticate(request),
        "roles": roles,
        "experiment_get": lambda: experiment_get(name=EXPERIMENT),
    }
    out = {}
    for name, call in calls.items():
        call()
        started = time.process_time()
        for _ in range(n):
            call()
        out[name] = (time.process_time() - started) / n * 1000
    return out


def proxy_record_ms(*, experiment, n: int = 50) -> float:
    """Wall ms of the proxy's `turn_pair_record` (its two turn events) with the web server's settings."""
    from canary.services.proxy import Routed, turn_pair_record

    messages = [{"role": "user", "content": "What notice does the termination clause need?"}]
    started = time.perf_counter()
    for i in range(n):
        routed = Routed(
            messages=messages,
            user_id=f"record-{i}",
            session_id=f"user:record-{i}",
            arm="baseline",
            version=experiment.baseline,
            event=secrets.token_hex(16),
        )
        turn_pair_record(
            experiment=experiment,
            routed=routed,
            text="[termination] 30 days notice",
            version=experiment.baseline,
            latency_ms=3.0,
            error="",
            fallback=False,
        )
    return (time.perf_counter() - started) / n * 1000


COPY_COLUMNS = (
    "experiment_id",
    "event_id",
    "session_id",
    "user_id",
    "arm",
    "version_id",
    "turn_index",
    "role",
    "text",
    "latency_ms",
    "error",
    "fallback",
    "source",
    "occurred_at",
    "received_at",
    "streamed",
    "abandoned",
    "follow_up_detector",
)


def bench_events_copy(*, conn, experiment_id: int, batches: list[list[dict]]) -> dict:
    now = datetime.now(UTC)
    tables = [
        [
            (
                experiment_id,
                e["event_id"],
                e["session_id"],
                e["user_id"],
                e["arm"],
                None,
                e["turn_index"],
                e["role"],
                e["text"],
                e.get("latency_ms"),
                "",
                False,
                "client",
                datetime.fromisoformat(e["timestamp"]),
                now,
                False,
                False,
                "",
            )
            for e in batch
        ]
        for batch in batches
    ]
    sql = f"COPY canary_turnevent ({', '.join(COPY_COLUMNS)}) FROM STDIN"
    started = time.perf_counter()
    for rows in tables:
        with conn.transaction(), conn.cursor() as cursor, cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)
    elapsed = time.perf_counter() - started
    rows = sum(len(b) for b in batches)
    return {"rows": rows, "seconds": elapsed, "per_second": rows / elapsed}


# ---------------------------------------------------------------------------------------------
# Set-up and the run
# ---------------------------------------------------------------------------------------------
def setup_django(*, env: dict) -> None:
    os.environ.update(env)
    for key in ("DATABASE_URL", "CELERY_BROKER_URL", "EVALHUB_WEBHOOK_URL"):
        if key not in env:
            os.environ.pop(key, None)
    import django

    django.setup()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request: noise and client CPU


def bow_checkpoint(*, out_dir: Path, every: int = 1) -> Path:
    """A bag-of-words checkpoint trained on the demo training split (every `every`-th item; a few s)."""
    from engines.demo.dataset import demo_dataset_build
    from engines.training import bow_train

    bow_train(items=demo_dataset_build(seed=0).train[::every], out_dir=out_dir, seed=0, epochs=10)
    return out_dir


def fixtures_create(*, checkpoint: Path, ports: dict[str, int]) -> dict:
    """Migrate; a baseline and a candidate serving `checkpoint` at `ports` (the candidate's server is
    not started: no user is on it); an `app` token; the experiment running at 10 % (as much as an
    ungated candidate may have) and a draft one for the events."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from canary.models import Experiment
    from canary.services.experiments import experiment_create, experiment_start
    from engines.demo.dataset import demo_dataset_build
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
    user = get_user_model().objects.create_user("bench-router-app")
    user_role_grant(user=user, role=APP)
    _, token = api_token_create(user=user, name="bench-router")
    experiment = experiment_create(name=EXPERIMENT, traffic_percent=10, actor=SYSTEM, **versions)
    experiment = experiment_start(experiment=experiment, actor=SYSTEM, reason="bench")
    events_experiment = experiment_create(name=EVENTS_EXPERIMENT, actor=SYSTEM, **versions)
    experiment = Experiment.objects.select_related("baseline", "candidate").get(pk=experiment.pk)
    return {
        "token": token,
        "baseline": versions["baseline"],
        "experiment": experiment,
        "events_experiment": events_experiment,
        "questions": [item.input for item in demo_dataset_build(seed=0).eval[:200]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--assign-ids", type=int, default=200_000, help="ids for the in-process bench")
    parser.add_argument(
        "--decision-seconds", type=float, default=15, help="measured load on the decision API"
    )
    parser.add_argument("--decision-warmup", type=float, default=2, help="unmeasured load before it")
    parser.add_argument("--decision-threads", type=int, default=16, help="concurrent client threads")
    parser.add_argument(
        "--decision-client",
        choices=["httpx", "raw"],
        default="raw",
        help="a hand-written keep-alive HTTP/1.1 socket client (default: ~0.1 ms CPU per request, so "
        "the load generator leaves the 2 cores to the server), or httpx.Client per thread (~1 ms)",
    )
    parser.add_argument("--proxy-requests", type=int, default=300, help="measured requests per path")
    parser.add_argument("--proxy-concurrency", type=int, default=1, help="client threads (1: sequential)")
    parser.add_argument("--events-batch", type=int, default=1000, help="turn events per batch")
    parser.add_argument("--events-batches", type=int, default=5, help="batches per ingestion method")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432", help="server URL")
    parser.add_argument("--database", default="evalhub_bench_router", help="scratch database (dropped)")
    parser.add_argument("--debug", action="store_true", help="run the web server with DEBUG on")
    parser.add_argument(
        "--telemetry-redis",
        default="redis://127.0.0.1:6379/12",
        help="Redis URL for the proxy's event stream, as in production (a key of its own, deleted at "
        "the end); '' writes the events to PostgreSQL in the request (the embedded default)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes: a test that the bench runs (the test suite's), not a measurement",
    )
    args = parser.parse_args()
    if args.smoke:
        args.assign_ids, args.decision_seconds, args.decision_warmup = 2000, 1.0, 0.5
        args.decision_threads, args.proxy_requests, args.events_batch, args.events_batches = 4, 10, 50, 1

    def log(line: str) -> None:
        print(line, flush=True)

    log("canary router bench: assignment in-process, decision API, proxy overhead, event ingestion")
    log(f"machine: {psutil.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start\n")

    # 1. First, while this process is alone and light.
    assign = bench_assign(n=args.assign_ids)
    log(f"1. assignment in-process, {args.assign_ids} ids at 50 % (best of 3)")
    log(f"   arm_assign   {assign['assign_us']:7.2f} µs/decision   (target <= 20 µs)")
    log(f"   bucket_of    {assign['bucket_us']:7.2f} µs  (the blake2b bucket alone)")
    log(f"   on candidate {assign['candidate_share']:.3f}")

    scratch = Path(tempfile.mkdtemp(prefix="evalhub-bench-router-"))
    admin_url = f"{args.postgres.rstrip('/')}/postgres"
    database_url = f"{args.postgres.rstrip('/')}/{args.database}".replace("postgresql://", "postgres://", 1)
    ports = {"baseline": port_free(), "candidate": port_free()}
    web_port = port_free()
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("DATABASE_URL", "CELERY_BROKER_URL", "EVALHUB_WEBHOOK_URL", "EVALHUB_TELEMETRY_REDIS_URL")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="evalhub.settings.local",
        DEBUG="1" if args.debug else "0",
        DATABASE_URL=database_url,
        EVALHUB_VAR_DIR=str(scratch),
        EVALHUB_MODEL_DIR=str(scratch / "models"),
        EVALHUB_TELEMETRY_REDIS_URL=args.telemetry_redis,
        EVALHUB_TELEMETRY_STREAM=f"evalhub:bench-router:{secrets.token_hex(6)}",
        PYTHONUNBUFFERED="1",
    )
    processes: list[Process] = []
    scratch_database_create(admin_url=admin_url, name=args.database)
    try:
        log(f"\nset-up: scratch database {args.database}, a bag-of-words model, logs in {scratch}")
        setup_django(env=env)
        fixtures = fixtures_create(checkpoint=bow_checkpoint(out_dir=scratch / "models" / "bow"), ports=ports)
        experiment = fixtures["experiment"]
        in_service_us = bench_experiment_assign(experiment=experiment, n=min(args.assign_ids, 50_000))
        log(f"   experiment_assign (service, experiment loaded) {in_service_us:.2f} µs/decision")

        baseline = fixtures["baseline"]
        processes.append(
            model_server_start(env=env, log_dir=scratch, version=baseline.ref, port=ports["baseline"])
        )
        web = web_start(env=env, log_dir=scratch, port=web_port)
        processes.append(web)
        web_url = f"http://127.0.0.1:{web_port}"
        log(
            f"   gunicorn {WEB_WORKERS} workers x {WEB_THREADS} threads on :{web_port}, as bin/run-local "
            f"(DEBUG {'on' if args.debug else 'off'}); model server {baseline.ref} on :{ports['baseline']}; "
            + (
                f"proxy events to the Redis stream {env['EVALHUB_TELEMETRY_STREAM']} ({args.telemetry_redis})"
                if args.telemetry_redis
                else "no telemetry Redis (proxy events written to PostgreSQL in the request)"
            )
        )
        trees = {"gunicorn": web.popen.pid}

        # 2. Decision API.
        decisions = bench_decisions(
            base_url=web_url,
            token=fixtures["token"],
            threads=args.decision_threads,
            seconds=args.decision_seconds,
            warmup=args.decision_warmup,
            meter_trees=trees,
            client=args.decision_client,
        )
        log(
            f"\n2. decision API: POST /api/v1/canary/{EXPERIMENT}/assign, {args.decision_threads} client "
            f"threads ({args.decision_client}, keep-alive), {args.decision_seconds:g} s "
            f"after {args.decision_warmup:g} s warm-up"
        )
        log(
            f"   {decisions['per_second']:8.0f} decisions/s   (target >= 1500)   "
            f"{decisions['n']} answered, {decisions['errors']} errors, "
            f"on candidate {decisions['candidate_share']:.3f}"
        )
        log(f"   latency p50 {decisions['p50_ms']:.1f} ms, p99 {decisions['p99_ms']:.1f} ms")
        log(f"   {decisions['cpu']}")
        n = max(1, decisions["n"])
        web_us, client_us = decisions["cpu_web"] / n * 1e6, decisions["cpu_client"] / n * 1e6
        log(
            f"   CPU per decision: gunicorn {web_us:.0f} µs, client {client_us:.0f} µs; "
            f"arm_assign is {assign['assign_us'] / web_us:.2%} of the gunicorn CPU"
        )
        lookups = request_lookups(token=fixtures["token"])
        log(
            "   the request's three lookups when not reused, CPU per call in this process: "
            + ", ".join(f"{name} {ms:.2f} ms" for name, ms in lookups.items())
            + f" (a miss: {sum(lookups.values()) * 1000 / web_us:.0%} of the gunicorn CPU per decision)"
        )

        # 3. Proxy overhead.
        users = baseline_users(experiment=experiment, n=args.proxy_requests)
        times = bench_proxy(
            web_url=web_url,
            model_url=f"http://127.0.0.1:{ports['baseline']}/v1",
            model_name=baseline.ref,
            token=fixtures["token"],
            questions=fixtures["questions"],
            users=users,
            concurrency=args.proxy_concurrency,
            warmup=min(20, args.proxy_requests),
        )
        from canary.models import TurnEvent
        from canary.services.telemetry import turn_stream_drain

        turn_stream_drain()  # what a cpu worker would do (nothing without Redis)
        proxy_events = TurnEvent.objects.filter(experiment=experiment, source="proxy").count()
        log(
            f"\n3. proxy overhead: {args.proxy_requests} chat completions per way to {baseline.ref} "
            f"(baseline-arm users), plain and streamed, straight and proxied, interleaved, "
            f"concurrency {args.proxy_concurrency}"
        )
        overhead = proxy_report(times=times, log=log)
        log(
            f"   plain overhead p50 {overhead['plain', 'total']:.2f} ms, streamed TTFB overhead p50 "
            f"{overhead['streamed', 'ttfb']:.2f} ms (targets <= 5 ms); turn events stored by the proxy: "
            f"{proxy_events}"
        )
        write = "XADD" if args.telemetry_redis else "INSERT"
        log(
            f"   in this process: the proxy's event write (2 events, {write}) "
            f"{proxy_record_ms(experiment=experiment):.2f} ms; the three lookups "
            f"{sum(lookups.values()):.2f} ms CPU (see 2.)"
        )

        # 4. Event ingestion.
        import psycopg

        events_id = fixtures["events_experiment"].pk
        started = fixtures["events_experiment"].created_at
        batches = events_build(
            batches=args.events_batches,
            size=args.events_batch,
            questions=fixtures["questions"],
            tag="ev",
            started=started,
        )
        with psycopg.connect(
            database_url.replace("postgres://", "postgresql://", 1), autocommit=True
        ) as conn:
            turn_rows_delete(conn=conn, experiment_id=events_id)
            api = bench_events_api(base_url=web_url, token=fixtures["token"], batches=batches)
            stored = turn_rows_delete(conn=conn, experiment_id=events_id)
            assert stored == api["rows"], (stored, api["rows"])
            service = bench_events_inprocess(batches=batches)
            split = events_split(
                batch=events_build(
                    batches=1,
                    size=args.events_batch,
                    questions=fixtures["questions"],
                    tag="split",
                    started=started,
                )[0]
            )
            turn_rows_delete(conn=conn, experiment_id=events_id)
            copy = bench_events_copy(conn=conn, experiment_id=events_id, batches=batches)
            copied = turn_rows_delete(conn=conn, experiment_id=events_id)
            assert copied == copy["rows"], (copied, copy["rows"])
        log(
            f"\n4. event ingestion: {args.events_batches} batches x {args.events_batch} turn events, "
            "one transaction per batch, the same rows each way (deleted and vacuumed between)"
        )
        log(f"   {'':34}{'rows/s':>10}{'seconds':>10}{'of COPY':>10}")
        for name, result in (
            ("POST /api/v1/events", api),
            ("events_ingest in-process", service),
            ("raw COPY (psycopg 3)", copy),
        ):
            log(
                f"   {name:34}{result['per_second']:>10.0f}{result['seconds']:>10.2f}"
                f"{result['per_second'] / copy['per_second']:>10.0%}"
            )
        log(
            f"   API / COPY = {api['per_second'] / copy['per_second']:.0%} (target >= 25 %); "
            f"API batch p50 {percentile(api['batch_ms'], 50) * 1000:.0f} ms"
        )
        log(
            f"   events_ingest's steps on one more batch of {args.events_batch}, ms: "
            + ", ".join(f"{name} {ms:.0f}" for name, ms in split.items())
        )
        log(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    finally:
        for process in reversed(processes):
            process.stop()
        if args.telemetry_redis:
            import redis

            redis.Redis.from_url(args.telemetry_redis).delete(env["EVALHUB_TELEMETRY_STREAM"])
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # Django may not be set up yet
            pass
        scratch_database_drop(admin_url=admin_url, name=args.database)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
