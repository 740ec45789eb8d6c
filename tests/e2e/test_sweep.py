"""The fabric sweep on a 5-node one-machine cluster (tests/e2e/cluster.py says what stands in for
what): two slowed nodes are both named, and the node between them, whose ring pairs are both slow, is
measured against a node known fast and cleared. The 3-node healthy and one-slowed cases run on
tests/e2e/test_cluster.py's cluster; scripts/bench-sweep times the sweep on 3 to 8 nodes."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.e2e.cluster import (
    SWEEP,
    Cluster,
    Node,
    missing_capabilities,
    slowed_rate,
    synthesize_cluster,
    throttle,
)

MISSING = missing_capabilities()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"this machine lacks: {', '.join(MISSING)}")


def boot_cluster(cluster: Cluster, out: Any, name: str, count: int, key: str) -> list[Node]:
    """`count` trn1 nodes of a ready stack, formed (hostfile, SSH, the leader's fi_pingpong)."""
    synthesize_cluster(out, name, node_count=str(count), monitoring="false")
    stack = cluster.create_stack(name, out, key)
    nodes = cluster.boot("s", stack, "ubuntu", [8] * count, {"EFA_CDK_POLL_SECONDS": "2"})
    cluster.wait(nodes)
    return nodes


@pytest.fixture(scope="module")
def five(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> list[Node]:
    return boot_cluster(cluster, tmp_path_factory.mktemp("sweep"), "Trn1EfaSweep", 5, "key-0e2e0000000000005")


def test_two_slowed_nodes_are_both_named_and_the_node_between_them_is_cleared(
    cluster: Cluster, five: list[Node]
) -> None:
    """Nodes 1 and 3 slowed: every ring pair of node 2 touches one of them, so the ring alone cannot clear
    it; measured against a node known fast (a narrowing round), it is. 5 ring pairs in 3 rounds, then
    the three suspects against the two nodes known fast: 2 rounds. The healthy five first name none."""
    sweep = str(five[0].root / "opt/efa-cdk/bin/fabric-sweep.sh")
    healthy = five[0].run_as_root(*SWEEP, "bash", sweep, timeout=600)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert healthy.stdout.endswith("; none named\n"), healthy.stdout
    rate = slowed_rate(five[0])  # that sweep's slowest node, with the slowed sweep's message size
    for n in (five[1], five[3]):
        throttle(cluster.aws_ns, n, rate)
    try:
        r = five[0].run_as_root(*SWEEP, "bash", sweep, timeout=600)
    finally:
        for n in (five[1], five[3]):
            throttle(cluster.aws_ns, n, None)
    assert r.returncode == 1, r.stdout + r.stderr
    *named, summary = r.stdout.splitlines()
    assert [line.split(":")[1].strip() for line in named] == [
        f"SLOW node {five[1].ip}",
        f"SLOW node {five[3].ip}",
    ]
    assert re.search(r"5 nodes, \d+ pairs in [5-7] rounds", summary) and summary.endswith("; 2 named"), (
        r.stdout
    )
