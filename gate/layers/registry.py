"""The gate's layers, in the order a run computes them (model layers first, then traffic layers).

A new layer is a judge module (`gate.judges.<name>`: policy section, stored details, pure judge), a
layer module (`gate.layers.<name>`: a `GateLayer` with its run and report part), an entry here and
its template (`templates/gate/layers/<name>.html`)."""

from __future__ import annotations

from typing import Any

from gate.layers.base import GateLayer
from gate.layers.business_value import BusinessValueLayer
from gate.layers.clean_accuracy import CleanAccuracyLayer
from gate.layers.follow_up_rate import FollowUpRateLayer
from gate.layers.robustness import RobustnessLayer
from gate.policy import GatePolicyConfig, PolicySection, StoredPolicy, policy_parse, policy_read

LAYERS: tuple[GateLayer[Any], ...] = (
    CleanAccuracyLayer(),
    RobustnessLayer(),
    FollowUpRateLayer(),
    BusinessValueLayer(),
)
LAYER_NAMES = tuple(layer.name for layer in LAYERS)
SECTIONS: dict[str, type[PolicySection]] = {layer.name: layer.policy for layer in LAYERS}
_BY_NAME = {layer.name: layer for layer in LAYERS}


def layer_get(name: str) -> GateLayer[Any] | None:
    return _BY_NAME.get(name)


def gate_policy_parse(data: dict[str, Any] | None) -> GatePolicyConfig:
    """Input (a new run's policy and overrides, a policy edit) checked strictly against every layer's
    section (PolicyError names the bad key). A stored document is read with `gate_policy_read`."""
    return policy_parse(data, sections=SECTIONS)


def gate_policy_read(data: dict[str, Any] | None) -> StoredPolicy:
    """A stored policy (a run's snapshot) read leniently: never refuses (see `gate.policy.policy_read`)."""
    return policy_read(data, sections=SECTIONS)
