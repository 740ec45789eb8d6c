"""The form of a device problem, one line: ``<device>: <what> (<reading>): mend: <mend>``, and the mends,
cheapest first. Python 3 standard library only (it runs on the nodes: node/devices.py, node/sysfs_counters.py
and node/boot/mend.sh read and write these lines)."""

from __future__ import annotations

import re
from collections.abc import Iterable

#: The mends, cheapest first: ``watch`` (said and counted, nothing done: the cause may be elsewhere),
#: ``reset`` (drain, then reset the device: ``nvidia-smi -r``, or a reboot where a reset cannot be done),
#: ``reboot``, ``replace``. A fault that persists after its mend climbs to the next (node/boot/mend.sh).
MENDS = ("watch", "reset", "reboot", "replace")


def problem_line(device: str, what: str, reading: str, mend: str) -> str:
    """One problem: ``<device>: <what> (<reading>): mend: <mend>``."""
    return f"{device}: {what} ({reading}): mend: {mend}"


_MEND = re.compile(r": mend: (\w+)\s*$")


def mend_of(text: str) -> str:
    """The mend a problem line asks for (a line without one: a reboot, the ladder's middle)."""
    found = _MEND.search(text)
    return found.group(1) if found and found.group(1) in MENDS else "reboot"


def worst(lines: Iterable[str]) -> str:
    """The most severe mend the lines ask for, or ``none``."""
    asked = [mend_of(text) for text in lines if text.strip()]
    return max(asked, key=MENDS.index) if asked else "none"
