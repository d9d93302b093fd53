"""Plain pages for people. The release UI proper (decisions, dashboards) comes later."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from evalhub.selectors.gate_runs import gate_run_get, gate_run_list, sample_result_list
from evalhub.selectors.versions import model_version_get, model_version_list


@login_required
def version_list(request):
    versions = model_version_list()
    runs = gate_run_list()[:20]
    return render(request, "evalhub/version_list.html", {"versions": versions, "runs": runs})


@login_required
def version_detail(request, ref: str):
    version = model_version_get(ref=ref)
    runs = gate_run_list(filters={"candidate": version})[:50]
    return render(request, "evalhub/version_detail.html", {"version": version, "runs": runs})


@login_required
def gate_run_detail(request, pk: int):
    run = gate_run_get(gate_run_id=pk)
    wrong = sample_result_list(run=run, correct=False)[:100]
    return render(request, "evalhub/gate_run_detail.html", {"run": run, "wrong": wrong})
