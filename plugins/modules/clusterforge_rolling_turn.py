"""ansible-doc's page of the action plugin clusterforge_rolling_turn (docs/architecture.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_rolling_turn
short_description: One node's turn in a rolling restart or upgrade
description:
  - One task does the whole turn of a node; the play runs it one node at a time, the
    elected cluster manager last (O(phase=turn), C(opensearch_rolling_batch=node)).
  - With C(opensearch_rolling_batch=zone) the play runs a batch of the plan as one serial
    step and the turn in three parts - O(phase=hold) once, O(phase=restart) on every node
    of the batch together, O(phase=release) once after all of them have rejoined.
  - Allocation is limited to primaries and the cluster flushed; the C(home) symlink is
    pointed at the planned version (the switch of an upgrade); the service restarts; the
    turn waits until the node answers and the cluster counts all its nodes again; then
    allocation goes back to the default and the turn waits for green.
  - Each wait runs on the node (M(clusterforge.stack.clusterforge_http_wait)) and gives up
    after O(timeout) seconds, naming the host, what it waited for and where to look.
  - Not for check mode; the calling play skips it there.
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.stack.opensearch_nodes.service
options:
  timeout:
    description: Seconds each wait may take.
    type: float
    default: 900
  phase:
    description:
      - V(turn) does all of a node's turn.
      - V(hold) limits allocation to primaries and flushes (once per batch, before it).
      - V(restart) points the symlink, restarts the service and waits until the node has
        rejoined (on every node of the batch at once).
      - V(release) sets allocation back to the default and waits for O(wait_for) (once per
        batch, after every node of it has rejoined).
    type: str
    choices: [turn, hold, restart, release]
    default: turn
  wait_for:
    description:
      - The cluster health O(phase=turn) and O(phase=release) wait for.
      - V(yellow) between the batches of an upgrade, while versions are mixed (the engine
        places no replica on a node older than its primary's); V(green) otherwise.
    type: str
    choices: [green, yellow]
    default: green
"""

EXAMPLES = r"""
- name: Restart this node, wait for it to rejoin and for green
  clusterforge.stack.clusterforge_rolling_turn:
    service: opensearch
    timeout: 900

- name: Release allocation after a batch of an upgrade, and wait for yellow
  clusterforge.stack.clusterforge_rolling_turn:
    service: opensearch
    phase: release
    wait_for: yellow
  run_once: true
"""

RETURN = r"""
seconds:
  description: How long each phase took, for the run's log.
  returned: success
  type: dict
"""
