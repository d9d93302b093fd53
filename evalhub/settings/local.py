"""Development on a laptop (`make run`): a fixed key unless the environment gives one. DEBUG stays
off, as in every environment, so an error never shows a traceback; `DEBUG=1` turns it on. Static
files are served by WhiteNoise from `collectstatic`'s folder (`make run` collects them)."""

import os

from .base import *  # noqa: F403
from .base import env_list, fernet_key_derive

SECRET_KEY = os.environ.get("SECRET_KEY") or "evalhub-local-development-key-not-for-production"
# Derived from SECRET_KEY unless set: a changed SECRET_KEY leaves stored API keys unreadable.
EVALHUB_SECRETS_KEY = os.environ.get("EVALHUB_SECRETS_KEY") or fernet_key_derive(SECRET_KEY)
# The demo's model servers (`serve_model`) listen on loopback.
EVALHUB_OUTBOUND_ALLOW_NETWORKS = env_list("EVALHUB_OUTBOUND_ALLOW_NETWORKS", "127.0.0.0/8,::1/128")
