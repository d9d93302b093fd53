"""The release manager's canary pages: the experiments, one experiment's A/B dashboard, and its
lifecycle actions (release managers only; every action through the audited services)."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from canary.selectors.experiments import experiment_get, experiment_overview_list
from canary.services import experiments as lifecycle
from canary.services import plans
from canary.services.experiments import ExperimentsCode
from canary.services.plans import UNBLIND_PERMISSION, unblind_permission_require
from engines.reasons import reason
from evalhub.permissions import error_text, reader_required, roles_required
from evalhub.terms import term_label
from gate.layers.base import to_json
from gate.layers.suite_shift import suite_shift_latest
from gate.services.dashboard import experiment_dashboard
from gate.services.horizons import experiment_start_registered
from registry.errors import ApplicationError
from registry.roles import RELEASE_MANAGER, RELEASE_ROLES, user_roles


@reader_required
def experiment_list(request: HttpRequest) -> HttpResponse:
    return render(request, "canary/experiment_list.html", {"experiments": experiment_overview_list()})


@reader_required
def experiment_detail(request: HttpRequest, name: str) -> HttpResponse:
    experiment = experiment_get(name=name)
    dashboard = experiment_dashboard(experiment=experiment, direction=request.GET.get("direction"))
    context = {
        "experiment": experiment,
        "dashboard": dashboard,
        "charts_json": [to_json(chart) for chart in dashboard.charts],
        "can_act": RELEASE_MANAGER in user_roles(request.user),
        "can_unblind": request.user.has_perm(UNBLIND_PERMISSION) and experiment.unblinded_at is None,
        "shift": suite_shift_latest(experiment=experiment),
    }
    return render(request, "canary/experiment_detail.html", context)


def _percent(text: str) -> float | None:
    """The ramp form's optional target share; empty means the plan's next step."""
    if not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        raise ApplicationError(
            reason(ExperimentsCode.NOT_A_NUMBER, field="traffic_percent"),
            fields={"traffic_percent": [reason(ExperimentsCode.MUST_BE_A_NUMBER)]},
        ) from None


@roles_required(RELEASE_ROLES)
@require_POST
def experiment_action(request: HttpRequest, name: str, action: str) -> HttpResponse:
    """start, pause, resume, ramp, rollback, promote; what the service refuses is shown on the page."""
    experiment = experiment_get(name=name)
    common = {"experiment": experiment, "actor": request.user, "reason": request.POST.get("reason", "")}
    try:
        if action == "ramp":
            changed = lifecycle.experiment_ramp(
                **common, traffic_percent=_percent(request.POST.get("traffic_percent", ""))
            )
        elif action == "start":  # with layer 3's fixed horizon
            changed = experiment_start_registered(**common)
        else:
            changed = getattr(lifecycle, f"experiment_{action}")(**common)
    except ApplicationError as exc:
        messages.error(request, error_text(exc))
    else:
        messages.success(
            request,
            _("%(action)s: %(name)s is %(status)s at %(share)s %%.")
            % {
                "action": term_label(action),
                "name": changed.name,
                "status": term_label(changed.status),
                "share": f"{changed.traffic_percent:g}",
            },
        )
    return redirect("canary:experiment-detail", name=experiment.name)


@reader_required
@require_POST
def experiment_unblind(request: HttpRequest, name: str) -> HttpResponse:
    """Unblind the traffic layers before their looks (the permission canary.unblind_experiment, a reason;
    audited); what the service refuses is shown on the page."""
    experiment = experiment_get(name=name)
    try:
        unblind_permission_require(request.user)
        plans.experiment_unblind(
            experiment=experiment, actor=request.user, reason=request.POST.get("reason", "")
        )
    except ApplicationError as exc:
        if exc.status_code == 403:
            raise PermissionDenied(error_text(exc)) from None
        messages.error(request, error_text(exc))
    else:
        messages.success(
            request, _("Unblinded: the numbers before the horizon are shown, with your name and reason.")
        )
    return redirect("canary:experiment-detail", name=experiment.name)
