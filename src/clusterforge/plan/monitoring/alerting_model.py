"""The alerting's data: one monitoring host's thresholds, receivers and rules files.

Plain frozen records, no logic: :mod:`clusterforge.plan.monitoring.alerting` builds an
:class:`Alerting` from the inventory (and renders alertmanager.yml from it),
:mod:`clusterforge.plan.monitoring.alert_rules` renders the rules file from it. Both import this
module and it imports neither, so the two stay free of an import circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class Watermark:
    """One disk watermark: ``percent`` of the disk used, or ``free_bytes`` left (the engine
    reads a byte size as the free space a node must keep)."""

    setting: str
    text: str
    percent: float | None = None
    free_bytes: int | None = None


@dataclass(frozen=True, kw_only=True)
class Receiver:
    """One Alertmanager receiver; secrets named by variable, never held here."""

    name: str
    kind: str  # webhook | email
    send_resolved: bool
    matchers: tuple[str, ...] = ()
    url: str | None = None
    bearer_token_var: str | None = None
    to: str | None = None
    sender: str | None = None
    smarthost: str | None = None
    auth_username: str | None = None
    auth_password_var: str | None = None
    require_tls: bool = True
    ca_file: str | None = None

    @property
    def secret_variables(self) -> tuple[str, ...]:
        return tuple(v for v in (self.bearer_token_var, self.auth_password_var) if v)


@dataclass(frozen=True, kw_only=True)
class Alerting:
    """The thresholds, receivers and extra rules files of one monitoring host."""

    red_for: str
    yellow_for: str
    nodes_for: str
    target_down_for: str
    disk_for: str
    heap_percent: int
    heap_for: str
    cert_expiry_days: int
    # None: no snapshot schedule and no age given, so no snapshot age alert.
    snapshot_max_age: str | None
    outbox_age_minutes: int
    error_percent: int
    error_for: str
    disk_low: Watermark
    disk_high: Watermark
    group_wait: str
    group_interval: str
    repeat_interval: str
    receivers: tuple[Receiver, ...] = ()
    # The user's own rules files: file name on the monitoring host -> text.
    rules_files: Mapping[str, str] = field(default_factory=dict)

    @property
    def secret_variables(self) -> tuple[str, ...]:
        """The variables (vaulted) whose values the receivers' secret files hold."""
        return tuple(v for receiver in self.receivers for v in receiver.secret_variables)
