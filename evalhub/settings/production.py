"""Production: secrets have no default, so a missing one stops the process at start."""

from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import EVALHUB_SECRETS_KEY, EVALHUB_WEBHOOK_SECRET, EVALHUB_WEBHOOK_URL, SECRET_KEY, env_bool

if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set in the environment for production.")
if not EVALHUB_SECRETS_KEY:
    raise ImproperlyConfigured(
        "EVALHUB_SECRETS_KEY (a Fernet key) must be set in the environment for production."
    )
for _key in EVALHUB_SECRETS_KEY.split(","):
    try:
        Fernet(_key.strip())
    except ValueError:
        raise ImproperlyConfigured(
            "EVALHUB_SECRETS_KEY must be Fernet keys (32 url-safe base64 bytes)."
        ) from None
if EVALHUB_WEBHOOK_URL and not EVALHUB_WEBHOOK_SECRET:
    raise ImproperlyConfigured("EVALHUB_WEBHOOK_SECRET must be set when EVALHUB_WEBHOOK_URL is.")
if EVALHUB_WEBHOOK_URL and not EVALHUB_WEBHOOK_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured("EVALHUB_WEBHOOK_URL must be an http(s) URL.")

DEBUG = env_bool("DEBUG", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
SECURE_CONTENT_TYPE_NOSNIFF = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
