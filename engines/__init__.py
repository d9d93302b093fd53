"""Pure engines: statistics, routing, perturbation and attacks, model backends, scoring,
embeddings, training, the model server and the follow-up detector. No Django, no Celery:
each package imports and tests on its own (tests/test_architecture.py checks it)."""
