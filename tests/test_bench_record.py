"""bench/record.py: a benchmark's output lands on its docs page with the conditions it ran under, the
page's own text around the latest run is kept, and a failed benchmark writes nothing."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def record(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "bench/record.py", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_run_is_written_with_its_commit_date_machine_and_load(tmp_path):
    script = tmp_path / "toy_bench.py"
    script.write_text("import sys\nprint('layer 2.90 s, its SQL 2.82 s: 1.03', sys.argv[1:])\n")
    page = tmp_path / "toy_bench.md"
    page.write_text(
        "# `bench/toy_bench.py`\n\nWhat it measures.\n\n## Earlier figures\n\n1.26 (quiet machine)\n"
    )

    result = record("--docs-dir", tmp_path, script, "--", "--repeat", "5")

    assert result.returncode == 0, result.stderr
    assert "1.03" in result.stdout  # shown as it runs, not only written
    text = page.read_text()
    assert text.startswith("# `bench/toy_bench.py`\n\nWhat it measures.")
    assert "## Earlier figures\n\n1.26 (quiet machine)" in text
    assert "layer 2.90 s, its SQL 2.82 s: 1.03 ['--repeat', '5']" in text
    assert f"| command | `python {script} --repeat 5` |" in text
    for row in (
        "| commit | `",
        "| date (UTC) | 20",
        "| machine | ",
        "| load before | load average",
        "| load after |",
    ):
        assert row in text, row

    # A second run replaces the latest run and keeps the rest.
    script.write_text("print('1.05')\n")
    assert record("--docs-dir", tmp_path, script).returncode == 0
    text = page.read_text()
    assert "1.05" in text and "2.90 s" not in text
    assert text.count("## Latest run") == 1 and "1.26 (quiet machine)" in text


def test_a_failed_benchmark_writes_nothing_and_keeps_its_status(tmp_path):
    script = tmp_path / "broken_bench.py"
    script.write_text("print('half a figure')\nraise SystemExit(3)\n")

    result = record("--docs-dir", tmp_path, script)

    assert result.returncode == 3
    assert not (tmp_path / "broken_bench.md").exists()
