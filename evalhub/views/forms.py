"""The pages that do the work without curl: register a version, upload a suite, start a gate run,
create an experiment, run probes. Each calls the service the API calls; what it refuses is shown next
to the field it names, with everything typed kept."""

from __future__ import annotations

from enum import StrEnum

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from canary.selectors.experiments import experiment_get
from canary.services.experiments import experiment_create
from canary.services.probes import probe_runs_request
from engines.reasons import gettext_noop, reason, wordings_register
from evalhub.forms import (
    ExperimentCreateForm,
    GateRunStartForm,
    ProbeRunForm,
    SuiteUploadForm,
    VersionRegisterForm,
    form_errors_from,
)
from evalhub.permissions import roles_required
from gate.services.gate_runs import gate_run_start
from registry.errors import ApplicationError, CommonCode, NotFoundError
from registry.roles import RELEASE_ROLES, WRITE_ROLES
from registry.selectors.suites import eval_suite_get
from registry.selectors.versions import model_version_get
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_register


class FormsCode(StrEnum):
    NO_SUITE = "forms.no_suite"


wordings_register({FormsCode.NO_SUITE: gettext_noop("No suite named '{name}'; choose one.")})


def _page(request: HttpRequest, form, *, title, intro="", multipart=False) -> HttpResponse:
    context = {"form": form, "title": title, "intro": intro, "multipart": multipart}
    return render(request, "evalhub/form.html", context, status=400 if form.is_bound else 200)


def _version(ref: str, field: str):
    return model_version_get(ref=ref, field=field) if ref else None


@roles_required(WRITE_ROLES)
def version_register(request: HttpRequest) -> HttpResponse:
    form = VersionRegisterForm(request.POST or None)
    if form.is_valid():
        data = form.cleaned_data
        try:
            version = model_version_register(
                family=data["family"],
                label=data["label"],
                backend_kind=data["backend_kind"],
                backend_config=data["backend_config"] or {},
                api_key=data["api_key"],
                baseline=_version(data["baseline"], "baseline"),
                description=data["description"],
                serving_url=data["serving_url"],
                actor=request.user,
            )
        except ApplicationError as exc:
            form_errors_from(form, exc)
        else:
            messages.success(request, _("Registered %(ref)s.") % {"ref": version.ref})
            return redirect("version-detail", ref=version.ref)
    return _page(request, form, title=gettext_lazy("Register a model version"))


@roles_required(WRITE_ROLES)
def suite_upload(request: HttpRequest) -> HttpResponse:
    form = SuiteUploadForm(request.POST or None, request.FILES or None)
    if form.is_valid():
        data = form.cleaned_data
        upload = data["file"]
        try:
            fmt = "csv" if upload.name.lower().endswith(".csv") else "jsonl"
            items = suite_items_parse(content=upload.read(), fmt=fmt)
            suite, created = eval_suite_import(
                name=data["name"], items=items, description=data["description"], actor=request.user
            )
        except ApplicationError as exc:
            form_errors_from(form, exc)
        else:
            text = _("Uploaded %(ref)s.") if created else _("The same content is already %(ref)s.")
            messages.success(request, text % {"ref": f"{suite.name}@{suite.version}"})
            return redirect("home")
    intro = gettext_lazy(
        "One item per line: input, and label or reference; optional id, language, tags, metadata. "
        "A suite is never edited: new content becomes its next version."
    )
    return _page(request, form, title=gettext_lazy("Upload a suite"), intro=intro, multipart=True)


@roles_required(WRITE_ROLES)
def gate_run_new(request: HttpRequest) -> HttpResponse:
    form = GateRunStartForm(request.POST or None, initial={"candidate": request.GET.get("candidate", "")})
    if form.is_valid():
        data = form.cleaned_data
        try:
            candidate = model_version_get(ref=data["candidate"], field="candidate")
            suite_ref = data["suite"] or candidate.family
            try:
                suite = eval_suite_get(ref=suite_ref)
            except NotFoundError:
                raise ApplicationError(
                    reason(FormsCode.NO_SUITE, name=suite_ref),
                    fields={"suite": [reason(CommonCode.REQUIRED)]},
                ) from None
            run = gate_run_start(
                candidate=candidate,
                baseline=_version(data["baseline"], "baseline"),
                suite=suite,
                policy_name=data["policy"] or None,
                policy_overrides=data["policy_overrides"],
                experiment_name=data["experiment"] or None,
                actor=request.user,
            )
        except ApplicationError as exc:
            form_errors_from(form, exc)
        else:
            return redirect("gate-run-detail", pk=run.pk)
    return _page(request, form, title=gettext_lazy("Start a gate run"))


@roles_required(RELEASE_ROLES)
def experiment_new(request: HttpRequest) -> HttpResponse:
    form = ExperimentCreateForm(request.POST or None)
    if form.is_valid():
        data = form.cleaned_data
        try:
            experiment = experiment_create(
                name=data["name"],
                baseline=model_version_get(ref=data["baseline"], field="baseline"),
                candidate=model_version_get(ref=data["candidate"], field="candidate"),
                traffic_percent=data["traffic_percent"],
                ramp=data["ramp"],
                ramp_auto=data["ramp_auto"],
                guardrails=data["guardrails"],
                shadow_percent=100.0 if data["shadow_percent"] is None else data["shadow_percent"],
                require_clean_shadow=data["require_clean_shadow"],
                actor=request.user,
            )
        except ApplicationError as exc:
            form_errors_from(form, exc)
        else:
            messages.success(
                request, _("Created %(name)s (a draft: start it on its page).") % {"name": experiment.name}
            )
            return redirect("canary:experiment-detail", name=experiment.name)
    return _page(request, form, title=gettext_lazy("Create a canary experiment"))


@roles_required(RELEASE_ROLES)
def experiment_probes(request: HttpRequest, name: str) -> HttpResponse:
    experiment = experiment_get(name=name)
    form = ProbeRunForm(request.POST or None, family=experiment.family)
    if form.is_valid():
        try:
            sets = probe_runs_request(
                experiment=experiment,
                actor=request.user,
                probe_set_name=form.cleaned_data["probe_set"] or None,
            )
        except ApplicationError as exc:
            form_errors_from(form, exc)
        else:
            names = ", ".join(s.name for s in sets)
            messages.success(request, _("Probe runs queued: %(sets)s.") % {"sets": names})
            return redirect("canary:experiment-detail", name=experiment.name)
    title = gettext_lazy("Run stress probes")
    return _page(request, form, title=f"{title}: {experiment.name}")
