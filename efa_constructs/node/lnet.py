"""LNet's own account of its EFA network, read from ``lnetctl net show -v``, and the storage benchmark's
figures (issue 44).

lnetctl prints YAML: under ``net:`` one item per network (``net type: efa``), each with its ``local NI(s)``
(``- nid: <address>@efa``, ``status``, ``interfaces``) and, with ``-v``, per NI ``statistics`` with
``send_count`` and ``recv_count`` (lustre/lustre-release, lnet/utils/lnetconfig/liblnetconfig.c, which
writes these keys). The client step reads it twice, around a direct write, to prove Lustre rides EFA.

The storage benchmark (node/boot/lustre-bench.sh): direct I/O to FSx for Lustre from every node at once.
The leader keeps, per node, in one directory: ``<host>.before`` and ``<host>.after`` (``lnetctl net show
-v`` around the run), ``<host>.write`` and ``<host>.read`` (GNU dd's summary: ``N bytes (...) copied, S s,
R MB/s``), and ``phases`` (``write SECONDS`` and ``read SECONDS``: each phase's wall time, every node
running it at once).
The result: the aggregate write and read (all bytes over the phase's wall time), the slowest node's, and the
share of LNet messages that rode EFA (the efa and tcp networks' send and receive counts). With an
EFA-enabled file system the share must be at least half, as ParallelCluster's own integration test asks of
its bulk RPCs (aws/aws-parallelcluster#7572).

CLI: ``lnet.py efa`` (stdin: ``lnetctl net show -v``) prints ``NIDS SENT RECEIVED`` for the efa network
(``0 0 0`` without one); ``lnet.py bench DIR [--efa]`` prints the benchmark's result JSON.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class NetCounts:
    """One LNet network's NIs that are up, and the messages its NIs sent and received."""

    nids: int = 0
    sent: int = 0
    received: int = 0

    def moved_since(self, before: NetCounts) -> bool:
        """True when the network carried messages both ways since `before` was read."""
        return self.sent > before.sent and self.received > before.received


def net_counts(text: str, net: str = "efa") -> NetCounts:
    """The NIs that are up on `net` and the sums of their send and receive counts."""
    current, nids, sent, received, nid_up = None, 0, 0, 0, False
    for line in text.splitlines():
        key, _, value = line.strip().lstrip("- ").partition(":")
        value = value.strip()
        if key == "net type":
            current = value
        elif current != net:
            continue
        elif key == "nid":
            nid_up = False
        elif key == "status" and value == "up" and not nid_up:
            nid_up, nids = True, nids + 1
        elif key == "send_count" and re.fullmatch(r"\d+", value):
            sent += int(value)
        elif key == "recv_count" and re.fullmatch(r"\d+", value):
            received += int(value)
    return NetCounts(nids, sent, received)


#: GNU dd's summary line (coreutils dd.c, print_xfer_stats): bytes first, seconds after "copied,".
_DD = re.compile(r"^(\d+) bytes\b.*copied, ([0-9.]+(?:e[-+]?\d+)?) s,", re.M)
#: At least this share of LNet's messages on EFA (aws/aws-parallelcluster#7572: half the bulk RPCs).
MIN_EFA_SHARE = 0.5
GB = 1e9


def dd_transfer(text: str) -> tuple[int, float] | None:
    """(bytes, seconds) from GNU dd's summary, or None when it has none (dd failed)."""
    found = _DD.findall(text)
    if not found:
        return None
    size, seconds = found[-1]
    return int(size), float(seconds)


def _text(path: Path) -> str:
    """A file's text; empty when it is missing (the node's command failed before writing it)."""
    return path.read_text(errors="replace") if path.exists() else ""


def _messages(text: str, net: str) -> int:
    counts = net_counts(text, net)
    return counts.sent + counts.received


def _node_figures(directory: Path, hosts: list[str]) -> dict[str, dict[str, float]] | str:
    """Each node's write and read (GB/s, bytes) from dd's summaries, or why there are none."""
    figures: dict[str, dict[str, float]] = {}
    for host in hosts:
        write, read = (dd_transfer(_text(directory / f"{host}.{phase}")) for phase in ("write", "read"))
        if write is None or read is None:
            return f"{host}: the direct {'write' if write is None else 'read'} failed"
        figures[host] = {
            "write": write[0] / write[1] / GB,
            "read": read[0] / read[1] / GB,
            "write_bytes": write[0],
            "read_bytes": read[0],
        }
    return figures


def _efa_share(directory: Path, hosts: list[str]) -> float | None:
    """The share of LNet's messages on the efa network (against tcp) across the run; None without any."""
    efa_msgs = tcp_msgs = 0
    for host in hosts:
        before, after = (_text(directory / f"{host}.{w}") for w in ("before", "after"))
        efa_msgs += _messages(after, "efa") - _messages(before, "efa")
        tcp_msgs += _messages(after, "tcp") - _messages(before, "tcp")
    return round(efa_msgs / (efa_msgs + tcp_msgs), 3) if efa_msgs + tcp_msgs else None


def result(directory: Path, efa: bool) -> dict[str, Any]:
    """The benchmark's result from the leader's files (see the module's docstring)."""
    name = "lustre"
    phases = dict(line.split() for line in _text(directory / "phases").splitlines() if line.strip())
    hosts = sorted(p.stem for p in directory.glob("*.write"))
    figures = _node_figures(directory, hosts) if hosts else "no node wrote"
    if not {"write", "read"} <= phases.keys():
        figures = "no phase timings (the leader stopped before the reads)"
    if isinstance(figures, str):
        return {"benchmark": name, "ok": False, "reason": figures}
    out: dict[str, Any] = {"benchmark": name, "ok": True, "nodes": len(hosts)}
    for phase in ("write", "read"):
        total = sum(f[f"{phase}_bytes"] for f in figures.values())
        out[f"{phase}_gbytes_s"] = round(total / float(phases[phase]) / GB, 2)
        slowest = min(figures, key=lambda host: figures[host][phase])
        out[f"slowest_{phase}"] = {"node": slowest, "gbytes_s": round(figures[slowest][phase], 2)}
    share = _efa_share(directory, hosts)
    if share is not None:
        out["efa_share"] = share
    if efa and (share or 0) < MIN_EFA_SHARE:
        out["ok"] = False
        out["reason"] = (
            f"{share or 0:.0%} of LNet's messages rode EFA (at least {MIN_EFA_SHARE:.0%} expected): Lustre "
            "traffic falls back to TCP"
        )
    return out


def main(argv: list[str]) -> int:
    """``efa`` (or another network's name): print NIDS SENT RECEIVED from stdin; ``bench DIR [--efa]``: the
    storage benchmark's result JSON (exit 1 when not ok)."""
    if len(argv) >= 2 and argv[0] == "bench":
        out = result(Path(argv[1]), "--efa" in argv[2:])
        print(json.dumps(out, sort_keys=True))
        return 0 if out["ok"] else 1
    if len(argv) != 1:
        print(
            "usage: lnet.py NET < 'lnetctl net show -v' output | lnet.py bench DIR [--efa]", file=sys.stderr
        )
        return 2
    counts = net_counts(sys.stdin.read(), argv[0])
    print(counts.nids, counts.sent, counts.received)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
