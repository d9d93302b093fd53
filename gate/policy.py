"""Gate policy: what a run requires and with which thresholds. Pure, no Django.

A policy is stored as one flat JSON object (`{"robustness_min": 0.9, ...}`). Every key is
declared once, by the section that uses it: `GeneralPolicy` here, each layer's own next to its
judge (`gate.judges.<layer>`), as a frozen dataclass whose fields are `setting(...)`s with a type,
a default, a range or a set of choices, and a help text. `policy_parse` checks a document against
the sections: an unknown key, a value of the wrong type or out of range is a `PolicyError`
naming the key; missing keys take their defaults. That strictness is for input (a new run's policy
and overrides, a policy edit). A document stored by this or an older version (a run's snapshot) is
read with `policy_read`, which never refuses: a key this version no longer knows is kept aside as
retired, a missing key takes the value it meant then (`absent`, else its default), a stored value now
out of range is kept as stored and named.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from engines.input_checks import FieldCode, text_problem
from engines.reasons import ENGLISH, Reason, gettext_noop, reason, reason_render, wordings_register

# Layers 0 and 1 judge on the Wilson lower bound or on the estimate.
LOWER_BOUND, POINT = "lower_bound", "point"
TEXT_METRICS = ("bertscore", "chrf")


class PolicyCode(StrEnum):
    BETWEEN = "policy.between"
    ONE_OF = "policy.one_of"
    LAYERS_MISSING = "policy.layers_missing"
    UNKNOWN_KEY = "policy.unknown_key"
    UNKNOWN_LAYER = "policy.unknown_layer"
    CUTOFFS = "policy.cutoffs"
    UNKNOWN_METRIC = "policy.unknown_metric"


wordings_register(
    {
        PolicyCode.BETWEEN: gettext_noop("must be between {low} and {high}"),
        PolicyCode.ONE_OF: gettext_noop("must be one of {choices}"),
        PolicyCode.LAYERS_MISSING: gettext_noop("layers this version does not have: {layers}"),
        PolicyCode.UNKNOWN_KEY: gettext_noop("unknown policy key; known keys: {known}"),
        PolicyCode.UNKNOWN_LAYER: gettext_noop("unknown layer '{layer}'; known: {known}"),
        PolicyCode.CUTOFFS: gettext_noop("must map metrics ({metrics}) to cut-offs"),
        PolicyCode.UNKNOWN_METRIC: gettext_noop("unknown metric; known: {known}"),
    }
)


class PolicyError(ValueError):
    """`note`, what is wrong with `field`, as a reason; `message` is the note in English (logs)."""

    def __init__(self, field: str, note: Reason):
        self.field = field
        self.note = note
        self.message = reason_render(note, words=ENGLISH)
        super().__init__(f"{field}: {self.message}")


def setting(
    default: Any,
    *,
    help: str,
    low: float | None = None,
    high: float | None = None,
    choices: Sequence[str] | None = None,
    check: Callable[[str, Any], Any] | None = None,
    absent: Any = MISSING,
) -> Any:
    """A policy key: its default, its help, and what values it takes. Numbers are checked against
    [low, high], strings (and the items of a list) against `choices`; `check(key, value)` validates
    (and may normalise) anything else, raising PolicyError. `absent` is what a stored document
    without the key means, when that differs from `default`: a key added later, whose absence in an
    older run's snapshot stands for what that version did (its then-default)."""
    metadata: dict[str, object] = {
        "help": help,
        "low": low,
        "high": high,
        "choices": tuple(choices) if choices else None,
        "check": check,
        "absent": absent,
    }
    if isinstance(default, (dict, list)):
        raise TypeError("mutable defaults: use None or a tuple")
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class PolicyFindings:
    """What a lenient read of a stored policy found besides keys it could take as stored:
    `retired_keys`, keys this version does not know, with their stored values; `defaulted_keys`, keys
    the document lacks, with the value read for them; `invalid_keys`, keys whose stored value this
    version would refuse: {"value": as stored, "why": the refusal, a reason's JSON or a sentence}
    (the config keeps the stored value when it is of the key's kind, else the default)."""

    retired_keys: dict[str, Any] = field(default_factory=dict)
    defaulted_keys: dict[str, Any] = field(default_factory=dict)
    invalid_keys: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        """Nothing retired or refused: the document reads as this version would have written it."""
        return not (self.retired_keys or self.invalid_keys)


@dataclass(frozen=True)
class PolicyKey:
    """One key as the docs and the admin show it."""

    name: str
    type: str
    default: Any
    help: str
    allowed: str


def _kind(annotation: Any) -> tuple[type, bool]:
    """(base type, nullable) of a field annotation such as `float | None` or `tuple[str, ...]`."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        base, _ = _kind(options[0])
        return base, True
    return (origin or annotation), False


def _number(key: str, value: Any, base: type, low: float | None, high: float | None) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PolicyError(key, reason(FieldCode.NUMBER))
    if base is int and value != int(value):
        raise PolicyError(key, reason(FieldCode.INTEGER))
    if (low is not None and value < low) or (high is not None and value > high):
        raise PolicyError(key, reason(PolicyCode.BETWEEN, low=low, high=high))
    return int(value) if base is int else float(value)


S = TypeVar("S", bound="PolicySection")


@dataclass(frozen=True)
class PolicySection:
    """A set of policy keys: subclasses are frozen dataclasses whose fields are `setting(...)`s."""

    @classmethod
    def key_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def parse(cls: type[S], data: Mapping[str, Any]) -> S:
        """The section from the keys of `data` it declares (others are ignored here)."""
        hints = get_type_hints(cls)
        values: dict[str, Any] = {}
        for spec in fields(cls):
            if spec.name not in data:
                continue
            values[spec.name] = _value(spec.name, data[spec.name], hints[spec.name], spec.metadata)
        return cls(**values)

    @classmethod
    def read(cls: type[S], data: Mapping[str, Any], found: PolicyFindings) -> S:
        """The section from a stored document, never refusing: what `parse` would refuse is noted in
        `found` (a value of the right kind is kept as stored, anything else takes the default)."""
        hints = get_type_hints(cls)
        values: dict[str, Any] = {}
        for spec in fields(cls):
            if spec.name not in data:
                absent = spec.metadata["absent"]
                values[spec.name] = spec.default if absent is MISSING else absent
                found.defaulted_keys[spec.name] = to_json_value(values[spec.name])
                continue
            try:
                values[spec.name] = _value(spec.name, data[spec.name], hints[spec.name], spec.metadata)
            except PolicyError as exc:
                why = exc.note.to_json() if isinstance(exc.note, Reason) else exc.note
                found.invalid_keys[spec.name] = {"value": data[spec.name], "why": why}
                values[spec.name] = _as_stored(data[spec.name], hints[spec.name], spec.default)
        return cls(**values)

    @classmethod
    def describe(cls) -> list[PolicyKey]:
        hints = get_type_hints(cls)
        described = []
        for spec in fields(cls):
            meta = spec.metadata
            if meta["choices"]:
                allowed = ", ".join(meta["choices"])
            elif meta["low"] is not None or meta["high"] is not None:
                allowed = f"{meta['low']} to {meta['high']}"
            else:
                allowed = ""
            default = spec.default if spec.default is not MISSING else None
            described.append(
                PolicyKey(
                    name=spec.name,
                    type=str(hints[spec.name]).replace("typing.", ""),
                    default=list(default) if isinstance(default, tuple) else default,
                    help=meta["help"],
                    allowed=allowed,
                )
            )
        return described

    def as_dict(self) -> dict[str, Any]:
        return {key: to_json_value(value) for key, value in asdict(self).items()}


def to_json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _as_stored(value: Any, annotation: Any, default: Any) -> Any:
    """A stored value `_value` refuses, kept as stored when it is of the key's kind (a number now out
    of range, a choice since dropped), else the key's default."""
    base, nullable = _kind(annotation)
    if value is None:
        return None if nullable else default
    if base in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return value if math.isfinite(value) else default
    if base is str and isinstance(value, str):
        return value
    if base is tuple and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return default


def _value(key: str, value: Any, annotation: Any, meta: Mapping[str, Any]) -> Any:
    base, nullable = _kind(annotation)
    if value is None:
        if nullable:
            return None
        raise PolicyError(key, reason(FieldCode.NOT_NULL))
    if meta["check"] is not None:
        return meta["check"](key, value)
    if base is bool:
        if not isinstance(value, bool):
            raise PolicyError(key, reason(FieldCode.BOOLEAN))
        return value
    if base in (int, float):
        return _number(key, value, base, meta["low"], meta["high"])
    if base is str:
        if not isinstance(value, str) or not value.strip() or len(value) > 100:
            raise PolicyError(key, reason(FieldCode.SHORT_STRING, limit=100))
        if meta["choices"] and value not in meta["choices"]:
            raise PolicyError(key, reason(PolicyCode.ONE_OF, choices=[repr(c) for c in meta["choices"]]))
        problem = text_problem(value)
        if problem:
            raise PolicyError(key, problem)
        return value
    if base is tuple:
        choices = meta["choices"]
        if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
            raise PolicyError(key, reason(FieldCode.STRINGS))
        if choices and any(v not in choices for v in value):
            raise PolicyError(key, reason(FieldCode.LIST_OF, choices=list(choices)))
        return tuple(dict.fromkeys(value))
    raise TypeError(f"{key}: no check for {annotation}")  # a section declared without `check`


def _text_cutoffs(key: str, value: Any) -> dict[str, float]:
    if not isinstance(value, dict) or not value:
        raise PolicyError(key, reason(PolicyCode.CUTOFFS, metrics=list(TEXT_METRICS)))
    for metric, cutoff in value.items():
        if metric not in TEXT_METRICS:
            raise PolicyError(f"{key}.{metric}", reason(PolicyCode.UNKNOWN_METRIC, known=list(TEXT_METRICS)))
        if isinstance(cutoff, bool) or not isinstance(cutoff, (int, float)) or not -1.0 <= cutoff <= 1.0:
            raise PolicyError(f"{key}.{metric}", reason(FieldCode.BETWEEN, low=-1, high=1))
    return {metric: float(cutoff) for metric, cutoff in value.items()}


@dataclass(frozen=True)
class GeneralPolicy(PolicySection):
    """Keys every layer shares."""

    # Absent from the input: every layer installed now but the opt-in ones (`policy_parse` fills them in,
    # and a saved policy stores them, so a layer added later is required only where a policy names it).
    required_layers: tuple[str, ...] = setting(
        (),
        help="layers that must all pass; a missing layer is never a pass (default: every layer installed "
        "when the policy is saved but the opt-in suite_shift, stored with it)",
    )
    batch_size: int = setting(32, low=1, high=4096, help="inputs per model call")
    run_baseline: bool = setting(True, help="also run the baseline, for the paired comparisons")
    output_cache: bool = setting(
        True,
        help="reuse stored answers for inputs a version has already answered; false forces fresh calls "
        "(benchmarks, endpoints that answer differently each time)",
    )
    decide_on: str = setting(
        LOWER_BOUND,
        choices=(LOWER_BOUND, POINT),
        help="layers 0 and 1 judge the Wilson interval's lower bound, or the estimate",
    )
    confidence: float = setting(0.95, low=0.5, high=0.9999, help="two-sided level of the intervals")
    text_cutoffs: dict[str, float] | None = setting(
        None,
        check=_text_cutoffs,
        help="cut-offs for free-text answers by metric (bertscore, chrf); null keeps the shipped ones",
    )


@dataclass(frozen=True)
class GatePolicyConfig:
    """A parsed policy: the general keys and each layer's section, by layer name."""

    general: GeneralPolicy
    layers: Mapping[str, PolicySection]

    def section(self, kind: type[S]) -> S:
        for section in self.layers.values():
            if isinstance(section, kind):
                return section
        raise KeyError(f"no {kind.__name__} in this policy")

    def requires(self, layer: str) -> bool:
        return layer in self.general.required_layers

    def as_dict(self) -> dict[str, Any]:
        """The flat JSON document, every key with its value (what a run stores)."""
        data = self.general.as_dict()
        for section in self.layers.values():
            data.update(section.as_dict())
        return data


def policy_parse(
    data: Mapping[str, Any] | None,
    *,
    sections: Mapping[str, type[PolicySection]],
    defaults: Sequence[str] | None = None,
) -> GatePolicyConfig:
    """Check `data` against the general keys and the layers' `sections` (layer name -> section). A
    document that names no `required_layers` requires `defaults` (None: every section's layer)."""
    data = dict(data or {})
    known = set(GeneralPolicy.key_names())
    for section in sections.values():
        known.update(section.key_names())
    for key in data:
        if key not in known:
            raise PolicyError(key, reason(PolicyCode.UNKNOWN_KEY, known=sorted(known)))
    general = GeneralPolicy.parse(data)
    if "required_layers" in data:
        unknown = [layer for layer in general.required_layers if layer not in sections]
        if unknown:
            raise PolicyError(
                "required_layers", reason(PolicyCode.UNKNOWN_LAYER, layer=unknown[0], known=list(sections))
            )
    else:
        required = list(sections) if defaults is None else list(defaults)
        general = GeneralPolicy.parse({**data, "required_layers": required})
    return GatePolicyConfig(
        general=general, layers={name: section.parse(data) for name, section in sections.items()}
    )


@dataclass(frozen=True)
class StoredPolicy:
    """A stored policy as `policy_read` reads it: the config (what this version acts on) and what
    the read found (retired, defaulted and invalid keys), for the report, the page and the API."""

    config: GatePolicyConfig
    found: PolicyFindings


# What a stored document that names no required layers meant (policies and runs from before they were
# stored explicitly): the four layers there were. Never "every layer installed now".
LAYERS_BEFORE_EXPLICIT = ("clean_accuracy", "robustness", "follow_up_rate", "business_value")


def policy_read(
    data: Mapping[str, Any] | None, *, sections: Mapping[str, type[PolicySection]]
) -> StoredPolicy:
    """A stored document against the general keys and the layers' `sections`, never refusing. A
    required layer this version does not have stays required: a run can never pass without it."""
    data = dict(data or {})
    found = PolicyFindings()
    known = set(GeneralPolicy.key_names())
    for section in sections.values():
        known.update(section.key_names())
    found.retired_keys.update({key: value for key, value in data.items() if key not in known})
    if "required_layers" not in data:
        data["required_layers"] = list(LAYERS_BEFORE_EXPLICIT)
    general = GeneralPolicy.read(data, found)
    found.defaulted_keys.pop("required_layers", None)
    unknown = [layer for layer in general.required_layers if layer not in sections]
    if unknown:
        found.invalid_keys["required_layers"] = {
            "value": list(general.required_layers),
            "why": reason(PolicyCode.LAYERS_MISSING, layers=unknown).to_json(),
        }
    layers = {name: section.read(data, found) for name, section in sections.items()}
    return StoredPolicy(config=GatePolicyConfig(general=general, layers=layers), found=found)
