"""Development on a laptop: DEBUG on and a fixed key unless the environment says otherwise."""

import os

from .base import *  # noqa: F403
from .base import env_bool

SECRET_KEY = os.environ.get("SECRET_KEY") or "evalhub-local-development-key-not-for-production"
DEBUG = env_bool("DEBUG", True)
