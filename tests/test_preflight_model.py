"""preflight's quota names (efa_constructs/tools/preflight/model.py): each family held to its own vCPU quota,
every catalogued family classed.
"""

from __future__ import annotations

import re

import pytest

from efa_constructs.tools.preflight import quota_name
from tests.account import CLASS_OF_PREFIX

#: cdk_free: nothing here reaches aws-cdk-lib (tests/conftest.py checks), so the floor run leaves these out;
#: moto warns of what its CloudFormation skips
pytestmark = [pytest.mark.cdk_free, pytest.mark.filterwarnings("ignore:Tried to parse")]


@pytest.mark.parametrize(
    ("itype", "quota"),
    [
        ("trn1.32xlarge", "Trn"),
        ("trn2.48xlarge", "Trn"),
        ("p5.48xlarge", "P"),
        ("p6e-gb200.36xlarge", "P"),
        ("dl1.24xlarge", "DL"),
        ("hpc7g.16xlarge", "HPC"),
        ("g6e.48xlarge", "G and VT"),
        ("c5n.18xlarge", "Standard (A, C, D, H, I, M, R, T, Z)"),
        ("u7i-12tb.224xlarge", "High Memory"),  # issue 41 item 3: L-43DA4232, not Standard
        ("u7in-32tb.224xlarge", "High Memory"),
        ("gr6.8xlarge", "G and VT"),  # L-DB2E81BA
        ("im4gn.16xlarge", "Standard (A, C, D, H, I, M, R, T, Z)"),  # I, not Inf
        ("inf1.24xlarge", "Inf"),
        ("x2idn.32xlarge", "X"),
    ],
)
def test_each_family_is_held_to_its_own_vcpu_quota(itype: str, quota: str) -> None:
    """EC2's On-Demand quotas are per instance class, in vCPUs (EC2 user guide, "On-Demand Instance
    quotas"; the High Memory and G and VT codes as issue 41 read them)."""
    assert quota_name(itype) == f"Running On-Demand {quota} instances"


def test_every_catalogued_family_has_its_quota_class() -> None:
    """Issue 41 item 3: over every type in the catalogue, the quota is the one its class prefix names."""
    from efa_constructs import all_instance_types

    for itype in all_instance_types():
        letters = re.match(r"[a-z]+", itype).group(0)  # type: ignore[union-attr]
        assert letters in CLASS_OF_PREFIX, f"{itype}: add its class ({letters}) to CLASS_OF_PREFIX"
        want = CLASS_OF_PREFIX[letters]
        if want == "Standard":
            want = "Standard (A, C, D, H, I, M, R, T, Z)"
        assert quota_name(itype) == f"Running On-Demand {want} instances", itype
