"""preflight's capacity checks (efa_constructs/tools/preflight/capacity.py): every page of Service Quotas,
unused reservations and running nodes against the vCPU quota, a Capacity Block's state, zone, type and size.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from efa_constructs.tools.preflight import NodeGroup, Preflight
from tests.account import (
    REGION,
    _ami,
    _reservation,
    run,
    stubbed_quotas,
    synth,
)

#: cdk_free: nothing here reaches aws-cdk-lib (tests/conftest.py checks), so the floor run leaves these out;
#: moto warns of what its CloudFormation skips
pytestmark = [pytest.mark.cdk_free, pytest.mark.filterwarnings("ignore:Tried to parse")]


def test_the_quota_check_reads_every_page_of_each_answer(account: dict[str, Any]) -> None:
    """Issue 41 item 18: each list the quota check reads is paginated (NextToken); a stand-in of one page
    hid a check that read only the first. Two pages of quotas (Trn's on the second), of running
    instances and of active reservations, each answer checked against botocore's model (Stubber)."""
    session = account["session"]
    quotas = session.client("service-quotas", region_name=REGION)
    ec2 = session.client("ec2", region_name=REGION)
    q_stub, e_stub = Stubber(quotas), Stubber(ec2)

    def quota(code: str, name: str, value: float) -> dict[str, Any]:
        return {"ServiceCode": "ec2", "QuotaCode": code, "QuotaName": name, "Value": value}

    q_stub.add_response(
        "list_service_quotas",
        {
            "Quotas": [
                quota("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", 1152)
            ],
            "NextToken": "q2",
        },
        {"ServiceCode": "ec2"},
    )
    trn_quota = quota("L-2C3B7624", "Running On-Demand Trn instances", 640)
    q_stub.add_response(
        "list_service_quotas", {"Quotas": [trn_quota]}, {"ServiceCode": "ec2", "NextToken": "q2"}
    )
    running = {"Code": 16, "Name": "running"}
    trn = {
        "InstanceType": "trn1.32xlarge",
        "CpuOptions": {"CoreCount": 64, "ThreadsPerCore": 2},
        "State": running,
    }
    filters = [{"Name": "instance-state-name", "Values": ["running"]}]
    e_stub.add_response(
        "describe_instances",
        {"Reservations": [{"Instances": [{**trn, "InstanceId": "i-01"}]}], "NextToken": "i2"},
        {"Filters": filters},
    )
    second = {"Reservations": [{"Instances": [{**trn, "InstanceId": "i-02"}]}]}
    e_stub.add_response("describe_instances", second, {"Filters": filters, "NextToken": "i2"})
    active = [{"Name": "state", "Values": ["active"]}]
    held = {"InstanceType": "trn1.32xlarge", "State": "active", "AvailableInstanceCount": 1}
    e_stub.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [{**held, "CapacityReservationId": "cr-01"}], "NextToken": "r2"},
        {"Filters": active},
    )
    second = {"CapacityReservations": [{**held, "CapacityReservationId": "cr-02"}]}
    e_stub.add_response("describe_capacity_reservations", second, {"Filters": active, "NextToken": "r2"})
    q_stub.activate()
    e_stub.activate()
    pf = Preflight(session)
    pf._clients |= {"service-quotas": quotas, "ec2": ec2}
    pf._types["trn1.32xlarge"] = {"VCpuInfo": {"DefaultVCpus": 128}}
    check = pf.quota(NodeGroup("S", "Cluster", "trn1.32xlarge", 2))
    # 2 running (256) + 2 held unused (256) + 2 more (256) = 768 > 640
    assert check is not None and check.status == "FAIL", check
    assert (
        "'Running On-Demand Trn instances' is 640 vCPUs; 256 run + 256 held by unused reservations"
        in check.found
    )
    q_stub.assert_no_pending_responses()
    e_stub.assert_no_pending_responses()


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_unused_reservations_and_only_running_on_demand_nodes_count_against_the_quota(
    account: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 41 item 3: an active reservation's unused instances count against the On-Demand quota (EC2
    user guide, On-Demand Instance quotas): 2 free trn1.32xlarge hold 256 vCPUs, so a quota of 384 does
    not fit the cluster's 256 more; the line says where the vCPUs went."""
    session = account["session"]
    out = synth(tmp_path, availability_zone="us-east-1a", ami_id=_ami(session), ami_os="ubuntu")
    quotas, _ = stubbed_quotas(session, 384)
    held = [{"CapacityReservationId": "cr-0123456789abcdef0", "InstanceType": "trn1.32xlarge",
             "AvailabilityZone": "us-east-1b", "State": "active", "TotalInstanceCount": 2,
             "AvailableInstanceCount": 2}]  # fmt: skip
    _, text, err = run(account, out, monkeypatch, capsys, quotas, "--json", reservations=held)
    assert text, err
    checks = {c["name"].split(" [")[0]: c for c in json.loads(text)["checks"]}
    assert checks["quota"]["status"] == "FAIL", checks["quota"]
    assert "0 run + 256 held by unused reservations, the cluster needs 256" in checks["quota"]["found"]
    assert "--desired-value 512" in checks["quota"]["fix"]


@pytest.mark.parametrize(
    ("answer", "status", "says"),
    [
        (_reservation(), "PASS", "Capacity Block cr-0123456789abcdef0: active, us-east-1c, 2 of 2 free"),
        (
            _reservation(TotalInstanceCount=1, AvailableInstanceCount=1),
            "FAIL",
            "it holds 1 instances for 2 nodes",
        ),
        (_reservation(AvailabilityZone="us-east-1b"), "FAIL", "it is in us-east-1b, the nodes in us-east-1c"),
        (_reservation(State="expired"), "FAIL", "it is expired"),
        (
            _reservation(State="scheduled", StartDate=datetime(2026, 12, 1, 9, tzinfo=timezone.utc)),
            "WARN",
            "scheduled, starts 2026-12-01 09:00:00+00:00",
        ),
        # EC2 API reference, CapacityReservation: AvailableInstanceCount is what can be launched now; a
        # block not yet active has none free, and that is no fault of it
        (_reservation(State="scheduled", AvailableInstanceCount=0), "WARN", "scheduled, us-east-1c, 0 of 2"),
        (_reservation(AvailableInstanceCount=1), "FAIL", "1 of its instances are free for 2 nodes"),
        # an active block has a StartDate too: only a block still to start says when
        (
            _reservation(StartDate=datetime(2026, 11, 1, 9, tzinfo=timezone.utc)),
            "PASS",
            "cr-0123456789abcdef0: active, us-east-1c, 2 of 2 free",
        ),
    ],
)
def test_a_capacity_block_is_checked_for_state_zone_type_and_size(
    account: dict[str, Any], answer: dict[str, Any], status: str, says: str
) -> None:
    """moto models no capacity reservations: botocore's Stubber answers, in DescribeCapacityReservations'
    own shape (a wrong field name or type fails the test)."""
    ec2 = account["session"].client("ec2", region_name=REGION)
    stub = Stubber(ec2)
    stub.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [answer]},
        {"CapacityReservationIds": ["cr-0123456789abcdef0"]},
    )
    stub.activate()
    pf = Preflight(account["session"])
    pf._clients["ec2"] = ec2
    group = NodeGroup(
        "S",
        "Cluster",
        "trn1.32xlarge",
        2,
        zone="us-east-1c",
        reservation_id="cr-0123456789abcdef0",
        capacity_block=True,
    )
    check = pf.capacity(group)
    assert check is not None and check.status == status and says in check.line(), check
    assert check.status == "PASS" or check.fix


def _preflight(account: dict[str, Any], network: dict[str, Any], vcpus: int = 128) -> Preflight:
    """A Preflight whose DescribeInstanceTypes answer for trn1.32xlarge is `network` (its NetworkInfo)."""
    pf = Preflight(account["session"])
    pf._types["trn1.32xlarge"] = {"NetworkInfo": network, "VCpuInfo": {"DefaultVCpus": vcpus}}
    return pf


@pytest.mark.parametrize(
    ("efas", "cards", "status", "says"),
    [
        (8, 8, "PASS", "8 EFA interfaces on 8 cards (EC2: at most 8 on 8)"),  # all AWS allows
        (9, 8, "FAIL", "asks 9 EFA interfaces on 8 cards; EC2 says trn1.32xlarge takes 8 on 8"),
        (8, 9, "FAIL", "asks 8 EFA interfaces on 9 cards"),
        (0, 0, "PASS", "EC2: trn1.32xlarge takes EFA, at most 8 on 8 cards"),  # ParallelCluster lays them out
    ],
)
def test_the_efa_check_holds_the_template_to_what_ec2_says_at_the_limit(
    account: dict[str, Any], efas: int, cards: int, status: str, says: str
) -> None:
    """DescribeInstanceTypes' NetworkInfo for trn1.32xlarge (EC2 user guide: 8 network cards, 8 EFAs): the
    template's ask at exactly that passes, one more interface or card fails; without NetworkCards the
    card count is MaximumNetworkCards."""
    info = {"EfaSupported": True, "EfaInfo": {"MaximumEfaInterfaces": 8}, "NetworkCards": [{}] * 8}
    check = _preflight(account, info).efa(NodeGroup("S", "Nodes", "trn1.32xlarge", 2, efas, cards))
    assert (check.status, says in check.found) == (status, True), check
    bare = {"EfaSupported": True, "EfaInfo": {"MaximumEfaInterfaces": 8}, "MaximumNetworkCards": 8}
    assert (
        _preflight(account, bare).efa(NodeGroup("S", "Nodes", "trn1.32xlarge", 2, efas, cards)).status
        == status
    )
    refused = _preflight(account, {"EfaSupported": False}).efa(
        NodeGroup("S", "N", "trn1.32xlarge", 2, efas, cards)
    )
    assert refused.status == "FAIL" and "does not support EFA" in refused.found


@pytest.mark.parametrize(("quota", "status"), [(256, "PASS"), (255, "FAIL")])
def test_a_quota_exactly_filled_fits(account: dict[str, Any], quota: int, status: str) -> None:
    """Issue 53's boundary: two trn1.32xlarge need 256 vCPUs (128 each: DescribeInstanceTypes' DefaultVCpus);
    a Trn quota of exactly 256 with nothing running and no reservation fits, 255 does not."""
    pf = _preflight(account, {})
    quotas, _ = stubbed_quotas(account["session"], quota)
    pf._clients["service-quotas"] = quotas
    check = pf.quota(NodeGroup("S", "Nodes", "trn1.32xlarge", 2))
    assert check is not None and check.status == status, check


@pytest.mark.parametrize("reserved", [{"reservation_id": "cr-0123456789abcdef0"}, {"capacity_block": True}])
def test_nodes_in_a_reservation_or_a_block_are_not_held_to_the_on_demand_quota(
    account: dict[str, Any], reserved: dict[str, Any]
) -> None:
    """EC2 user guide, On-Demand Instance quotas: a reservation's instances count against the reservation."""
    assert _preflight(account, {}).quota(NodeGroup("S", "Nodes", "trn1.32xlarge", 2, **reserved)) is None


def test_only_running_on_demand_nodes_of_the_quotas_class_count_with_their_vcpus(
    account: dict[str, Any],
) -> None:
    """EC2 user guide, On-Demand Instance quotas: Spot instances count against the Spot quotas and another
    class against its own; an instance's vCPUs are its CpuOptions' cores x threads (DescribeInstances), or the
    type's DefaultVCpus where no CpuOptions are given. The stack's own nodes are counted apart (an update
    replaces them). The answer is checked against botocore's model (Stubber)."""
    ec2 = account["session"].client("ec2", region_name=REGION)
    stub = Stubber(ec2)
    own = [{"Key": "aws:cloudformation:stack-name", "Value": "S"}]
    instances = [
        {"InstanceType": "trn1.32xlarge", "CpuOptions": {"CoreCount": 64, "ThreadsPerCore": 2}, "Tags": own},
        {"InstanceType": "trn1.32xlarge", "CpuOptions": {"CoreCount": 64, "ThreadsPerCore": 2},
         "InstanceLifecycle": "spot"},
        {"InstanceType": "trn1.32xlarge"},  # no CpuOptions: the type's DefaultVCpus
        {"InstanceType": "trn1.32xlarge", "CpuOptions": {"CoreCount": 32}},  # one thread per core
        {"InstanceType": "p5.48xlarge", "CpuOptions": {"CoreCount": 96, "ThreadsPerCore": 2}},  # the P quota
    ]  # fmt: skip
    filters = [{"Name": "instance-state-name", "Values": ["running"]}]
    stub.add_response(
        "describe_instances", {"Reservations": [{"Instances": instances}]}, {"Filters": filters}
    )
    stub.activate()
    pf = Preflight(account["session"])
    pf._clients["ec2"] = ec2
    pf._types["trn1.32xlarge"] = {"VCpuInfo": {"DefaultVCpus": 128}}
    assert pf._running_vcpus("Running On-Demand Trn instances", "S") == (128 + 128 + 32, 128)
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("zone", "subnet_from", "status", "says"),
    [
        (None, "NetworkStack", "WARN", "the subnet comes from NetworkStack: its zone is not known here"),
        (None, None, "WARN", "the zone is chosen at deploy"),
        ("us-east-1c", "NetworkStack", "PASS", "trn1.32xlarge is offered in us-east-1c"),
        ("us-east-1a", None, "FAIL", "trn1.32xlarge is not offered in us-east-1a"),
    ],
)
def test_the_offered_check_says_what_it_cannot_know_of_an_imported_subnet(
    account: dict[str, Any], zone: str | None, subnet_from: str | None, status: str, says: str
) -> None:
    """moto's DescribeInstanceTypeOfferings offers trn1.32xlarge in us-east-1b, c and f: the nodes' zone is
    held to that list; a subnet imported (its zone unknown at synth) says where it comes from and the zones
    to put it in; a zone chosen at deploy is told which to pass."""
    group = NodeGroup("S", "Cluster", "trn1.32xlarge", 2, zone=zone, subnet_from=subnet_from)
    check = Preflight(account["session"]).offered(group)
    assert (check.status, says in check.found) == (status, True), check
    assert "us-east-1b, us-east-1c, us-east-1f" in check.line() or status == "PASS", check
