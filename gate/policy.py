"""Gate policy: what a run requires and with which thresholds.

A policy is stored as JSON; `gate_policy_parse` validates it against the known keys (an
unknown key is an error, not something silently ignored) and fills defaults.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

LAYERS = ("clean_accuracy", "robustness", "follow_up_rate", "business_value")
TEXT_METRICS = ("bertscore", "chrf")
# Follow-up detector kinds that a policy may count (`engines.followup.detector.KINDS` less "new").
FOLLOW_UP_KINDS = ("follow_up", "deepening")
# Layer 2 judges on the Wilson upper bound or on the rate; layer 3's metric is better lower or higher.
UPPER_BOUND, POINT = "upper_bound", "point"
FOLLOW_UP_DECIDE_ON = (UPPER_BOUND, POINT)
DECREASE, INCREASE = "decrease", "increase"
BUSINESS_DIRECTIONS = (DECREASE, INCREASE)


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
    # Reuse stored answers for inputs a version has already answered; false forces fresh calls
    # (benchmarks, endpoints that answer differently each time).
    output_cache: bool = True
    clean_accuracy_min: float = 0.80
    clean_min_items: int = 30
    robustness_recipe: str = "robustness-v1"
    robustness_seed: int = 0
    robustness_samples: int = 1000
    robustness_min_samples: int = 500
    robustness_min: float = 0.85
    robustness_chunk_size: int = 100
    # Perturbation type -> share; None keeps the recipe's own shares.
    robustness_shares: dict | None = None
    # False allows perturbations that change numbers (amounts, days) in the inputs.
    numbers_matter: bool = True
    # "reference": a perturbed sample is right when its answer is right for the item (label or
    # reference); "consistency": when it agrees with the model's own answer to the clean item.
    robustness_judge_by: str = "reference"
    # Cut-offs for free-text answers, by metric ("bertscore", "chrf"); None keeps the shipped ones.
    # A family whose answers differ in style from the demo's sets its own in its policy.
    text_cutoffs: dict | None = None
    # Attack mode (classifiers): a TextAttack recipe ("deepwordbug", "pwws") searched against a
    # sample of `attack_items` English items, at most `attack_query_budget` model calls per item.
    # Reported beside the robustness rate; it does not change the layer's verdict.
    attack_recipe: str | None = None
    attack_items: int = 50
    attack_query_budget: int = 500
    # "lower_bound": judge on the Wilson interval's lower bound; "point": on the estimate.
    decide_on: str = "lower_bound"
    confidence: float = 0.95
    # Layer 2, follow-up rate on the canary experiment's user traffic (probe traffic excluded).
    follow_up_max: float = 0.18
    # "upper_bound": the candidate's Wilson upper bound must be at most the bar; "point": its rate.
    follow_up_decide_on: str = "upper_bound"
    # Non-inferiority: candidate − baseline may exceed 0 by at most this (rate, 0.01 = 1 point).
    follow_up_margin: float = 0.01
    follow_up_min_answered: int = 200
    # Detector kinds that count as follow-ups; add "deepening" to count new related questions too.
    follow_up_kinds: tuple[str, ...] = ("follow_up",)
    # Layer 3, business value: the outcome metric (OutcomeEvent.metric), which way is better, and the
    # smallest improvement worth shipping, in the metric's unit (e.g. 0.2 hours per contract).
    business_metric: str | None = None
    business_direction: str = "decrease"
    business_min_effect: float = 0.0
    # "user": the metric is Σ values / Σ outcomes over users (ratio, delta method; users are the
    # randomisation unit); "outcome": every outcome is an independent unit (Welch).
    business_per: str = "user"
    business_min_units: int = 100
    # One-sided level of the improvement test (the interval reported is the two-sided 1 − 2α one).
    business_alpha: float = 0.05
    business_srm_alpha: float = 0.001
    # Set (> 0, in the metric's unit, fixed before the experiment) for always-valid intervals that
    # may be looked at any number of times.
    business_sequential_tau: float | None = None

    def as_dict(self) -> dict:
        data = asdict(self)
        data["required_layers"] = list(self.required_layers)
        data["follow_up_kinds"] = list(self.follow_up_kinds)
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
        "robustness_seed": (int, 0, 2**31 - 1),
        "robustness_samples": (int, 1, 100_000),
        "robustness_min_samples": (int, 1, 100_000),
        "robustness_min": (float, 0.0, 1.0),
        "robustness_chunk_size": (int, 1, 10_000),
        "attack_items": (int, 1, 10_000),
        "attack_query_budget": (int, 1, 1_000_000),
        "follow_up_max": (float, 0.0, 1.0),
        "follow_up_margin": (float, 0.0, 1.0),
        "follow_up_min_answered": (int, 1, 10**9),
        "business_min_effect": (float, 0.0, 1e12),
        "business_min_units": (int, 2, 10**9),
        "business_alpha": (float, 0.0001, 0.25),
        "business_srm_alpha": (float, 1e-9, 0.1),
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
    for key in ("run_baseline", "numbers_matter", "output_cache"):
        if key in data and not isinstance(data[key], bool):
            raise PolicyError(key, "must be true or false")
    if "robustness_recipe" in data and not (
        isinstance(data["robustness_recipe"], str) and data["robustness_recipe"].strip()
    ):
        raise PolicyError("robustness_recipe", "must be a recipe name")
    shares = data.get("robustness_shares")
    if shares is not None and not (
        isinstance(shares, dict)
        and shares
        and all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
            for k, v in shares.items()
        )
    ):
        raise PolicyError("robustness_shares", "must map perturbation types to non-negative numbers")
    if "decide_on" in data and data["decide_on"] not in ("lower_bound", "point"):
        raise PolicyError("decide_on", "must be 'lower_bound' or 'point'")
    if "robustness_judge_by" in data and data["robustness_judge_by"] not in ("reference", "consistency"):
        raise PolicyError("robustness_judge_by", "must be 'reference' or 'consistency'")
    cutoffs = data.get("text_cutoffs")
    if cutoffs is not None:
        if not isinstance(cutoffs, dict) or not cutoffs:
            raise PolicyError("text_cutoffs", "must map metrics (bertscore, chrf) to cut-offs")
        for metric, value in cutoffs.items():
            if metric not in TEXT_METRICS:
                known = ", ".join(TEXT_METRICS)
                raise PolicyError(f"text_cutoffs.{metric}", f"unknown metric; known: {known}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1.0 <= value <= 1.0:
                raise PolicyError(f"text_cutoffs.{metric}", "must be a number between -1 and 1")
    choices = {
        "follow_up_decide_on": FOLLOW_UP_DECIDE_ON,
        "business_direction": BUSINESS_DIRECTIONS,
        "business_per": ("user", "outcome"),
    }
    for key, allowed in choices.items():
        if key in data and data[key] not in allowed:
            raise PolicyError(key, f"must be one of {', '.join(repr(a) for a in allowed)}")
    if "follow_up_kinds" in data:
        kinds = data["follow_up_kinds"]
        if not (isinstance(kinds, list) and kinds and all(k in FOLLOW_UP_KINDS for k in kinds)):
            raise PolicyError("follow_up_kinds", f"must be a non-empty list of {', '.join(FOLLOW_UP_KINDS)}")
        data["follow_up_kinds"] = tuple(dict.fromkeys(kinds))
    metric = data.get("business_metric")
    if metric is not None and not (isinstance(metric, str) and metric.strip() and len(metric) <= 100):
        raise PolicyError(
            "business_metric", "must be an outcome metric name (at most 100 characters) or null"
        )
    tau = data.get("business_sequential_tau")
    if tau is not None:
        if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not 0 < tau < 1e12:
            raise PolicyError("business_sequential_tau", "must be a positive number or null")
        data["business_sequential_tau"] = float(tau)
    recipe = data.get("attack_recipe")
    if recipe is not None and not (isinstance(recipe, str) and recipe.strip()):
        raise PolicyError("attack_recipe", "must be a recipe name (deepwordbug, pwws) or null")
    return GatePolicyConfig(**data)
