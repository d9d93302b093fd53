"""Every interval, test and comparison that the gate and the canary use, on sufficient statistics."""
