from __future__ import annotations

from enum import StrEnum

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from engines.reasons import Reason, gettext_noop, reason, wordings_register
from registry.actors import Actor, actor_require_role, actor_user
from registry.errors import ApplicationError, CommonCode
from registry.models import AuditAction, EvalItem, EvalSuite
from registry.roles import WRITE_ROLES
from registry.services.audit import audit_record
from registry.suite_format import (
    SuiteFormatError,
    SuiteItem,
    suite_content_hash,
    suite_parse_csv,
    suite_parse_jsonl,
    suite_parse_records,
)

FORMATS = {"jsonl": suite_parse_jsonl, "csv": suite_parse_csv}


class SuitesCode(StrEnum):
    UNKNOWN_FORMAT = "suites.unknown_format"
    UNREADABLE = "suites.unreadable"
    INVALID = "suites.invalid"
    CONCURRENT = "suites.concurrent"


wordings_register(
    {
        SuitesCode.UNKNOWN_FORMAT: gettext_noop("Unknown format '{format}'."),
        SuitesCode.UNREADABLE: gettext_noop(
            "The suite could not be read: {problems} problem(s); first: {first}: {problem}"
        ),
        SuitesCode.INVALID: gettext_noop("Invalid suite."),
        SuitesCode.CONCURRENT: gettext_noop("Suite {name} was changed concurrently; retry."),
    }
)


def suite_items_parse(
    *, content: bytes | None = None, fmt: str = "jsonl", records: object = None, field: str = "file"
) -> list[SuiteItem]:
    """Parse an upload (bytes in `fmt`) or a JSON array of records; errors name line and field."""
    try:
        if records is not None:
            return suite_parse_records(records)
        if fmt not in FORMATS:
            raise ApplicationError(
                reason(SuitesCode.UNKNOWN_FORMAT, format=fmt),
                fields={"format": [reason(CommonCode.ONE_OF, choices=sorted(FORMATS))]},
            )
        return FORMATS[fmt](content or b"", max_depth=settings.EVALHUB_JSON_MAX_DEPTH)
    except SuiteFormatError as exc:
        fields: dict[str, list[Reason | str]] = {}
        for issue in exc.issues:
            key = issue.key if records is not None else f"{field}: {issue.key}"
            fields.setdefault(key, []).append(issue.message)
        raise ApplicationError(
            reason(
                SuitesCode.UNREADABLE,
                problems=len(exc.issues),
                first=exc.issues[0].key,
                problem=exc.issues[0].message,
            ),
            code="invalid_suite",
            fields=fields,
        ) from None


@transaction.atomic
def eval_suite_import(
    *,
    name: str,
    items: list[SuiteItem],
    actor: Actor,
    description: str = "",
    is_demo: bool = False,
    action: AuditAction = AuditAction.EVAL_SUITE_IMPORT,
    audit_after: dict | None = None,
) -> tuple[EvalSuite, bool]:
    """Store `items` as the next version of suite `name`. Suites are never edited: new content
    makes a new version, and the same content as the latest version returns that version.
    Returns (suite, created). The audit row has `action`, and `audit_after` beside the version's
    figures (a suite built by another service says how)."""
    actor_require_role(actor, WRITE_ROLES, action="upload a suite")
    content_hash = suite_content_hash(items)
    latest = EvalSuite.objects.filter(name=name).order_by("-version").first()
    if latest is not None and latest.content_hash == content_hash:
        return latest, False
    next_version = (EvalSuite.objects.filter(name=name).aggregate(v=Max("version"))["v"] or 0) + 1
    suite = EvalSuite(
        name=name,
        version=next_version,
        description=description,
        content_hash=content_hash,
        item_count=len(items),
        is_demo=is_demo,
        created_by=actor_user(actor),
    )
    try:
        suite.full_clean(exclude=["created_by"], validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        raise ApplicationError(reason(SuitesCode.INVALID), fields=exc.message_dict) from None
    try:
        with transaction.atomic():
            suite.save()
    except IntegrityError:
        raise ApplicationError(
            reason(SuitesCode.CONCURRENT, name=name), code="conflict", status_code=409
        ) from None
    EvalItem.objects.bulk_create(
        [
            EvalItem(
                suite=suite,
                position=position,
                external_id=item.id,
                input=item.input,
                label=item.label,
                reference=item.reference,
                language=item.language,
                tags=list(item.tags),
                metadata=item.metadata,
            )
            for position, item in enumerate(items)
        ],
        batch_size=1000,
    )
    audit_record(
        actor=actor,
        action=action,
        target=suite,
        after={
            "version": suite.version,
            "items": suite.item_count,
            "content_hash": content_hash,
            **(audit_after or {}),
        },
    )
    return suite, True


def eval_suite_lock(*, suite: EvalSuite) -> None:
    """Mark the suite as used by a gate run: from now on it is never edited (idempotent)."""
    EvalSuite.objects.filter(pk=suite.pk, locked_at__isnull=True).update(locked_at=timezone.now())
