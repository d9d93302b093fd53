"""Plain pages for people: versions, suites, gate runs and release decisions (the canary pages are in
`evalhub.views.canary`)."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from evalhub.permissions import error_text, reader_required, roles_required
from evalhub.terms import term_label
from gate.layers.suite_shift import suite_shift_latest
from gate.selectors.costs import family_costs_by_month
from gate.selectors.decisions import (
    decision_get,
    decision_list,
    gate_run_latest_finished,
    incumbent_request_open,
    override_request_open,
)
from gate.selectors.gate_runs import gate_run_get, gate_run_list
from gate.services.decisions import decision_record
from registry.errors import ApplicationError
from registry.roles import RELEASE_MANAGER, RELEASE_ROLES, user_roles
from registry.selectors.suites import eval_suite_get, eval_suite_list, eval_suite_make_up
from registry.selectors.versions import model_version_get, model_version_in_production, model_version_list


@reader_required
def version_list(request):
    versions = model_version_list()
    runs = gate_run_list()[:20]
    return render(request, "evalhub/version_list.html", {"versions": versions, "runs": runs})


@reader_required
def version_detail(request, ref: str):
    version = model_version_get(ref=ref)
    context = {
        "version": version,
        "runs": gate_run_list(filters={"candidate": version})[:50],
        "family_costs": family_costs_by_month(family=version.family),
        "decisions": decision_list(filters={"version": version}),
        "can_decide": RELEASE_MANAGER in user_roles(request.user),
        "decided_run": gate_run_latest_finished(version=version),
        "open_request": override_request_open(version=version),
        # Before its family has a production version, this one may be declared the incumbent.
        "may_be_incumbent": version.status == version.Status.REGISTERED
        and model_version_in_production(family=version.family) is None,
        "open_incumbent_request": incumbent_request_open(version=version),
    }
    return render(request, "evalhub/version_detail.html", context)


@reader_required
def suite_detail(request, ref: str):
    """A suite version: what it holds (languages, tags, the live questions with their provenance), its
    other versions, the gate runs on it and the latest suite-vs-live shift a run measured on it."""
    suite = eval_suite_get(ref=ref)
    context = {
        "suite": suite,
        "make_up": eval_suite_make_up(suite=suite),
        "versions": eval_suite_list(name=suite.name).order_by("-version"),
        "runs": gate_run_list(filters={"suite": suite})[:50],
        "shift": suite_shift_latest(suite=suite),
    }
    return render(request, "evalhub/suite_detail.html", context)


@roles_required(RELEASE_ROLES)
@require_POST
def version_decide(request, ref: str):
    """The decision form of the version page; what the service refuses is shown there."""
    version = model_version_get(ref=ref)
    data = request.POST
    try:
        decision = decision_record(
            version=version,
            action=data.get("action", ""),
            reason=data.get("reason", ""),
            actor=request.user,
            gate_run=gate_run_get(gate_run_id=data["gate_run"]) if data.get("gate_run") else None,
            confirms=decision_get(decision_id=data["confirms"]) if data.get("confirms") else None,
        )
    except ApplicationError as exc:
        messages.error(request, error_text(exc))
    else:
        messages.success(
            request,
            _("Recorded: %(action)s of %(ref)s.")
            % {"action": term_label(decision.action), "ref": version.ref},
        )
    return redirect("version-detail", ref=version.ref)
