"""preflight's network checks (efa_constructs/tools/preflight/network.py): the route out of an existing
subnet and its free addresses, an image's state and its SSM parameter, the Elastic IPs, FSx for Lustre's
quotas, each at its edge.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from efa_constructs.tools import preflight
from efa_constructs.tools.preflight import NodeGroup, Preflight
from tests.account import (
    REGION,
    SUBNET,
    _fsx_quotas,
    _root,
    run,
    stubbed_quotas,
    synth,
)

#: cdk_free: nothing here reaches aws-cdk-lib (tests/conftest.py checks), so the floor run leaves these out;
#: moto warns of what its CloudFormation skips
pytestmark = [pytest.mark.cdk_free, pytest.mark.filterwarnings("ignore:Tried to parse")]


def test_a_run_asks_for_each_subnet_once(account: dict[str, Any]) -> None:
    """The free-address check and the route out (its main-table fallback, its public-address question) read
    one subnet: DescribeSubnets is asked once a run, as instance types and quotas are."""
    ec2 = account["session"].client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.8.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.8.1.0/24", AvailabilityZone="us-east-1c")["Subnet"]
    gateway = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=gateway, VpcId=vpc)
    (main,) = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["RouteTables"]
    ec2.create_route(RouteTableId=main["RouteTableId"], DestinationCidrBlock="0.0.0.0/0", GatewayId=gateway)
    pf = Preflight(account["session"])
    asked: list[str] = []
    pf.client("ec2").meta.events.register(
        "before-call.ec2.DescribeSubnets", lambda **_: asked.append("DescribeSubnets")
    )
    one = NodeGroup("S", "Cluster", "c5n.18xlarge", 2, subnet_id=subnet["SubnetId"], interfaces=1)
    route, free = pf.route_out(one), pf.subnet(one)
    assert route is not None and route.status == "FAIL" and "MapPublicIpOnLaunch false" in route.found
    assert free is not None and free.status == "PASS"
    assert asked == ["DescribeSubnets"]


def test_an_existing_subnet_without_a_route_out_is_warned_of(account: dict[str, Any]) -> None:
    ec2 = account["session"].client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.1.0/24", AvailabilityZone="us-east-1c")["Subnet"]
    pf = Preflight(account["session"])
    group = NodeGroup("S", "Cluster", "trn1.32xlarge", 2, subnet_id=subnet["SubnetId"])
    check = pf.route_out(group)
    assert check is not None and check.status == "WARN" and "has no default route" in check.found
    gateway = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=gateway, VpcId=vpc)
    table = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", GatewayId=gateway)
    ec2.associate_route_table(RouteTableId=table, SubnetId=subnet["SubnetId"])
    # Issue 60 item 1: an internet gateway carries only a public address's traffic. A trn1.32xlarge node
    # launches with 8 interfaces: EC2 gives it no public address from the subnet (one interface only, EC2 user
    # guide), so without an Elastic IP each the nodes cannot fetch their software.
    many = NodeGroup("S", "Cluster", "trn1.32xlarge", 2, subnet_id=subnet["SubnetId"], interfaces=8)
    check = pf.route_out(many)
    assert (
        check is not None
        and check.status == "FAIL"
        and "8 network interfaces get no public address" in (check.found)
    ), check
    many.elastic_ips = 2
    check = pf.route_out(many)
    assert check is not None and check.status == "PASS" and gateway in check.found
    one = NodeGroup("S", "Cluster", "c5n.18xlarge", 2, subnet_id=subnet["SubnetId"], interfaces=1)
    check = pf.route_out(one)
    assert check is not None and check.status == "FAIL" and "MapPublicIpOnLaunch false" in check.found
    ec2.modify_subnet_attribute(SubnetId=subnet["SubnetId"], MapPublicIpOnLaunch={"Value": True})
    pf = Preflight(account["session"])  # a run reads each subnet once: the changed account is a new run
    check = pf.route_out(one)
    assert check is not None and check.status == "PASS" and gateway in check.found
    free = pf.subnet(NodeGroup("S", "Cluster", "trn1.32xlarge", 300, subnet_id=subnet["SubnetId"]))
    assert (
        free is not None and free.status == "FAIL" and "the nodes take 300" in free.found
    )  # a /24: 251 free


@pytest.mark.parametrize(
    ("route", "status", "says"),
    [
        # EC2 API reference, Route: State "blackhole" when the target is gone (a deleted NAT gateway)
        ({"NatGatewayId": "nat-0a", "State": "blackhole"}, "WARN", "is a blackhole"),
        ({"NatGatewayId": "nat-0a", "State": "active"}, "PASS", "through nat-0a"),
        # a NAT instance: the route names the instance (and its interface)
        ({"InstanceId": "i-0a", "NetworkInterfaceId": "eni-0a", "State": "active"}, "PASS", "i-0a, an"),
        # an appliance's interface alone (a firewall): it must forward too
        ({"NetworkInterfaceId": "eni-0a", "State": "active"}, "PASS", "eni-0a, an instance or appliance"),
        # VPC peering guide: no edge-to-edge routing, so the internet is not reached through a peer
        ({"VpcPeeringConnectionId": "pcx-0a", "State": "active"}, "WARN", "peering connection"),
        ({"TransitGatewayId": "tgw-0a", "State": "active"}, "PASS", "through tgw-0a"),
    ],
)  # fmt: skip
def test_the_route_out_is_judged_by_its_target_and_state(
    account: dict[str, Any], route: dict[str, str], status: str, says: str
) -> None:
    """Answers checked against botocore's model of DescribeRouteTables (Stubber)."""
    ec2 = account["session"].client("ec2", region_name=REGION)
    stub = Stubber(ec2)
    table = {"RouteTableId": "rtb-0123456789abcdef0", "Routes": [
        {"DestinationCidrBlock": "10.0.0.0/16", "GatewayId": "local", "State": "active"},
        {"DestinationCidrBlock": "0.0.0.0/0", **route},
    ]}  # fmt: skip
    stub.add_response("describe_route_tables", {"RouteTables": [table]},
                      {"Filters": [{"Name": "association.subnet-id", "Values": [SUBNET]}]})  # fmt: skip
    stub.activate()
    pf = Preflight(account["session"])
    pf._clients["ec2"] = ec2
    check = pf.route_out(NodeGroup("S", "Cluster", "trn1.32xlarge", 2, subnet_id=SUBNET))
    assert check is not None and check.status == status and says in check.found, check
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("image", "error", "status", "says"),
    [
        ({"State": "deregistered"}, None, "FAIL", "is deregistered, not available"),
        ({"State": "failed"}, None, "FAIL", "is failed, not available"),
        ({"State": "available", "DeprecationTime": "2025-01-01T00:00:00.000Z"}, None, "WARN",
         "deprecated since 2025-01-01"),
        ({"State": "available", "DeprecationTime": "2099-01-01T00:00:00.000Z"}, None, "PASS", "x86_64"),
        # boundaries: a root snapshot as large as the root volume (200 GiB) launches, one GiB more does not
        ({"State": "available", **_root(200)}, None, "PASS", "root 200 GiB"),
        ({"State": "available", **_root(201)}, None, "FAIL", "snapshot is 201 GiB, the root volume 200 GiB"),
        (None, "InvalidAMIID.NotFound", "FAIL", "does not exist in us-east-1"),
    ],
)  # fmt: skip
def test_an_image_that_is_not_available_or_is_deprecated_is_said(
    account: dict[str, Any], image: dict[str, str] | None, error: str | None, status: str, says: str
) -> None:
    """EC2 API reference, Image (State, DeprecationTime); DescribeImages of an unknown id is an error."""
    ec2 = account["session"].client("ec2", region_name=REGION)
    stub = Stubber(ec2)
    ami = "ami-0123456789abcdef0"
    if error:
        stub.add_client_error(
            "describe_images", service_error_code=error, expected_params={"ImageIds": [ami]}
        )
    else:
        found = {"ImageId": ami, "Architecture": "x86_64", **(image or {})}
        stub.add_response("describe_images", {"Images": [found]},
                          {"ImageIds": [ami]})  # fmt: skip
    stub.activate()
    pf = Preflight(account["session"])
    pf._clients["ec2"] = ec2
    pf._types["c5n.18xlarge"] = {"ProcessorInfo": {"SupportedArchitectures": ["x86_64"]}}
    check = pf.image(NodeGroup("S", "Cluster", "c5n.18xlarge", 2, image_id=ami, root_gib=200))
    assert check is not None and check.status == status and says in check.line(), check


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_the_lustre_quotas_hold_the_file_system_beside_the_regions(
    account: dict[str, Any], tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """-c fsx_lustre_capacity_gib=19200 -c fsx_lustre_efa=true: the PERSISTENT_2 storage already in the
    region (moto's FSx) plus the file system's against the storage quota (Stubber), and one more file
    system against the count; over it, FAIL with the increase request."""
    session = account["session"]
    fsx = session.client("fsx", region_name=REGION)
    subnet = session.client("ec2", region_name=REGION).describe_subnets()["Subnets"][0]["SubnetId"]
    fsx.create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=86400, SubnetIds=[subnet],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250},
    )  # fmt: skip
    out = synth(
        tmp_path, availability_zone="us-east-1c", fsx_lustre_capacity_gib="19200", fsx_lustre_efa="true"
    )
    (asked,) = preflight.lustre_file_systems(
        "Trn1EfaCluster", json.loads((out / "Trn1EfaCluster.template.json").read_text())
    )
    assert (asked.capacity_gib, asked.efa) == (19200, True)
    verdicts = {}
    for storage in (100800, 120000):
        quotas, stub = stubbed_quotas(session, 1024)
        _fsx_quotas(quotas, stub, storage, 100)
        _, text, _ = run(account, out, monkeypatch, capsys, quotas, "--json")
        (check,) = [c for c in json.loads(text)["checks"] if c["name"].startswith("lustre [")]
        verdicts[storage] = check
        stub.assert_no_pending_responses()
    failed, passed = verdicts[100800], verdicts[120000]
    assert (
        failed["status"] == "FAIL"
        and "the region has 86400, this file system needs 19200 more" in failed["found"]
    )
    assert "--service-code fsx --quota-code L-8F1B9C74 --desired-value 105600" in failed["fix"]
    assert passed["status"] == "PASS" and "86400 GiB in 1 file systems + 19200 GiB" in passed["found"]


def _stubbed(account: dict[str, Any], service: str) -> tuple[Any, Stubber]:
    client = account["session"].client(service, region_name=REGION)
    return client, Stubber(client)


def test_the_image_is_read_from_its_ssm_parameter_and_a_group_with_none_is_not_checked(
    account: dict[str, Any],
) -> None:
    """An image named by an SSM parameter (moto's SSM holds it) is that parameter's value, checked with
    DescribeImages (Stubber); a group with no image of its own (the launcher's) asks nothing."""
    ami = "ami-0123456789abcdef0"
    account["session"].client("ssm", region_name=REGION).put_parameter(
        Name="/efa-cdk/test/image", Value=ami, Type="String"
    )
    ec2, stub = _stubbed(account, "ec2")
    stub.add_response(
        "describe_images",
        {"Images": [{"ImageId": ami, "State": "available", "Architecture": "x86_64"}]},
        {"ImageIds": [ami]},
    )
    stub.activate()
    pf = Preflight(account["session"])
    pf._clients["ec2"] = ec2
    pf._types["trn1.32xlarge"] = {"ProcessorInfo": {"SupportedArchitectures": ["x86_64"]}}
    check = pf.image(NodeGroup("S", "Cluster", "trn1.32xlarge", 2, image_parameter="/efa-cdk/test/image"))
    assert check is not None and check.status == "PASS" and ami in check.found, check
    assert pf.image(NodeGroup("S", "Cluster", "trn1.32xlarge", 2)) is None
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("quota", "adds", "status"),
    # EC2 user guide, Elastic IP address quota: five per Region unless Service Quotas says otherwise
    [(None, 2, "PASS"), (None, 3, "FAIL"), (6, 3, "PASS"), (6, 4, "FAIL"), (None, 0, None)],
)
def test_the_elastic_ips_fit_the_quota_exactly_or_fail(
    account: dict[str, Any], quota: int | None, adds: int, status: str | None
) -> None:
    """Three addresses in use (DescribeAddresses, Stubber) and the stack's `adds`, against the quota
    'EC2-VPC Elastic IPs' when Service Quotas lists it, else EC2's default of five."""
    quotas, q_stub = _stubbed(account, "service-quotas")
    listed = [
        {"ServiceCode": "ec2", "QuotaCode": "L-0263D0A3", "QuotaName": "EC2-VPC Elastic IPs", "Value": quota}
    ]
    ec2, stub = _stubbed(account, "ec2")
    if adds:
        q_stub.add_response(
            "list_service_quotas", {"Quotas": listed if quota else []}, {"ServiceCode": "ec2"}
        )
        used = [{"PublicIp": f"203.0.113.{i}", "AllocationId": f"eipalloc-{i}"} for i in range(3)]
        stub.add_response("describe_addresses", {"Addresses": used}, {})
    q_stub.activate()
    stub.activate()
    pf = Preflight(account["session"])
    pf._clients |= {"ec2": ec2, "service-quotas": quotas}
    check = pf.elastic_ips(NodeGroup("S", "Cluster", "trn1.32xlarge", 2, elastic_ips=adds))
    assert (check.status if check else None) == status, check
    assert check is None or f"3 of {quota or 5}" in check.found, check
    stub.assert_no_pending_responses()


def test_the_stacks_own_elastic_ips_are_not_counted_twice_on_an_update(account: dict[str, Any]) -> None:
    """Issue 60 item 2: five addresses in use, one of them the stack's own (CloudFormation tags what it makes
    with aws:cloudformation:stack-name), the stack needing one: an update, within the quota of five."""
    quotas, q_stub = _stubbed(account, "service-quotas")
    ec2, stub = _stubbed(account, "ec2")
    q_stub.add_response("list_service_quotas", {"Quotas": []}, {"ServiceCode": "ec2"})
    used = [{"PublicIp": f"203.0.113.{i}", "AllocationId": f"eipalloc-{i}"} for i in range(4)]
    own = {"PublicIp": "203.0.113.9", "AllocationId": "eipalloc-9",
           "Tags": [{"Key": "aws:cloudformation:stack-name", "Value": "S"}]}  # fmt: skip
    stub.add_response("describe_addresses", {"Addresses": [*used, own]}, {})
    q_stub.activate()
    stub.activate()
    pf = Preflight(account["session"])
    pf._clients |= {"ec2": ec2, "service-quotas": quotas}
    check = pf.elastic_ips(NodeGroup("S", "Cluster", "trn1.32xlarge", 1, elastic_ips=1))
    assert check is not None and check.status == "PASS", check
    assert "4 of 5 in use by others (1 of them the stack's own)" in check.found, check


@pytest.mark.parametrize(("free", "status"), [(16, "PASS"), (15, "FAIL")])
def test_the_subnet_holds_every_interface_with_an_address_exactly_or_fails(
    account: dict[str, Any], free: int, status: str
) -> None:
    """Four nodes of four interfaces with an address each (EFA-only ones take none) need 16 free
    addresses (DescribeSubnets' AvailableIpAddressCount, Stubber); a subnet from outside the assembly is
    said to be unchecked."""
    ec2, stub = _stubbed(account, "ec2")
    subnet = {"SubnetId": SUBNET, "AvailableIpAddressCount": free, "AvailabilityZone": "us-east-1c"}
    stub.add_response("describe_subnets", {"Subnets": [subnet]}, {"SubnetIds": [SUBNET]})
    stub.activate()
    pf = Preflight(account["session"])
    pf._clients["ec2"] = ec2
    check = pf.subnet(NodeGroup("S", "Cluster", "trn1.32xlarge", 4, subnet_id=SUBNET, interfaces_with_ip=4))
    assert check is not None and (check.status, "16" in check.found) == (status, True), check
    imported = pf.subnet(NodeGroup("S", "Cluster", "trn1.32xlarge", 4, subnet_from="the export Net:Subnet"))
    assert imported is not None and imported.status == "WARN" and "not checked" in imported.found


@pytest.mark.parametrize(
    ("storage", "count", "status", "says"),
    [
        (7200, 2, "PASS", "2400 GiB in 1 file systems + 4800 GiB"),
        (7199, 2, "FAIL", "the region has 2400, this file system needs 4800 more"),
        (7200, 1, "FAIL", "the region has 1, this file system needs 1 more"),
        (7200, None, "WARN", "no FSx quota named"),
    ],
)
def test_the_lustre_quotas_count_only_other_persistent_2_lustre_file_systems_at_their_edge(
    account: dict[str, Any], storage: int, count: int | None, status: str, says: str
) -> None:
    """The region holds a PERSISTENT_2 Lustre file system of 2400 GiB, a SCRATCH_2 one, an ONTAP one and
    this stack's own (an update: its CloudFormation tags name the stack and the resource); only the first
    counts against FSx's PERSISTENT_2 quotas (DescribeFileSystems and Service Quotas, Stubber)."""

    def fs(kind: str, deployment: str, gib: int, stack: str = "Other") -> dict[str, Any]:
        tags = [
            {"Key": "aws:cloudformation:stack-name", "Value": stack},
            {"Key": "aws:cloudformation:logical-id", "Value": "Fs"},
        ]
        return {
            "FileSystemId": f"fs-0{gib:016x}",
            "FileSystemType": kind,
            "StorageCapacity": gib,
            "LustreConfiguration": {"DeploymentType": deployment},
            "Tags": tags,
        }

    file_systems = [
        fs("LUSTRE", "PERSISTENT_2", 2400),
        fs("LUSTRE", "SCRATCH_2", 1200),
        fs("ONTAP", "PERSISTENT_2", 1024),
        fs("LUSTRE", "PERSISTENT_2", 4800, stack="S"),
    ]
    fsx, f_stub = _stubbed(account, "fsx")
    f_stub.add_response("describe_file_systems", {"FileSystems": file_systems}, {})
    quotas, q_stub = _stubbed(account, "service-quotas")
    _fsx_quotas(quotas, q_stub, storage, count)
    f_stub.activate()
    q_stub.activate()
    pf = Preflight(account["session"])
    pf._clients |= {"fsx": fsx, "service-quotas": quotas}
    check = pf.lustre(preflight.LustreAsk("S", "Fs", 4800, True))
    assert (check.status, says in check.found) == (status, True), check
