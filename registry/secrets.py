"""Secrets at rest: a backend's API key is stored as a Fernet token (AES-128-CBC + HMAC-SHA256,
from `cryptography`) under EVALHUB_SECRETS_KEY, and decrypted only where a version's endpoint is
called. The setting holds one Fernet key, or several separated by commas for rotation: the first
encrypts, any of them decrypts."""

from __future__ import annotations

from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class SecretUnreadableError(Exception):
    """A stored secret that none of the configured keys decrypts."""


@lru_cache(maxsize=4)
def _fernet(keys: str) -> MultiFernet:
    parts = [key.strip() for key in keys.split(",") if key.strip()]
    if not parts:
        raise ImproperlyConfigured("EVALHUB_SECRETS_KEY must be set to store API keys.")
    try:
        return MultiFernet([Fernet(key) for key in parts])
    except ValueError:
        raise ImproperlyConfigured(
            "EVALHUB_SECRETS_KEY must be Fernet keys (32 url-safe base64 bytes; "
            "`python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`)."
        ) from None


def secret_encrypt(*, plain: str) -> str:
    """The token to store for `plain`; empty stays empty (no secret)."""
    if not plain:
        return ""
    return _fernet(settings.EVALHUB_SECRETS_KEY).encrypt(plain.encode()).decode()


def secret_decrypt(*, token: str) -> str:
    if not token:
        return ""
    try:
        return _fernet(settings.EVALHUB_SECRETS_KEY).decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadableError(
            "a stored API key cannot be decrypted with EVALHUB_SECRETS_KEY (was the key changed?)"
        ) from None
