"""Bad input refused by the interface layout (core/layout.py) and the instance catalogue (core/catalogue):
each fails at synth naming the value, why, the fix and its id."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_ec2 as ec2

from efa_constructs import (
    Layout,
    NicLayout,
    plan_layout,
)
from tests.refusals import (
    Row,
    S,
    assert_refused,
    call,
    cluster,
    ctx,
    parametrize,
    pcluster,
    pcs_cluster,
    template,
)

ROWS: list[Row] = [
    (
        "unknown type",
        ctx(instance_type="trn1.32xlarg"),
        "instance_type",
        "not in the EFA instance catalogue",
        "efa-cdk:instance-type-unknown",
    ),
    (
        "type without EFA",
        ctx(instance_type="m5.large"),
        "instance_type",
        "does not support EFA",
        "efa-cdk:instance-type-without-efa",
    ),
    (
        "type without EFA in a construct",
        cluster(instance_type=ec2.InstanceType("t3.micro")),
        "instance_type",
        "does not support EFA",
        "efa-cdk:instance-type-without-efa",
    ),
    ("more EFAs than cards", ctx(efa_count="9"), "efa_count", "between 1 and 8", "efa-cdk:efa-count-range"),
    (
        "more EFAs than the type allows",
        call(plan_layout, "i7ie.48xlarge", efa_count=2),
        "efa_count",
        "1 to 1",
        "efa-cdk:efa-count-range",
    ),
    (
        "zero EFAs",
        cluster(nic_layout=Layout.recommended(efa_count=0)),
        "efa_count",
        "between 1 and 8",
        "efa-cdk:efa-count-range",
    ),
    (
        "legacy where cards take only efa-only",
        ctx(instance_type="p6e-gb200.36xlarge", nic_layout="legacy"),
        "nic_layout",
        "accepts only ['efa-only']",
        "efa-cdk:layout-legacy-card",
    ),
    (
        "efa-only as primary",
        call(NicLayout.custom, "trn1.32xlarge", [S(0, 0, "efa-only")]),
        "nic_layout",
        "cannot be efa-only",
        "efa-cdk:layout-invalid",
    ),
    (
        "two EFAs on one card",
        call(NicLayout.custom, "trn1.32xlarge", [S(0, 0, "efa"), S(0, 1, "efa-only")]),
        "nic_layout",
        "at most one EFA per network card",
        "efa-cdk:layout-invalid",
    ),
    (
        "DeviceIndex = card index on p5 (eksctl bug)",
        call(NicLayout.custom, "p5.48xlarge", [S(0, 0, "interface"), S(2, 2, "efa-only")]),
        "nic_layout",
        "below the card's MaximumNetworkInterfaces",
        "efa-cdk:layout-invalid",
    ),
    (
        "card that does not exist",
        call(NicLayout.custom, "p4d.24xlarge", [S(0, 0, "interface"), S(4, 0, "efa-only")]),
        "nic_layout",
        "network cards 0..3",
        "efa-cdk:layout-invalid",
    ),
    (
        "EFA on an ENA-only card",
        call(NicLayout.custom, "p6-b300.48xlarge", [S(0, 0, "efa")]),
        "nic_layout",
        "accepts ['interface']",
        "efa-cdk:layout-invalid",
    ),
    (
        "misspelt interface type",
        call(NicLayout.custom, "trn1.32xlarge", [S(0, 0, "efx")]),
        "nic_layout",
        "unknown interface type",
        "efa-cdk:layout-invalid",
    ),
    (
        "layout planned for another type",
        template(nic_layout=Layout.custom(plan_layout("p5.48xlarge"))),
        "nic_layout",
        "another type",
        "efa-cdk:layout-other-instance-type",
    ),
    (
        "a misspelt PCS login type",
        pcs_cluster(availability_zone="us-east-1c", login_instance_type=ec2.InstanceType("c7i.xlarg")),
        "login_instance_type",
        "not an EC2 instance type",
        "efa-cdk:not-an-ec2-instance-type",
    ),
    (
        "a misspelt head node type",
        pcluster(head_node_instance_type=ec2.InstanceType("c5.2xlarg")),
        "head_node_instance_type",
        "not an EC2 instance type",
        "efa-cdk:not-an-ec2-instance-type",
    ),
    (
        "a custom layout that is not a NicLayout",
        call(Layout.custom, "legacy"),
        "nic_layout",
        "takes a NicLayout",
        "efa-cdk:layout-custom-type",
    ),
]


@parametrize(ROWS)
def test_the_layout_and_catalogue_refuse_bad_input_at_synth(
    make_stack: Any, build: Any, key: str, why: str, code: str
) -> None:
    assert_refused(make_stack, build, key, why, code)
