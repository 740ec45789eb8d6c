"""LNet's own account of its EFA network, read from ``lnetctl net show -v`` (issue 44).

lnetctl prints YAML: under ``net:`` one item per network (``net type: efa``), each with its ``local NI(s)``
(``- nid: <address>@efa``, ``status``, ``interfaces``) and, with ``-v``, per NI ``statistics`` with
``send_count`` and ``recv_count`` (lustre/lustre-release, lnet/utils/lnetconfig/liblnetconfig.c, which
writes these keys). The client step reads it twice, around a direct write, to prove Lustre rides EFA.

CLI (stdin: the output of ``lnetctl net show -v``): ``lnet.py efa`` prints ``NIDS SENT RECEIVED`` for the
efa network (``0 0 0`` without one).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass


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


def main(argv: list[str]) -> int:
    """``efa`` (or another network's name): print NIDS SENT RECEIVED from stdin."""
    if len(argv) != 1:
        print("usage: lnet.py NET < 'lnetctl net show -v' output", file=sys.stderr)
        return 2
    counts = net_counts(sys.stdin.read(), argv[0])
    print(counts.nids, counts.sent, counts.received)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
