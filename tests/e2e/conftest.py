"""The one-machine cluster's fixtures, per test module (each module's stacks and nodes apart)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.cluster import Cluster


def _running(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Cluster]:
    c = Cluster(work=tmp_path_factory.mktemp(name))  # logs stay in pytest's temporary directory
    try:
        c.start()
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The AWS namespace, bridge and endpoint; stopped with everything booted on it after the module."""
    yield from _running(tmp_path_factory, "cluster")


@pytest.fixture(scope="module")
def second_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Another AWS namespace, bridge and endpoint, for a second stack whose nodes run beside the
    first's: moto gives each new subnet the same first addresses (10.0.64.4, ...), which one bridge
    cannot carry twice, just as two VPCs never share a link."""
    yield from _running(tmp_path_factory, "second-cluster")
