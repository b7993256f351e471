"""``scripts/status``: what a running cluster looks like, and what needs attention."""
