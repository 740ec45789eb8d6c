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


@pytest.mark.parametrize(
    ("capacity", "count", "zone", "code"),
    [
        (Capacity.reservation(RESERVATION, instance_type="p5.48xlarge"), 2, "us-east-1a",
         "efa-cdk:capacity-other-instance-type"),
        (Capacity.reservation(RESERVATION, availability_zone="us-east-1b", instance_count=4), 2, "us-east-1a",
         "efa-cdk:capacity-other-zone"),
        (Capacity.reservation(RESERVATION, availability_zone="us-east-1a", instance_count=1), 2, "us-east-1a",
         "efa-cdk:capacity-too-small"),
        # the boundaries: exactly the count fits; an unknown zone or count (a token) is not checked at synth
        (Capacity.reservation(RESERVATION, availability_zone="us-east-1a", instance_count=2), 2, "us-east-1a",
         None),
        (Capacity.reservation(RESERVATION, availability_zone="us-east-1b", instance_count=4), 2, None, None),
        (Capacity.reservation(RESERVATION, instance_count=1), None, "us-east-1a", None),
        (Capacity.on_demand(), 1000, "us-east-1a", None),
    ],
)  # fmt: skip
def test_check_fits_holds_the_capacity_to_type_zone_and_count(
    capacity: Capacity, count: int | None, zone: str | None, code: str | None
) -> None:
    plan = NodePlan.resolve("trn1.32xlarge", capacity=capacity)
    if code is None:
        plan.check_fits(count=count, count_name="max_count", availability_zone=zone)
        return
    with pytest.raises(EfaConfigError) as err:
        plan.check_fits(count=count, count_name="max_count", availability_zone=zone)
    assert err.value.code == code
    if code == "efa-cdk:capacity-too-small":  # the orchestrator's own keyword, in the message and the fix
        assert err.value.what == "max_count" and "use max_count <= 1" in str(err.value)
