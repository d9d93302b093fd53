"""Canary reads, one module per section: `experiments` (lookups, the traffic window, the experiment a
gate run reads), `sql` (helpers the SQL selectors share), `stats` (the traffic layers' per-arm
sufficient statistics), `looks` (layers 2 and 3's one look at their horizon), `attribution` (what a
report shows when a traffic layer did not pass), `listings` (the API's listings), `reviews` (the
follow-up review queue) and `history` (the dashboard's share windows and per-arm figures)."""
