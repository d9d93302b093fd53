"""Run one benchmark and write what it printed to its docs page, `docs/benchmarks/<bench>.md`, with the
commit, date, machine and load it ran under (`make bench` runs every benchmark through it).

    python bench/record.py bench/gate_clean.py [-- --repeat 5]

The page's "Latest run" section sits between two markers and is replaced on each run; what the page
holds outside them (what the figures mean, earlier runs) is kept. A failed benchmark writes nothing
and exits with its status."""

import argparse
import datetime
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks"
START = "<!-- bench:latest:start (written by bench/record.py) -->"
END = "<!-- bench:latest:end -->"


@dataclass(frozen=True)
class BenchRun:
    bench: str  # the script's stem: `gate_clean`
    command: str
    output: str
    commit: str
    date: str
    machine: str
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]


def commit_describe(*, root: Path) -> str:
    """The commit the figures are of, `+ local changes` when the work tree differs from it."""
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
    ).stdout.strip()
    # The pages this writer changed earlier in the same `make bench` are not a change to the code.
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", ".", ":!docs/benchmarks"],
        cwd=root,
        capture_output=True,
        text=True,
    ).stdout
    return f"{head or 'unknown'}{' + local changes' if dirty.strip() else ''}"


def machine_describe() -> str:
    system = f"{platform.system()} {platform.release()}"
    return f"{platform.machine()}, {os.cpu_count()} CPUs, {system}, Python {platform.python_version()}"


def bench_section_render(*, run: BenchRun) -> str:
    load = "load average (1, 5, 15 min) {0[0]:.2f}, {0[1]:.2f}, {0[2]:.2f}"
    return "\n".join(
        [
            START,
            "## Latest run",
            "",
            "| | |",
            "|---|---|",
            f"| command | `{run.command}` |",
            f"| commit | `{run.commit}` |",
            f"| date (UTC) | {run.date} |",
            f"| machine | {run.machine} |",
            f"| load before | {load.format(run.load_before)} |",
            f"| load after | {load.format(run.load_after)} |",
            "",
            "```text",
            run.output.rstrip("\n"),
            "```",
            END,
        ]
    )


def bench_page_write(*, run: BenchRun, docs_dir: Path = DOCS) -> Path:
    """Replace the page's latest-run section (or add one at its end; a new page gets a title)."""
    path = docs_dir / f"{run.bench}.md"
    section = bench_section_render(run=run)
    text = path.read_text(encoding="utf-8") if path.exists() else f"# `bench/{run.bench}.py`\n"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("script", type=Path, help="the benchmark, e.g. bench/gate_clean.py")
    parser.add_argument(
        "--docs-dir", type=Path, default=DOCS, help="where the pages are (default: docs/benchmarks)"
    )
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its options, after --")
    options = parser.parse_args()
    args = options.args[1:] if options.args[:1] == ["--"] else options.args
    load_before = os.getloadavg()
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M")
    process = subprocess.Popen(
        [sys.executable, str(options.script), *args], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    printed = []
    for line in process.stdout:  # shown as it comes: benchmarks run for minutes
        sys.stdout.write(line)
        printed.append(line)
    if process.wait() != 0:
        return process.returncode
    run = BenchRun(
        bench=options.script.stem,
        command=" ".join(["python", str(options.script), *args]),
        output="".join(printed),
        commit=commit_describe(root=ROOT),
        date=date,
        machine=machine_describe(),
        load_before=load_before,
        load_after=os.getloadavg(),
    )
    print(f"written: {bench_page_write(run=run, docs_dir=options.docs_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
