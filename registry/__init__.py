"""The registry: model versions, suites, tokens, roles, audit, the one error type, outbound
notifications and the task dispatch (Django app label `evalhub`)."""
