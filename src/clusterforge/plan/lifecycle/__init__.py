"""The index lifecycle: its policies, runner and alert rules."""
