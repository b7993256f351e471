"""ansible-doc's page of the action plugin clusterforge_plan (docs/architecture.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_plan
short_description: Compute the plan on the control node, before any host changes
description:
  - Runs C(clusterforge.plan.plan.build_plan) on the control node. It validates the whole
    inventory at once (every problem reported together, each naming the variable and the
    fix), fetches and checks the engine and plugin archives, creates or reuses the PKI,
    renders every node's files and the security files (bcrypt hashes, never passwords),
    plans the console, the services and the monitoring (the monitoring host's files and
    every node exporter's, their certificates issued or reused), and decides the rollout
    from what the nodes report they run.
  - C(scripts/render) calls the same function and writes what each host would get,
    secrets left out.
  - A successful result holds password hashes, so it is censored in the output
    (C(_ansible_no_log)); a refusal (bad inventory, downgrade, bad archive) is shown in full.
  - The hosts of the groups C(user_directory) and C(order_service) are planned too; their
    settings are validated by the services' own settings models.
  - Use it once per play with C(run_once) and C(delegate_to=localhost);
    C(playbooks/plan.yml) does, and every playbook imports that.
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.stack.opensearch_nodes.group
options:
  console_group:
    description: The inventory group of the console hosts; a group with no hosts plans no console.
    type: str
    default: dashboards
  security_files:
    description:
      - Whether the plan renders the security plugin's files.
      - V(false) leaves them out for a playbook that places none (C(rolling_restart.yml)),
        since their bcrypt checks are most of a plan's time.
    type: bool
    default: true
  observed:
    description:
      - Per inventory name, what the read-only look at the node found
        (M(clusterforge.stack.clusterforge_observe)'s C(observed)).
      - Without it every node is planned as new.
    type: dict
    default: {}
  planned:
    description:
      - The result of an earlier call in the same run. With it, only the rollout, the
        removal and the groups are decided again, from O(observed); the rest of that plan
        is kept.
    type: dict
  restore:
    description:
      - With O(planned), the restore's inputs - C(snapshot), the snapshot's name;
        C(snapshot_indices), the indices the cluster reports it holds; C(requested), the
        indices asked for (C(restore_indices), comma-separated or a list; empty, every
        index but the security plugin's own).
      - O(planned) comes back with C(snapshots.restore.indices), the indices the restore
        touches (C(clusterforge.plan.plan.with_restore)), or the run fails naming each
        index the snapshot does not hold.
    type: dict
  restore_snapshot:
    description:
      - With O(planned), the restore's snapshot - C(requested), C(snapshot_name) as given;
        C(snapshots), the repository's snapshots as the cluster lists them
        (C(GET _snapshot/<repository>/_all)), needed for C(latest) only.
      - O(planned) comes back with C(snapshots.restore.snapshot), the snapshot the restore
        reads - C(latest) resolved to the newest successful one by its end time
        (C(clusterforge.plan.plan.with_restore_snapshot)) - or the run fails when the
        repository holds no successful snapshot.
    type: dict
  changes:
    description:
      - The changes every host recorded this run, as C({host, reason, restart}) items
        (each host's C(__clusterforge_changes) together). Needs O(planned).
      - With it, O(planned) comes back with the rolling play's restart decision added to
        its rollout (C(clusterforge.plan.plan.with_restarts)) and nothing else decided
        again - C(rollout.restarts), per node that restarts its reasons (the changes
        recorded for it, a pending upgrade; a node that was not running or a mode switch
        restarts none); C(rollout.restart_batches), with C(opensearch_rolling_batch=zone)
        the plan's batches that keep a node to restart, each with C(reasons) per node,
        empty in node mode.
      - C(playbooks/rolling.yml) asks this once, after the roles ran; no play computes
        a restart itself.
    type: list
    elements: dict
  hosts:
    description:
      - With O(changes), the play's hosts (C(ansible_play_hosts)) - a batch of
        C(rollout.restart_batches) keeps only those (C(--limit), or hosts failed before).
      - Without it every node of a batch may restart.
    type: list
    elements: str
  validate_only:
    description:
      - Only check the whole inventory
        (C(clusterforge.plan.validation.validate_inventory)), writing, generating and
        fetching nothing. The first play of every playbook
        (C(playbooks/check_inventory.yml)) does this before any host is contacted.
      - Its result holds C(services), each service host's settings as the services'
        own models validated them (settings file included, so the result is no_log);
        C(playbooks/check_inventory.yml) keeps them as C(__clusterforge_checked_services).
      - It holds C(postgresql_tls) too, as the plan does; C(playbooks/check_inventory.yml)
        keeps it as C(__clusterforge_checked_postgresql_tls).
    type: bool
    default: false
  checked_services:
    description:
      - The C(services) of the O(validate_only) check of the same run. When it holds
        every service host, the plan's C(services) section is taken from it, with the
        order delivery's real password put in, and the services' settings are not
        validated a second time (C(playbooks/plan.yml) passes it).
    type: dict
  services_only:
    description:
      - Plan the services' part of the plan alone, for a run without C(playbooks/plan.yml)
        (C(playbooks/services_plan.yml), imported by C(playbooks/services.yml)). It runs
        the O(validate_only) check, then adds to O(checked_services) the passwords the
        plan puts in (the order delivery's, the services' PostgreSQL ones; read, or
        generated once).
      - Its result holds C(services) (no_log) and C(orders_search) (public), which the
        services' roles copy as they copy the plan's.
    type: bool
    default: false
  renew_monitoring:
    description:
      - Issue the monitoring host's certificate again now, whatever its expiry (the plan's
        C(monitoring) section; C(playbooks/rotate_certs.yml) sets it).
    type: bool
    default: false
  renew_node_exporters:
    description:
      - Issue every host's node exporter certificate again now (C(monitoring.node_exporter)).
    type: bool
    default: false
notes:
  - Runs on the control node only and needs the C(clusterforge) Python package in the
    Python that runs Ansible.
seealso:
  - module: clusterforge.stack.clusterforge_observe
"""

EXAMPLES = r"""
- name: Plan the cluster
  clusterforge.stack.clusterforge_plan:
    group: opensearch
  run_once: true
  delegate_to: localhost
  register: __clusterforge_plan

- name: Decide the rollout from what the nodes run
  clusterforge.stack.clusterforge_plan:
    group: opensearch
    planned: "{{ __clusterforge_plan }}"
    observed: "{{ observed_by_host }}"
  run_once: true
  delegate_to: localhost

- name: Decide what restarts from the changes the run recorded
  clusterforge.stack.clusterforge_plan:
    planned: "{{ __clusterforge_plan }}"
    changes: >-
      {{ ansible_play_hosts_all | map('extract', hostvars)
         | map(attribute='__clusterforge_changes', default=[]) | flatten(levels=1) }}
    hosts: "{{ ansible_play_hosts }}"
  run_once: true
  delegate_to: localhost
  register: __clusterforge_plan
"""

RETURN = r"""
cluster:
  description:
    - Facts every role reads (name, mode, version, URLs, HTTP scheme, PKI paths,
      markers, tool environment).
  returned: success
  type: dict
nodes:
  description:
    - Per inventory name, the node's name, roles, URL, rendered files and
      certificate paths.
  returned: success
  type: dict
artifacts:
  description: The archives fetched and checked on the control node (engine, plugins).
  returned: success
  type: dict
security:
  description:
    - The security plugin's rendered files and their digests, or nothing when
      O(security_files=false).
    - C(api_users), the internal users basic mode puts through the REST API (every one
      but the reserved), with the fields the call sets.
  returned: success
  type: dict
rollout:
  description:
    - What restarts, why and in which order (the elected cluster manager last).
    - With O(observed), C(nodes[host].config_restart) too - the opensearch.yml settings
      whose change needs a restart of the running node (none when only start-only
      settings such as C(discovery.seed_hosts) change; C([opensearch.yml]) when the node
      had no file).
    - C(nodes[host].change_records) - per file of the node (C(opensearch.yml),
      C(heap.options), C(opensearch.service)), the record roles/opensearch adds to the
      run's changes when it changes that file (its reason, and whether it restarts a
      running node).
    - With O(changes), also C(restarts) (per node, its reasons; only the nodes that
      restart) and C(restart_batches) (the zone-mode batches that restart, empty in node
      mode).
  returned: success
  type: dict
removal:
  description: The nodes marked absent and how they leave.
  returned: success
  type: dict
groups:
  description:
    - The run's groups of OpenSearch hosts, in inventory order (playbooks/plan.yml adds
      the hosts to them once) - C(opensearch_present), the nodes that stay;
      C(opensearch_serving), the nodes the cluster's API is reached through (in check
      mode only those that run now); C(opensearch_removed), the nodes marked absent.
  returned: success
  type: dict
consoles:
  description: The console hosts' planned settings.
  returned: success
  type: dict
services:
  description: The services' hosts and their validated settings.
  returned: success
  type: dict
postgresql_tls:
  description: The services' PostgreSQL server's TLS settings (C(ssl_min_protocol_version),
    C(ssl_max_protocol_version), C(ssl_ciphers)) from the cluster's TLS profile.
  returned: success
  type: dict
snapshots:
  description: The snapshot repository and policy.
  returned: success
  type: dict
orders_search:
  description: The public part of the order service's delivery into the cluster.
  returned: success
  type: dict
cluster_config:
  description:
    - The cluster's own objects the inventory declares, validated (C(objects) by kind
      variable), C(prune), C(keep) (the toolkit's own objects) and C(kinds) (the kinds a
      run visits, in order). docs/cluster-config.md.
  returned: success
  type: dict
model_warnings:
  description: Warnings about the inventory that do not stop the run.
  returned: success
  type: list
  elements: str
"""
