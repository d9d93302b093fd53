"""The pages' forms. They only parse what a person typed; every check of substance is the service's,
the same one the API calls, and what it refuses comes back next to the field it names."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from canary.models import SHADOW_STEP, ProbeSet
from engines.input_checks import JSONInputError, json_parse_storable
from evalhub.permissions import error_fields_words
from evalhub.wordings import reason_words
from gate.models import GatePolicy
from registry.errors import ApplicationError
from registry.models import ModelVersion
from registry.selectors.suites import eval_suite_list
from registry.selectors.versions import model_version_list

_FIRST_NAME = re.compile(r"^[^.\[:]+")


def form_errors_from(form: forms.Form, exc: ApplicationError) -> None:
    """Put a service's refusal on the form: each named field's notes next to it (`backend_config.path`
    and `file: line 3.input` go to `backend_config` and `file`), the rest, and the message, above the form."""
    placed = False
    for name, notes in error_fields_words(exc).items():
        match = _FIRST_NAME.match(name)
        field = match.group(0) if match else ""
        text = "; ".join(notes)
        if field in form.fields:
            form.add_error(field, f"{name}: {text}" if name != field else text)
            placed = True
        else:
            form.add_error(None, f"{name}: {text}")
    if not placed:
        form.add_error(None, reason_words(exc.reason))


class JSONObjectField(forms.CharField):
    """A JSON object typed into a text area, held to the API's rules for a JSON body (nesting depth,
    no NaN or Infinity, only storable text)."""

    widget = forms.Textarea(attrs={"rows": 4, "cols": 70, "spellcheck": "false"})

    def to_python(self, value: Any) -> dict | None:
        text = super().to_python(value)
        if not text:
            return None
        try:
            parsed = json_parse_storable(
                text.encode("utf-8", "surrogatepass"), max_depth=settings.EVALHUB_JSON_MAX_DEPTH
            )
        except JSONInputError as exc:
            message = reason_words(exc.reason)
            if exc.path:
                message = _("At %(path)s: %(message)s") % {"path": exc.path, "message": message}
            raise forms.ValidationError(message) from None
        if not isinstance(parsed, dict):
            raise forms.ValidationError(_("Must be a JSON object: {…}."))
        return parsed


class RampPlanField(forms.CharField):
    """A ramp plan: shares in percent separated by commas or spaces, the first may be "shadow" (or the
    word in the reader's language: 影子): shadow, 1, 10, 100."""

    def to_python(self, value: Any) -> list[float | str] | None:
        text = super().to_python(value)
        if not text:
            return None
        steps: list[float | str] = []
        for part in (p for p in re.split(r"[,\s→>]+", text.strip()) if p):
            if part.casefold() in (SHADOW_STEP, str(_("shadow")).casefold()):  # the word, or the reader's
                steps.append(SHADOW_STEP)
                continue
            try:
                steps.append(float(part))
            except ValueError:
                raise forms.ValidationError(
                    _("Shares separated by commas, the first may be shadow: shadow, 1, 10, 100.")
                ) from None
        return steps


def _version_choices(blank: str | None = None) -> list[tuple[str, str]]:
    choices = [(v.ref, v.ref) for v in model_version_list()]
    return [("", blank), *choices] if blank is not None else choices


class VersionRegisterForm(forms.Form):
    family = forms.CharField(label=_("Family"), max_length=100)
    label = forms.CharField(label=_("Label"), max_length=100)
    backend_kind = forms.ChoiceField(label=_("Backend"), choices=ModelVersion.BackendKind.choices)
    backend_config = JSONObjectField(
        label=_("Backend config (JSON)"),
        help_text=_(
            'e.g. {"path": "demo/v3"} (builtin, hf), {"base_url": "https://…/v1", "model": "…"} (openai)'
        ),
    )
    api_key = forms.CharField(
        label=_("API key (openai; write-only)"),
        required=False,
        max_length=500,
        widget=forms.PasswordInput(render_value=False),
        help_text=_("Never shown again; type it anew if the form comes back with an error."),
    )
    baseline = forms.ChoiceField(label=_("Baseline"), required=False)
    serving_url = forms.URLField(
        label=_("Serving URL (for live traffic)"), required=False, max_length=500, assume_scheme="https"
    )
    description = forms.CharField(
        label=_("Description"), required=False, widget=forms.Textarea(attrs={"rows": 2, "cols": 70})
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["baseline"].choices = _version_choices(blank=str(_("none")))


class SuiteUploadForm(forms.Form):
    name = forms.SlugField(label=_("Name"), max_length=100)
    file = forms.FileField(label=_("JSONL or CSV file"))
    description = forms.CharField(
        label=_("Description"), required=False, widget=forms.Textarea(attrs={"rows": 2, "cols": 70})
    )


class GateRunStartForm(forms.Form):
    candidate = forms.ChoiceField(label=_("Candidate"))
    baseline = forms.ChoiceField(
        label=_("Baseline"), required=False, help_text=_("default: the candidate's baseline")
    )
    suite = forms.ChoiceField(
        label=_("Suite"), required=False, help_text=_("default: the latest suite named as the family")
    )
    policy = forms.ChoiceField(
        label=_("Policy"),
        required=False,
        help_text=_("default: the policy named as the family, else default"),
    )
    policy_overrides = JSONObjectField(
        label=_("Policy overrides (JSON)"),
        required=False,
        help_text=_(
            'e.g. {"robustness_samples": 200}; a run with overrides is not a full gate to approve on'
        ),
    )
    experiment = forms.CharField(
        label=_("Canary experiment"),
        required=False,
        max_length=100,
        help_text=_("feeds layers 2 and 3; default: the candidate's running or latest one"),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["candidate"].choices = _version_choices()
        self.fields["baseline"].choices = _version_choices(blank=str(_("the candidate's baseline")))
        suites = [
            (f"{s.name}@{s.version}", f"{s.name}@{s.version}")
            for s in eval_suite_list().order_by("name", "-version")
        ]
        self.fields["suite"].choices = [("", str(_("the family's latest suite"))), *suites]
        policies = [(p.name, p.name) for p in GatePolicy.objects.order_by("name")]
        self.fields["policy"].choices = [("", str(_("the family's policy"))), *policies]


class ExperimentCreateForm(forms.Form):
    name = forms.SlugField(label=_("Name"), max_length=100)
    baseline = forms.ChoiceField(label=_("Baseline"))
    candidate = forms.ChoiceField(label=_("Candidate"))
    traffic_percent = forms.FloatField(
        label=_("Candidate's share (%)"),
        required=False,
        help_text=_("default 1 %, or the ramp plan's first step"),
    )
    ramp = RampPlanField(
        label=_("Ramp plan (%)"),
        required=False,
        help_text=_(
            "increasing steps, e.g. 1, 5, 25, 50; start with shadow to mirror first: shadow, 1, 10, 100"
        ),
    )
    ramp_auto = forms.BooleanField(label=_("Ramp automatically when the analysis passes"), required=False)
    shadow_percent = forms.FloatField(
        label=_("Questions mirrored at the shadow step (%)"),
        required=False,
        help_text=_("default 100"),
    )
    require_clean_shadow = forms.BooleanField(
        label=_("The first user step needs a passing shadow window"), required=False
    )
    guardrails = JSONObjectField(
        label=_("Guardrails (JSON)"),
        required=False,
        help_text=_('e.g. {"max_error_rate_increase": 0.02, "min_requests": 200}'),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["baseline"].choices = _version_choices()
        self.fields["candidate"].choices = _version_choices()


class ProbeRunForm(forms.Form):
    probe_set = forms.ChoiceField(label=_("Probe set"), required=False)

    def __init__(self, *args: Any, family: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        sets = [(s.name, s.name) for s in ProbeSet.objects.filter(family=family).order_by("name")]
        self.fields["probe_set"].choices = [("", str(_("every set of the family"))), *sets]
