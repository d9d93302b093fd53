"""The bundled demo: family "contract-assistant", trained on SYNTHETIC data.

`demo_install` is idempotent: it trains the two demo models only when their checkpoints are
missing or were trained on other data, registers V3 (bag-of-words, the production incumbent)
and V4 (MiniLM classifier, the candidate), and imports the golden eval suite.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from enum import StrEnum
from pathlib import Path

from django.conf import settings
from django.db import transaction

from engines.demo.dataset import demo_dataset_build, demo_suite_jsonl
from engines.reasons import gettext_noop, reason, wordings_register
from gate.selectors.policies import gate_policy_get
from gate.services.policies import gate_policy_save
from registry.actors import SystemActor
from registry.errors import ApplicationError
from registry.models import EvalSuite, ModelVersion
from registry.roles import RELEASE_MANAGER
from registry.selectors.versions import model_version_in_production
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import user_role_grant
from registry.services.versions import (
    model_version_is_evaluated,
    model_version_register,
    model_version_serving_set,
)

FAMILY = "contract-assistant"


class DemoCode(StrEnum):
    NOT_INSTALLED = "demo.not_installed"
    V5_EXISTS = "demo.v5_exists"


wordings_register(
    {
        DemoCode.NOT_INSTALLED: gettext_noop(
            "the demo is not installed here: run manage.py demo_setup first"
        ),
        DemoCode.V5_EXISTS: gettext_noop(
            "contract-assistant:v5 is registered, trained from gate run {run}: a registered version's "
            "checkpoint is not trained again on other data (`make clean` starts the demo over)"
        ),
    }
)
DEMO = SystemActor("demo")  # who installs the demo, in the audit log
# The synthetic release managers who declare V3 the demo family's production incumbent (two people
# sign every declaration); accounts without a password.
DEMO_RELEASE_MANAGERS = ("demo-release-manager-1", "demo-release-manager-2")
DEMO_EXPERIMENT = "contract-assistant-canary"
DEMO_SHADOW_EXPERIMENT = "contract-assistant-shadow"
DEMO_PROBE_SET = "contract-assistant-weaknesses"
# A quarter of the TRAINING split as a suite: V4 is attacked on it, and what breaks V4 there becomes
# V5's training data (`demo_v5_install`); the golden suite stays held out.
HARDENING_SUITE = f"{FAMILY}-hardening"
HARDENING_POLICY = "demo-hardening"
# Ports of the demo's model servers (bin/run-local starts them: `manage.py serve_model`).
DEMO_SERVE_PORTS = tuple(int(p) for p in os.environ.get("EVALHUB_DEMO_SERVE_PORTS", "8101,8102").split(","))
# Layer-1-only policies for the demo, so a newcomer sees the gate decide both ways on the same
# models: V4 misses the bar on answers right for the item (its clean accuracy caps that rate),
# and clears it on answers agreeing with its own clean answers (it is stable under perturbation).
DEMO_POLICIES = {
    # Named as the family, so it is the family's policy when a gate run names none.
    FAMILY: (
        "The family's sandwich gate: all four layers; layer 1 under the TextFooler-class attack "
        "(textfooler-v2, adaptive: every drawn item searched against the candidate; the demo suite's "
        "320 labelled items, each once); layer 3 on review hours per contract (outcome metric "
        "review_hours, per user), which must fall by at least 0.2 h, judged at a horizon sized for a "
        "true 0.4 h (per-user sd 0.55 h until the family has history before a start).",
        {
            "robustness_recipe": "textfooler-v2",
            "robustness_min_samples": 300,
            "business_metric": "review_hours",
            "business_direction": "decrease",
            "business_min_effect": 0.2,
            # The simulator's hours (2 h, +1.5 h for a wrong answer, noise 0.3 h, 1–3 contracts a user) at
            # V4's error rate give a linearised per-user sd of about 0.52 h.
            "business_planning_sd": 0.55,
        },
    ),
    HARDENING_POLICY: (
        "Layer 1 only, on the hardening suite (training data): V4 under the TextFooler-class attack, "
        "adaptive, no baseline; the examples that break it are V5's training data (manage.py demo_v5).",
        {
            "required_layers": ["robustness"],
            "robustness_recipe": "textfooler-v2",
            "robustness_samples": 240,
            "robustness_min_samples": 200,
            "run_baseline": False,
        },
    ),
    "demo-robustness": (
        "Layer 1 only, the random-noise check (robustness-v1): a perturbed sample counts when its "
        "answer is right.",
        {"required_layers": ["robustness"]},
    ),
    "demo-robustness-transfer": (
        "Layer 1 only, transfer: every version answers the TextFooler-class set made once against "
        "the baseline (did the candidate fix what broke the baseline?).",
        {
            "required_layers": ["robustness"],
            "robustness_recipe": "textfooler-v2",
            "robustness_transfer_from": "baseline",
            "robustness_min_samples": 300,
        },
    ),
    "demo-robustness-consistency": (
        "Layer 1 only, consistency judging: a perturbed sample counts when its answer agrees with "
        "the model's own answer to the clean item.",
        {"required_layers": ["robustness"], "robustness_judge_by": "consistency"},
    ),
}
HARDENING_DESCRIPTION = (
    "SYNTHETIC demo TRAINING data (every 4th item of the training split), for attacking a version to "
    "make the next one's training data. Not held out: never judge a version on it."
)
SUITE_DESCRIPTION = (
    "SYNTHETIC demo data: clause-type questions in English and Chinese, generated by "
    "engines/demo/dataset.py. Not real contracts."
)


def _train_if_needed(*, name: str, train, items, out_dir: Path, fingerprint: str, log) -> dict:
    # One trainer per checkpoint: processes that install the demo at once (a test run and a bench, two
    # sessions on one machine) would otherwise train the same folder together; the others wait, then
    # find it up to date.
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(out_dir.parent / f".{out_dir.name}.training.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = out_dir / "evalhub_training.json"
        if marker.exists():
            recorded = json.loads(marker.read_text())
            if recorded.get("fingerprint") == fingerprint:
                log(f"{name}: checkpoint up to date in {out_dir}")
                return recorded
        log(f"{name}: training into {out_dir} ...")
        started = time.perf_counter()
        metrics = train(items=items, out_dir=out_dir, seed=0)
        recorded = {"fingerprint": fingerprint, "seconds": time.perf_counter() - started, "metrics": metrics}
        marker.write_text(json.dumps(recorded, indent=2))
        log(f"{name}: trained in {recorded['seconds']:.1f} s")
        return recorded


def demo_install(*, log=print, seed: int = 0) -> dict:
    from engines import training  # torch: only when the demo is set up

    dataset = demo_dataset_build(seed=seed)
    train_jsonl = demo_suite_jsonl(items=dataset.train)
    # Retrain when the data or the training code changes.
    code = Path(training.__file__).read_bytes()
    fingerprint = hashlib.sha256(train_jsonl.encode() + code).hexdigest()
    model_dir = Path(settings.EVALHUB_MODEL_DIR) / FAMILY
    trained = {
        "v3": _train_if_needed(
            name="v3 (bag of words)",
            train=training.bow_train,
            items=dataset.train,
            out_dir=model_dir / "v3",
            fingerprint=fingerprint,
            log=log,
        ),
        "v4": _train_if_needed(
            name="v4 (MiniLM classifier)",
            train=training.minilm_train,
            items=dataset.train,
            out_dir=model_dir / "v4",
            fingerprint=fingerprint,
            log=log,
        ),
    }
    with transaction.atomic():
        v3 = ModelVersion.objects.filter(family=FAMILY, label="v3").first() or model_version_register(
            family=FAMILY,
            label="v3",
            backend_kind=ModelVersion.BackendKind.BUILTIN,
            backend_config={"path": f"{FAMILY}/v3"},
            description="Demo V3: word-level bag-of-words classifier (fast, brittle to typos). "
            "Trained on synthetic demo data.",
            is_demo=True,
            serving_url=_demo_serving_url("v3"),
            actor=DEMO,
        )
        v3 = _demo_incumbent_declare(version=v3)
        v4 = ModelVersion.objects.filter(family=FAMILY, label="v4").first() or model_version_register(
            family=FAMILY,
            label="v4",
            backend_kind=ModelVersion.BackendKind.HF,
            backend_config={"path": f"{FAMILY}/v4", "max_length": 256},
            baseline=v3,
            description="Demo V4: classifier on the MiniLM encoder (transformers checkpoint). "
            "Trained on synthetic demo data.",
            is_demo=True,
            serving_url=_demo_serving_url("v4"),
            actor=DEMO,
        )
        for name, (description, config) in DEMO_POLICIES.items():
            if gate_policy_get(name=name) is None:
                gate_policy_save(name=name, config=config, description=description, actor=DEMO)
        items = suite_items_parse(content=demo_suite_jsonl(items=dataset.eval).encode(), fmt="jsonl")
        suite, created = eval_suite_import(
            name=FAMILY, items=items, description=SUITE_DESCRIPTION, is_demo=True, actor=DEMO
        )
        hardening = suite_items_parse(
            content=demo_suite_jsonl(items=dataset.train[::4]).encode(), fmt="jsonl"
        )
        eval_suite_import(
            name=HARDENING_SUITE, items=hardening, description=HARDENING_DESCRIPTION, is_demo=True, actor=DEMO
        )
        chat = _demo_chat_versions_install(
            v3=v3, v4=v4, labels=sorted({item.label for item in dataset.train})
        )
    experiment = _demo_canary_install(v3=v3, v4=v4)
    log(f"versions: {v3.ref} ({v3.status}), {v4.ref} ({v4.status}, baseline {v3.ref})")
    log(f"chat versions (openai backend, through the model servers): {', '.join(v.ref for v in chat)}")
    log(f"served at {v3.serving_url} and {v4.serving_url} (bin/run-local starts both model servers)")
    log(
        f"canary experiment {experiment.name}: {experiment.status}, "
        f"{experiment.traffic_percent} % on {v4.ref}"
    )
    log(f"suite: {suite}: {suite.item_count} items ({'imported' if created else 'already there'})")
    log(f"hardening suite (training data, for V5): {HARDENING_SUITE}")
    log(f"gate policies: default, {', '.join(DEMO_POLICIES)} ({FAMILY} is the family's own)")
    return {"versions": [v3, v4], "chat_versions": chat, "suite": suite, "trained": trained}


def _demo_chat_versions_install(
    *, v3: ModelVersion, v4: ModelVersion, labels: list[str]
) -> list[ModelVersion]:
    """V3 and V4 again, as a team whose versions are chat endpoints registers them: `openai` versions
    whose base URL is the model server bin/run-local starts for each. Their label set lets the
    layer-1 attack read class scores from the answers' log-probabilities, so the whole sandwich runs
    on them as on the in-process ones. Sixteen requests in flight: the model server batches the ones
    waiting into each forward pass, as a real serving stack does."""
    chat: list[ModelVersion] = []
    for version in (v3, v4):
        label = f"{version.label}-chat"
        existing = ModelVersion.objects.filter(family=FAMILY, label=label).first()
        chat.append(
            existing
            or model_version_register(
                family=FAMILY,
                label=label,
                backend_kind=ModelVersion.BackendKind.OPENAI,
                backend_config={
                    "base_url": version.serving_url,
                    "model": version.ref,
                    "labels": labels,
                    "max_concurrency": 16,
                },
                baseline=chat[0] if chat else None,
                description=f"Demo {version.label.upper()} behind its model server, as an OpenAI-compatible "
                "chat endpoint (the same checkpoint). Trained on synthetic demo data.",
                is_demo=True,
                actor=DEMO,
            )
        )
    return chat


def _demo_serving_url(label: str) -> str:
    """Where bin/run-local's model server for the demo's v3 or v4 listens."""
    return f"http://127.0.0.1:{DEMO_SERVE_PORTS[('v3', 'v4').index(label)]}/v1"


def _demo_incumbent_declare(*, version: ModelVersion) -> ModelVersion:
    """V3 serves the demo's production: declared so as any family's incumbent is, by two release
    managers through `model_version_incumbent_declare`. The demo's two are synthetic accounts
    (DEMO_RELEASE_MANAGERS, no password: nobody signs in as them) that exist for this only."""
    from django.contrib.auth import get_user_model

    from gate.services.decisions import model_version_incumbent_confirm, model_version_incumbent_declare

    if version.status != ModelVersion.Status.REGISTERED or model_version_in_production(family=FAMILY):
        return version
    managers = []
    for username in DEMO_RELEASE_MANAGERS:
        user, created = get_user_model().objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        if not user.groups.filter(name=RELEASE_MANAGER).exists():
            user_role_grant(user=user, role=RELEASE_MANAGER, actor=DEMO)
        managers.append(user)
    request = model_version_incumbent_declare(
        version=version,
        actor=managers[0],
        reason="Demo set-up: V3 is the synthetic demo family's production version.",
    )
    model_version_incumbent_confirm(
        request=request, actor=managers[1], reason="Demo set-up: confirmed, V3 serves the demo's traffic."
    )
    version.refresh_from_db()
    return version


def _demo_canary_install(*, v3: ModelVersion, v4: ModelVersion):
    """The demo's stress probes and a running V3 → V4 experiment at 1 %."""
    from canary.models import Experiment, ProbeSet
    from canary.probes_gen import demo_probes_build
    from canary.services.experiments import experiment_create
    from canary.services.probes import probe_set_import
    from gate.services.horizons import experiment_start_registered

    for version in (v3, v4):
        # Registered with its address since issue 18; a version of an older demo database without one
        # gets it while nothing has evaluated it (after that its address is fixed: `make clean`).
        if not version.serving_url and not model_version_is_evaluated(version=version):
            model_version_serving_set(
                version=version, serving_url=_demo_serving_url(version.label), actor=DEMO
            )
    if not ProbeSet.objects.filter(name=DEMO_PROBE_SET).exists():
        probe_set_import(
            name=DEMO_PROBE_SET,
            family=FAMILY,
            probes=demo_probes_build(seed=0),
            description="SYNTHETIC stress probes aimed at V3's weaknesses: a clause buried in a long "
            "contract (2 000+ tokens), English clauses in Chinese contracts, OCR noise, conflicting clauses.",
            is_demo=True,
            actor=DEMO,
        )
    experiment = Experiment.objects.filter(name=DEMO_EXPERIMENT).first()
    if experiment is None:
        experiment = experiment_create(
            name=DEMO_EXPERIMENT,
            baseline=v3,
            candidate=v4,
            traffic_percent=1,
            # V4 is a transformer on the CPU, V3 a bag of words: V4's median answer took 14 times
            # as long (150 vs 10.6 ms, simulate_traffic), which the default 1.5 would roll back.
            guardrails={"max_latency_ratio": 100},
            is_demo=True,
            actor=DEMO,
        )
    if (
        experiment.status == Experiment.Status.DRAFT
        and not Experiment.objects.filter(family=FAMILY, status__in=Experiment.ACTIVE).exists()
    ):
        experiment = experiment_start_registered(experiment=experiment, actor=DEMO, reason="demo set-up")
    return experiment


def demo_shadow_start(*, log=print):
    """The demo's shadow experiment (`demo_setup --shadow`): V3 → V4 with the plan shadow → 1 % → 10 %
    → 100 %, half the questions mirrored, a clean shadow window required before the 1 %. One experiment
    per family runs, so the running demo experiment is rolled back first (audited, with a reason). Its
    shadow window fills as traffic comes: `simulate_traffic --experiment contract-assistant-shadow`."""
    from canary.models import Experiment
    from canary.services.experiments import experiment_create, experiment_rollback
    from gate.services.horizons import experiment_start_registered

    experiment = Experiment.objects.filter(name=DEMO_SHADOW_EXPERIMENT).first()
    if experiment is not None:
        log(f"shadow experiment {experiment.name}: {experiment.status} (already there)")
        return experiment
    v3, v4 = (ModelVersion.objects.get(family=FAMILY, label=label) for label in ("v3", "v4"))
    for running in Experiment.objects.filter(family=FAMILY, status__in=Experiment.ACTIVE):
        experiment_rollback(
            experiment=running, actor=DEMO, reason=f"demo: {DEMO_SHADOW_EXPERIMENT} mirrors V4 instead"
        )
    experiment = experiment_create(
        name=DEMO_SHADOW_EXPERIMENT,
        baseline=v3,
        candidate=v4,
        ramp=["shadow", 1, 10, 100],
        shadow_percent=50,
        require_clean_shadow=True,
        guardrails={
            # V4 (a transformer on the CPU) answers ~35 times as slowly as V3 (a bag of words), and
            # disagrees with V3 where it fixes V3's mistakes: 72 % label agreement measured (152 pairs).
            "max_latency_ratio": 100,
            "max_shadow_latency_ratio": 100,
            "min_shadow_agreement": 0.6,
        },
        is_demo=True,
        actor=DEMO,
    )
    experiment = experiment_start_registered(experiment=experiment, actor=DEMO, reason="demo: shadow traffic")
    log(f"shadow experiment {experiment.name}: {experiment.status}, plan {experiment.ramp}")
    return experiment


def demo_v5_install(*, gate_run_id: int, log=print, epochs: int = 3) -> ModelVersion:
    """V5 (issue 22's loop): V4's recipe trained on the demo's training split, a noisy 15 % of it and
    the examples of gate run `gate_run_id` (V4 attacked on the hardening suite) that broke V4, each
    with its true label; refused when any of them is, or is near, an item of the golden suite.
    Registered as contract-assistant:v5 with baseline v4; its checkpoint records the data's make-up."""
    from engines import training
    from engines.training_data import TrainingExample
    from gate.selectors.gate_runs import gate_run_get
    from gate.services.hardening import hardening_set_build

    v4 = ModelVersion.objects.filter(family=FAMILY, label="v4").first()
    held_out = demo_suite_get()
    if v4 is None or held_out is None:
        raise ApplicationError(reason(DemoCode.NOT_INSTALLED), code="not_found", status_code=404)
    dataset = demo_dataset_build(seed=0)
    train = [
        TrainingExample(input=i.input, label=i.label, source="train", origin=i.id) for i in dataset.train
    ]
    built = hardening_set_build(
        run=gate_run_get(gate_run_id=gate_run_id),
        version=v4,
        train=train,
        languages={i.id: i.language for i in dataset.train},
        held_out=held_out,
    )
    log(
        f"V5 training data: {built.counts} (adversarial: what broke {built.attacked} in gate run "
        f"{built.gate_run}); nearest to the held-out suite {built.held_out_suite}: "
        f"{built.nearest_held_out:.3f}"
    )
    rows = json.dumps([[e.input, e.label, e.source, e.origin] for e in built.examples], ensure_ascii=False)
    code = Path(training.__file__).read_bytes()
    fingerprint = hashlib.sha256(rows.encode() + code + str(epochs).encode()).hexdigest()
    existing = ModelVersion.objects.filter(family=FAMILY, label="v5").first()
    out_dir = Path(settings.EVALHUB_MODEL_DIR) / FAMILY / "v5"
    marker = out_dir / "evalhub_training.json"
    before = json.loads(marker.read_text()) if marker.exists() else {}
    if existing is not None and before.get("fingerprint") != fingerprint:
        raise ApplicationError(
            reason(DemoCode.V5_EXISTS, run=before.get("gate_run")), code="conflict", status_code=409
        )
    recorded = _train_if_needed(
        name="v5 (MiniLM classifier, hardened)",
        train=lambda **kw: training.minilm_train(**kw, epochs=epochs),
        items=built.examples,
        out_dir=out_dir,
        fingerprint=fingerprint,
        log=log,
    )
    recorded["gate_run"] = built.gate_run
    recorded["data"] = {
        "counts": built.counts,
        "attacked": built.attacked,
        "held_out_suite": built.held_out_suite,
        "held_out_items": built.held_out_items,
        "nearest_held_out": built.nearest_held_out,
    }
    marker.write_text(json.dumps(recorded, indent=2))
    return existing or model_version_register(
        family=FAMILY,
        label="v5",
        backend_kind=ModelVersion.BackendKind.HF,
        backend_config={"path": f"{FAMILY}/v5", "max_length": 256},
        baseline=v4,
        description=f"Demo V5: V4's recipe trained again with a noisy 15 % and the adversarial examples that "
        f"broke V4 on the hardening suite (gate run {built.gate_run}). Trained on synthetic demo data.",
        is_demo=True,
        actor=DEMO,
    )


def demo_suite_get() -> EvalSuite | None:
    return EvalSuite.objects.filter(name=FAMILY).order_by("-version").first()
