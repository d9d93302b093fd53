"""The suite-vs-live shift check at scale: --turns synthetic live user turns (English, Chinese and mixed,
some with typos) in a scratch SQLite table shaped like canary_turnevent, read as the layer reads them
(the ids of the experiment's user turns, a seeded draw of at most 4 × --sample of them, their texts),
grouped by language and measured (`engines.shift.shift_measure`) against a --suite-item suite.

    python bench/shift.py [--turns 1000000] [--suite 2000] [--sample 2000] [--workers -1]
                          [--postgres postgres://postgres@127.0.0.1:5432/bench_shift]

With --postgres the table is in that PostgreSQL database (created when missing, the table replaced)
instead of SQLite.

Prints the seconds of each step and in all (the table's filling is not counted), and the figures per
language. Pure Python and SQLite, no Django.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engines.shift import shift_measure, texts_by_language  # noqa: E402

EN = [
    "notice period",
    "termination clause",
    "liability cap",
    "renewal date",
    "governing law",
    "payment terms",
]
ZH = ["通知期", "终止条款", "责任上限", "续约日期", "适用法律", "付款条件"]


def suite_texts(n: int, rng: random.Random) -> list[str]:
    """Clean questions, half English, half Chinese."""
    return [
        f"What is the {rng.choice(EN)} in section {k}?" if k % 2 else f"第{k}条的{rng.choice(ZH)}是什么？"
        for k in range(n)
    ]


def live_text(rng: random.Random) -> str:
    """A user's question: colloquial, with typos, sometimes mixed Chinese and English."""
    roll = rng.random()
    if roll < 0.4:
        words = f"hey whats the {rng.choice(EN)} here".split()
        k = rng.randrange(len(words))
        words[k] = words[k][::-1] if rng.random() < 0.5 else words[k]
        return " ".join(words)
    if roll < 0.8:
        return f"这个合同{rng.choice(ZH)}是啥"
    return f"这个 {rng.choice(EN)} 怎么算"


def table_fill(path: str, *, turns: int, seed: int) -> None:
    rng = random.Random(seed)
    db = sqlite3.connect(path)
    db.execute(
        "create table turn (id integer primary key, experiment_id int, role text, source text, text text)"
    )
    rows = ((k, 1, "user" if k % 2 == 0 else "assistant", "client", live_text(rng)) for k in range(2 * turns))
    db.executemany("insert into turn values (?, ?, ?, ?, ?)", rows)
    db.execute("create index turn_experiment_role on turn (experiment_id, role)")
    db.commit()
    db.close()


def live_read(path: str, *, sample: int, seed: int) -> tuple[list[str], int]:
    """As `canary.selectors.shift.live_questions`: ids, a seeded draw, the drawn texts."""
    db = sqlite3.connect(path)
    ids = [row[0] for row in db.execute("select id from turn where experiment_id = 1 and role = 'user'")]
    drawn = sorted(random.Random(seed).sample(ids, min(len(ids), 4 * sample)))
    texts: list[str] = []
    for start in range(0, len(drawn), 900):
        chunk = drawn[start : start + 900]
        marks = ",".join("?" * len(chunk))
        texts += [row[0] for row in db.execute(f"select text from turn where id in ({marks})", chunk)]
    db.close()
    return texts, len(ids)


def pg_fill(url: str, *, turns: int, seed: int) -> None:
    import psycopg  # only with --postgres

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        if not admin.execute("select 1 from pg_database where datname = %s", (name,)).fetchone():
            admin.execute(f'create database "{name}"')
    rng = random.Random(seed)
    with psycopg.connect(url) as db:
        db.execute("drop table if exists turn")
        db.execute(
            "create table turn (id bigint primary key, experiment_id int, role text, source text, text text)"
        )
        with db.cursor().copy("copy turn from stdin") as copy:
            for k in range(2 * turns):
                copy.write_row((k, 1, "user" if k % 2 == 0 else "assistant", "client", live_text(rng)))
        db.execute("create index turn_experiment_role on turn (experiment_id, role)")
        db.execute("analyze turn")


def pg_read(url: str, *, sample: int, seed: int) -> tuple[list[str], int]:
    """As `live_read`, on PostgreSQL."""
    import psycopg

    with psycopg.connect(url) as db:
        rows = db.execute("select id from turn where experiment_id = 1 and role = 'user'").fetchall()
        ids = [row[0] for row in rows]
        drawn = sorted(random.Random(seed).sample(ids, min(len(ids), 4 * sample)))
        texts: list[str] = []
        for start in range(0, len(drawn), 1000):
            chunk = drawn[start : start + 1000]
            texts += [
                r[0] for r in db.execute("select text from turn where id = any(%s) order by id", (chunk,))
            ]
    return texts, len(ids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1_000_000, help="live user turns")
    parser.add_argument("--suite", type=int, default=2000, help="suite items")
    parser.add_argument("--sample", type=int, default=2000, help="texts per side and language, at most")
    parser.add_argument("--workers", type=int, default=-1, help="rapidfuzz threads (-1: every core)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--postgres", default="", help="a PostgreSQL URL (its last part a scratch database)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.postgres:
            pg_fill(args.postgres, turns=args.turns, seed=args.seed)
            started = time.perf_counter()
            texts, total = pg_read(args.postgres, sample=args.sample, seed=args.seed)
        else:
            path = str(Path(stack.enter_context(tempfile.TemporaryDirectory())) / "turns.sqlite3")
            table_fill(path, turns=args.turns, seed=args.seed)
            started = time.perf_counter()
            texts, total = live_read(path, sample=args.sample, seed=args.seed)
        read = time.perf_counter() - started
    live = texts_by_language(texts)
    suite = texts_by_language(suite_texts(args.suite, random.Random(args.seed)))
    mark = time.perf_counter()
    figures = shift_measure(live=live, suite=suite, sample=args.sample, seed=args.seed, workers=args.workers)
    measured = time.perf_counter() - mark
    store = "PostgreSQL" if args.postgres else "SQLite"
    print(f"{store}: {total} live user turns, {len(texts)} read", end="")
    print(f", suite {args.suite} items, sample {args.sample}")
    print(f"read {read:.2f} s, measure {measured:.2f} s, in all {read + measured:.2f} s")
    for f in figures:
        print(
            f"{f.language}: live {f.live.n}, suite {f.suite.n}, live->suite median {f.live_to_suite}, "
            f"suite->live {f.suite_to_live}, live->live {f.live_to_live}, "
            f"typos live {f.live.typos.share} suite {f.suite.typos.share}, "
            f"mixed live {f.live.mixed_script.share} suite {f.suite.mixed_script.share}"
        )


if __name__ == "__main__":
    main()
