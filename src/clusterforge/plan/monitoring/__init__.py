"""The monitoring host: its inputs, user, configuration files, alerting and alert rules, and the
plan's monitoring section with its certificates."""
