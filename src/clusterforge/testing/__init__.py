"""Test tooling: the load checker that runs under the disruptive drills."""
