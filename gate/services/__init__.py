"""Gate services: the writes (and the measurements layers and pages share)."""
