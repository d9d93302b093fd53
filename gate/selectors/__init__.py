"""Gate selectors: the reads."""
