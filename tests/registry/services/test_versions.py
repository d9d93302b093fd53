from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.utils import timezone

from engines.backends import BackendError
from engines.backends.config import BackendConfigCode
from engines.reasons import reason
from gate.models import GateRun
from gate.services.decisions import decision_record
from registry.actors import SYSTEM
from registry.errors import ApplicationError
from registry.models import AuditLog, ModelVersion
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import (
    TRANSITIONS,
    model_version_api_key,
    model_version_backend,
    model_version_register,
    model_version_serving_set,
    model_version_transition,
)
from tests.lifecycle import declarers, gate_run_record, version_to

pytestmark = pytest.mark.django_db
Status = ModelVersion.Status
BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}


def register(label="v1", **kwargs):
    return model_version_register(family="fam", label=label, actor=SYSTEM, **BUILTIN, **kwargs)


def test_happy_lifecycle_is_audited_step_by_step():
    version = register()
    path = [Status.EVALUATING, Status.GATE_PASSED, Status.APPROVED, Status.CANARY, Status.PROMOTED]
    suite, _ = eval_suite_import(
        name="s", items=suite_items_parse(records=[{"input": "q", "label": "a"}]), actor=SYSTEM
    )
    for step in path:
        if step == Status.GATE_PASSED:
            GateRun.objects.create(
                candidate=version, suite=suite, status="succeeded", verdict="pass", finished_at=timezone.now()
            )
        if step == Status.APPROVED:  # a release decision, never a bare status move
            decision_record(version=version, action="approve", reason="passed", actor=declarers()[0])
        else:
            model_version_transition(version=version, to_status=step, actor=SYSTEM, reason=f"to {step}")
    version.refresh_from_db()
    assert version.status == Status.PROMOTED
    rows = AuditLog.objects.filter(action="model_version.transition").order_by("id")
    assert [r.after["status"] for r in rows] == path
    assert [r.before["status"] for r in rows] == [Status.REGISTERED, *path[:-1]]


@pytest.mark.parametrize("status", sorted(ModelVersion.CLEARED_STATUSES))
def test_a_bare_status_move_never_clears_a_version_for_production(status):
    version = register()
    gate_run_record(version, "pass")
    with pytest.raises(ApplicationError) as caught:
        model_version_transition(version=version, to_status=status, actor=SYSTEM)
    assert (caught.value.status_code, list(caught.value.fields)) == (409, ["status"])
    version.refresh_from_db()
    assert version.status == Status.GATE_PASSED


@pytest.mark.parametrize(
    ("start", "target"),
    [(s, t) for s in Status.values for t in Status.values if t not in TRANSITIONS[s]],
)
def test_every_illegal_transition_is_refused(start, target):
    version = version_to(register(), start)
    moves = AuditLog.objects.filter(action="model_version.transition").count()
    with pytest.raises(ApplicationError) as caught:
        model_version_transition(version=version, to_status=target, actor=SYSTEM)
    assert caught.value.code == "illegal_transition" and "status" in caught.value.fields
    version.refresh_from_db()
    assert version.status == start
    assert AuditLog.objects.filter(action="model_version.transition").count() == moves


def test_terminal_states_have_no_exit():
    for status in (Status.REJECTED, Status.ROLLED_BACK, Status.RETIRED):
        assert TRANSITIONS[status] == set()
    # A promoted version leaves production only when another one replaces it.
    assert TRANSITIONS[Status.PROMOTED] == {Status.RETIRED}


def test_register_takes_no_status_and_refuses_a_foreign_baseline():
    with pytest.raises(TypeError):
        register(status=Status.PROMOTED)
    other = model_version_register(family="other", label="v1", actor=SYSTEM, **BUILTIN)
    with pytest.raises(ApplicationError) as caught:
        register(label="v2", baseline=other)
    assert "baseline" in caught.value.fields


def test_audit_rows_are_append_only():
    register()
    row = AuditLog.objects.get()
    with pytest.raises(ValueError):
        row.save()
    with pytest.raises(ValueError):
        row.delete()


# ---------------------------------------------------------------------------------------------
# Release integrity: outbound addresses, checkpoint paths, secrets
# ---------------------------------------------------------------------------------------------
def register_openai(label="remote", base_url="http://127.0.0.1:9/v1", **config):
    return model_version_register(
        family="fam",
        label=label,
        backend_kind="openai",
        backend_config={"base_url": base_url, "model": "m", **config},
        actor=SYSTEM,
    )


@pytest.fixture
def strict_outbound(settings):
    """The guard as production has it (no allowed networks), with DNS answered from `answers`."""
    answers = {"models.example.com": ["93.184.216.34"]}
    settings.EVALHUB_OUTBOUND_ALLOW_NETWORKS = []
    settings.EVALHUB_OUTBOUND_RESOLVE = lambda host: answers[host]
    return answers


@pytest.mark.parametrize(
    "base_url",
    [
        "http://169.254.169.254/v1",
        "http://10.0.0.1/",
        "http://[::ffff:169.254.169.254]/v1",
        "http://[fd00:ec2::254]/v1",
        "ftp://models.example.com/v1",
        "http://127.0.0.1:9/v1",  # loopback: only the test settings allow it
    ],
)
def test_register_refuses_a_base_url_on_a_refused_address(strict_outbound, base_url):
    with pytest.raises(ApplicationError) as caught:
        register_openai(base_url=base_url)
    assert list(caught.value.fields) == ["backend_config.base_url"] and caught.value.status_code == 400
    assert not ModelVersion.objects.exists()


def test_register_refuses_a_name_that_resolves_to_a_refused_address(strict_outbound):
    strict_outbound["metadata.example.com"] = ["169.254.169.254"]
    with pytest.raises(ApplicationError) as caught:
        register_openai(base_url="http://metadata.example.com/v1")
    assert "backend_config.base_url" in caught.value.fields
    assert "169.254.169.254" in caught.value.fields["backend_config.base_url"][0]


@pytest.mark.parametrize(
    "serving_url",
    [
        "http://169.254.169.254/v1",
        "http://[::ffff:169.254.169.254]/v1",
        "http://10.0.0.1/v1",
        "ftp://models.example.com/v1",
    ],
)
def test_serving_url_on_a_refused_address_is_refused(strict_outbound, serving_url):
    with pytest.raises(ApplicationError) as caught:
        register(serving_url=serving_url)
    assert "serving_url" in caught.value.fields
    version = register(label="v2")
    with pytest.raises(ApplicationError) as caught:
        model_version_serving_set(version=version, serving_url=serving_url, actor=SYSTEM)
    assert "serving_url" in caught.value.fields
    version.refresh_from_db()
    assert version.serving_url == ""


def test_a_name_public_at_registration_and_private_later_is_refused_at_connect_time(strict_outbound):
    version = register_openai(base_url="http://models.example.com/v1", max_retries=0, timeout_s=2)
    strict_outbound["models.example.com"] = ["10.0.0.1"]
    with pytest.raises(BackendError, match=r"10\.0\.0\.1") as caught:
        model_version_backend(version=version, cached=False).predict(["The buyer pays in 30 days."])
    assert not caught.value.transient


@pytest.mark.parametrize("name", ["DATABASE_URL", "SECRET_KEY", "EVALHUB_WEBHOOK_SECRET", "HOME"])
def test_api_key_env_outside_the_prefix_is_refused(name):
    with pytest.raises(ApplicationError) as caught:
        register_openai(api_key_env=name)
    assert caught.value.fields == {
        "backend_config.api_key_env": [reason(BackendConfigCode.ENV_PREFIX, prefix="EVALHUB_BACKEND_SECRET_")]
    }


def test_api_key_env_under_the_prefix_is_taken(settings):
    assert register_openai(api_key_env="EVALHUB_BACKEND_SECRET_VENDOR").backend_config["api_key_env"]
    settings.EVALHUB_BACKEND_SECRET_ENV_PREFIX = "TEAM_A_"
    with pytest.raises(ApplicationError):
        register_openai(label="other", api_key_env="EVALHUB_BACKEND_SECRET_VENDOR")


@pytest.mark.parametrize("kind", ["builtin", "hf"])
def test_checkpoint_paths_outside_the_model_folder_or_missing_are_refused(kind, settings, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (settings.EVALHUB_MODEL_DIR / "escape").symlink_to(outside, target_is_directory=True)
    root = str(Path(settings.EVALHUB_MODEL_DIR).resolve())
    outside_root = reason(BackendConfigCode.OUTSIDE_MODEL_DIR, root=root)
    for path, note in [
        ("/etc", outside_root),
        ("../../../../etc", outside_root),
        (str(outside), outside_root),
        ("escape", outside_root),
        ("missing-folder", reason(BackendConfigCode.NO_CHECKPOINT, path=f"{root}/missing-folder")),
        ("placeholder/../nothing", reason(BackendConfigCode.NO_CHECKPOINT, path=f"{root}/nothing")),
    ]:
        with pytest.raises(ApplicationError) as caught:
            model_version_register(
                family="fam", label="v1", backend_kind=kind, backend_config={"path": path}, actor=SYSTEM
            )
        assert caught.value.fields == {"backend_config.path": [note]}, path
    (settings.EVALHUB_MODEL_DIR / "escape").unlink()


def test_checkpoint_paths_inside_the_model_folder_stay_as_given(settings):
    relative = register(label="v1")
    absolute = model_version_register(
        family="fam",
        label="v2",
        backend_kind="builtin",
        backend_config={"path": str(settings.EVALHUB_MODEL_DIR / "placeholder")},
        actor=SYSTEM,
    )
    assert relative.backend_config["path"] == "placeholder"
    assert absolute.backend_config["path"] == str(settings.EVALHUB_MODEL_DIR / "placeholder")


def test_a_checkpoint_moved_outside_the_folder_later_is_refused_where_it_is_loaded(settings, tmp_path):
    version = register()
    ModelVersion.objects.filter(pk=version.pk).update(backend_config={"path": "/etc", "batch_size": 256})
    version.refresh_from_db()
    with pytest.raises(BackendError, match="inside the model folder"):
        model_version_backend(version=version, cached=False)


def test_the_api_key_is_stored_encrypted_and_decrypted_only_for_the_endpoint():
    version = register_openai(label="keyed")
    assert version.api_key_encrypted == ""
    keyed = model_version_register(
        family="fam",
        label="keyed2",
        backend_kind="openai",
        backend_config={"base_url": "http://127.0.0.1:9/v1", "model": "m"},
        api_key="sk-plain-secret",
        actor=SYSTEM,
    )
    stored = ModelVersion.objects.filter(pk=keyed.pk).values_list("api_key_encrypted", flat=True).get()
    assert stored and "sk-plain-secret" not in stored
    assert model_version_api_key(version=keyed) == "sk-plain-secret"
    backend = model_version_backend(version=keyed, cached=False)
    assert backend.client.headers["Authorization"] == "Bearer sk-plain-secret"
    audit = AuditLog.objects.get(action="model_version.register", target_id=str(keyed.pk))
    assert "sk-plain-secret" not in str(audit.after) and stored not in str(audit.after)


def test_a_key_encrypted_under_another_key_is_a_backend_error(settings):
    version = model_version_register(
        family="fam",
        label="keyed",
        backend_kind="openai",
        backend_config={"base_url": "http://127.0.0.1:9/v1", "model": "m"},
        api_key="sk-plain-secret",
        actor=SYSTEM,
    )
    settings.EVALHUB_SECRETS_KEY = Fernet.generate_key().decode()
    with pytest.raises(BackendError, match="EVALHUB_SECRETS_KEY"):
        model_version_backend(version=version, cached=False)
