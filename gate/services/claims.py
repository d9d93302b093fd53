"""Which worker holds a running gate run. Every write of a layer first checks the claim, so a
worker that lost its run (to the reaper, or to a retry elsewhere) stores nothing."""

from __future__ import annotations

from gate.models import GateRun


class ClaimLost(Exception):
    """Another worker (or the reaper) took the run over; stop without writing."""


def gate_run_assert_held(run: GateRun) -> None:
    """Raise ClaimLost when another worker (or the reaper) has taken the run over: store nothing."""
    if not GateRun.objects.filter(pk=run.pk, status=GateRun.Status.RUNNING, worker=run.worker).exists():
        raise ClaimLost(f"gate run {run.pk} is no longer held by {run.worker}")
