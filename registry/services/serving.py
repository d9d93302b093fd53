"""What serves a version is what its gate judged. An `openai` version serves at the endpoint the gate
calls (its base_url: `model_version_serving_url_check`); a `builtin` or `hf` version is judged
in-process and served by the reference model server (`manage.py serve_model`), which announces the
hash of the version's backend config on `/v1/models`. The gate (before its model layers), the canary
(when an experiment starts) and the proxy (on its first call per process) check that announcement."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import httpx

from engines.outbound import OutboundRefusedError, outbound_client
from engines.reasons import Reason, gettext_noop, reason, wordings_register
from registry.models import ModelVersion
from registry.outbound import outbound_policy
from registry.services.versions import model_version_config_hash

CHECK_TIMEOUT_S = 5.0
SHOWN = 12  # hex digits of a hash in a message, as git shows commits


class ServingCode(StrEnum):
    ELSEWHERE = "serving.elsewhere"
    NO_ANSWER = "serving.no_answer"
    OTHER_MODEL = "serving.other_model"


wordings_register(
    {
        ServingCode.ELSEWHERE: gettext_noop(
            "{ref} serves at {url}, not at the endpoint its gate calls ({base})"
        ),
        ServingCode.NO_ANSWER: gettext_noop("{url} did not answer: {error}"),
        ServingCode.OTHER_MODEL: gettext_noop("{url} serves config hash {announced}, not {ref}'s {expected}"),
    }
)


@dataclass(frozen=True)
class ServingCheck:
    """The answer of a version's serving address. `mismatch`: it answered, and not as the version's
    model (`problem` names the address and both hashes); `problem` alone: it did not answer."""

    url: str
    expected: str
    announced: tuple[str, ...]
    mismatch: bool
    problem: Reason | None = None


def model_version_serving_verify(
    *, version: ModelVersion, timeout: float = CHECK_TIMEOUT_S
) -> ServingCheck | None:
    """Check what `version`'s serving address serves; None when there is nothing to check (no serving
    address, or an `openai` version served at the endpoint the gate calls)."""
    expected = model_version_config_hash(version=version)
    if version.backend_kind == ModelVersion.BackendKind.OPENAI:
        base_url = version.backend_config.get("base_url", "")
        if not version.serving_url or version.serving_url.rstrip("/") == base_url.rstrip("/"):
            return None
        problem = reason(ServingCode.ELSEWHERE, ref=version.ref, url=version.serving_url, base=base_url)
        return ServingCheck(
            url=version.serving_url, expected=expected, announced=(), mismatch=True, problem=problem
        )
    if not version.serving_url:
        return None
    url = f"{version.serving_url.rstrip('/')}/models"
    try:
        with outbound_client(policy=outbound_policy(), timeout=timeout) as client:
            response = client.get(url)
    except (httpx.TransportError, OutboundRefusedError) as exc:
        problem = reason(ServingCode.NO_ANSWER, url=url, error=f"{type(exc).__name__}: {exc}")
        return ServingCheck(
            url=version.serving_url, expected=expected, announced=(), mismatch=False, problem=problem
        )
    announced = _announced(response)
    if expected in announced:
        return ServingCheck(url=version.serving_url, expected=expected, announced=announced, mismatch=False)
    said = ", ".join(h[:SHOWN] for h in announced if h) or "none"
    problem = reason(
        ServingCode.OTHER_MODEL,
        url=version.serving_url,
        announced=said,
        ref=version.ref,
        expected=expected[:SHOWN],
    )
    return ServingCheck(
        url=version.serving_url, expected=expected, announced=announced, mismatch=True, problem=problem
    )


def _announced(response: httpx.Response) -> tuple[str, ...]:
    """The config hashes a `/v1/models` answer announces (none from anything but the model server)."""
    try:
        models = response.json().get("data") if response.is_success else None
    except (ValueError, AttributeError):
        return ()
    if not isinstance(models, list):
        return ()
    return tuple(str(m.get("evalhub_config_hash") or "") for m in models if isinstance(m, dict))
