"""The one-machine cluster's fixture, one per test module (each module's stacks and nodes apart)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.cluster import Cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The AWS namespace, bridge and endpoint; stopped with everything booted on it after the module."""
    c = Cluster(work=tmp_path_factory.mktemp("cluster"))  # logs stay in pytest's temporary directory
    try:
        c.start()
        yield c
    finally:
        c.close()
