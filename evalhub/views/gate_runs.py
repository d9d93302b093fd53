"""Plain pages for people: versions, gate runs and release decisions (the canary pages are in
`evalhub.views.canary`)."""

from django.shortcuts import render

from evalhub.permissions import reader_required
from gate.selectors.gate_runs import gate_run_get, sample_result_list


@reader_required
def gate_run_detail(request, pk: int):
    run = gate_run_get(gate_run_id=pk)
    wrong = sample_result_list(run=run, correct=False)[:100]
    return render(request, "evalhub/gate_run_detail.html", {"run": run, "wrong": wrong})
