"""The follow-up review queue at scale: picking a turn to label, recording a label and layer 2's
live-agreement query over an experiment of --sessions chat sessions in PostgreSQL.

Data (generated inside PostgreSQL, kept between runs; --regenerate builds them again): --sessions
sessions of three turns each (question, answer, next turn; 10 % of them in Chinese), the next turn
judged by the detector (15 % follow_up, 10 % deepening, else new), and --reviewed of the next turns,
a random sample spread over the traffic, labelled by a reviewer (agreeing with the detector 9 times
in 10).

Timed, each --repeat times after one warm-up, medians:
  * pick: `follow_up_review_next` (any language, and `language="zh"`), against one primary-key
    lookup of a turn (what reading the turn shown costs at the least);
  * record: `follow_up_review_record` of a fresh turn (label, audit row, one transaction);
  * agreement: `follow_up_live_agreement_measure` (what layer 2 adds), against a plain COUNT of the
    experiment's labels.

    python bench/review_queue.py [--sessions 200000] [--reviewed 20000] [--repeat 20] [--regenerate] [--json]

Runs against PostgreSQL at --postgres (default postgres@127.0.0.1:5432) in database --database
(default evalhub_bench_review, created when missing and kept). Nothing else is touched.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

EXPERIMENT = "bench-review"
FAMILY = "bench-review-assistant"


def database_create(*, server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{server.rstrip('/')}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def django_setup(*, database_url: str, var_dir: Path) -> None:
    for name in ("CELERY_BROKER_URL", "EVALHUB_TELEMETRY_REDIS_URL", "EVALHUB_WEBHOOK_URL"):
        os.environ.pop(name, None)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="evalhub.settings.local",
        DATABASE_URL=database_url,
        DEBUG="0",
        EVALHUB_VAR_DIR=str(var_dir),
        HF_HUB_OFFLINE="1",
    )
    import django

    django.setup()


def experiment_get_or_create():
    from django.conf import settings

    from canary.models import Experiment
    from canary.services.experiments import experiment_create, experiment_start
    from registry.actors import SYSTEM
    from registry.models import ModelVersion
    from registry.services.versions import model_version_register

    experiment = Experiment.objects.filter(name=EXPERIMENT).first()
    if experiment is not None:
        return experiment
    versions: dict[str, ModelVersion] = {}
    for label in ("v1", "v2"):
        # Never loaded: an empty checkpoint folder, where registration requires one to be.
        (Path(settings.EVALHUB_MODEL_DIR) / "bench-review" / label).mkdir(parents=True, exist_ok=True)
        versions[label] = model_version_register(
            family=FAMILY,
            label=label,
            backend_kind="builtin",
            backend_config={"path": f"bench-review/{label}"},
            actor=SYSTEM,
            baseline=versions.get("v1"),
        )
    experiment = experiment_create(
        name=EXPERIMENT, baseline=versions["v1"], candidate=versions["v2"], traffic_percent=10, actor=SYSTEM
    )
    return experiment_start(experiment=experiment, actor=SYSTEM, reason="bench")


def _h(expression: str, modulo: int) -> str:
    """SQL: a deterministic hash of a text expression in 0 .. modulo - 1."""
    return f"mod(hashtext({expression})::bigint + 2147483648, {modulo})"


TURNS_SQL = f"""
    INSERT INTO canary_turnevent (
        experiment_id, event_id, session_id, user_id, arm, turn_index, role, text, error, fallback,
        source, follow_up_kind, occurred_at, received_at, streamed, abandoned, follow_up_detector)
    SELECT %(experiment)s, 't-' || n || '-' || t, 'session-' || n, 'user-' || n,
           CASE WHEN {_h("'arm:' || n", 10)} = 0 THEN 'candidate' ELSE 'baseline' END, t,
           CASE WHEN t = 1 THEN 'assistant' ELSE 'user' END,
           CASE WHEN {_h("'zh:' || n", 10)} = 0
                THEN (ARRAY['这是什么条款？', '这是付款条款。', '那如果逾期付款呢？'])[t + 1]
                ELSE (ARRAY['Which clause is this?', '[payment] A payment clause.', 'And if late?'])[t + 1]
           END || ' ' || n,
           '', false, 'client',
           CASE WHEN t = 0 THEN 'new' WHEN t = 1 THEN NULL
                WHEN {_h("'kind:' || n", 100)} < 15 THEN 'follow_up'
                WHEN {_h("'kind:' || n", 100)} < 25 THEN 'deepening' ELSE 'new' END,
           now() - interval '1 hour' + make_interval(secs => 20 * t),
           now() - interval '1 hour' + make_interval(secs => 20 * t),
           false, false, ''
    FROM generate_series(1, %(sessions)s) AS n CROSS JOIN generate_series(0, 2) AS t
    ORDER BY n, t  -- ids in the order turns arrive: a session's three turns one after the other
"""
REVIEWS_SQL = f"""
    INSERT INTO canary_followupreview (
        turn_id, experiment_id, detector_kind, is_first, label, reviewer_name, created_at)
    SELECT id, experiment_id, follow_up_kind, true,
           CASE WHEN {_h("'agree:' || id", 10)} = 0 THEN
                (CASE WHEN follow_up_kind = 'new' THEN 'follow_up' ELSE 'new' END)
                ELSE follow_up_kind END,
           'bench', now()
    FROM canary_turnevent
    WHERE experiment_id = %(experiment)s AND turn_index = 2 AND {_h("'sample:' || id", 1000)} < %(share)s
    ORDER BY id LIMIT %(reviewed)s
"""


def data_ensure(*, experiment, sessions: int, reviewed: int, regenerate: bool) -> float | None:
    """Generate the turns and labels unless a run of the same size left them; seconds taken or None."""
    from django.db import connection, transaction

    from canary.models import FollowUpReview, TurnEvent

    turns = TurnEvent.objects.filter(experiment=experiment)
    have = (
        turns.count(),
        FollowUpReview.objects.filter(experiment=experiment, reviewer_name="bench").count(),
    )
    if have == (3 * sessions, reviewed) and not regenerate:
        return None
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        FollowUpReview.objects.filter(experiment=experiment).delete()
        turns.delete()
        cursor.execute(TURNS_SQL, {"experiment": experiment.pk, "sessions": sessions})
        # A random sample of the next turns: a little over `reviewed` of them, then the first `reviewed`.
        share = min(1000, 1 + 1100 * reviewed // sessions)
        cursor.execute(REVIEWS_SQL, {"experiment": experiment.pk, "reviewed": reviewed, "share": share})
    with connection.cursor() as cursor:  # VACUUM cannot run in a transaction
        cursor.execute("VACUUM ANALYZE canary_turnevent")
        cursor.execute("VACUUM ANALYZE canary_followupreview")
    return time.perf_counter() - started


def median_seconds(call: Callable[[], object], *, repeat: int) -> float:
    call()  # warm-up
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200_000)
    parser.add_argument("--reviewed", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="evalhub_bench_review")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    database_create(server=args.postgres, name=args.database)
    var_dir = Path(tempfile.mkdtemp(prefix="bench-review-"))
    django_setup(database_url=f"{args.postgres.rstrip('/')}/{args.database}", var_dir=var_dir)
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from canary.models import FollowUpReview, TurnEvent
    from canary.services.reviews import follow_up_review_next, follow_up_review_record
    from gate.layers.follow_up_review import follow_up_live_agreement_measure
    from gate.layers.registry import gate_policy_parse
    from registry.services.tokens import user_role_grant

    experiment = experiment_get_or_create()
    generated = data_ensure(
        experiment=experiment, sessions=args.sessions, reviewed=args.reviewed, regenerate=args.regenerate
    )
    reviewer, created = get_user_model().objects.get_or_create(username="bench-annotator")
    if created:
        user_role_grant(user=reviewer, role="annotator")
    FollowUpReview.objects.filter(experiment=experiment, reviewer_name=reviewer.username).delete()
    rng = random.Random(0)
    high = TurnEvent.objects.filter(experiment=experiment).order_by("-pk").values_list("pk", flat=True)[0]
    policy = gate_policy_parse({})

    def record() -> None:
        item = follow_up_review_next(experiment=experiment, actor=reviewer, rng=rng)
        assert item is not None
        follow_up_review_record(experiment=experiment, turn_id=item.turn_id, label="new", actor=reviewer)

    timings = {
        "pk_lookup": median_seconds(
            lambda: TurnEvent.objects.filter(pk=rng.randint(1, high)).first(), repeat=args.repeat
        ),
        "pick": median_seconds(
            lambda: follow_up_review_next(experiment=experiment, actor=reviewer, rng=rng), repeat=args.repeat
        ),
        "pick_zh": median_seconds(
            lambda: follow_up_review_next(experiment=experiment, actor=reviewer, language="zh", rng=rng),
            repeat=args.repeat,
        ),
        "pick_and_record": median_seconds(record, repeat=args.repeat),
        "count_labels": median_seconds(
            lambda: FollowUpReview.objects.filter(experiment=experiment).count(), repeat=args.repeat
        ),
        "agreement": median_seconds(
            lambda: follow_up_live_agreement_measure(experiment=experiment, policy=policy), repeat=args.repeat
        ),
    }
    live = follow_up_live_agreement_measure(experiment=experiment, policy=policy)
    result = {
        "sessions": args.sessions,
        "turns": 3 * args.sessions,
        "reviewed": live.labels,
        "generated_seconds": generated,
        "median_seconds": timings,
        "pick_over_pk_lookup": timings["pick"] / timings["pk_lookup"],
        "pick_zh_over_pk_lookup": timings["pick_zh"] / timings["pk_lookup"],
        "agreement_over_count": timings["agreement"] / timings["count_labels"],
        "agreement": live.agreement,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['turns']} turns, {live.labels} reviewed (agreement {live.agreement:.3f})")
    for name, seconds in timings.items():
        print(f"  {name:16s} {seconds * 1000:8.2f} ms")
    print(f"pick / pk lookup {result['pick_over_pk_lookup']:.1f}, zh {result['pick_zh_over_pk_lookup']:.1f}")
    print(f"agreement / count of labels {result['agreement_over_count']:.1f}")


if __name__ == "__main__":
    main()
