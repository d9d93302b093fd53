"""The gate run page: the layers, live progress, charts and the wrong answers (the candidate's
first, the baseline's on their own tab), paginated and filtered."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from evalhub.permissions import error_text, reader_required, roles_required
from evalhub.terms import term_label
from gate.cost import costs_total
from gate.layers.base import to_json
from gate.selectors.gate_runs import gate_run_get, wrong_answer_filters, wrong_answer_list
from gate.services.charts import gate_run_charts
from gate.services.gate_runs import gate_run_cancel, gate_run_cancellable_by
from gate.services.progress import gate_run_live
from gate.services.report import (
    gate_run_costs,
    gate_run_layers,
    gate_run_policy_findings,
    gate_run_retired_layers,
)
from registry.errors import ApplicationError
from registry.roles import WRITE_ROLES

WRONG_PER_PAGE = 50
CANDIDATE, BASELINE = "candidate", "baseline"


class WrongAnswerFilterForm(forms.Form):
    """The wrong answers' tab and filters; the choices are the run's own."""

    side = forms.ChoiceField(choices=[(CANDIDATE, _("candidate")), (BASELINE, _("baseline"))], required=False)
    layer = forms.ChoiceField(label=_("Layer"), required=False)
    tag = forms.ChoiceField(label=_("Tag"), required=False)
    perturbation = forms.ChoiceField(label=_("Perturbation type"), required=False)

    def __init__(self, *args, choices, **kwargs):
        super().__init__(*args, **kwargs)
        every = [("", _("all"))]
        self.fields["layer"].choices = every + [(name, term_label(name)) for name in choices.layers]
        self.fields["tag"].choices = every + [(name, name) for name in choices.tags]
        self.fields["perturbation"].choices = every + [(name, name) for name in choices.perturbations]


@reader_required
def gate_run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = gate_run_get(gate_run_id=pk)
    form = WrongAnswerFilterForm(request.GET or None, choices=wrong_answer_filters(run=run))
    chosen = form.cleaned_data if form.is_valid() else {}
    side = chosen.get("side") or CANDIDATE
    narrowed = {key: chosen.get(key) or None for key in ("layer", "tag", "perturbation")}
    versions = {CANDIDATE: run.candidate, BASELINE: run.baseline}
    counts = {
        name: wrong_answer_list(run=run, version=version, **narrowed).count() if version else 0
        for name, version in versions.items()
    }
    version = versions[side] or run.candidate
    page = Paginator(wrong_answer_list(run=run, version=version, **narrowed), WRONG_PER_PAGE).get_page(
        request.GET.get("page")
    )
    # The filters kept across tabs and pages.
    kept = request.GET.copy()
    for key in ("side", "page"):
        kept.pop(key, None)
    layers = gate_run_layers(run=run)
    charts = gate_run_charts(layers=layers)
    costs = gate_run_costs(layers=layers)
    context = {
        "costs": costs,
        "cost_total": costs_total([row.cost for row in costs]),
        "run": run,
        "layers": layers,
        "live": gate_run_live(run=run),
        "may_cancel": not run.is_finished and gate_run_cancellable_by(run=run, actor=request.user),
        "policy_found": gate_run_policy_findings(run=run),
        "retired_layers": gate_run_retired_layers(run=run),
        "charts": charts,
        "charts_json": [to_json(chart) for chart in charts],
        "form": form,
        "side": side,
        "counts": counts,
        "page": page,
        # Clean accuracy asked each item this many times: its wrong answers say which one they are.
        "repeats": (run.policy_config or {}).get("repeats") or 1,
        "kept": kept.urlencode(),
    }
    return render(request, "gate/gate_run_detail.html", context)


@roles_required(WRITE_ROLES)
@require_POST
def gate_run_cancel_page(request: HttpRequest, pk: int) -> HttpResponse:
    """The page's cancel button; what the service refuses is shown on the page."""
    run = gate_run_get(gate_run_id=pk)
    if not gate_run_cancellable_by(run=run, actor=request.user):
        raise PermissionDenied
    try:
        gate_run_cancel(gate_run_id=run.pk, actor=request.user, why=request.POST.get("reason", "").strip())
    except ApplicationError as exc:
        messages.error(request, error_text(exc))
    else:
        messages.success(request, gettext("Gate run #%(pk)d cancelled.") % {"pk": run.pk})
    return redirect("gate-run-detail", pk=run.pk)
