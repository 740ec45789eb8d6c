"""Waiting on the one-machine cluster: until done, for as long as the nodes make progress.

A fixed wall clock fails a correct run on a busy machine: CI runs this suite beside the in-process one
and the floor run on 2 cores, and a boot that takes 35 s idle took over 180 s there. So a wait here
ends in one of three ways:

- its condition holds: done;
- nothing moved for `stall` seconds (no process in the watched network namespaces used the CPU, no
  watched file changed): the node is stuck, and the failure names where it stopped;
- it is still moving after `ceiling` seconds: the line says the machine is too slow for the test
  (with its load average), not that the node is broken.

Every step the nodes run is bounded by its own timeout (the longest, fi_pingpong's client, 240 s,
spins the CPU while it waits), so a stuck node is seen as stuck, not as slow.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path

STALL = 150.0  # seconds with nothing moving
CEILING = 1500.0  # seconds in all, still moving


def namespace_ticks(ns: str) -> int:
    """CPU time (clock ticks) of the processes in network namespace `ns`, with their reaped children
    (/proc/PID/stat fields 14-17: utime, stime, cutime, cstime; proc(5))."""
    pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, check=False).stdout
    total = 0
    for pid in pids.split():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        total += sum(int(f) for f in fields[11:15])  # after "pid (comm)", field 14 is the 12th
    return total


def activity(namespaces: Iterable[str], files: Iterable[Path]) -> tuple[object, ...]:
    """What changes while nodes work: each namespace's CPU time and each file's size and time."""
    marks: list[object] = [namespace_ticks(ns) for ns in namespaces]
    for f in files:
        try:
            st = f.stat()
            marks.append((st.st_size, st.st_mtime_ns))
        except OSError:
            marks.append(None)
    return tuple(marks)


def until(
    done: Callable[[], bool],
    moved: Callable[[], object],
    where: Callable[[], str],
    *,
    what: str,
    stall: float = STALL,
    ceiling: float = CEILING,
    poll: float = 1.0,
) -> float:
    """Wait until `done()`; `moved()` returns a value that changes while there is progress; `where()`
    says where the work stands, for the failure. Returns the seconds waited."""
    start = last_move = time.monotonic()
    mark = moved()
    while not done():
        now = time.monotonic()
        if now - last_move > stall:
            raise AssertionError(f"{what}: stuck, nothing moved for {stall:.0f}s; {where()}")
        if now - start > ceiling:
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            raise AssertionError(
                f"{what}: this machine is too slow for the one-machine cluster: still working after "
                f"{ceiling:.0f}s (load average {load}); {where()}"
            )
        time.sleep(poll)
        new = moved()
        if new != mark:
            mark, last_move = new, time.monotonic()
    return time.monotonic() - start
