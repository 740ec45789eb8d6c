"""`NodePlan` (efa_constructs/core/node_plan.py): an EFA node resolved once, in the pure core (no CDK).

Expected values come from the catalogue's sources and EC2's rules, not from the plan: trn1.32xlarge has 8
EFA network cards (EC2 user guide, EFA supported instance types), the recommended layout puts ENA plus
efa-only on card 0 and efa-only on the others (one IP per node), and a targeted Capacity Reservation
launches only its type, in its zone, up to its count (EC2 user guide, Capacity Reservations).
"""

from __future__ import annotations

import pytest

from efa_constructs.core import Capacity, Layout
from efa_constructs.core.errors import EfaConfigError
from efa_constructs.core.node_plan import NodePlan

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free

RESERVATION = "cr-0123456789abcdef0"


def test_resolve_defaults_to_the_recommended_layout_on_demand_and_hop_limit_one() -> None:
    plan = NodePlan.resolve("trn1.32xlarge")
    assert plan.instance_type.name == "trn1.32xlarge"
    assert (plan.layout.efa_count, plan.layout.ip_count) == (8, 1)
    assert plan.capacity == Capacity.on_demand() and plan.hop_limit == 1 and plan.root_volume_gib == 200
    assert NodePlan.resolve("trn1.32xlarge", bridged_containers=True).hop_limit == 2  # one hop more
    assert NodePlan.resolve("trn1.32xlarge", nic_layout=Layout.legacy(efa_count=4)).layout.efa_count == 4


def test_resolve_refuses_a_type_without_efa() -> None:
    with pytest.raises(EfaConfigError) as err:
        NodePlan.resolve("t3.micro")
    assert err.value.what == "instance_type"
