"""Settings shared by every environment. Everything that differs per deployment comes from
the environment; the defaults are embedded ones (SQLite, a broker on the filesystem) so that
a fresh clone runs with no servers."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("EVALHUB_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [part.strip() for part in os.environ.get(name, default).split(",") if part.strip()]


def fernet_key_derive(secret: str) -> str:
    """A Fernet key derived from `secret` (local and test settings: from SECRET_KEY)."""
    return base64.urlsafe_b64encode(hashlib.sha256(f"evalhub-secrets:{secret}".encode()).digest()).decode()


# ---------------------------------------------------------------------------------------------
# Core
# ---------------------------------------------------------------------------------------------
SECRET_KEY = os.environ.get("SECRET_KEY", "")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

DJANGO_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
]
THIRD_PARTY_APPS = [
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # django-axes, the sign-in throttle: failed password sign-ins per account and per address.
    "evalhub.apps.SignInThrottleConfig",
]
LOCAL_APPS = [
    "registry.apps.RegistryConfig",
    "canary.apps.CanaryConfig",
    "gate.apps.GateConfig",
    "evalhub.apps.EvalhubConfig",
]
# Apps that bring gate layers of their own (a package whose `gate_layers` module lists them, see
# docs/adding-a-layer.md), installed without editing this file.
LAYER_APPS = env_list("EVALHUB_LAYER_APPS", "")
INSTALLED_APPS = DJANGO_APPS + THIRD_PARTY_APPS + LOCAL_APPS + LAYER_APPS

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The page language: the remembered switch (a cookie), else the browser's Accept-Language.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last: turns a locked-out sign-in into the lockout page (evalhub.throttle.signin_locked_out).
    "axes.middleware.AxesMiddleware",
]
# Axes first: a locked-out account or address is refused before its password is even checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "evalhub.urls"
WSGI_APPLICATION = "evalhub.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# ---------------------------------------------------------------------------------------------
# Database: DATABASE_URL, else a SQLite file under var/
# ---------------------------------------------------------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'evalhub.sqlite3'}"
if DATABASE_URL.startswith("sqlite:///"):
    Path(DATABASE_URL.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)


def database_config(url: str) -> dj_database_url.DBConfig:
    config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # Web server and worker write the same file: WAL lets readers go on during a write,
        # IMMEDIATE transactions and a timeout turn lock contention into waiting, not errors.
        config["CONN_MAX_AGE"] = 0
        config["OPTIONS"] = {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
        }
    return config


DATABASES = {"default": database_config(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# Pages, messages and the admin in English or Simplified Chinese: the switch in the page header
# (remembered in a cookie for a year), else the browser's Accept-Language. Catalogues live in
# locale/ (`make messages` compiles them; `make run` and `make test` do it too).
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
LANGUAGE_COOKIE_AGE = 365 * 24 * 3600
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# EvalHub's own sign-in for every role that may read the pages; the admin's stays for staff.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"  # which sends a signed-out visitor on to the sign-in
# A signed-in session ends this long after sign-in (seconds; default 12 h), or when the browser
# closes with EVALHUB_SESSION_EXPIRE_AT_BROWSER_CLOSE=1.
SESSION_COOKIE_AGE = int(os.environ.get("EVALHUB_SESSION_SECONDS", 12 * 3600))
SESSION_EXPIRE_AT_BROWSER_CLOSE = env_bool("EVALHUB_SESSION_EXPIRE_AT_BROWSER_CLOSE", False)

# ---------------------------------------------------------------------------------------------
# Sign-in throttle (django-axes) and the bad-token throttle
# ---------------------------------------------------------------------------------------------
# The client's address: REMOTE_ADDR, or with N trusted reverse proxies in front, the address the
# N-th one (from the right of X-Forwarded-For) saw. Both throttles count per this address.
EVALHUB_CLIENT_ADDRESS_PROXIES = int(os.environ.get("EVALHUB_CLIENT_ADDRESS_PROXIES", 0))
# Password sign-in (/login/ and the admin's): after this many failures for one account, or from one
# address, that account or address is refused for the cool-off; a success clears the account's count.
AXES_FAILURE_LIMIT = int(os.environ.get("EVALHUB_SIGNIN_FAILURE_LIMIT", 5))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("EVALHUB_SIGNIN_COOLOFF_MINUTES", 15)))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # each on its own: per account, per address
AXES_RESET_ON_SUCCESS = True
# Attempts during a lockout do not prolong it: the cool-off runs from the lockout.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_CLIENT_IP_CALLABLE = "evalhub.throttle.client_address"
AXES_LOCKOUT_CALLABLE = "evalhub.throttle.signin_locked_out"
AXES_USERNAME_FORM_FIELD = "username"
AXES_VERBOSE = False
# API tokens: after this many invalid or revoked tokens from one address within the window, that
# address is answered 429 (with Retry-After) for the cool-off, whatever token it sends.
EVALHUB_TOKEN_FAILURE_LIMIT = int(os.environ.get("EVALHUB_TOKEN_FAILURE_LIMIT", 20))
EVALHUB_TOKEN_FAILURE_WINDOW_SECONDS = int(os.environ.get("EVALHUB_TOKEN_FAILURE_WINDOW_SECONDS", 300))
EVALHUB_TOKEN_COOLOFF_SECONDS = int(os.environ.get("EVALHUB_TOKEN_COOLOFF_SECONDS", 900))
# The bad-token counts live in this cache: Redis (EVALHUB_CACHE_URL, by default the Celery broker
# when it is Redis) so every web process counts together; else each process counts on its own.
_broker = os.environ.get("CELERY_BROKER_URL", "")
EVALHUB_CACHE_URL = os.environ.get("EVALHUB_CACHE_URL", _broker if _broker.startswith("redis") else "")
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": EVALHUB_CACHE_URL}
        if EVALHUB_CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# ---------------------------------------------------------------------------------------------
# REST API
# ---------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "evalhub.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["evalhub.permissions.HasRole"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON bodies only, unless a view takes uploads (suites, probe sets: multipart too).
    "DEFAULT_PARSER_CLASSES": ["evalhub.api.parsers.JSONParser"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "evalhub.api.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "evalhub.api.schema.EvalHubAutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "EvalHub API",
    "DESCRIPTION": "Model registry, gate runs and release decisions for LLM model versions.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and the docs pages need a reading role, as every other read does.
    "SERVE_PERMISSIONS": ["evalhub.permissions.HasRole"],
    # Swagger UI and Redoc from the installed sidecar package: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "ModelVersionStatusEnum": "registry.models.ModelVersion.Status",
        "GateRunStatusEnum": "gate.models.GateRun.Status",
    },
}

# Uploads: suites larger than this are refused with 413 naming the field.
EVALHUB_MAX_UPLOAD_BYTES = int(os.environ.get("EVALHUB_MAX_UPLOAD_BYTES", 20 * 1024 * 1024))
DATA_UPLOAD_MAX_MEMORY_SIZE = EVALHUB_MAX_UPLOAD_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = EVALHUB_MAX_UPLOAD_BYTES

# JSON bodies (and JSON in form fields) nested deeper than this are refused with 400 before parsing.
EVALHUB_JSON_MAX_DEPTH = int(os.environ.get("EVALHUB_JSON_MAX_DEPTH", 64))

# Checkpoints (`hf`, `builtin` backends) live in this folder: relative paths are resolved against
# it, and a path outside it (after `..` and symlinks) is refused.
EVALHUB_MODEL_DIR = Path(os.environ.get("EVALHUB_MODEL_DIR", VAR_DIR / "models"))
# Labelled answers that an answer judge is measured on (policy `answer_judge_labels`) live in this
# folder: a path is resolved against it, and one outside it (after `..` and symlinks) is refused.
EVALHUB_LABELS_DIR = Path(os.environ.get("EVALHUB_LABELS_DIR", VAR_DIR / "labels"))

# A running gate run whose worker has not reported for this long is considered lost.
EVALHUB_GATE_RUN_STALE_SECONDS = int(os.environ.get("EVALHUB_GATE_RUN_STALE_SECONDS", 300))
EVALHUB_GATE_RUN_MAX_ATTEMPTS = int(os.environ.get("EVALHUB_GATE_RUN_MAX_ATTEMPTS", 3))
# Outgoing webhooks (canary rollbacks, verdicts, decisions): JSON POSTs signed with HMAC-SHA256
# over the delivery's timestamp and body.
EVALHUB_WEBHOOK_URL = os.environ.get("EVALHUB_WEBHOOK_URL", "")
EVALHUB_WEBHOOK_SECRET = os.environ.get("EVALHUB_WEBHOOK_SECRET", "")
# Backend API keys are stored encrypted with this Fernet key (several, comma-separated: the first
# encrypts, any decrypts). Production requires it; local and test settings derive one.
EVALHUB_SECRETS_KEY = os.environ.get("EVALHUB_SECRETS_KEY", "")
# An `openai` backend's `api_key_env` must name a variable starting with this (empty: none).
EVALHUB_BACKEND_SECRET_ENV_PREFIX = os.environ.get(
    "EVALHUB_BACKEND_SECRET_ENV_PREFIX", "EVALHUB_BACKEND_SECRET_"
)
# Outbound HTTP (backends' base_url, serving URLs, the webhook) goes to public addresses only:
# never loopback, private, link-local, metadata, multicast or reserved ones, unless the host
# (by name) or its network is allowed here, comma-separated.
EVALHUB_OUTBOUND_ALLOW_HOSTS = env_list("EVALHUB_OUTBOUND_ALLOW_HOSTS", "")
EVALHUB_OUTBOUND_ALLOW_NETWORKS = env_list("EVALHUB_OUTBOUND_ALLOW_NETWORKS", "")
# host -> its addresses, in place of DNS (tests only; None: socket.getaddrinfo).
EVALHUB_OUTBOUND_RESOLVE = None
# Release decisions: the user who registered a version may not approve it (nor request or confirm
# an override of its gate); rejecting it stays allowed.
EVALHUB_DECISIONS_FORBID_SELF_APPROVAL = env_bool("EVALHUB_DECISIONS_FORBID_SELF_APPROVAL", True)
# Per-process reuse of what the request hot path reads: a checked API token (with its roles),
# and a canary experiment. Revoking a token or changing an experiment applies within that long.
EVALHUB_AUTH_CACHE_SECONDS = float(os.environ.get("EVALHUB_AUTH_CACHE_SECONDS", 10))
EVALHUB_CANARY_CACHE_SECONDS = float(os.environ.get("EVALHUB_CANARY_CACHE_SECONDS", 1))
# Follow-up detector: a user turn whose answer is still missing this long after it is judged `new`.
EVALHUB_FOLLOW_UP_GRACE_SECONDS = int(os.environ.get("EVALHUB_FOLLOW_UP_GRACE_SECONDS", 300))
# Canary telemetry: the most events one POST /api/v1/events may carry.
EVALHUB_EVENTS_MAX_BATCH = int(os.environ.get("EVALHUB_EVENTS_MAX_BATCH", 5000))
# Canary: the most a candidate's share may be (percent) until a gate run of it, under its family's
# policy, passed clean accuracy and robustness.
EVALHUB_CANARY_UNGATED_MAX_PERCENT = float(os.environ.get("EVALHUB_CANARY_UNGATED_MAX_PERCENT", 10))
# An event's timestamp may lie this far outside its experiment's life (creation to end, or now), and
# its arm is checked against the router's within this much of its timestamp: clients' clocks drift.
EVALHUB_EVENTS_CLOCK_SKEW_SECONDS = float(os.environ.get("EVALHUB_EVENTS_CLOCK_SKEW_SECONDS", 300))
# Canary proxy: seconds to wait for a version's answer before the baseline stands in.
EVALHUB_PROXY_TIMEOUT_SECONDS = float(os.environ.get("EVALHUB_PROXY_TIMEOUT_SECONDS", 30))
# Canary shadow traffic (canary.services.shadow): background threads per web process that send the
# mirrored questions, and how many mirrors may wait for them (one more is dropped, and counted).
EVALHUB_SHADOW_WORKERS = int(os.environ.get("EVALHUB_SHADOW_WORKERS", 4))
EVALHUB_SHADOW_QUEUE = int(os.environ.get("EVALHUB_SHADOW_QUEUE", 200))

# Gate cost (gate.cost): the price of an hour of each device kind a model runs on locally, as
# JSON ({"cpu": 0.05, "cuda": 2.5}; a kind not named is unpriced), and the currency prices are in.
EVALHUB_DEVICE_HOUR_PRICE: dict[str, float] = {
    str(kind): float(price)
    for kind, price in json.loads(os.environ.get("EVALHUB_DEVICE_HOUR_PRICE", "{}")).items()
}
if any(price < 0 for price in EVALHUB_DEVICE_HOUR_PRICE.values()):
    raise ValueError("EVALHUB_DEVICE_HOUR_PRICE: a price must not be negative")
EVALHUB_COST_CURRENCY = os.environ.get("EVALHUB_COST_CURRENCY", "USD")

# ---------------------------------------------------------------------------------------------
# Celery: CELERY_BROKER_URL, else kombu's filesystem transport under var/ (no server)
# ---------------------------------------------------------------------------------------------
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or "filesystem://"
if CELERY_BROKER_URL.startswith("filesystem://"):
    # One folder for in and out: the worker reads what the web process writes.
    for folder in ("queue", "control"):
        (BROKER_DIR / folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
else:
    # Redis redelivers an unacknowledged task after this long (a worker died mid-task).
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": int(os.environ.get("CELERY_VISIBILITY_TIMEOUT", 3600))
    }
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True  # results live in the database, not in a result backend
CELERY_TASK_DEFAULT_QUEUE = "cpu"

# Where the proxy's turn events wait for a worker (a Redis stream); by default the Celery broker
# when it is Redis. Empty: the proxy writes them to the database in the request.
EVALHUB_TELEMETRY_REDIS_URL = os.environ.get(
    "EVALHUB_TELEMETRY_REDIS_URL", CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else ""
)
# The stream's key: deployments sharing one Redis database need their own.
EVALHUB_TELEMETRY_STREAM = os.environ.get("EVALHUB_TELEMETRY_STREAM", "evalhub:canary:turns")
CELERY_TASK_SOFT_TIME_LIMIT = int(os.environ.get("CELERY_TASK_SOFT_TIME_LIMIT", 3300))
CELERY_TASK_TIME_LIMIT = int(os.environ.get("CELERY_TASK_TIME_LIMIT", 3600))
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# How long the pages wait for the workers to say which queues they consume (a broadcast; the answer
# is cached for 10 s), so "no worker consumes the gpu queue" is told apart from "waiting". 0: not asked.
EVALHUB_WORKER_INSPECT_SECONDS = float(os.environ.get("EVALHUB_WORKER_INSPECT_SECONDS", 1.5))
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# A line per request or task (the web access log, each refused request, the proxy's outbound calls,
# each task a worker takes and each beat tick) is off by default, so the console shows what matters;
# EVALHUB_LOG_REQUESTS=1 turns them on (bin/run-local passes it to gunicorn's access log too).
EVALHUB_LOG_REQUESTS = env_bool("EVALHUB_LOG_REQUESTS", False)
PER_CALL_LOGGERS = ("httpx", "httpcore", "celery.app.trace", "celery.worker.strategy", "celery.beat", "axes")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        **{name: {"level": "NOTSET" if EVALHUB_LOG_REQUESTS else "WARNING"} for name in PER_CALL_LOGGERS},
        # A 4xx is a line per request too (a signed-out visitor, a bad token); a 5xx is always logged.
        "django.request": {"level": "NOTSET" if EVALHUB_LOG_REQUESTS else "ERROR"},
    },
}
