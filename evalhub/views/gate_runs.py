"""Plain pages for people: versions, gate runs and release decisions (the canary pages are in
`evalhub.views.canary`)."""

from django.shortcuts import render

from evalhub.permissions import reader_required
from gate.selectors.gate_runs import gate_run_get, sample_result_list
from gate.services.report import gate_run_layers


@reader_required
def gate_run_detail(request, pk: int):
    run = gate_run_get(gate_run_id=pk)
    wrong = sample_result_list(run=run, correct=False)[:100]
    context = {"run": run, "layers": gate_run_layers(run=run), "wrong": wrong}
    return render(request, "gate/gate_run_detail.html", context)
