#!/usr/bin/env python3
"""The fabric sweep's plan and verdict: which node, or which link between two nodes, is slow.

Runs on the nodes (Python 3 standard library only; ``fabric-sweep.sh`` drives it) and in the tests.

Every node is measured against its two neighbours on a ring of the hostfile's nodes. The ring's edges are
coloured so that no node is in two pairs of one round, and each round's pairs run at once: two rounds for
an even count of nodes, three for an odd one, however many nodes there are. Every round is filled up with
pairs of the nodes it leaves idle, so every round loads the fabric alike (figures taken under different
loads do not compare: on a shared host, one pair alone runs several times faster than one of two at once)
and each extra pair is one more figure. A node none of whose pairs reached ``THRESHOLD`` of the fastest
pair is a suspect; in two more rounds (more only when the suspects outnumber the nodes known fast) each
suspect is measured against two nodes known fast, which tells a slow node from a slow neighbour, and a slow
pair of two nodes known fast is measured again the other way: one slow figure is no verdict on a link.
Each node's figure is its best pair's; a node whose figure is below ``THRESHOLD`` of the cluster's median
is named, with its figure; a pair below it both ways between two nodes that are fast elsewhere is named as
a link.

    sweep.py rounds HOST...                 the ring's rounds, filled up: one line per round, "A:B A:B ..."
    sweep.py next FIGURES.json HOST...      the narrowing rounds, the same way (none: nothing printed)
    sweep.py verdict FIGURES.json HOST...   JSON (median, each node's figure, what is named); exit 1
                                            when a node or link is named, or no pair was fast
    sweep.py figure LOG                     the Gbps of a fi_pingpong client log (its best row)
    sweep.py result VERDICT.json            the verdict as a benchmark result (bench_parse.py's form)
    sweep.py named HOST < RESULTS           what the newest sweep in the leader's kept results (stdin:
                                            the results parameter's value) says of HOST, if it named it

FIGURES.json: {"A:B": Gbps, ...}, one entry per pair measured (client A, server B).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

#: A node below this fraction of the cluster's median is named (and a pair below it of the fastest pair
#: makes its nodes suspects). Half: far outside the spread of a healthy fabric's pairs.
THRESHOLD = 0.5

Pair = tuple[str, str]


def ring_rounds(hosts: list[str]) -> list[list[Pair]]:
    """The ring's edges (node i with node i+1, the last with the first) in rounds of disjoint pairs:
    even edges, then odd ones; with an odd count the last edge (which meets the first) runs alone."""
    n = len(hosts)
    if n < 2:
        return []
    if n == 2:
        return [[(hosts[0], hosts[1])]]
    edges = [(hosts[i], hosts[(i + 1) % n]) for i in range(n)]
    rounds = [edges[0 : n - n % 2 : 2], edges[1::2]]
    if n % 2:
        rounds.append([edges[-1]])
    return rounds


def padded(rounds: list[list[Pair]], hosts: list[str]) -> list[list[Pair]]:
    """Each round with the nodes it leaves idle paired among themselves, in hostfile order (one stays
    idle when their count is odd)."""
    out = []
    for r in rounds:
        busy = {h for pair in r for h in pair}
        idle = [h for h in hosts if h not in busy]
        out.append(r + list(zip(idle[0::2], idle[1::2], strict=False)))
    return out


def _key(pair: Pair) -> str:
    return f"{pair[0]}:{pair[1]}"


def _measured(figures: dict[str, float]) -> dict[Pair, float]:
    out: dict[Pair, float] = {}
    for key, gbps in figures.items():
        a, _, b = key.partition(":")
        out[(a, b)] = float(gbps)
    return out


def _best(hosts: list[str], measured: dict[Pair, float]) -> dict[str, float]:
    """Each node's figure: its best pair's (0 when no pair of it was measured, or all failed)."""
    return {h: max((g for p, g in measured.items() if h in p), default=0.0) for h in hosts}


def known_fast(hosts: list[str], figures: dict[str, float], threshold: float = THRESHOLD) -> list[str]:
    """The nodes of a pair that reached `threshold` of the fastest pair, in hostfile order."""
    measured = _measured(figures)
    top = max(measured.values(), default=0.0)
    fast = {h for p, g in measured.items() if top > 0 and g >= threshold * top for h in p}
    return [h for h in hosts if h in fast]


def narrowing_rounds(
    hosts: list[str], figures: dict[str, float], threshold: float = THRESHOLD
) -> list[list[Pair]]:
    """Each suspect (a node of no fast pair) against two nodes known fast (one figure taken in a moment of
    load names no node), and each slow pair of two nodes known fast measured again the other way (nor one a
    link), packed into rounds where no node is twice: two rounds while the suspects are fewer than the
    fast nodes. None when nothing is suspect, or when no pair was fast (nothing to measure against)."""
    fast = known_fast(hosts, figures, threshold)
    measured = _measured(figures)
    top = max(measured.values(), default=0.0)
    links = [(b, a) for (a, b), g in measured.items() if g < threshold * top and a in fast and b in fast]
    suspects = [h for h in hosts if h not in fast]
    return _packed(links, suspects, fast, tries=min(2, len(fast))) if fast else []


def _packed(links: list[Pair], suspects: list[str], fast: list[str], *, tries: int) -> list[list[Pair]]:
    """The links, and each suspect with `tries` distinct fast nodes, in rounds where no node is twice."""
    met: dict[str, set[str]] = {s: set() for s in suspects}
    rounds: list[list[Pair]] = []
    while links or any(len(m) < tries for m in met.values()):
        this: list[Pair] = []
        for pair in list(links):  # the links first: each pair as it was, the other way round
            if not set(pair) & {h for p in this for h in p}:
                this.append(pair)
                links.remove(pair)
        this += _suspects_round(met, fast, tries, busy={h for p in this for h in p})
        rounds.append(this)
    return rounds


def _suspects_round(met: dict[str, set[str]], fast: list[str], tries: int, busy: set[str]) -> list[Pair]:
    """One round's suspect pairs: each suspect still short of `tries` with a fast node it has not met, those
    with the most still to meet first, while free fast nodes last (`met` and `busy` are updated)."""
    out: list[Pair] = []
    for suspect, partners in sorted(met.items(), key=lambda item: len(item[1])):
        partner = next((f for f in fast if f not in busy and f not in partners), None)
        if len(partners) < tries and suspect not in busy and partner is not None:
            out.append((suspect, partner))
            busy |= {suspect, partner}
            partners.add(partner)
    return out


def verdict(hosts: list[str], figures: dict[str, float], threshold: float = THRESHOLD) -> dict[str, Any]:
    """Each node's figure against the median of them all: the slow nodes, with their figures, and the
    slow links: pairs of nodes fast elsewhere measured slow both ways (the narrowing round measures a
    slow pair again), named with their better figure."""
    measured = _measured(figures)
    best = _best(hosts, measured)
    median = statistics.median(best.values()) if best else 0.0
    slow_nodes = {h: g for h, g in best.items() if g < threshold * median}
    slow_links: dict[str, float] = {}
    for (a, b), g in measured.items():  # a link: slow both ways between nodes that are fast elsewhere
        again = measured.get((b, a))
        if again is not None and max(g, again) < threshold * median and not {a, b} & slow_nodes.keys():
            first = (a, b) if hosts.index(a) < hosts.index(b) else (b, a)
            slow_links.setdefault(_key(first), max(g, again))
    return {
        "median_gbps": round(median, 3),
        "threshold": threshold,
        "nodes": {h: round(g, 3) for h, g in best.items()},
        "slow_nodes": {h: round(g, 3) for h, g in slow_nodes.items()},
        "slow_links": {p: round(g, 3) for p, g in slow_links.items()},
        "pairs": len(measured),
        "no_fast_pair": median == 0.0 or not known_fast(hosts, figures, threshold),
    }


def figure(log: str) -> float:
    """A fi_pingpong client log's best MB/sec row, in Gbps (0 when it has none)."""
    best = 0.0
    for line in log.splitlines():
        tok = line.split()
        if len(tok) == 8 and tok[0] != "bytes":
            try:
                best = max(best, float(tok[5]) * 8 / 1000)
            except ValueError:
                continue
    return best


def result(found: dict[str, Any]) -> dict[str, Any]:
    """The verdict as one benchmark result (bench_parse.py's form: benchmark, ok, reason), for the
    stack's BenchmarkResults output, `efa-cdk status` and the nodes' health checks."""
    named = [f"slow node {h}: {g:g} Gbps" for h, g in found["slow_nodes"].items()]
    named += [f"slow link {p.replace(':', ' <-> ')}: {g:g} Gbps" for p, g in found["slow_links"].items()]
    if found.get("no_fast_pair"):
        named.append("no pair measured fast")
    out = {
        "benchmark": "fabric-sweep",
        "ok": not named,
        "median_gbps": found["median_gbps"],
        "slow_nodes": found["slow_nodes"],
        "slow_links": found["slow_links"],
        "rounds": found.get("rounds"),
        "seconds": found.get("seconds"),
    }
    if named:
        out["reason"] = f"{'; '.join(named)} (the cluster's median {found['median_gbps']:g} Gbps)"
    return out


def named(host: str, kept: str) -> str:
    """What the fabric sweep among the leader's kept results (``{"data": [result, ...]}``, the results
    parameter's value) says of `host` when it named it slow, else empty (no sweep, nothing named, or the
    value is not the leader's results yet)."""
    try:
        data = json.loads(kept).get("data", [])
    except (ValueError, AttributeError):
        return ""
    for r in data if isinstance(data, list) else []:
        if (
            isinstance(r, dict)
            and r.get("benchmark") == "fabric-sweep"
            and host in (r.get("slow_nodes") or {})
        ):
            return (
                f"the fabric sweep measured it at {r['slow_nodes'][host]:g} Gbps, the cluster's median "
                f"{r.get('median_gbps', 0):g} Gbps"
            )
    return ""


def _print_rounds(rounds: list[list[Pair]]) -> None:
    for r in rounds:
        print(" ".join(_key(p) for p in r))


def _share(text: str) -> float:
    """A threshold: a share of the median strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text}: a share of the median between 0 and 1, as 0.5")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=("rounds", "next", "verdict", "figure", "result", "named"))
    parser.add_argument("args", nargs="*")
    parser.add_argument("--threshold", type=_share, default=THRESHOLD)
    a = parser.parse_intermixed_args(argv)
    if a.command == "figure":
        print(f"{figure(Path(a.args[0]).read_text()):.3f}")
        return 0
    if a.command == "named":
        print(named(a.args[0], sys.stdin.read()))
        return 0
    if a.command == "result":
        print(json.dumps(result(json.loads(Path(a.args[0]).read_text())), separators=(",", ":")))
        return 0
    if a.command == "rounds":
        _print_rounds(padded(ring_rounds(a.args), a.args))
        return 0
    figures = json.loads(Path(a.args[0]).read_text())
    hosts = a.args[1:]
    if a.command == "next":
        _print_rounds(padded(narrowing_rounds(hosts, figures, a.threshold), hosts))
        return 0
    found = verdict(hosts, figures, a.threshold)
    print(json.dumps(found, separators=(",", ":")))
    return 1 if found["slow_nodes"] or found["slow_links"] or found["no_fast_pair"] else 0


if __name__ == "__main__":
    sys.exit(main())
