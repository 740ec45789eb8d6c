"""ParallelCluster's own rules on a configuration's names and on Slurm's topology plugin, apart from the model
they check (efa_constructs/core/pcluster.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .errors import EfaConfigError

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,24}$")


#: Instance types for which ParallelCluster (3.14 and later) sets up a Slurm topology plugin itself
#: (aws-parallelcluster-cookbook CHANGELOG, 3.14.0: "ParallelCluster sets up Slurm topology plugin to
#: handle P6e-GB200 UltraServers"); a TopologyPlugin of ours would fight it.
PCLUSTER_MANAGED_TOPOLOGY_PREFIXES = ("p6e-gb",)


def _check_topology_tree(head_node_on_node_start: str | None, instance_types: Sequence[str]) -> None:
    """topology/tree needs a topology.conf before slurmctld starts (the head node's OnNodeStart writes
    it), and must not replace the plugin ParallelCluster sets up for UltraServers (`instance_types`: the
    queues')."""
    if not head_node_on_node_start:
        raise EfaConfigError(
            "topology_tree",
            code="efa-cdk:pcluster-topology-tree-unreadable",
            value=True,
            why="Slurm's topology/tree plugin stops slurmctld when topology.conf cannot be read, and "
            "ParallelCluster starts slurmctld before OnNodeConfigured runs",
            fix="give head_node_on_node_start a script that writes topology.conf, or leave topology_tree off",
        )
    managed = sorted(t for t in instance_types if t.startswith(PCLUSTER_MANAGED_TOPOLOGY_PREFIXES))
    if managed:
        raise EfaConfigError(
            "topology_tree",
            code="efa-cdk:pcluster-topology-tree-ultraserver",
            value=managed,
            why="ParallelCluster 3.14 and later sets up its own Slurm topology plugin for these UltraServer "
            "types; topology/tree would replace it",
            fix="leave topology_tree off for a cluster with these types",
        )


def _check_unique(what: str, values: list[str], why: str) -> None:
    if len(set(values)) != len(values):
        raise EfaConfigError(
            what, code="efa-cdk:pcluster-not-unique", value=values, why=why, fix="make each one unique"
        )


def _check_name(what: str, value: str) -> None:
    if not _NAME.match(value):
        raise EfaConfigError(
            what.replace(" ", "_"),
            code="efa-cdk:pcluster-name-form",
            value=value,
            why="ParallelCluster names start with a lowercase letter and have up to 25 lowercase letters, "
            "digits and '-'",
            fix="e.g. 'compute' or 'trn1-32xl'",
        )
