"""Order the cluster's nodes by EC2 instance topology, so ranks that talk most sit under the same switch.

``python3 topology.py ANSWER.json... < nodes`` reads the nodes as the hostfile step lists them
("<index> <ip> <instance id>" per line, the leader first) and DescribeInstanceTopology answers
(``aws --output json ec2 describe-instance-topology``: at most 100 instance ids per call, so one file
per call), and prints "<index> <ip>" per line: grouped by network node from the spine down (3 or 4
layers depending on the type), the leader still first (the sorted ring is rotated to it). Nodes the
answers do not cover (the API is eventually consistent, and does not cover every type) go last, in
their listed order; a line on stderr says so. Source: EC2 API reference, DescribeInstanceTopology
(NetworkNodes, "listed from the top of the hierarchy"; MaxResults and the 100-instance-id limit).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _paths(answers: Sequence[dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Instance id -> its network nodes, spine first, from DescribeInstanceTopology answers."""
    return {
        inst["InstanceId"]: tuple(inst.get("NetworkNodes") or ())
        for answer in answers
        for inst in answer.get("Instances", [])
    }


def order(nodes: Sequence[tuple[str, ...]], answers: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """The nodes (index, ip, instance id), ordered by topology with the first node kept first."""
    paths = _paths(answers)
    covered = [n for n in nodes if paths.get(n[2])]
    missing = [n for n in nodes if not paths.get(n[2])]
    if missing:
        names = ", ".join(n[1] for n in missing)
        print(f"topology: no network nodes for {names}: listed last, in address order", file=sys.stderr)
    ring = sorted(covered, key=lambda n: (paths[n[2]], nodes.index(n)))
    if ring and nodes[0] in ring:
        k = ring.index(nodes[0])
        ring = ring[k:] + ring[:k]
    return [(n[0], n[1]) for n in ring + missing]


def slurm_tree(nodes: Sequence[tuple[str, ...]], answers: Sequence[dict[str, Any]]) -> str:
    """Slurm's topology.conf (topology/tree) for the nodes ("<slurm name> <ip> <instance id>" for a
    running node, "<slurm name>" for one without an instance; a name may be a hostlist expression): a
    switch per network node, the bottom ones listing their nodes, every switch under one root so a
    job may span the tree; nodes without an answer under their own switch (``efa-cdk-unplaced``), so
    every node sits under a switch, as topology.conf(5) requires."""
    paths = _paths(answers)
    leaves: dict[str, list[str]] = {}
    children: dict[str, set[str]] = {"efa-cdk-root": set()}
    for node in nodes:
        name, iid = node[0], node[2] if len(node) > 2 else ""
        path = paths.get(iid) or ("efa-cdk-unplaced",)
        leaves.setdefault(path[-1], []).append(name)
        children["efa-cdk-root"].add(path[0])
        for i in range(len(path) - 1):  # (no itertools.pairwise: nodes may run Python 3.9)
            children.setdefault(path[i], set()).add(path[i + 1])
    lines = ["# Written by efa-cdk from EC2 DescribeInstanceTopology (slurm-topology.sh)"]
    lines += [f"SwitchName={leaf} Nodes={','.join(sorted(names))}" for leaf, names in sorted(leaves.items())]
    lines += [
        f"SwitchName={sw} Switches={','.join(sorted(kids))}" for sw, kids in sorted(children.items()) if kids
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    """Command line: ``[slurm] ANSWER.json...``, nodes on stdin; the ordered "<index> <ip>" lines, or
    with ``slurm`` the topology.conf, on stdout."""
    nodes = [tuple(line.split()[:3]) for line in sys.stdin if line.strip()]
    if argv[:1] == ["slurm"]:
        print(slurm_tree(nodes, [json.loads(Path(p).read_text()) for p in argv[1:]]), end="")
        return 0
    answers = [json.loads(Path(p).read_text()) for p in argv]
    for index, ip in order(nodes, answers):
        print(index, ip)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
