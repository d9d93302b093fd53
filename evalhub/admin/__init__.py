"""The Django admin for operators: registrations of every app's models, on the entry-point floor."""

from evalhub.admin import auth, canary, gate, registry

__all__ = ["auth", "canary", "gate", "registry"]
