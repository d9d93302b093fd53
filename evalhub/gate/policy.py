"""Gate policy: what a run requires and with which thresholds.

A policy is stored as JSON; `gate_policy_parse` validates it against the known keys (an
unknown key is an error, not something silently ignored) and fills defaults.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

LAYERS = ("clean_accuracy", "robustness", "follow_up_rate", "business_value")


class PolicyError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class GatePolicyConfig:
    # Every listed layer must pass; a missing layer is never a pass.
    required_layers: tuple[str, ...] = LAYERS
    batch_size: int = 32
    run_baseline: bool = True
    clean_accuracy_min: float = 0.80
    clean_min_items: int = 30
    # "lower_bound": judge on the Wilson interval's lower bound; "point": on the estimate.
    decide_on: str = "lower_bound"
    confidence: float = 0.95

    def as_dict(self) -> dict:
        data = asdict(self)
        data["required_layers"] = list(self.required_layers)
        return data


def gate_policy_parse(data: dict | None) -> GatePolicyConfig:
    data = dict(data or {})
    known = {f.name for f in fields(GatePolicyConfig)}
    for key in data:
        if key not in known:
            raise PolicyError(key, f"unknown policy key; known keys: {', '.join(sorted(known))}")
    if "required_layers" in data:
        layers = data["required_layers"]
        if not isinstance(layers, list) or not layers:
            raise PolicyError("required_layers", "must be a non-empty list")
        for layer in layers:
            if layer not in LAYERS:
                raise PolicyError("required_layers", f"unknown layer {layer!r}")
        data["required_layers"] = tuple(dict.fromkeys(layers))
    checks = {
        "batch_size": (int, 1, 4096),
        "clean_min_items": (int, 1, 10**7),
        "clean_accuracy_min": (float, 0.0, 1.0),
        "confidence": (float, 0.5, 0.9999),
    }
    for key, (kind, low, high) in checks.items():
        if key in data:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise PolicyError(key, "must be a number")
            if kind is int and value != int(value):
                raise PolicyError(key, "must be an integer")
            if not low <= value <= high:
                raise PolicyError(key, f"must be between {low} and {high}")
            data[key] = kind(value)
    if "run_baseline" in data and not isinstance(data["run_baseline"], bool):
        raise PolicyError("run_baseline", "must be true or false")
    if "decide_on" in data and data["decide_on"] not in ("lower_bound", "point"):
        raise PolicyError("decide_on", "must be 'lower_bound' or 'point'")
    return GatePolicyConfig(**data)
