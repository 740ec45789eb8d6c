"""`efa-cdk preflight` and `efa-cdk status` against an emulated account (issue 35).

moto's server stands in for the account wherever moto models the API: STS, SSM (the CDK bootstrap
version, image parameters), EC2's instance types, zone offerings, instances, key pairs, images, subnets
and addresses, CloudFormation, Auto Scaling and CloudWatch. Where moto has no backend, botocore's Stubber
answers, and validates each request and response against botocore's own service model: Service Quotas
for EC2's vCPU quotas (moto models only VPC's) and EC2's DescribeCapacityReservations. Each check has a
case where the account is wrong and the command says so, with the fix.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_cdk import aws_ec2 as ec2
from botocore.stub import Stubber

from efa_constructs.tools import preflight, status
from efa_constructs.tools.preflight import NodeGroup, Preflight, node_groups, quota_name
from tests.helpers import cdk_json_context, moto_server

REGION = "us-east-1"
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse")  # moto: what its CloudFormation skips


@pytest.fixture(scope="module")
def account() -> Iterator[dict[str, Any]]:
    """moto's server on a free port, and credentials that reach only it."""
    with moto_server("preflight") as env, pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        mp.delenv("AWS_PROFILE", raising=False)
        yield {"session": boto3.session.Session(region_name=REGION)}


def synth(tmp: Path, **context: str) -> Path:
    """Trn1EfaCluster synthesized into a cloud assembly, as `npx cdk synth` writes it."""
    import aws_cdk as cdk

    from stacks.cluster_stack import EfaClusterStack
    from stacks.params import ClusterParams

    out = tmp / "cdk.out"
    app = cdk.App(outdir=str(out), context=cdk_json_context())
    params = ClusterParams.from_context({"node_count": "2", **context}, default_instance_type="trn1.32xlarge")
    EfaClusterStack(app, "Trn1EfaCluster", params=params)
    app.synth()
    return out


def stubbed_quotas(session: Any, vcpus: float, *, calls: int = 1) -> tuple[Any, Stubber]:
    """Service Quotas' answer for EC2's Trn quota, `calls` times, checked against botocore's model."""
    client = session.client("service-quotas", region_name=REGION)
    stub = Stubber(client)
    quota = {
        "ServiceCode": "ec2",
        "QuotaCode": "L-2C3B7624",
        "QuotaName": "Running On-Demand Trn instances",
        "Value": vcpus,
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
    }
    for _ in range(calls):
        stub.add_response("list_service_quotas", {"Quotas": [quota]}, {"ServiceCode": "ec2"})
    stub.activate()
    return client, stub


def answer_reservations(client: Any, reservations: list[dict[str, Any]]) -> None:
    """moto has no Capacity Reservations: the ec2 `client` answers DescribeCapacityReservations with
    `reservations`, the response checked against botocore's model of it (as Stubber checks), every other
    call still going to moto."""
    from botocore.awsrequest import AWSResponse
    from botocore.validate import ParamValidator

    operation = client.meta.service_model.operation_model("DescribeCapacityReservations")
    answer = {"CapacityReservations": reservations}
    report = ParamValidator().validate(answer, operation.output_shape)
    assert not report.has_errors(), report.generate_report()

    def respond(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        return AWSResponse("https://moto", 200, {}, None), answer

    client.meta.events.register("before-call.ec2.DescribeCapacityReservations", respond)


def run(
    account: dict[str, Any],
    out: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
    quotas: Any,
    *args: str,
    reservations: list[dict[str, Any]] | None = None,
    stacks: tuple[str, ...] = ("Trn1EfaCluster",),
) -> tuple[int, str, str]:
    """The command as a user runs it, with Service Quotas answered by the stub, and Capacity
    Reservations by `reservations` (default: none)."""
    real = Preflight.client

    def client(self: Preflight, service: str) -> Any:
        if service == "service-quotas":
            return quotas
        made = real(self, service)
        if service == "ec2" and not getattr(made, "_answers_reservations", False):
            answer_reservations(made, reservations or [])
            made._answers_reservations = True
        return made

    monkeypatch.setattr(Preflight, "client", client)
    code = preflight.main(list(stacks), out, None, "--json" in args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_an_auto_scaling_groups_zone_comes_from_the_group(tmp_path: Path) -> None:
    """Issue 41 item 3: an Auto Scaling group's launch template has no subnet (the group's
    VPCZoneIdentifier has it), so the zone was lost and a reservation in another zone passed."""
    out = synth(tmp_path, availability_zone="us-east-1a", node_group="asg")
    (group,) = node_groups("Trn1EfaCluster", json.loads((out / "Trn1EfaCluster.template.json").read_text()))
    assert (group.zone, group.count) == ("us-east-1a", 2)


def test_the_template_says_what_the_account_must_have(tmp_path: Path) -> None:
    out = synth(tmp_path, availability_zone="us-east-1a", key_pair="mine")
    (group,) = node_groups("Trn1EfaCluster", json.loads((out / "Trn1EfaCluster.template.json").read_text()))
    assert (group.instance_type, group.count, group.zone) == ("trn1.32xlarge", 2, "us-east-1a")
    assert (group.efa_interfaces, group.network_cards) == (8, 8)  # trn1.32xlarge (EFA-FACTS.md)
    assert (
        group.key_name == "mine"
        and group.image_parameter
        and group.image_parameter.startswith("/aws/service/")
    )


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


#: Every class prefix of the catalogue's families and the quota EC2's user guide puts it under: a new
#: family in the catalogue must be added here (and to QUOTA_CLASSES), never fall into Standard unseen.
CLASS_OF_PREFIX = {"c": "Standard", "dl": "DL", "f": "F", "g": "G and VT", "gr": "G and VT",
                   "hpc": "HPC", "i": "Standard", "im": "Standard", "inf": "Inf", "m": "Standard",
                   "p": "P", "r": "Standard", "trn": "Trn", "u": "High Memory", "vt": "G and VT",
                   "x": "X"}  # fmt: skip


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


def _ami(session: Any) -> str:
    images = session.client("ec2", region_name=REGION).describe_images(Owners=["amazon"])["Images"]
    return next(i["ImageId"] for i in images if i.get("Architecture") == "x86_64")


def test_a_ready_account_passes(
    account: dict[str, Any], tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    session = account["session"]
    session.client("ssm", region_name=REGION).put_parameter(
        Name=preflight.BOOTSTRAP_VERSION_PARAMETER, Value="30", Type="String", Overwrite=True
    )
    out = synth(tmp_path, availability_zone="us-east-1c", ami_id=_ami(session), ami_os="ubuntu")
    quotas, stub = stubbed_quotas(session, 1024)
    code, text, err = run(account, out, monkeypatch, capsys, quotas)
    assert code == 0, text + err
    lines = text.splitlines()
    assert all(line.startswith("PASS") for line in lines), text
    assert any("offered [" in line and "trn1.32xlarge is offered in us-east-1c" in line for line in lines)
    assert any("'Running On-Demand Trn instances' 1024 vCPUs: 0 run + 256 needed" in line for line in lines)
    assert any("bootstrap version 30 (>= 6)" in line for line in lines)
    stub.assert_no_pending_responses()


def test_the_bootstrap_check_reads_the_qualifier_the_stacks_were_synthesized_with(
    account: dict[str, Any], tmp_path: Path
) -> None:
    """A team's own qualifier (cdk.json's @aws-cdk/core:bootstrapQualifier, CDK's bootstrapping guide):
    the stacks read /cdk-bootstrap/<qualifier>/version, so that parameter is the one checked."""
    import aws_cdk as cdk

    from stacks.cluster_stack import EfaClusterStack
    from stacks.params import ClusterParams

    out = tmp_path / "cdk.out"
    app = cdk.App(
        outdir=str(out), context={**cdk_json_context(), "@aws-cdk/core:bootstrapQualifier": "team1"}
    )
    EfaClusterStack(
        app, "Trn1EfaCluster", params=ClusterParams.from_context({}, default_instance_type="trn1.32xlarge")
    )
    app.synth()
    need = preflight.bootstrap_required(preflight.templates(out, [])["Trn1EfaCluster"])
    assert need == ("/cdk-bootstrap/team1/version", 6)
    ssm = account["session"].client("ssm", region_name=REGION)
    ssm.put_parameter(Name=preflight.BOOTSTRAP_VERSION_PARAMETER, Value="30", Type="String", Overwrite=True)
    pf = Preflight(account["session"])
    (_, missing) = pf.run([], dict([need]))
    assert missing.status == "FAIL" and "no /cdk-bootstrap/team1/version" in missing.found, missing
    assert "npx cdk bootstrap --qualifier team1 aws://" in missing.fix
    ssm.put_parameter(Name="/cdk-bootstrap/team1/version", Value="5", Type="String")
    (_, old) = pf.run([], dict([need]))
    assert old.status == "FAIL" and "bootstrap version 5 (/cdk-bootstrap/team1/version)" in old.found
    ssm.put_parameter(Name="/cdk-bootstrap/team1/version", Value="30", Type="String", Overwrite=True)
    (_, ok) = pf.run([], dict([need]))
    assert ok.status == "PASS", ok


def test_parallelcluster_queues_are_checked_from_the_clusters_configuration(
    account: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 41 item 3: the queues of the configuration the stack writes (its output) are node groups:
    the queue's type in the queue's zone (moto offers trn1 in b, c and f only), its MaxCount against the
    quota; a configuration that cannot be read is a WARN saying the queues were not checked."""
    import aws_cdk as cdk

    from stacks.parallel_cluster_stack import EfaParallelClusterStack
    from stacks.params import PclusterParams

    out = tmp_path / "cdk.out"
    app = cdk.App(outdir=str(out), context=cdk_json_context())
    params = PclusterParams.from_context(
        {"availability_zone": "us-east-1a"}, default_instance_type="trn1.32xlarge"
    )
    EfaParallelClusterStack(app, "Trn1ParallelCluster", params=params)
    app.synth()
    quotas, _ = stubbed_quotas(account["session"], 0)
    code, text, err = run(
        account, out, monkeypatch, capsys, quotas, "--json", stacks=("Trn1ParallelCluster",)
    )
    assert code == 1, text + err
    checks = {c["name"]: c for c in json.loads(text)["checks"]}
    where = "[Trn1ParallelCluster/queue compute/trn1-32xlarge (2 x trn1.32xlarge)]"
    assert checks[f"offered {where}"]["found"] == "trn1.32xlarge is not offered in us-east-1a"
    assert "the cluster needs 256" in checks[f"quota {where}"]["found"]
    assert checks[f"efa {where}"]["status"] == "PASS"
    # the configuration's output cut short: said, not silently skipped
    path = out / "Trn1ParallelCluster.template.json"
    template = json.loads(path.read_text())
    template["Outputs"]["ParallelClusterConfig"]["Value"] = "# ParallelCluster 3.16.3\nScheduling: [unclosed"
    path.write_text(json.dumps(template))
    quotas, _ = stubbed_quotas(account["session"], 0, calls=0)
    code, text, err = run(
        account, out, monkeypatch, capsys, quotas, "--json", stacks=("Trn1ParallelCluster",)
    )
    (note,) = [c for c in json.loads(text)["checks"] if c["name"].startswith("parallelcluster")]
    assert note["status"] == "WARN" and "its queues were not checked" in note["found"], note
    assert not [c for c in json.loads(text)["checks"] if "queue compute" in c["name"]]


@pytest.mark.parametrize("references", ["weak", "strong"])
def test_a_subnet_imported_from_another_stack_of_the_assembly_is_followed_or_said(
    tmp_path: Path, references: str
) -> None:
    """Issue 41 item 3: a VPC made in one stack and used by another (CDK writes Fn::ImportValue of the
    network stack's export): the node group's zone is read in the exporting stack; an export the
    assembly does not hold is named, and the zone and subnet checks say they could not look."""
    import aws_cdk as cdk

    from efa_constructs import EfaCluster, NodeSoftware

    out = tmp_path / "cdk.out"
    context = {**cdk_json_context(), "@aws-cdk/core:defaultCrossStackReferences": references}
    app = cdk.App(outdir=str(out), context=context)
    network = cdk.Stack(app, "Network")
    vpc = ec2.Vpc(network, "Vpc", availability_zones=["us-east-1c"], nat_gateways=0, subnet_configuration=[
        ec2.SubnetConfiguration(name="nodes", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])  # fmt: skip
    cluster = cdk.Stack(app, "Cluster")
    EfaCluster(cluster, "C", vpc=vpc, instance_type=ec2.InstanceType("trn1.32xlarge"), node_count=2,
               node_software=NodeSoftware.none())  # fmt: skip
    app.synth()
    found = preflight.templates(out, ["Cluster"])
    # the cross-stack reference CDK writes: Fn::ImportValue (its default), Fn::GetStackOutput ("weak")
    wrote = "Fn::GetStackOutput" if references == "weak" else "Fn::ImportValue"
    assert wrote in json.dumps(found["Cluster"])
    exports = preflight.assembly_exports(preflight._every_template(out, found))
    (group,) = node_groups("Cluster", found["Cluster"], exports)
    assert group.zone == "us-east-1c" and group.subnet_from is None
    (alone,) = node_groups("Cluster", found["Cluster"], {})  # the exporting stack not in the assembly
    said = "output Network/Publish" if references == "weak" else "export Network:ExportsOutput"
    assert alone.zone is None and alone.subnet_from is not None and said in alone.subnet_from, alone
    pf = Preflight(boto3.session.Session(region_name=REGION))
    ec2_client = pf.session.client("ec2", region_name=REGION)
    stub = Stubber(ec2_client)
    stub.add_response(
        "describe_instance_type_offerings",
        {
            "InstanceTypeOfferings": [
                {
                    "InstanceType": "trn1.32xlarge",
                    "LocationType": "availability-zone",
                    "Location": "us-east-1c",
                }
            ]
        },
    )
    stub.activate()
    pf._clients["ec2"] = ec2_client
    offered, subnet = pf.offered(alone), pf.subnet(alone)
    assert offered.status == "WARN" and "its zone is not known here" in offered.found, offered
    assert subnet is not None and subnet.status == "WARN" and "not checked" in subnet.found


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


def test_each_stack_is_checked_in_the_region_it_was_synthesized_for(
    account: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 42: a stack synthesized for us-west-2 deploys there whatever the AWS configuration says,
    so preflight asks us-west-2 for it; an environment-agnostic stack is checked in --region."""
    import aws_cdk as cdk
    from aws_cdk import aws_sns as sns

    out = tmp_path / "cdk.out"
    app = cdk.App(outdir=str(out), context=cdk_json_context())
    west = cdk.Stack(app, "West", env=cdk.Environment(region="us-west-2"))
    anywhere = cdk.Stack(app, "Anywhere")
    for stack in (west, anywhere):
        sns.Topic(stack, "T")
    app.synth()
    for where in ("us-west-2", "eu-west-1"):
        ssm = account["session"].client("ssm", region_name=where)
        ssm.put_parameter(
            Name=preflight.BOOTSTRAP_VERSION_PARAMETER, Value="30", Type="String", Overwrite=True
        )
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # the configuration names another region
    assert preflight.main([], out, "eu-west-1", True) == 0  # a WARN: exit 0
    body = json.loads(capsys.readouterr().out)
    assert body["regions"] == {"West": "us-west-2", "Anywhere": "eu-west-1"}
    (said,) = [c for c in body["checks"] if c["name"] == "region"]  # --region was not silently set aside
    assert said["status"] == "WARN" and "West was synthesized for us-west-2" in said["found"]
    creds = [c["found"] for c in body["checks"] if c["name"] == "credentials"]
    assert sorted(f.split(" in ")[1].split(" ")[0] for f in creds) == ["eu-west-1", "us-west-2"]


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


def test_a_wrong_account_fails_naming_each_problem_and_its_fix(
    account: dict[str, Any], tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """Issue 35's account: no trn1 in the chosen zone, a quota of 0, a missing key pair, no bootstrap."""
    session = account["session"]
    session.client("ssm", region_name=REGION).delete_parameter(Name=preflight.BOOTSTRAP_VERSION_PARAMETER)
    out = synth(
        tmp_path, availability_zone="us-east-1a", key_pair="nobody", ami_id=_ami(session), ami_os="ubuntu"
    )
    quotas, _ = stubbed_quotas(session, 0)
    code, text, _ = run(account, out, monkeypatch, capsys, quotas, "--json")
    assert code == 1
    checks = {c["name"].split(" [")[0]: c for c in json.loads(text)["checks"]}
    assert checks["bootstrap"]["status"] == "FAIL" and "npx cdk bootstrap" in checks["bootstrap"]["fix"]
    assert checks["offered"]["status"] == "FAIL"
    assert checks["offered"]["found"] == "trn1.32xlarge is not offered in us-east-1a"
    assert "us-east-1b, us-east-1c, us-east-1f" in checks["offered"]["fix"]  # moto's offerings for trn1
    assert (
        checks["quota"]["status"] == "FAIL"
        and "0 vCPUs; 0 run, the cluster needs 256" in checks["quota"]["found"]
    )
    assert "--quota-code L-2C3B7624 --desired-value 256" in checks["quota"]["fix"]
    assert (
        checks["key pair"]["status"] == "FAIL" and "no key pair named nobody" in checks["key pair"]["found"]
    )
    assert checks["efa"]["status"] == "PASS"  # moto's DescribeInstanceTypes: 8 EFAs on 8 cards


def _reservation(**overrides: Any) -> dict[str, Any]:
    base = {
        "CapacityReservationId": "cr-0123456789abcdef0",
        "InstanceType": "trn1.32xlarge",
        "AvailabilityZone": "us-east-1c",
        "State": "active",
        "TotalInstanceCount": 2,
        "AvailableInstanceCount": 2,
        "InstancePlatform": "Linux/UNIX",
    }
    return base | overrides


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


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (
            "UnauthorizedOperation",
            "ec2:DescribeInstanceTypeOfferings was denied. Fix: allow ec2:DescribeInstanceTypeOfferings",
        ),
        ("RequestLimitExceeded", "ec2:DescribeInstanceTypeOfferings was throttled (RequestLimitExceeded)"),
    ],
)
def test_a_denied_or_throttled_call_is_one_line_naming_the_permission(
    account: dict[str, Any], code: str, says: str
) -> None:
    ec2 = account["session"].client("ec2", region_name=REGION)
    stub = Stubber(ec2)
    stub.add_client_error("describe_instance_type_offerings", service_error_code=code, service_message="no")
    stub.activate()
    pf = Preflight(account["session"])
    pf._clients["ec2"] = ec2
    group = NodeGroup("S", "Cluster", "trn1.32xlarge", 2, zone="us-east-1c")
    check = pf._guard("offered", lambda: pf.offered(group))  # as run() guards each check
    assert check is not None and check.status == "FAIL" and says in check.line(), check


def test_no_credentials_is_one_line_not_a_traceback(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    out = tmp_path / "cdk.out"
    out.mkdir()
    (out / "Trn1EfaCluster.template.json").write_text("{}")
    manifest = {"artifacts": {"Trn1EfaCluster": {"type": "aws:cloudformation:stack",
                              "properties": {"templateFile": "Trn1EfaCluster.template.json"}}}}  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert preflight.main(["Trn1EfaCluster"], out, REGION, False) == 4
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: preflight: ") and "credentials" in err


def test_the_stacks_are_the_manifests_not_every_template_file(tmp_path: Path) -> None:
    """A nested stack's template (CDK writes <Parent><Nested><hash>.nested.template.json beside its
    parent's) is its parent's asset: preflight checks the manifest's stacks only."""
    out = _assembly(tmp_path, REGION)
    (out / "SNestedA1B2C3D4.nested.template.json").write_text(json.dumps({"Resources": {}}))
    assert list(preflight.templates(out, [])) == ["S"]
    with pytest.raises(
        preflight.PreflightError, match=r"no template for SNestedA1B2C3D4\.nested in .* \(it has S\)"
    ):
        preflight.templates(out, ["SNestedA1B2C3D4.nested"])
    (out / "manifest.json").write_text("[]")
    with pytest.raises(preflight.PreflightError, match="is not a cloud assembly manifest"):
        preflight.templates(out, [])


def test_without_a_cloud_assembly_it_says_how_to_make_one(tmp_path: Path, capsys: Any) -> None:
    assert preflight.main([], tmp_path / "cdk.out", REGION, False) == 4
    assert "synthesize first (npx cdk synth" in capsys.readouterr().err


def test_status_shows_the_nodes_alarms_and_benchmarks_of_a_stack_created_in_the_emulator(
    account: dict[str, Any], tmp_path: Path, capsys: Any
) -> None:
    from tests.moto_compat import moto_compatible

    session = account["session"]
    out = synth(tmp_path, availability_zone="us-east-1c", ami_id=_ami(session), ami_os="ubuntu")
    template = json.loads((out / "Trn1EfaCluster.template.json").read_text())
    cfn = session.client("cloudformation", region_name=REGION)
    body = moto_compatible(template, _ami(session), session.client("ssm", region_name=REGION))
    # moto launches an instance from no launch template field: give it the template's type and subnet
    lts = {k: v for k, v in body["Resources"].items() if v["Type"] == "AWS::EC2::LaunchTemplate"}
    for r in body["Resources"].values():
        if r["Type"] == "AWS::EC2::Instance":
            data = lts[r["Properties"]["LaunchTemplate"]["LaunchTemplateId"]["Ref"]]["Properties"][
                "LaunchTemplateData"
            ]
            r["Properties"]["InstanceType"] = data["InstanceType"]
            r["Properties"]["SubnetId"] = data["NetworkInterfaces"][0]["SubnetId"]
    cfn.create_stack(
        StackName="Trn1EfaCluster", TemplateBody=json.dumps(body), Capabilities=["CAPABILITY_IAM"]
    )
    resources = cfn.list_stack_resources(StackName="Trn1EfaCluster")["StackResourceSummaries"]
    nodes = sorted(r["PhysicalResourceId"] for r in resources if r["ResourceType"] == "AWS::EC2::Instance")
    cw = session.client("cloudwatch", region_name=REGION)
    # moto's CloudFormation creates no alarms: made here as CloudFormation names them (<stack>-<id>-<suffix>)
    for name, metric in (("UnhealthyNodes", "EfaUnhealthyNodes"), ("HeldBack", "EfaReplacementsHeldBack")):
        cw.put_metric_alarm(
            AlarmName=f"Trn1EfaCluster-ClusterMonitoring{name}-ABC123",
            Namespace="EfaCdk/Trn1EfaCluster/Cluster",
            MetricName=metric,
            Statistic="Maximum",
            Period=300,
            EvaluationPeriods=1,
            Threshold=0,
            ComparisonOperator="GreaterThanThreshold",
        )
    cw.set_alarm_state(
        AlarmName="Trn1EfaCluster-ClusterMonitoringUnhealthyNodes-ABC123",
        StateValue="ALARM",
        StateReason="a node failed its EFA check",
    )
    cw.put_metric_data(
        Namespace="EfaCdk/Trn1EfaCluster/Cluster",
        MetricData=[
            {
                "MetricName": "EfaHealthy",
                "Dimensions": [{"Name": "InstanceId", "Value": nodes[0]}],
                "Value": 1,
            }
        ],
    )
    assert status.main("Trn1EfaCluster", None, True) == 0
    s = json.loads(capsys.readouterr().out)
    assert sorted(n["id"] for n in s["nodes"]) == nodes and len(nodes) == 2
    assert all(
        (n["state"], n["zone"], n["type"]) == ("running", "us-east-1c", "trn1.32xlarge") for n in s["nodes"]
    )
    by_id = {n["id"]: n for n in s["nodes"]}
    assert by_id[nodes[0]]["last_health_check"].startswith("healthy at ")
    assert by_id[nodes[1]]["last_health_check"] is None
    states = {a["metric"]: a["state"] for a in s["alarms"]}
    assert states == {"EfaUnhealthyNodes": "ALARM", "EfaReplacementsHeldBack": "OK"}  # moto starts OK
    assert status.main("Trn1EfaCluster", None, False) == 0
    text = capsys.readouterr().out
    assert (
        text.startswith("Trn1EfaCluster: CREATE_COMPLETE\nnodes (2):")
        and "EFA verified: yes (signalled)" in text
    )
    assert "ALARM             Trn1EfaCluster-ClusterMonitoringUnhealthyNodes-ABC123" in text
    assert s["benchmarks_of"] == "the stack's creation"
    # issue 41 item 2: a later generation's leader keeps its results in the results parameter (as
    # node/boot/benchmarks.sh writes it); status shows those, naming the generation and when
    (results,) = [
        r["PhysicalResourceId"] for r in resources if r["PhysicalResourceId"].endswith("/benchmark-results")
    ]
    kept = {"generation": "0e2e0000000000b2", "at": "2026-11-25T10:00:00Z", "status": "SUCCESS",
            "data": [{"benchmark": "fi_pingpong", "ok": True, "peak_gbytes_s": 12.5}]}  # fmt: skip
    session.client("ssm", region_name=REGION).put_parameter(
        Name=results, Value=json.dumps(kept), Overwrite=True, Tier="Intelligent-Tiering"
    )
    assert status.main("Trn1EfaCluster", None, True) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["benchmarks_of"] == {"generation": "0e2e0000000000b2", "at": "2026-11-25T10:00:00Z"}
    assert [b["benchmark"] for b in s["benchmarks"]] == ["fi_pingpong"]
    assert s["benchmarks"][0]["line_rate_fraction"] == round(12.5 * 8 / 800, 3)
    assert status.main("Trn1EfaCluster", None, False) == 0
    assert "benchmarks (generation 0e2e0000000000b2, 2026-11-25T10:00:00Z):" in capsys.readouterr().out


def test_status_of_a_stack_that_does_not_exist_is_one_line(account: dict[str, Any], capsys: Any) -> None:
    assert status.main("NoSuchStack", None, False) == 4
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cloudformation:DescribeStacks" in err and "NoSuchStack" in err


@pytest.mark.parametrize(
    ("outputs", "fraction"),
    [
        # the stack's machine-readable output (issue 42: status reads values, not prose), over the text
        ({"EfaLineRateGbps": "800", "Layout": "trn1.32xlarge legacy: 8 EFA/node, 1 Gbps EFA line rate"}, 0.8),
        # a stack made before the output existed: its Layout text
        ({"Layout": "trn1.32xlarge recommended: 8 EFA/node, 1 IP/node, 800 Gbps EFA line rate"}, 0.8),
        ({}, None),
    ],
)  # fmt: skip
def test_benchmarks_are_read_against_the_line_rate(outputs: dict[str, str], fraction: float | None) -> None:
    results = [{"benchmark": "nccom-test", "ok": True, "peak_gbytes_s": 80.0}]
    (row,) = status._benchmarks(
        {"BenchmarkResults": json.dumps({"benchmarks": json.dumps(results)}), **outputs}
    )
    assert row.get("line_rate_fraction") == fraction  # 80 GB/s = 640 Gbps of 800


@pytest.mark.parametrize(
    ("answer", "status", "says"),
    [
        ({"CapacityReservations": [{"CapacityReservationId": "cr-0123456789abcdef0",
                                    "NetworkNodes": ["nn-spine", "nn-block", "nn-leaf"]}]},
         "PASS", "places its instances under nn-spine > nn-block > nn-leaf"),
        ("UnsupportedOperation", "WARN", "no topology for cr-0123456789abcdef0 (UnsupportedOperation)"),
        # a region without the API, or any other answer: information missing, a WARN (issue 41 item 3)
        ("InvalidAction", "WARN", "no topology for cr-0123456789abcdef0 (InvalidAction)"),
        ("RequestLimitExceeded", "WARN", "(RequestLimitExceeded)"),
        # a refusal of the call is the permission to add
        ("UnauthorizedOperation", "FAIL", "ec2:DescribeCapacityReservationTopology was denied"),
    ],
)  # fmt: skip
def test_a_reservation_s_placement_is_shown_before_launch(
    account: dict[str, Any], answer: Any, status: str, says: str
) -> None:
    """DescribeCapacityReservationTopology (moto has no backend: botocore's Stubber, its shapes checked)."""
    ec2 = account["session"].client("ec2", region_name=REGION)
    stub = Stubber(ec2)
    if isinstance(answer, str):
        stub.add_client_error("describe_capacity_reservation_topology", service_error_code=answer)
    else:
        stub.add_response("describe_capacity_reservation_topology", answer,
                          {"CapacityReservationIds": ["cr-0123456789abcdef0"]})  # fmt: skip
    stub.activate()
    pf = Preflight(account["session"])
    pf._clients["ec2"] = ec2
    group = NodeGroup("S", "Cluster", "p5.48xlarge", 2, reservation_id="cr-0123456789abcdef0")
    check = pf._guard("placement", lambda: pf.placement(group))  # as run() calls each check
    assert check is not None and check.status == status and says in check.line(), check


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
    check = pf.route_out(group)
    assert check is not None and check.status == "PASS" and gateway in check.found
    free = pf.subnet(NodeGroup("S", "Cluster", "trn1.32xlarge", 300, subnet_id=subnet["SubnetId"]))
    assert (
        free is not None and free.status == "FAIL" and "the nodes take 300" in free.found
    )  # a /24: 251 free


SUBNET = "subnet-0123456789abcdef0"


@pytest.mark.parametrize(
    ("route", "status", "says"),
    [
        # EC2 API reference, Route: State "blackhole" when the target is gone (a deleted NAT gateway)
        ({"NatGatewayId": "nat-0a", "State": "blackhole"}, "WARN", "is a blackhole"),
        ({"NatGatewayId": "nat-0a", "State": "active"}, "PASS", "through nat-0a"),
        # a NAT instance: the route names the instance (and its interface)
        ({"InstanceId": "i-0a", "NetworkInterfaceId": "eni-0a", "State": "active"}, "PASS", "i-0a, an"),
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


def _root(gib: int) -> dict[str, Any]:
    """An image's root device and its snapshot's size (EC2 API reference, Image.BlockDeviceMappings)."""
    return {"RootDeviceName": "/dev/sda1", "BlockDeviceMappings": [{"DeviceName": "/dev/sda1",
            "Ebs": {"VolumeSize": gib, "SnapshotId": "snap-0123456789abcdef0"}}]}  # fmt: skip


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


def test_status_shows_the_nodes_parallelcluster_launched(account: dict[str, Any], capsys: Any) -> None:
    """ParallelCluster launches its nodes itself and tags them with the cluster's name."""
    session = account["session"]
    cfn = session.client("cloudformation", region_name=REGION)
    parameter = {"Type": "String", "Value": "x", "Name": "/pc/config"}
    body = {"Resources": {"Config": {"Type": "AWS::SSM::Parameter", "Properties": parameter}}}
    cfn.create_stack(StackName="Trn1ParallelCluster", TemplateBody=json.dumps(body))
    ec2 = session.client("ec2", region_name=REGION)
    tags = [{"Key": "parallelcluster:cluster-name", "Value": "trn1"}]
    made = ec2.run_instances(
        ImageId=_ami(session),
        MinCount=1,
        MaxCount=1,
        InstanceType="trn1.32xlarge",
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )["Instances"][0]
    assert status.main("Trn1ParallelCluster", None, True, "trn1") == 0
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    assert node["id"] == made["InstanceId"] and node["efa_verified"] == "(launched by the service)"


def test_status_shows_the_nodes_pcs_launched(account: dict[str, Any], capsys: Any, monkeypatch: Any) -> None:
    """PCS tags the instances of a compute node group with its id (docs/pcs.md finds the login node so).
    moto's CloudFormation models no AWS::PCS::* resource: the stack's answers come from botocore's Stubber
    (in DescribeStacks' and ListStackResources' own shapes), the instances from moto."""
    session = account["session"]
    group = "pcs_0123456789"
    ec2 = session.client("ec2", region_name=REGION)
    made = ec2.run_instances(
        ImageId=_ami(session),
        MinCount=1,
        MaxCount=1,
        InstanceType="trn1.32xlarge",
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": "aws:pcs:compute-node-group-id", "Value": group}]}
        ],
    )["Instances"][0]
    cfn = session.client("cloudformation", region_name=REGION)
    stub = Stubber(cfn)
    now = datetime.now(timezone.utc)
    stub.add_response(
        "describe_stacks",
        {"Stacks": [{"StackName": "Trn1PcsCluster", "CreationTime": now, "StackStatus": "CREATE_COMPLETE"}]},
        {"StackName": "Trn1PcsCluster"},
    )
    arn = f"arn:aws:pcs:{REGION}:123456789012:cluster/pcs_c1/computenodegroup/{group}"
    resource = {
        "LogicalResourceId": "PcsComputeNodes",
        "PhysicalResourceId": arn,
        "ResourceType": "AWS::PCS::ComputeNodeGroup",
        "LastUpdatedTimestamp": now,
        "ResourceStatus": "CREATE_COMPLETE",
    }
    stub.add_response(
        "list_stack_resources", {"StackResourceSummaries": [resource]}, {"StackName": "Trn1PcsCluster"}
    )
    stub.activate()
    real = session.client
    monkeypatch.setattr(session, "client", lambda s, **kw: cfn if s == "cloudformation" else real(s, **kw))
    monkeypatch.setattr(boto3.session, "Session", lambda **kw: session)
    assert status.main("Trn1PcsCluster", None, True) == 0
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    assert node["id"] == made["InstanceId"] and node["efa_verified"] == "(launched by the service)"


def test_a_pcs_node_group_s_image_is_the_one_preflight_checks(tmp_path: Path) -> None:
    """PCS takes the image from the node group's AmiId, not the launch template (which has none)."""
    import aws_cdk as cdk

    from stacks.params import PcsParams
    from stacks.pcs_stack import EfaPcsClusterStack

    app = cdk.App(outdir=str(tmp_path), context=cdk_json_context())
    context = {"availability_zone": "us-east-1c", "ami_id": "ami-0123456789abcdef0"}
    EfaPcsClusterStack(
        app, "Trn1PcsCluster", params=PcsParams.from_context(context, default_instance_type="trn1.32xlarge")
    )
    app.synth()
    template = json.loads((tmp_path / "Trn1PcsCluster.template.json").read_text())
    (group,) = node_groups("Trn1PcsCluster", template)  # the EFA group (the login group has no EFA)
    assert (group.instance_type, group.image_id, group.zone) == (
        "trn1.32xlarge",
        "ami-0123456789abcdef0",
        "us-east-1c",
    )


# --- issue 41 item 4: the CLI never ends in a traceback -------------------------------------------------


class _StubbedSession:
    """A boto3 session whose clients are botocore's Stubber-checked ones (each request and answer checked
    against AWS's service model), one per service."""

    def __init__(self) -> None:
        real = boto3.session.Session(region_name=REGION, aws_access_key_id="k", aws_secret_access_key="k")
        self.region_name = REGION
        self.clients = {s: real.client(s) for s in ("cloudformation", "cloudwatch", "ec2", "ssm")}
        self.stubs = {s: Stubber(c) for s, c in self.clients.items()}

    def client(self, service: str, **_: Any) -> Any:
        return self.clients[service]


def test_status_shows_a_failed_node_a_gone_node_eks_nodes_and_never_prints_what_nodes_wrote_raw() -> None:
    """A node whose create failed has no physical id (was a KeyError); a node EC2 no longer lists is
    named, not the end of the report (an instance-id filter, not InstanceIds); an EKS node group's nodes
    are found by the eks:nodegroup-name tag; terminal escapes in node-written results are not printed;
    a malformed result is a note."""

    when = datetime(2026, 11, 25, tzinfo=timezone.utc)
    s = _StubbedSession()
    cfn, cw, ec2, ssm = (s.stubs[k] for k in ("cloudformation", "cloudwatch", "ec2", "ssm"))
    cfn.add_response("describe_stacks", {"Stacks": [{"StackName": "S", "CreationTime": when,
                     "StackStatus": "UPDATE_COMPLETE", "Outputs": []}]}, {"StackName": "S"})  # fmt: skip
    row = {"LastUpdatedTimestamp": when, "ResourceStatus": "CREATE_COMPLETE"}
    cfn.add_response("list_stack_resources", {"StackResourceSummaries": [
        {**row, "LogicalResourceId": "ClusterNode0", "ResourceType": "AWS::EC2::Instance",
         "PhysicalResourceId": "i-0aaaaaaaaaaaaaaa0"},
        {**row, "LogicalResourceId": "ClusterNode1", "ResourceType": "AWS::EC2::Instance",
         "ResourceStatus": "CREATE_FAILED", "ResourceStatusReason": "insufficient capacity"},
        {**row, "LogicalResourceId": "ClusterNode2", "ResourceType": "AWS::EC2::Instance",
         "PhysicalResourceId": "i-0ccccccccccccccc0"},
        {**row, "LogicalResourceId": "Nodes", "ResourceType": "AWS::EKS::Nodegroup",
         "PhysicalResourceId": "training/efa-nodes"},
        {**row, "LogicalResourceId": "Results", "ResourceType": "AWS::SSM::Parameter",
         "PhysicalResourceId": "/efa-cdk/S/Cluster/benchmark-results"},
    ]}, {"StackName": "S"})  # fmt: skip

    def instance(iid: str, ip: str) -> dict[str, Any]:
        return {"InstanceId": iid, "InstanceType": "p5.48xlarge", "State": {"Name": "running", "Code": 16},
                "Placement": {"AvailabilityZone": "us-east-1a"}, "PrivateIpAddress": ip}  # fmt: skip

    eks_node, node0 = instance("i-0eeeeeeeeeeeeeee0", "10.0.0.9"), instance("i-0aaaaaaaaaaaaaaa0", "10.0.0.5")
    ec2.add_response("describe_instances", {"Reservations": [{"Instances": [eks_node]}]},
                     {"Filters": [{"Name": "tag:eks:nodegroup-name", "Values": ["efa-nodes"]}]})  # fmt: skip
    ec2.add_response("describe_instances", {"Reservations": [{"Instances": [node0]}]},
                     {"Filters": [{"Name": "instance-id",
                                   "Values": ["i-0aaaaaaaaaaaaaaa0", "i-0ccccccccccccccc0"]}]})  # fmt: skip
    cw.add_response("describe_alarms", {"MetricAlarms": []}, {"AlarmNamePrefix": "S-"})
    for _ in range(2):
        cw.add_response("get_metric_statistics", {"Datapoints": []})
    kept = {"generation": "g\x1b]0;owned\x07", "at": "now\x1b[2J", "status": "SUCCESS",
            "data": ["not a row", {"benchmark": "nccl-tests", "ok": False, "reason": "bad\x1b[31m red",
                                   "peak_gbytes_s": "fast"}]}  # fmt: skip
    ssm.add_response("get_parameter", {"Parameter": {"Name": "/efa-cdk/S/Cluster/benchmark-results",
                     "Value": json.dumps(kept), "Type": "String"}},
                     {"Name": "/efa-cdk/S/Cluster/benchmark-results"})  # fmt: skip
    for stub in s.stubs.values():
        stub.activate()
    found = status.cluster_status(s, "S")
    for stub in s.stubs.values():
        stub.assert_no_pending_responses()
    assert [n["id"] for n in found["nodes"]] == ["i-0aaaaaaaaaaaaaaa0", "i-0eeeeeeeeeeeeeee0"]
    assert found["missing_nodes"] == [
        "ClusterNode1: CREATE_FAILED insufficient capacity",
        "i-0ccccccccccccccc0: EC2 no longer lists it",
    ]
    assert found["benchmarks"][0] == {"benchmark": "?", "ok": False, "note": "unreadable result: not a row"}
    assert found["benchmarks"][1]["note"] == "unreadable peak: fast"
    text = status.render(found)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), repr(text)
    assert "not running: ClusterNode1: CREATE_FAILED insufficient capacity" in text
    assert "FAILED (bad?[31m red)" in text


@pytest.mark.parametrize("order", ["newest first", "newest last", "newest between"])
def test_a_nodes_health_is_its_newest_datapoint_whatever_order_cloudwatch_answers(order: str) -> None:
    """Issue 41 item 18 (the latest of several): GetMetricStatistics' datapoints come in no set order
    (CloudWatch API reference); a node healthy at 10:00 and 10:05 but failing at 10:10 is UNHEALTHY."""
    points = [
        (datetime(2026, 11, 25, 10, m, tzinfo=timezone.utc), v) for m, v in ((0, 1.0), (5, 1.0), (10, 0.0))
    ]
    newest = points.pop()
    points.insert({"newest first": 0, "newest last": 2, "newest between": 1}[order], newest)
    s = _StubbedSession()
    s.stubs["cloudwatch"].add_response("get_metric_statistics", {"Datapoints": [
        {"Timestamp": t, "Minimum": v, "Unit": "Count"} for t, v in points]})  # fmt: skip
    s.stubs["cloudwatch"].activate()
    node = {"InstanceId": "i-0aaaaaaaaaaaaaaa0", "State": {"Name": "running", "Code": 16}}
    row = status._node_row(s.clients["cloudwatch"], node, "EfaCdk/S/Cluster", {})
    assert row["last_health_check"] == "UNHEALTHY at 10:10 UTC"


def _cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """efa-cdk as a user runs it (python -m efa_constructs), in `cwd`, with `env` over a clean one."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", "efa_constructs", *args], cwd=cwd,
                          env={**base, **env}, capture_output=True, text=True, timeout=120)  # fmt: skip


def _assembly(tmp_path: Path, region: str) -> Path:
    """A cloud assembly's manifest with one stack for `region` ('unknown-region': env-agnostic)."""
    out = tmp_path / "cdk.out"
    out.mkdir()
    manifest = {"artifacts": {"S": {"type": "aws:cloudformation:stack",
                                    "properties": {"templateFile": "S.template.json"},
                                    "environment": f"aws://unknown-account/{region}"}}}  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "S.template.json").write_text(json.dumps({"Resources": {}}))
    return out


def test_without_a_region_the_commands_use_the_stacks_or_name_the_flag(tmp_path: Path) -> None:
    """No region configured: an env-agnostic assembly is one line naming --region (was a botocore
    traceback); an assembly for one region is asked in that region (here: the endpoint refuses the
    made-up credentials, one line)."""
    _assembly(tmp_path, "unknown-region")
    no_aws = {"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}
    for command in (["status", "S"], ["preflight"]):
        run = _cli(*command, cwd=tmp_path, env=no_aws)
        assert run.returncode == 4 and "Traceback" not in run.stderr, run.stderr
        assert run.stderr.strip().count("\n") == 0 and "pass --region REGION" in run.stderr, run.stderr
    other = tmp_path / "regional"
    other.mkdir()
    _assembly(other, "eu-west-1")
    with moto_server("cli") as env:
        moto = {**no_aws, **{k: v for k, v in env.items() if k != "AWS_DEFAULT_REGION"}}
        run = _cli("status", "S", cwd=other, env=moto)
    assert run.returncode == 4 and "Traceback" not in run.stderr, run.stderr
    assert "cloudformation:DescribeStacks" in run.stderr and "pass --region" not in run.stderr, run.stderr


def test_aws_region_alone_is_a_region_as_the_refusal_says(tmp_path: Path) -> None:
    """The refusal says '(or set AWS_REGION)', and botocore reads only AWS_DEFAULT_REGION: with AWS_REGION
    alone (as the AWS CLI v2 and the CDK CLI take it), an env-agnostic assembly is asked in that region (here
    moto's endpoint answers, refusing nothing: the first check passes), not refused for no region."""
    _assembly(tmp_path, "unknown-region")
    no_aws = {"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}
    with moto_server("cli") as env:
        moto = {**no_aws, **{k: v for k, v in env.items() if k != "AWS_DEFAULT_REGION"}, "AWS_REGION": REGION}
        run = _cli("preflight", cwd=tmp_path, env=moto)
    assert "pass --region" not in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert f"in {REGION} as" in run.stdout, run.stdout + run.stderr


def test_status_asks_the_region_the_stack_deploys_to_before_the_configurations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--region first; then the region the assembly's stack was synthesized for (where it deployed); only
    then the AWS configuration's (it was asked first, so a eu-west-1 stack was looked for in us-east-1)."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    out = _assembly(tmp_path, "eu-west-1")
    assert preflight.session_for(None, out, ["S"]).region_name == "eu-west-1"
    assert preflight.session_for("ap-south-1", out, ["S"]).region_name == "ap-south-1"
    (tmp_path / "agnostic").mkdir()
    agnostic = _assembly(tmp_path / "agnostic", "unknown-region")
    assert preflight.session_for(None, agnostic, ["S"]).region_name == "us-east-1"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("{not json", "is not JSON"),
        ("[1, 2]", "no Resources object"),
        (json.dumps({"Resources": {"X": {"Type": "AWS::EC2::Instance", "Properties": [1]}}}),
         "not as synthesis writes it"),
        (None, "bytes: no synthesized template"),
    ],
)  # fmt: skip
def test_a_broken_template_in_the_assembly_is_one_line(tmp_path: Path, body: str | None, says: str) -> None:
    out = _assembly(tmp_path, "us-east-1")
    template = out / "S.template.json"
    if body is None:  # a huge file (sparse: no disk used)
        with template.open("wb") as f:
            f.truncate(17 * 1024 * 1024)
    else:
        template.write_text(body)
    run = _cli("preflight", cwd=tmp_path, env={"AWS_CONFIG_FILE": "/nonexistent"})
    assert run.returncode == 4 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip().count("\n") == 0 and says in run.stderr, run.stderr


def test_preflight_holds_each_written_template_to_cloudformations_limits(tmp_path: Path) -> None:
    """Issue 41 item 19, through the command line against the emulator: a template of 501 resources in
    the assembly is a FAIL naming the stack and the count (exit 1); one of 500 passes that check."""
    out = _assembly(tmp_path, "us-east-1")
    for count, rc in ((501, 1), (500, 0)):
        handles = {f"H{i}": {"Type": "AWS::CloudFormation::WaitConditionHandle"} for i in range(count)}
        (out / "S.template.json").write_text(json.dumps({"Resources": handles}))
        with moto_server("limits") as env:
            run = _cli("preflight", cwd=tmp_path, env=env)
        assert run.returncode == rc, run.stdout + run.stderr
        assert ("FAIL template: S: 501 resources; CloudFormation allows 500" in run.stdout) == (rc == 1), (
            run.stdout
        )


@pytest.fixture
def throttling_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """An endpoint that answers every call as EC2 does when it throttles (HTTP 503, RequestLimitExceeded:
    EC2 API reference, "Error codes"); the list holds each request's action, in order."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Throttle(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            seen.append(next(p.split("=", 1)[1] for p in body.split("&") if p.startswith("Action=")))
            answer = (
                b"<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded."
                b"</Message></Error></Errors><RequestID>1</RequestID></Response>"
            )
            self.send_response(503)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Throttle)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for key, value in {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")  # no profile's retry settings from this machine
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_port}")
    yield seen
    server.shutdown()


def test_a_throttled_call_is_retried_by_botocores_standard_mode_then_is_one_line(
    throttling_endpoint: list[str],
) -> None:
    """botocore's standard retry mode makes 3 attempts (botocore's "Retries" guide: max_attempts 3, where
    legacy mode made 5), whatever botocore's own default in the range this package accepts."""
    pf = Preflight(boto3.session.Session(region_name=REGION))
    group = NodeGroup("S", "Cluster", "trn1.32xlarge", 2, zone="us-east-1c")
    check = pf._guard("offered", lambda: pf.offered(group))
    assert check is not None and "was throttled (RequestLimitExceeded)" in check.line(), check
    assert throttling_endpoint == ["DescribeInstanceTypeOfferings"] * 3
    assert pf.client("ec2").meta.config.retries["mode"] == "standard"


def test_a_retry_mode_the_user_chose_is_kept(
    throttling_endpoint: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_RETRY_MODE", "legacy")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    session = boto3.session.Session(region_name=REGION)
    pf = Preflight(session)
    pf._guard("offered", lambda: pf.offered(NodeGroup("S", "Cluster", "trn1.32xlarge", 2, zone="us-east-1c")))
    assert throttling_endpoint == ["DescribeInstanceTypeOfferings"] * 2
    assert pf.client("ec2").meta.config.retries.get("mode", "legacy") == "legacy"


def test_every_check_is_registered_once_and_preflight_runs_the_register(
    account: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The register is the one list of checks: each check method in it once, none outside it, and
    ``run`` runs what it holds, each line named by the rule's id."""
    methods = {
        name
        for name, value in vars(Preflight).items()
        if callable(value) and not name.startswith("_") and name not in ("client", "run")
    }
    registered = [rule.check.__name__ for rule in preflight.RULES]
    assert sorted(registered) == sorted(methods)
    assert len({rule.id for rule in preflight.RULES}) == len(preflight.RULES)
    ran: list[str] = []

    def probe(_pf: Preflight, g: NodeGroup) -> preflight.Check:
        ran.append(g.name)
        return preflight.Check("anything", "PASS", "seen")

    probe_rule = preflight.Rule(
        "probe", "a probe", preflight.NODE_GROUP, probe, asks="nothing", fails="never"
    )
    monkeypatch.setattr(preflight, "RULES", (probe_rule,))
    checks = Preflight(account["session"]).run([NodeGroup("S", "Cluster", "trn1.32xlarge", 2)], {})
    assert [c.name for c in checks] == ["probe [S/Cluster (2 x trn1.32xlarge)]"] and ran == ["Cluster"]


def test_status_shows_the_fabric_sweeps_verdict() -> None:
    """The sweep's result (efa_constructs/node/sweep.py ``result``) in the benchmarks: its median when
    nothing is named, the named node and its figure when one is."""
    from efa_constructs.node import sweep

    healthy = sweep.result(
        {"median_gbps": 96.5, "slow_nodes": {}, "slow_links": {}, "rounds": 3, "seconds": 40}
    )
    slow = sweep.result(
        {"median_gbps": 96.5, "slow_nodes": {"10.0.64.5": 9.1}, "slow_links": {}, "rounds": 4, "seconds": 52}
    )
    base = {"stack": "S", "status": "CREATE_COMPLETE", "nodes": [], "alarms": [], "changes": []}
    text = status.render({**base, "benchmarks": status._benchmarks({}, {"data": [healthy]})})
    assert "  fabric-sweep: median pair 96.5 Gbps, no slow node or link" in text
    text = status.render({**base, "benchmarks": status._benchmarks({}, {"data": [slow]})})
    assert "  fabric-sweep: FAILED (slow node 10.0.64.5: 9.1 Gbps (the cluster's median 96.5 Gbps))" in text


def test_sweep_runs_the_document_on_the_stacks_instances_waits_and_shows_what_it_named() -> None:
    """`efa-cdk sweep` (Stubber, against botocore's models of CloudFormation and SSM): the stack's
    BenchmarkDocument sent by the stack-name tag, the invocations waited for until every one is done, and
    the leader's newest results read as status reads them; without the document, one line saying what to
    run instead."""
    from efa_constructs.tools import sweep

    when = datetime(2026, 11, 26, tzinfo=timezone.utc)
    s = _StubbedSession()
    cfn, ssm = s.stubs["cloudformation"], s.stubs["ssm"]
    outputs = [{"OutputKey": "BenchmarkDocument", "OutputValue": "S-ClusterMonitoringBenchmarkDocument-1"}]
    cfn.add_response("describe_stacks", {"Stacks": [{"StackName": "S", "CreationTime": when,
                     "StackStatus": "CREATE_COMPLETE", "Outputs": outputs}]}, {"StackName": "S"})  # fmt: skip
    targets = [{"Key": "tag:aws:cloudformation:stack-name", "Values": ["S"]}]
    command = "0e2e0000-0000-4000-8000-000000000001"
    ssm.add_response("send_command", {"Command": {"CommandId": command}}, {
        "DocumentName": "S-ClusterMonitoringBenchmarkDocument-1", "Targets": targets,
        "Comment": "efa-cdk sweep S"})  # fmt: skip
    for states in (("InProgress", "Success"), ("Success", "Success")):
        ssm.add_response("list_command_invocations", {"CommandInvocations": [
            {"InstanceId": "i-0aaaaaaaaaaaaaaa0", "Status": states[0]},
            {"InstanceId": "i-0bbbbbbbbbbbbbbb0", "Status": states[1]}]}, {"CommandId": command})  # fmt: skip
    cfn.add_response("list_stack_resources", {"StackResourceSummaries": [
        {"LogicalResourceId": "Results", "ResourceType": "AWS::SSM::Parameter", "LastUpdatedTimestamp": when,
         "ResourceStatus": "CREATE_COMPLETE", "PhysicalResourceId": "/efa-cdk/S/Cluster/benchmark-results"}]},
        {"StackName": "S"})  # fmt: skip
    named = {"benchmark": "fabric-sweep", "ok": False, "median_gbps": 96.5, "slow_nodes": {"10.0.64.5": 9.1},
             "reason": "slow node 10.0.64.5: 9.1 Gbps (the cluster's median 96.5 Gbps)"}  # fmt: skip
    kept = {"generation": "g", "at": "2026-11-26T06:00:00Z", "status": "SUCCESS", "data": [named]}
    ssm.add_response("get_parameter", {"Parameter": {"Name": "/efa-cdk/S/Cluster/benchmark-results",
                     "Value": json.dumps(kept), "Type": "String"}},
                     {"Name": "/efa-cdk/S/Cluster/benchmark-results"})  # fmt: skip
    for stub in s.stubs.values():
        stub.activate()
    waited: list[float] = []
    found = sweep.sweep(s, "S", pause=waited.append)
    for stub in s.stubs.values():
        stub.assert_no_pending_responses()
    both = ["i-0aaaaaaaaaaaaaaa0", "i-0bbbbbbbbbbbbbbb0"]
    assert waited == [10] and found["invocations"] == dict.fromkeys(both, "Success")
    assert found["sweep"]["slow_nodes"] == {"10.0.64.5": 9.1}
    assert status.render_benchmark(found["sweep"]).startswith(
        "fabric-sweep: FAILED (slow node 10.0.64.5: 9.1 Gbps"
    )
    bare = _StubbedSession()
    bare_stack = {"StackName": "S", "CreationTime": when, "StackStatus": "CREATE_COMPLETE", "Outputs": []}
    bare.stubs["cloudformation"].add_response("describe_stacks", {"Stacks": [bare_stack]}, {"StackName": "S"})
    bare.stubs["cloudformation"].activate()
    with pytest.raises(
        preflight.PreflightError, match=r"S has no BenchmarkDocument output .*/fabric-sweep\.sh on its leader"
    ):
        sweep.sweep(bare, "S")


def _fsx_quotas(client: Any, stub: Stubber, storage_gib: float, file_systems: float) -> None:
    """Service Quotas' answer for fsx (after ec2's), its shape checked against botocore's model: the
    PERSISTENT_2 Lustre quotas by the names and codes Service Quotas' default list records."""
    quotas = [
        {"ServiceCode": "fsx", "QuotaCode": code, "QuotaName": name, "Value": value, "Unit": "None",
         "Adjustable": True, "GlobalQuota": False}
        for code, name, value in (
            ("L-8F1B9C74", preflight.LUSTRE_STORAGE_QUOTA, storage_gib),
            ("L-FD6F2F22", preflight.LUSTRE_COUNT_QUOTA, file_systems),
        )
    ]  # fmt: skip
    stub.add_response("list_service_quotas", {"Quotas": quotas}, {"ServiceCode": "fsx"})


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


def test_status_never_lets_node_written_text_forge_a_line_or_end_in_a_traceback() -> None:
    """Issue 53 item 15: what nodes write (benchmark reasons, the last replacement) may hold a newline (a
    forged line of its own), bidirectional or zero-width characters (a line that reads otherwise than it is),
    an epoch past the calendar, a digit of another script, or a share that is no number: each is shown as
    text, on its own line, and status never ends in a traceback."""
    forged = {
        "benchmark": "nccl-tests",
        "ok": False,
        "reason": "slow\nnccl-tests: 400 GB/s peak, 100% of the EFA line rate\u202e\u200b",
    }
    line = status.render_benchmark(forged)
    assert "\n" not in line and "\u202e" not in line and "\u200b" not in line
    share = status.render_benchmark({"benchmark": "lustre", "ok": True, "nodes": 2, "efa_share": "most"})
    assert "unreadable share" in share
    assert status._when("99999999999999999999 ops") == "99999999999999999999 ops"  # past the calendar
    assert status._when("\u00b2 ops") == "\u00b2 ops"  # '²'.isdigit() is True, int('²') is not a number
    assert status._when("1764000000 ops").endswith("UTC by ops")
    report = status.render({
        "stack": "S", "status": "UPDATE_COMPLETE\nforged: line", "nodes": [], "benchmarks": [forged],
        "alarms": [], "changes": ["replaced\u2028node 3"],
    })  # fmt: skip
    assert not any(line.startswith(("forged", "nccl-tests: 400", "node 3")) for line in report.splitlines())


def _crafted(tmp_path: Path, template_file: str) -> Path:
    out = tmp_path / "cdk.out"
    out.mkdir()
    manifest = {"version": "48.0.0", "artifacts": {"S": {"type": "aws:cloudformation:stack",
                "environment": "aws://unknown-account/unknown-region",
                "properties": {"templateFile": template_file}}}}  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


@pytest.mark.parametrize("crafted", ["outside", "link to /dev/zero", "fifo", "deep", "huge"])
def test_preflight_reads_a_crafted_assembly_in_one_line(tmp_path: Path, crafted: str) -> None:
    """Issue 53 item 16: a cdk.out someone else made (a pull request's) is read only as the CDK writes one:
    regular files inside it, bounded in size, any depth of JSON; each other case is one line, never a
    MemoryError (/dev/zero), a hang (a FIFO), a RecursionError (deep JSON) or a file read from outside."""
    import os

    from efa_constructs.tools.preflight import PreflightError, templates

    name = "../../../etc/hostname" if crafted == "outside" else "S.template.json"
    out = _crafted(tmp_path, name)
    target = out / "S.template.json"
    if crafted == "link to /dev/zero":
        target.symlink_to("/dev/zero")
    elif crafted == "fifo":
        os.mkfifo(target)
    elif crafted == "deep":
        target.write_text("[" * 100_000 + "]" * 100_000)
    elif crafted == "huge":
        with target.open("wb") as fh:
            fh.truncate(17 * 1024 * 1024)
    with pytest.raises(PreflightError) as err:
        templates(out, [])
    said = {
        "outside": "outside the assembly",
        "link to /dev/zero": "outside the assembly",
        "fifo": "a device, FIFO or folder",
        "deep": "nested too deeply",
        "huge": "over 16,777,216 bytes",
    }
    assert said[crafted] in str(err.value) and "\n" not in str(err.value), str(err.value)  # fmt: skip
