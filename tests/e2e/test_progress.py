"""The one-machine cluster's waits (tests/e2e/progress.py): they end when the work is done, fail as
stuck when nothing moves, and fail as a slow machine when the work still moves past the ceiling.
The namespace measure is read from real processes in a real network namespace."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import progress


def test_done_ends_the_wait() -> None:
    calls = iter([False, False, True])
    assert progress.until(lambda: next(calls), lambda: 0, lambda: "", what="x", poll=0.01) < 1


def test_nothing_moving_is_stuck_and_says_where() -> None:
    with pytest.raises(AssertionError, match=r"^n0: stuck, nothing moved for 0s; at step 9/9$"):
        progress.until(lambda: False, lambda: 0, lambda: "at step 9/9", what="n0", stall=0.2, poll=0.05)


def test_work_that_moves_past_the_ceiling_is_a_slow_machine_not_a_stuck_node() -> None:
    ticks = iter(range(10_000))
    with pytest.raises(AssertionError, match=r"too slow .* still working after 0s \(load average [\d.]+, "):
        progress.until(
            lambda: False,
            lambda: next(ticks),
            lambda: "at step 9/9",
            what="n0",
            stall=0.2,
            ceiling=0.5,
            poll=0.05,
        )


def test_a_wait_longer_than_the_stall_passes_while_the_work_moves() -> None:
    start = time.monotonic()
    ticks = iter(range(10_000))
    progress.until(
        lambda: time.monotonic() - start > 0.6,
        lambda: next(ticks),
        lambda: "",
        what="n0",
        stall=0.2,
        poll=0.05,
    )


@pytest.fixture
def namespace() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    name = f"efa-e2e-progress-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def _in(ns: str, *cmd: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["ip", "netns", "exec", ns, *cmd])


def test_a_namespace_whose_process_works_moves_and_one_that_sleeps_does_not(namespace: str) -> None:
    sleeper = _in(namespace, "sleep", "30")
    try:
        time.sleep(0.3)
        first = progress.namespace_ticks(namespace)
        time.sleep(0.5)
        assert progress.namespace_ticks(namespace) == first  # a sleeping process uses no CPU
        busy = _in(namespace, "sh", "-c", "while :; do :; done")
        try:
            time.sleep(0.6)
            assert progress.namespace_ticks(namespace) > first
        finally:
            busy.kill()
            busy.wait()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_file_that_grows_moves(tmp_path: Path) -> None:
    log = tmp_path / "efa-cdk.log"
    before = progress.activity([], [log])
    log.write_text("==> step 1/9\n")
    assert progress.activity([], [log]) != before
