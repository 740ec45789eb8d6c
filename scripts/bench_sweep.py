"""scripts/bench-sweep's body: the fabric sweep timed on the one-machine cluster (tests/e2e/cluster.py),
on 3 to 8 nodes of one booted cluster, and its planned rounds on larger clusters (no measurement)."""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from efa_constructs.node import sweep
from tests.e2e.cluster import Cluster, missing_capabilities, synthesize_cluster

SUMMARY = re.compile(r"(\d+) nodes, (\d+) pairs in (\d+) rounds, (\d+) s; median ([0-9.]+) Gbps; (\w+) named")


def planned() -> None:
    """The ring's rounds and the narrowing rounds with 1% of the nodes slow (at least one; every 100th),
    as sweep.py plans them from the ring's figures."""
    print(f"{'nodes':>6} {'ring rounds':>11} {'narrowing rounds (1% slow)':>27}")
    for n in (16, 64, 256, 1024, 4096):
        nodes = [f"n{i}" for i in range(n)]
        slow = {nodes[i] for i in range(0, n, 100)}
        ring = sweep.padded(sweep.ring_rounds(nodes), nodes)
        figures = {f"{a}:{b}": 1.0 if {a, b} & slow else 100.0 for r in ring for a, b in r}
        print(f"{n:>6} {len(ring):>11} {len(sweep.narrowing_rounds(nodes, figures)):>27}")


def measured(largest: int) -> None:
    missing = missing_capabilities()
    if missing:
        print(f"not measured: this machine lacks {', '.join(missing)}")
        return
    with tempfile.TemporaryDirectory() as work:
        cluster = Cluster(work=Path(work))
        try:
            cluster.start()
            out = Path(work) / "assembly"
            synthesize_cluster(out, "Trn1EfaSweepBench", node_count=str(largest), monitoring="false")
            stack = cluster.create_stack("Trn1EfaSweepBench", out, "key-0e2e0000000000008")
            # the default bar (half), not the test harness's quarter: what a cluster's sweep does
            settings = {"EFA_CDK_POLL_SECONDS": "2", "EFA_CDK_SWEEP_THRESHOLD": "0.5"}
            nodes = cluster.boot("b", stack, "ubuntu", [8] * largest, settings)
            cluster.wait(nodes)
            script = str(nodes[0].root / "opt/efa-cdk/bin/fabric-sweep.sh")
            print("healthy nodes, 1 MiB x 50 round trips a pair (rounds past the ring's: pairs this busy")
            print("2-core machine slowed below half the fastest, measured again against a fast node)")
            print(f"{'nodes':>6} {'pairs':>6} {'rounds':>7} {'seconds':>8} {'median Gbps':>12} {'named':>6}")
            for k in range(3, largest + 1):
                hostfile = nodes[0].root / f"sweep-hosts-{k}"
                hostfile.write_text("".join(f"{n.ip} slots=1\n" for n in nodes[:k]))
                r = nodes[0].run_as_root(
                    "env", "EFA_CDK_SWEEP_BYTES=1048576", "EFA_CDK_SWEEP_ITERATIONS=50",
                    "bash", script, "--hostfile", str(hostfile), timeout=900,
                )  # fmt: skip
                found = SUMMARY.search(r.stdout)
                if found is None:
                    print(f"{k:>6} the sweep did not finish: {r.stdout[-300:]} {r.stderr[-300:]}")
                    continue
                _, pairs, rounds, seconds, median, named = found.groups()
                print(f"{k:>6} {pairs:>6} {rounds:>7} {seconds:>8} {median:>12} {named:>6}")
                if "--verbose" in sys.argv:
                    print((nodes[0].root / "var/lib/efa-cdk/sweep/figures.json").read_text())
        finally:
            cluster.close()


if __name__ == "__main__":
    planned()
    measured(int(next((a for a in sys.argv[1:] if a.isdigit()), "8")))
