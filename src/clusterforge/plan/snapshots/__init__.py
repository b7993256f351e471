"""Snapshots: the repository and policy, a restore's reads, the schedule's timers."""
