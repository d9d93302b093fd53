from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from engines.backends.config import (
    BackendConfigCode,
    BackendConfigError,
    api_key_env_check,
    backend_config_hash,
    backend_config_validate,
    checkpoint_path_resolve,
)
from engines.reasons import Term, gettext_noop, wordings_register
from engines.reasons import reason as reason_of
from registry.actors import Actor, actor_require_role, actor_user
from registry.errors import ApplicationError, CommonCode
from registry.models import AuditAction, AuditLog, ModelVersion
from registry.outbound import outbound_policy, outbound_url_check
from registry.roles import RELEASE_ROLES, WRITE_ROLES
from registry.secrets import SecretUnreadableError, secret_decrypt, secret_encrypt
from registry.selectors.versions import model_version_in_production
from registry.services.audit import audit_record

if TYPE_CHECKING:
    from engines.backends import ModelBackend

Status = ModelVersion.Status

# The release lifecycle. Anything not listed here is refused.
TRANSITIONS: dict[str, set[str]] = {
    # Approval from here is an override (no gate pass: inconclusive or errored; it needs a finished run).
    Status.REGISTERED: {Status.EVALUATING, Status.APPROVED, Status.REJECTED},
    # A rejection does not wait for the run: the run goes on, and its end leaves a rejected version be.
    Status.EVALUATING: {Status.GATE_PASSED, Status.GATE_FAILED, Status.REGISTERED, Status.REJECTED},
    Status.GATE_PASSED: {Status.APPROVED, Status.REJECTED, Status.EVALUATING},
    Status.GATE_FAILED: {Status.APPROVED, Status.REJECTED, Status.EVALUATING},
    Status.APPROVED: {Status.CANARY, Status.REJECTED, Status.PROMOTED},
    Status.REJECTED: set(),
    Status.CANARY: {Status.PROMOTED, Status.ROLLED_BACK, Status.REJECTED},
    # Promotion is `model_version_promote`, which retires the version it replaces.
    Status.PROMOTED: {Status.RETIRED},
    Status.ROLLED_BACK: set(),
    Status.RETIRED: set(),
}
# Cleared for production by a release decision: an approval, a confirmed two-person override, or
# (for the version already serving when its family starts) a confirmed incumbent declaration.
APPROVED_STATUSES = ModelVersion.CLEARED_STATUSES


class VersionsCode(StrEnum):
    BACKEND_CONFIG_INVALID = "versions.backend_config_invalid"
    SERVING_URL_NOT_GATED = "versions.serving_url_not_gated"
    SERVING_URL_NOTE = "versions.serving_url_note"
    BASELINE_OTHER_FAMILY = "versions.baseline_other_family"
    BASELINE_SAME_FAMILY_NOTE = "versions.baseline_same_family_note"
    INVALID = "versions.invalid"
    DUPLICATE = "versions.duplicate"
    DUPLICATE_NOTE = "versions.duplicate_note"
    EVALUATED = "versions.evaluated"
    EVALUATED_NOTE = "versions.evaluated_note"
    BASELINE_REFUSED = "versions.baseline_refused"
    BASELINE_OTHER_NOTE = "versions.baseline_other_note"
    HAS_HISTORY = "versions.has_history"
    HAS_HISTORY_NOTE = "versions.has_history_note"
    UNKNOWN_STATUS = "versions.unknown_status"
    ILLEGAL_TRANSITION = "versions.illegal_transition"
    ALLOWED_FROM = "versions.allowed_from"
    ALLOWED_NONE = "versions.allowed_none"
    NOT_APPROVED = "versions.not_approved"
    NO_APPROVAL_NOTE = "versions.no_approval_note"
    INCUMBENT_REFUSED = "versions.incumbent_refused"
    INCUMBENT_SERVES = "versions.incumbent_serves"
    INCUMBENT_STATUS = "versions.incumbent_status"
    SERVING_URL_NOT_HTTP = "versions.serving_url_not_http"
    SERVING_URL_HTTP_NOTE = "versions.serving_url_http_note"
    SERVING_URL_EVALUATED = "versions.serving_url_evaluated"


wordings_register(
    {
        VersionsCode.BACKEND_CONFIG_INVALID: gettext_noop("{field}: {problem}"),
        VersionsCode.SERVING_URL_NOT_GATED: gettext_noop(
            "serving_url {url} is not the endpoint the gate calls (backend_config.base_url {base}): "
            "leave it empty, or register the endpoint you serve as the backend."
        ),
        VersionsCode.SERVING_URL_NOTE: gettext_noop("empty or {base}, the endpoint the gate judges"),
        VersionsCode.BASELINE_OTHER_FAMILY: gettext_noop("The baseline {ref} is not of family '{family}'."),
        VersionsCode.BASELINE_SAME_FAMILY_NOTE: gettext_noop("must be a version of the same family"),
        VersionsCode.INVALID: gettext_noop("Invalid model version."),
        VersionsCode.DUPLICATE: gettext_noop("{family}:{label} is already registered."),
        VersionsCode.DUPLICATE_NOTE: gettext_noop("label '{label}' already exists in family '{family}'"),
        VersionsCode.EVALUATED: gettext_noop(
            "{ref} is {status}: its model and baseline are what was evaluated and approved; register a "
            "new version instead."
        ),
        VersionsCode.EVALUATED_NOTE: gettext_noop("cannot change once the version is evaluated ({status})"),
        VersionsCode.BASELINE_REFUSED: gettext_noop("{baseline} cannot be the baseline of {ref}."),
        VersionsCode.BASELINE_OTHER_NOTE: gettext_noop("must be another version of the same family"),
        VersionsCode.HAS_HISTORY: gettext_noop(
            "{ref} has history ({history}): it is kept; retire or reject it instead."
        ),
        VersionsCode.HAS_HISTORY_NOTE: gettext_noop("has {history}"),
        VersionsCode.UNKNOWN_STATUS: gettext_noop("Unknown status '{status}'."),
        VersionsCode.ILLEGAL_TRANSITION: gettext_noop("{ref} cannot go from {status} to {to}."),
        VersionsCode.ALLOWED_FROM: gettext_noop("from {status} allowed: {allowed}"),
        VersionsCode.ALLOWED_NONE: gettext_noop("from {status} allowed: none: final state"),
        VersionsCode.NOT_APPROVED: gettext_noop(
            "{ref} is {status}, not approved: record an approval (POST /api/v1/decisions/) or a "
            "confirmed two-person override first."
        ),
        VersionsCode.NO_APPROVAL_NOTE: gettext_noop("{ref} has no approval decision"),
        VersionsCode.INCUMBENT_REFUSED: gettext_noop(
            "{family} cannot declare {ref} its production incumbent: {why}."
        ),
        VersionsCode.INCUMBENT_SERVES: gettext_noop("{serving} serves it already"),
        VersionsCode.INCUMBENT_STATUS: gettext_noop("{ref} is {status}"),
        VersionsCode.SERVING_URL_NOT_HTTP: gettext_noop("serving_url must be an http(s) URL."),
        VersionsCode.SERVING_URL_HTTP_NOTE: gettext_noop("an http(s) URL"),
        VersionsCode.SERVING_URL_EVALUATED: gettext_noop(
            "{ref} is {status}: where it serves is part of what its gate judged; register a new "
            "version to serve elsewhere."
        ),
    }
)


def _snapshot(version: ModelVersion) -> dict:
    return {
        "status": version.status,
        "backend_kind": version.backend_kind,
        "backend_config": version.backend_config,
        "baseline": version.baseline.ref if version.baseline else None,
        "serving_url": version.serving_url,
    }


def model_version_config_check(*, backend_kind: str, backend_config: dict) -> dict:
    """The config with defaults filled, or a 400 naming the field: the schema, an `api_key_env`
    outside EVALHUB_BACKEND_SECRET_ENV_PREFIX, a `base_url` on a refused address, a checkpoint
    `path` outside EVALHUB_MODEL_DIR or missing."""
    try:
        config = backend_config_validate(kind=backend_kind, config=backend_config)
        if config.get("api_key_env"):
            api_key_env_check(name=config["api_key_env"], prefix=settings.EVALHUB_BACKEND_SECRET_ENV_PREFIX)
        if "path" in config:
            resolved = checkpoint_path_resolve(
                path=config["path"], model_dir=Path(settings.EVALHUB_MODEL_DIR)
            )
            if not resolved.exists():
                raise BackendConfigError(
                    "backend_config.path", reason_of(BackendConfigCode.NO_CHECKPOINT, path=str(resolved))
                )
    except BackendConfigError as exc:
        raise ApplicationError(
            reason_of(VersionsCode.BACKEND_CONFIG_INVALID, field=exc.field, problem=exc.message),
            code="invalid_backend_config",
            fields={exc.field: [exc.message]},
        ) from None
    if "base_url" in config:
        outbound_url_check(url=config["base_url"], field="backend_config.base_url")
    return config


def model_version_serving_url_check(*, backend_kind: str, backend_config: dict, serving_url: str) -> None:
    """An `openai` version serves where the gate calls it: its serving address is empty (its
    base_url) or that base_url; another one is refused (400 naming `serving_url`). Other kinds are
    served by the model server at any allowed address, which must announce the version's config hash
    (`registry.services.serving`)."""
    if backend_kind != ModelVersion.BackendKind.OPENAI or not serving_url:
        return
    base_url = backend_config.get("base_url", "")
    if serving_url.rstrip("/") != base_url.rstrip("/"):
        raise ApplicationError(
            reason_of(VersionsCode.SERVING_URL_NOT_GATED, url=serving_url, base=base_url),
            fields={"serving_url": [reason_of(VersionsCode.SERVING_URL_NOTE, base=base_url)]},
        )


@transaction.atomic
def model_version_register(
    *,
    family: str,
    label: str,
    backend_kind: str,
    backend_config: dict,
    actor: Actor,
    api_key: str = "",
    baseline: ModelVersion | None = None,
    description: str = "",
    is_demo: bool = False,
    serving_url: str = "",
) -> ModelVersion:
    """A new version, `registered`: registration never sets a status. Production is reached only
    through a release decision (`gate.services.decisions`), the incumbent's included."""
    actor_require_role(actor, WRITE_ROLES, action="register a model version")
    config = model_version_config_check(backend_kind=backend_kind, backend_config=backend_config)
    if serving_url:
        outbound_url_check(url=serving_url, field="serving_url")
        model_version_serving_url_check(
            backend_kind=backend_kind, backend_config=config, serving_url=serving_url
        )
    if baseline is not None and baseline.family != family:
        raise ApplicationError(
            reason_of(VersionsCode.BASELINE_OTHER_FAMILY, ref=baseline.ref, family=family),
            fields={"baseline": [reason_of(VersionsCode.BASELINE_SAME_FAMILY_NOTE)]},
        )
    version = ModelVersion(
        family=family,
        label=label,
        backend_kind=backend_kind,
        backend_config=config,
        api_key_encrypted=secret_encrypt(plain=api_key),
        baseline=baseline,
        description=description,
        is_demo=is_demo,
        serving_url=serving_url,
        created_by=actor_user(actor),
    )
    try:
        version.full_clean(
            exclude=["created_by", "baseline"], validate_unique=False, validate_constraints=False
        )
    except ValidationError as exc:
        raise ApplicationError(reason_of(VersionsCode.INVALID), fields=exc.message_dict) from None
    try:
        with transaction.atomic():
            version.save()
    except IntegrityError:
        raise ApplicationError(
            reason_of(VersionsCode.DUPLICATE, family=family, label=label),
            code="duplicate",
            fields={"label": [reason_of(VersionsCode.DUPLICATE_NOTE, family=family, label=label)]},
            status_code=409,
        ) from None
    audit_record(
        actor=actor, action=AuditAction.MODEL_VERSION_REGISTER, target=version, after=_snapshot(version)
    )
    return version


# What an evaluation looked at: once a version has left `registered` or passed an offline gate, its
# model (backend kind and config), its baseline and where it serves stay as they were; a changed model
# or address is a new version.
EVALUATED_FIELDS = ("backend_kind", "backend_config", "baseline", "serving_url")


def model_version_is_evaluated(*, version: ModelVersion) -> bool:
    return version.status != Status.REGISTERED or version.offline_gate_passed_at is not None


def model_version_edit_check(
    *,
    version: ModelVersion,
    actor: Actor,
    backend_kind: str,
    backend_config: dict,
    baseline: ModelVersion | None,
) -> dict:
    """The edit's backend config with defaults filled, or the reason it is refused (400/409 naming
    the field): the registration checks, and no change of what an evaluation covered."""
    actor_require_role(actor, WRITE_ROLES, action="edit a model version")
    config = model_version_config_check(backend_kind=backend_kind, backend_config=backend_config)
    if model_version_is_evaluated(version=version):
        proposed = {"backend_kind": backend_kind, "backend_config": config, "baseline": baseline}
        changed = [f for f in EVALUATED_FIELDS if f in proposed and proposed[f] != getattr(version, f)]
        if changed:
            status = Term(version.status)
            raise ApplicationError(
                reason_of(VersionsCode.EVALUATED, ref=version.ref, status=status),
                code="evaluated_version",
                fields={f: [reason_of(VersionsCode.EVALUATED_NOTE, status=status)] for f in changed},
                status_code=409,
            )
    if baseline is not None and (baseline.family != version.family or baseline.pk == version.pk):
        raise ApplicationError(
            reason_of(VersionsCode.BASELINE_REFUSED, baseline=baseline.ref, ref=version.ref),
            fields={"baseline": [reason_of(VersionsCode.BASELINE_OTHER_NOTE)]},
        )
    return config


@transaction.atomic
def model_version_edit(
    *,
    version: ModelVersion,
    actor: Actor,
    backend_kind: str,
    backend_config: dict,
    baseline: ModelVersion | None,
    description: str,
    is_demo: bool,
    api_key: str | None = None,
) -> ModelVersion:
    """Change a version's description, demo flag, API key (None keeps it) and, until it is evaluated,
    its backend and baseline. Audited with what changed (never the key itself)."""
    locked = ModelVersion.objects.select_for_update().get(pk=version.pk)
    config = model_version_edit_check(
        version=locked,
        actor=actor,
        backend_kind=backend_kind,
        backend_config=backend_config,
        baseline=baseline,
    )
    before = {**_snapshot(locked), "description": locked.description, "is_demo": locked.is_demo}
    locked.backend_kind, locked.backend_config, locked.baseline = backend_kind, config, baseline
    locked.description, locked.is_demo = description, is_demo
    if api_key is not None:
        locked.api_key_encrypted = secret_encrypt(plain=api_key)
    after = {**_snapshot(locked), "description": description, "is_demo": is_demo}
    changed = {k for k in after if after[k] != before[k]}
    if api_key is not None:
        changed.add("api_key")
    if changed:
        locked.save()
        audit_record(
            actor=actor,
            action=AuditAction.MODEL_VERSION_EDIT,
            target=locked,
            before={k: before[k] for k in sorted(changed - {"api_key"})},
            after={
                **{k: after[k] for k in sorted(changed - {"api_key"})},
                **({"api_key": "changed"} if "api_key" in changed else {}),
            },
        )
    return locked


def model_version_history(*, version: ModelVersion) -> list[str]:
    """What refers to the version (gate runs, decisions, experiments, challengers...) or happened to
    it beyond its registration; empty for a version nothing has used yet."""
    found = [
        rel.related_model._meta.verbose_name_plural
        for rel in ModelVersion._meta.related_objects
        if rel.related_model._default_manager.filter(**{rel.field.name: version}).exists()
    ]
    if version.status != Status.REGISTERED:
        found.append(f"status {version.status}")
    if (
        AuditLog.objects.filter(target_type=ModelVersion._meta.label_lower, target_id=str(version.pk))
        .exclude(action=AuditAction.MODEL_VERSION_REGISTER)
        .exists()
    ):
        found.append("audit rows")
    return sorted(set(found))


@transaction.atomic
def model_version_delete(*, version: ModelVersion, actor: Actor, reason: str = "") -> None:
    """Delete a registration nothing has used (a typo, say): refused (409) for a version with history,
    whose audit trail and results must stay. The audit row of the deletion stays too."""
    actor_require_role(actor, WRITE_ROLES, action="delete a model version")
    locked = ModelVersion.objects.select_for_update().get(pk=version.pk)
    history = model_version_history(version=locked)
    if history:
        raise ApplicationError(
            reason_of(VersionsCode.HAS_HISTORY, ref=locked.ref, history=history),
            code="has_history",
            fields={"version": [reason_of(VersionsCode.HAS_HISTORY_NOTE, history=history)]},
            status_code=409,
        )
    audit_record(
        actor=actor,
        action=AuditAction.MODEL_VERSION_DELETE,
        target=locked,
        before=_snapshot(locked),
        reason=reason,
    )
    locked.delete()


@transaction.atomic
def model_version_transition(
    *, version: ModelVersion, to_status: str, actor: Actor, reason: str = ""
) -> ModelVersion:
    """Move a version along its lifecycle; refuses any step not in TRANSITIONS."""
    actor_require_role(actor, RELEASE_ROLES, action="move a version's status")
    locked = ModelVersion.objects.select_for_update().get(pk=version.pk)
    if to_status not in Status.values:
        raise ApplicationError(
            reason_of(VersionsCode.UNKNOWN_STATUS, status=to_status),
            fields={"status": [reason_of(CommonCode.ONE_OF, choices=list(Status.values))]},
        )
    if to_status not in TRANSITIONS[locked.status]:
        status = Term(locked.status)
        allowed = sorted(TRANSITIONS[locked.status])
        note = (
            reason_of(VersionsCode.ALLOWED_FROM, status=status, allowed=[Term(to) for to in allowed])
            if allowed
            else reason_of(VersionsCode.ALLOWED_NONE, status=status)
        )
        raise ApplicationError(
            reason_of(VersionsCode.ILLEGAL_TRANSITION, ref=locked.ref, status=status, to=Term(to_status)),
            code="illegal_transition",
            fields={"status": [note]},
            status_code=409,
        )
    before = locked.status
    locked.status = to_status
    locked.save(update_fields=["status", "updated_at"])
    audit_record(
        actor=actor,
        action=AuditAction.MODEL_VERSION_TRANSITION,
        target=locked,
        before={"status": before},
        after={"status": to_status},
        reason=reason,
    )
    version.status = locked.status
    return locked


def model_version_promote(*, version: ModelVersion, actor: Actor, reason: str) -> list[ModelVersion]:
    """`version` serves production now: it becomes `promoted` and the family's other promoted
    versions `retired` (audited each). Only an approved version is promoted (409 otherwise).
    Returns the versions retired. Call it inside the transaction that moves the traffic."""
    if version.status not in APPROVED_STATUSES:
        raise ApplicationError(
            reason_of(VersionsCode.NOT_APPROVED, ref=version.ref, status=Term(version.status)),
            code="not_approved",
            fields={"candidate": [reason_of(VersionsCode.NO_APPROVAL_NOTE, ref=version.ref)]},
            status_code=409,
        )
    retired = list(
        ModelVersion.objects.select_for_update()
        .filter(family=version.family, status=Status.PROMOTED)
        .exclude(pk=version.pk)
    )
    for old in retired:
        model_version_transition(
            version=old, to_status=Status.RETIRED, actor=actor, reason=f"replaced by {version.ref}"
        )
    if version.status != Status.PROMOTED:
        model_version_transition(version=version, to_status=Status.PROMOTED, actor=actor, reason=reason)
    return retired


def model_version_incumbent_promote(*, version: ModelVersion, actor: Actor, reason: str) -> ModelVersion:
    """`version`, registered and never cleared, becomes its family's production incumbent: the last
    step of a confirmed incumbent declaration (`gate.services.decisions`), whose decision must exist
    already (`gate.services.clearance` checks). Refused (409) once the family has a promoted version."""
    actor_require_role(actor, RELEASE_ROLES, action="declare a production incumbent")
    locked = ModelVersion.objects.select_for_update().get(pk=version.pk)
    serving = model_version_in_production(family=locked.family)
    if serving is not None or locked.status != Status.REGISTERED:
        why = (
            reason_of(VersionsCode.INCUMBENT_SERVES, serving=serving.ref)
            if serving
            else reason_of(VersionsCode.INCUMBENT_STATUS, ref=locked.ref, status=Term(locked.status))
        )
        raise ApplicationError(
            reason_of(VersionsCode.INCUMBENT_REFUSED, family=locked.family, ref=locked.ref, why=why),
            code="illegal_transition",
            fields={"version": [why]},
            status_code=409,
        )
    locked.status = Status.PROMOTED
    locked.save(update_fields=["status", "updated_at"])
    audit_record(
        actor=actor,
        action=AuditAction.MODEL_VERSION_TRANSITION,
        target=locked,
        before={"status": Status.REGISTERED},
        after={"status": Status.PROMOTED},
        reason=reason,
    )
    version.status = locked.status
    return locked


def model_version_offline_gate_record(*, version: ModelVersion, gate_run_id: int, actor: Actor) -> None:
    """Record that a gate run's offline layers (clean accuracy and robustness) passed for `version`."""
    now = timezone.now()
    ModelVersion.objects.filter(pk=version.pk).update(
        offline_gate_run_id=gate_run_id, offline_gate_passed_at=now
    )
    version.offline_gate_run_id, version.offline_gate_passed_at = gate_run_id, now
    audit_record(
        actor=actor,
        action=AuditAction.MODEL_VERSION_OFFLINE_GATE_PASSED,
        target=version,
        after={"gate_run": gate_run_id},
    )


@transaction.atomic
def model_version_serving_set(
    *, version: ModelVersion, serving_url: str, actor: Actor, reason: str = ""
) -> ModelVersion:
    """Point live traffic (the canary proxy) at `serving_url`, an OpenAI-compatible base URL: release
    managers only, audited, and only before the version is evaluated (409 naming `serving_url` after:
    where a version serves is part of what its gate judged; serving elsewhere is a new version)."""
    from django.core.validators import URLValidator

    actor_require_role(actor, RELEASE_ROLES, action="set a version's serving address")
    locked = ModelVersion.objects.select_for_update().get(pk=version.pk)
    if serving_url:
        try:
            URLValidator(schemes=["http", "https"])(serving_url)
        except ValidationError:
            raise ApplicationError(
                reason_of(VersionsCode.SERVING_URL_NOT_HTTP),
                fields={"serving_url": [reason_of(VersionsCode.SERVING_URL_HTTP_NOTE)]},
            ) from None
        outbound_url_check(url=serving_url, field="serving_url")
        model_version_serving_url_check(
            backend_kind=locked.backend_kind, backend_config=locked.backend_config, serving_url=serving_url
        )
    if serving_url == locked.serving_url:
        return locked
    if model_version_is_evaluated(version=locked):
        status = Term(locked.status)
        raise ApplicationError(
            reason_of(VersionsCode.SERVING_URL_EVALUATED, ref=locked.ref, status=status),
            code="evaluated_version",
            fields={"serving_url": [reason_of(VersionsCode.EVALUATED_NOTE, status=status)]},
            status_code=409,
        )
    before = locked.serving_url
    locked.serving_url = serving_url
    locked.save(update_fields=["serving_url", "updated_at"])
    version.serving_url = serving_url
    audit_record(
        actor=actor,
        action=AuditAction.MODEL_VERSION_SERVING_SET,
        target=locked,
        before={"serving_url": before},
        after={"serving_url": serving_url},
        reason=reason,
    )
    return locked


def model_version_config_hash(*, version: ModelVersion) -> str:
    """The hash of the version's model (backend kind and config): what its model server announces."""
    return backend_config_hash(kind=version.backend_kind, config=version.backend_config)


def model_version_serving_url(*, version: ModelVersion) -> str:
    """Where live traffic for `version` goes; empty when it is not served."""
    if version.serving_url:
        return version.serving_url
    if version.backend_kind == ModelVersion.BackendKind.OPENAI:
        return version.backend_config.get("base_url", "")
    return ""


def model_version_serving_model(*, version: ModelVersion) -> str:
    """The `model` to ask for at the serving URL: an `openai` backend's own, else the version's ref
    (what `manage.py serve_model` answers to)."""
    if version.backend_kind == ModelVersion.BackendKind.OPENAI:
        return version.backend_config["model"]
    return version.ref


def model_version_api_key(*, version: ModelVersion) -> str:
    """The version's API key in clear, for the request to its endpoint only: never log or return
    it. A key the configured EVALHUB_SECRETS_KEY cannot decrypt is a BackendError (not transient)."""
    from engines.backends.base import BackendError

    try:
        return secret_decrypt(token=version.api_key_encrypted)
    except SecretUnreadableError as exc:
        raise BackendError(f"{version.ref}: {exc}") from None


def model_version_backend(*, version: ModelVersion, cached: bool = True) -> ModelBackend:
    """The version's model, loaded as its backend says (checkpoints under EVALHUB_MODEL_DIR; an
    endpoint through the outbound policy). Cached per process by default, keyed on everything
    that defines it."""
    from engines.backends import backend_build, backend_cached  # torch: only where models run

    spec = {
        "kind": version.backend_kind,
        "config": version.backend_config,
        "api_key": model_version_api_key(version=version),
        "model_dir": Path(settings.EVALHUB_MODEL_DIR),
        "outbound": outbound_policy(),
        "api_key_env_prefix": settings.EVALHUB_BACKEND_SECRET_ENV_PREFIX,
    }
    if not cached:
        return backend_build(**spec)
    key = (
        version.pk,
        version.backend_kind,
        json.dumps(version.backend_config, sort_keys=True),
        version.api_key_encrypted,
        spec["model_dir"],
        spec["outbound"],
        spec["api_key_env_prefix"],
    )
    return backend_cached(key=key, **spec)
