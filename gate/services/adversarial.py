"""Layer 1's attack shared out: a gpu worker attacks one version of a gate run's layer 1 while the
run's own worker attacks another (`gate.layers.robustness_adversarial`)."""

from __future__ import annotations

from gate.layers.robustness_adversarial import (
    adversarial_set_claim,
    adversarial_set_extend,
    adversarial_set_release,
)
from gate.models import AdversarialSet


def adversarial_set_build(*, set_id: int, chunk_size: int, worker: str) -> bool:
    """Attack what a stored set still misses, under its lease; False when there was nothing to do
    (complete, or another live worker holds it)."""
    aset = AdversarialSet.objects.select_related("suite", "version").filter(pk=set_id).first()
    if aset is None or aset.complete or not adversarial_set_claim(set_id=set_id, worker=worker):
        return False
    try:
        aset.refresh_from_db()
        by_id = {item.external_id: item for item in aset.suite.items.all() if item.label}
        adversarial_set_extend(
            aset=aset,
            worker=worker,
            by_id=by_id,
            chunk_size=chunk_size,
            hold=lambda: None,  # the lease alone: no gate run is held here
            on_items=lambda n: None,
        )
    finally:
        adversarial_set_release(set_id=set_id, worker=worker)
    return True
