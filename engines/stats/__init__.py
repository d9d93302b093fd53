"""Every interval, test and comparison that the gate and the canary use, on sufficient statistics.

scipy is imported inside the functions that need it: the web process imports these modules (a
policy, a report) and should not load scipy until a test is computed.
"""
