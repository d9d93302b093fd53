"""Every benchmark script still starts: its module-level imports resolve and its options parse."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # each script imports its stack (torch, textattack) in a child process


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "bench").glob("*.py")))
def test_bench_script_starts(script):
    result = subprocess.run(
        [sys.executable, f"bench/{script}", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout
