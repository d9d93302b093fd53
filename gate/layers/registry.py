"""The gate's layers, in the order a run computes them (model layers first, then traffic layers).

A layer lives in a package of its own, a Django app: its judge (policy section, stored details,
codes and their wordings), its `GateLayer` (run, report part, charts), its template
(`templates/gate/layers/<name>.html`) and its translations (`locale/`). The app's `gate_layers`
module lists them (`LAYERS = (MyLayer(),)`); this registry collects them from every installed app,
the gate's own four first (`gate/gate_layers.py`). Adding a layer is that folder and its line in
`INSTALLED_APPS` (or `EVALHUB_LAYER_APPS`); an existing policy names the layers it requires, so a
new one is required only where a policy says so."""

from __future__ import annotations

import functools
from importlib import import_module
from typing import Any

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import module_has_submodule

from gate.layers.base import GateLayer, LayerKind
from gate.policy import GatePolicyConfig, PolicySection, StoredPolicy, policy_parse, policy_read

LAYERS_MODULE = "gate_layers"


@functools.cache
def gate_layers() -> tuple[GateLayer[Any], ...]:
    """Every installed app's layers, model layers first, each kind in `INSTALLED_APPS` order."""
    found: list[GateLayer[Any]] = []
    for app in apps.get_app_configs():
        if module_has_submodule(app.module, LAYERS_MODULE):
            found.extend(import_module(f"{app.name}.{LAYERS_MODULE}").LAYERS)
    names = [layer.name for layer in found]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ImproperlyConfigured(f"gate layers declared twice: {', '.join(twice)}")
    keys: dict[str, str] = {}
    for layer in found:
        for key in layer.policy.key_names():
            if keys.setdefault(key, layer.name) != layer.name:
                raise ImproperlyConfigured(f"policy key {key} is both {keys[key]}'s and {layer.name}'s")
    return tuple(sorted(found, key=lambda layer: layer.kind != LayerKind.MODEL))


def gate_layers_forget() -> None:
    """Collect the layers again on next use (the installed apps changed: a test's `override_settings`)."""
    gate_layers.cache_clear()


def layer_names() -> tuple[str, ...]:
    return tuple(layer.name for layer in gate_layers())


def default_layer_names() -> tuple[str, ...]:
    """The layers a policy that names none requires: every installed layer but the opt-in ones."""
    return tuple(layer.name for layer in gate_layers() if layer.required_by_default)


def layer_get(name: str) -> GateLayer[Any] | None:
    return next((layer for layer in gate_layers() if layer.name == name), None)


def _sections() -> dict[str, type[PolicySection]]:
    return {layer.name: layer.policy for layer in gate_layers()}


def gate_policy_parse(data: dict[str, Any] | None) -> GatePolicyConfig:
    """Input (a new run's policy and overrides, a policy edit) checked strictly against every layer's
    section (PolicyError names the bad key). A stored document is read with `gate_policy_read`."""
    return policy_parse(data, sections=_sections(), defaults=default_layer_names())


def gate_policy_read(data: dict[str, Any] | None) -> StoredPolicy:
    """A stored policy (a run's snapshot) read leniently: never refuses (see `gate.policy.policy_read`)."""
    return policy_read(data, sections=_sections())
