"""The canary sandbox (router, telemetry, probes, analysis). Built in its own issue; the app is
installed now so its migrations slot in without touching the registry."""
