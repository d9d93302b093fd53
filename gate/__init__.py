"""The gate: runs, their layers, the policy, the report and release decisions (Django app `gate`)."""
