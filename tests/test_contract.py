"""The contract every orchestrator's EFA nodes keep, one suite over the four (issue 42).

Each rule and attribute the four share is asserted here once, parametrized over `ORCHESTRATORS`: a fifth
orchestrator joins by adding one entry. The rules live in one place (``cdk/_node_base.EfaNodeBase``
and ``NodePlan.check_fits``); before they did, ``EfaParallelCluster`` accepted a Capacity Reservation of
another type, in another zone or smaller than its ``max_count``, and ``EfaNodegroup`` the same, while
``EfaCluster`` and ``EfaPcsCluster`` refused them. Expected values come from EC2's rules (a targeted
reservation launches only its type, in its zone, up to its count; an instance's interfaces and security
groups are in one VPC; EC2 places a Capacity Block's instances itself) and aws-cdk-lib's own interfaces.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aws_cdk import Stack, assertions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam

from efa_constructs import (
    Capacity,
    EfaCluster,
    EfaLustreFileSystem,
    EfaNodegroup,
    EfaParallelCluster,
    EfaPcsCluster,
    EfaSecurityGroup,
    NodeSoftware,
)
from efa_constructs.core import node_rules
from efa_constructs.core.errors import EfaConfigError
from tests.helpers import new_app, pcs_image

TYPE, ZONE = "trn1.32xlarge", "us-east-1a"
RESERVATION = "cr-0123456789abcdef0"


def network(stack: Stack, name: str = "Vpc") -> ec2.Vpc:
    """One zone (named, so zone rules are checked at synth), a public and an isolated subnet."""
    return ec2.Vpc(
        stack, name, availability_zones=[ZONE], nat_gateways=0,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC),
            ec2.SubnetConfiguration(name="nodes", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
        ],
    )  # fmt: skip


@dataclass(frozen=True)
class Orchestrator:
    """How to make one orchestrator's nodes: `build(stack, vpc, subnet, count, capacity, placement)`;
    `count_name` is its keyword for the most nodes it launches."""

    name: str
    count_name: str
    build: Callable[..., Any]
    grantable: bool = True
    #: its keywords for an EFA-enabled FSx for Lustre file system of 19,200 GiB in `subnet`: ``lustre=`` a
    #: file system given, or the size and EFA of one it makes
    efa_lustre: Callable[[Stack, ec2.IVpc, ec2.ISubnet], dict[str, Any]] = lambda stack, vpc, subnet: {
        "lustre": EfaLustreFileSystem(stack, "Fsx", vpc=vpc, subnet=subnet, capacity_gib=19200, efa=True)
    }


#: A keyword the builders leave out (`instance_type=LEFT_OUT`).
LEFT_OUT = object()


def _node(kw: dict[str, Any]) -> dict[str, Any]:
    """The node options: the type unless the test sets or leaves it out, and what the test passes."""
    return {k: v for k, v in {"instance_type": ec2.InstanceType(TYPE), **kw}.items() if v is not LEFT_OUT}


def _cluster(stack: Stack, vpc: ec2.IVpc, subnet: ec2.ISubnet, count: int, **kw: Any) -> Any:
    # the node software mounts a Lustre file system; without one the nodes boot bare
    software = kw.pop("node_software", NodeSoftware.efa() if "lustre" in kw else NodeSoftware.none())
    return EfaCluster(stack, "Nodes", vpc=vpc, subnet=subnet, node_count=count, node_software=software,
                      **_node(kw))  # fmt: skip


def _pcs(stack: Stack, vpc: ec2.IVpc, subnet: ec2.ISubnet, count: int, **kw: Any) -> Any:
    return EfaPcsCluster(stack, "Nodes", vpc=vpc, subnet=subnet, machine_image=pcs_image(),
                         max_count=count, **_node(kw))  # fmt: skip


def _pcluster(stack: Stack, vpc: ec2.IVpc, subnet: ec2.ISubnet, count: int, **kw: Any) -> Any:
    head = vpc.public_subnets[0]
    return EfaParallelCluster(stack, "Nodes", vpc=vpc, compute_subnet=subnet, head_node_subnet=head,
                              max_count=count, **_node(kw))  # fmt: skip


def _eks(stack: Stack, vpc: ec2.IVpc, subnet: ec2.ISubnet, count: int, **kw: Any) -> Any:
    from aws_cdk import aws_eks_v2 as eks

    isolated = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
    if "lustre" in kw:  # the CSI driver's chart and the volume need the kubectl provider
        from tests.helpers import eks_cluster_with_kubectl

        cluster = eks_cluster_with_kubectl(stack, vpc)
    else:
        cluster = eks.Cluster(stack, "Eks", version=eks.KubernetesVersion.V1_35, vpc=vpc, default_capacity=0,
                              default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
                              vpc_subnets=[isolated])  # fmt: skip
    return EfaNodegroup(stack, "Nodes", cluster=cluster, subnet=subnet, min_size=0, max_size=count,
                        device_plugin=False, **_node(kw))  # fmt: skip


def _own_lustre(stack: Stack, vpc: ec2.IVpc, subnet: ec2.ISubnet) -> dict[str, Any]:
    """One the orchestrator makes."""
    return {"fsx_lustre_capacity_gib": 19200, "fsx_lustre_efa": True}


def _pcs_lustre(stack: Stack, vpc: ec2.IVpc, subnet: ec2.ISubnet) -> dict[str, Any]:
    """... on a cluster that may grow past FSx's connections (a SMALL PCS cluster has 32 instances)."""
    from efa_constructs import PcsClusterSize

    return {**_own_lustre(stack, vpc, subnet), "size": PcsClusterSize.MEDIUM}


ORCHESTRATORS = [
    Orchestrator("EfaCluster", "node_count", _cluster),
    Orchestrator("EfaPcsCluster", "max_count", _pcs, efa_lustre=_pcs_lustre),
    # ParallelCluster makes its nodes' instance roles itself (docs/parallelcluster.md): no grant principal
    Orchestrator("EfaParallelCluster", "max_count", _pcluster, grantable=False, efa_lustre=_own_lustre),
    Orchestrator("EfaNodegroup", "max_size", _eks),
]
IDS = [o.name for o in ORCHESTRATORS]


def make(o: Orchestrator, count: int = 2, **kw: Any) -> tuple[Stack, ec2.Vpc, Any]:
    stack = Stack(new_app(), "Contract")
    vpc = network(stack)
    return stack, vpc, o.build(stack, vpc, vpc.isolated_subnets[0], count, **kw)


REFUSED = [
    # a targeted reservation launches only its own type
    ("another type", {"capacity": Capacity.reservation(RESERVATION, instance_type="p5.48xlarge")},
     "efa-cdk:capacity-other-instance-type", "capacity_reservation"),
    # ... only in its own zone (the nodes' subnet is in us-east-1a)
    ("another zone", {"capacity": Capacity.reservation(RESERVATION, instance_type=TYPE,
                                                        availability_zone="us-east-1b", instance_count=8)},
     "efa-cdk:capacity-other-zone", "capacity_reservation"),
    # ... and no more instances than it holds: 2 nodes at most, 1 reserved
    ("too small", {"capacity": Capacity.reservation(RESERVATION, instance_type=TYPE, availability_zone=ZONE,
                                                     instance_count=1)},
     "efa-cdk:capacity-too-small", None),
    # EC2 places a Capacity Block's instances: no placement group goes with one
    ("block and a placement group",
     {"capacity": Capacity.capacity_block(RESERVATION), "placement_group": "made"},
     "efa-cdk:placement-group-with-capacity-block", "placement_group"),
]  # fmt: skip


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS, ids=IDS)
@pytest.mark.parametrize(("case", "kwargs", "code", "what"), REFUSED, ids=[c[0] for c in REFUSED])
def test_every_orchestrator_refuses_what_its_capacity_cannot_launch(
    orchestrator: Orchestrator, case: str, kwargs: dict[str, Any], code: str, what: str | None
) -> None:
    stack = Stack(new_app(), "Contract")
    vpc = network(stack)
    if kwargs.get("placement_group") == "made":
        pg = ec2.PlacementGroup(stack, "Pg", strategy=ec2.PlacementGroupStrategy.CLUSTER)
        kwargs = {**kwargs, "placement_group": pg}
    with pytest.raises(EfaConfigError) as err:
        orchestrator.build(stack, vpc, vpc.isolated_subnets[0], 2, **kwargs)
    assert err.value.code == code, str(err.value)
    assert err.value.what == (what or orchestrator.count_name), str(err.value)


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS, ids=IDS)
def test_every_orchestrator_refuses_a_subnet_of_another_vpc(orchestrator: Orchestrator) -> None:
    """An instance's interfaces and its security groups are in one VPC (EC2 refuses the launch)."""
    stack = Stack(new_app(), "Contract")
    vpc, other = network(stack), network(stack, "Other")
    with pytest.raises(EfaConfigError) as err:
        orchestrator.build(stack, vpc, other.isolated_subnets[0], 2)
    assert err.value.code == "efa-cdk:subnet-of-another-vpc" and "Contract/Other" in str(err.value)


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS, ids=IDS)
def test_every_orchestrator_takes_a_reservation_that_fits(orchestrator: Orchestrator) -> None:
    """The boundary: a reservation of the type, in the zone, holding exactly the count."""
    fits = Capacity.reservation(RESERVATION, instance_type=TYPE, availability_zone=ZONE, instance_count=2)
    _, _, nodes = make(orchestrator, capacity=fits)
    assert nodes.placement_group is None  # the reservation decides placement: no group is made


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS, ids=IDS)
def test_every_orchestrator_shares_the_node_face_and_works_through_cdk(orchestrator: Orchestrator) -> None:
    """plan, security group, placement group (a new cluster group On-Demand), ``connections`` through
    aws-cdk-lib's own Connections, and ``grant_principal`` through an aws-cdk-lib grant."""
    stack, vpc, nodes = make(orchestrator)
    assert nodes.plan.instance_type.name == TYPE
    assert isinstance(nodes.security_group, EfaSecurityGroup)
    assert isinstance(nodes.placement_group, ec2.PlacementGroup)
    db = ec2.SecurityGroup(stack, "Db", vpc=vpc)
    db.connections.allow_from(nodes, ec2.Port.tcp(5432), "nodes to the database")
    bucket_policy = iam.Role(stack, "Reader", assumed_by=iam.AccountRootPrincipal())
    if orchestrator.grantable:
        bucket_policy.grant_assume_role(nodes.grant_principal)
    else:
        assert not hasattr(nodes, "grant_principal")
    t = assertions.Template.from_stack(stack)
    t.has_resource_properties("AWS::EC2::PlacementGroup", {"Strategy": "cluster"})
    group = stack.resolve(nodes.security_group.security_group_id)
    t.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress", {"FromPort": 5432, "SourceSecurityGroupId": group}
    )
    if orchestrator.grantable:
        assume = assertions.Match.array_with([assertions.Match.object_like({"Action": "sts:AssumeRole"})])
        t.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": assume}})


#: The node options misused as a user would, and the library's answer (its code, the keyword it names, and
#: what the fix says): a misspelt key, a reservation id given as a string, the type left out.
MISUSED = [
    ("misspelt", {"capcity": Capacity.on_demand()}, "efa-cdk:argument-unknown", "capcity",
     "did you mean capacity"),
    ("wrong type", {"capacity": RESERVATION}, "efa-cdk:argument-wrong-type", "capacity",
     "Capacity.reservation('cr-...')"),
    ("type left out", {"instance_type": LEFT_OUT}, "efa-cdk:argument-missing", None, "instance_type"),
]  # fmt: skip


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS, ids=IDS)
@pytest.mark.parametrize(("case", "kwargs", "code", "what", "fix"), MISUSED, ids=[c[0] for c in MISUSED])
def test_every_orchestrator_checks_the_node_options_at_its_door(
    orchestrator: Orchestrator, case: str, kwargs: dict[str, Any], code: str, what: str | None, fix: str
) -> None:
    """The options come through ``**node: Unpack[...]``, which Python itself would take whatever its keys:
    ``@checked`` holds them to the options' declaration, as it holds the construct's own keywords."""
    stack = Stack(new_app(), "Contract")
    vpc = network(stack)
    with pytest.raises(EfaConfigError) as err:
        orchestrator.build(stack, vpc, vpc.isolated_subnets[0], 2, **kwargs)
    assert err.value.code == code, str(err.value)
    assert err.value.what == (what or orchestrator.name), str(err.value)
    assert fix in err.value.fix, str(err.value)


def test_the_node_options_are_declared_once() -> None:
    """Issue 42: each node option is declared in its options type (and `NodePlan.resolve`, the plan's own
    constructor), never again as a construct's own keyword; every construct that launches EFA nodes takes
    them by unpacking the one declaration, ParallelCluster the part it can honour (it lays out and
    roles its compute nodes itself)."""
    import inspect
    import typing

    from constructs import Construct

    import efa_constructs
    from efa_constructs import (
        NodeOptions,
        NodeTemplateOptions,
        ParallelClusterOptions,
        PcsClusterOptions,
        StorageOptions,
    )

    keys = set(typing.get_type_hints(NodeTemplateOptions))
    assert keys == {"instance_type", "capacity", "placement_group", "nic_layout", "root_volume_gib", "role"}
    #: A keyword of the same name for another thing: the role of nodes made elsewhere, granted the software.
    other_meaning = {("NodeSoftwareInstallation", "role")}
    unpacking: dict[str, object] = {}
    for name in efa_constructs.__all__:
        cls = getattr(efa_constructs, name)
        if not (inspect.isclass(cls) and issubclass(cls, Construct)):
            continue
        parameters = inspect.signature(cls.__init__).parameters.values()
        own = {p.name for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD}
        assert not {(name, k) for k in own & keys} - other_meaning, name
        hints = typing.get_type_hints(cls.__init__)
        for p in parameters:
            if p.kind is inspect.Parameter.VAR_KEYWORD:
                unpacking[name] = typing.get_args(hints[p.name])[0]
    assert unpacking == {
        "EfaCluster": NodeTemplateOptions,
        "EfaPcsCluster": PcsClusterOptions,
        "EfaNodegroup": NodeTemplateOptions,
        "EfaLaunchTemplate": NodeTemplateOptions,
        "EfaParallelCluster": ParallelClusterOptions,
        "EfaSharedStorage": StorageOptions,
    }
    # Issue 52: the storage options likewise, once, for the three constructs that make storage; the two
    # orchestrators' options are exactly the node's and the storage's (nothing declared a second time)
    storage = set(typing.get_type_hints(StorageOptions))
    assert storage == {"efs_throughput_mibps", "fsx_lustre_capacity_gib", "fsx_lustre_throughput",
                       "fsx_lustre_efa", "fsx_lustre_gds", "storage_removal_policy"}  # fmt: skip
    assert set(typing.get_type_hints(PcsClusterOptions)) == keys | storage
    assert (
        set(typing.get_type_hints(ParallelClusterOptions))
        == set(typing.get_type_hints(NodeOptions)) | storage
    )
    for name in efa_constructs.__all__:
        cls = getattr(efa_constructs, name)
        if inspect.isclass(cls) and issubclass(cls, Construct):
            assert not set(inspect.signature(cls.__init__).parameters) & storage, name


def test_a_renamed_storage_option_still_works_with_a_deprecation_at_synth() -> None:
    """EfaSharedStorage's removal_policy is StorageOptions' storage_removal_policy (issue 52: one name per
    quantity): the old keyword is honoured, and synthesis says it is deprecated and what to write."""
    from aws_cdk import RemovalPolicy
    from aws_cdk.assertions import Annotations, Match, Template

    from efa_constructs import EfaSharedStorage

    for old in (True, False):
        stack = Stack(new_app(), "Storage")
        vpc = network(stack)
        group = ec2.SecurityGroup(stack, "Clients", vpc=vpc)
        kwargs = {"removal_policy" if old else "storage_removal_policy": RemovalPolicy.DESTROY}
        EfaSharedStorage(stack, "S", vpc=vpc, subnet=vpc.isolated_subnets[0], clients=group, **kwargs)
        efs = Template.from_stack(stack).find_resources("AWS::EFS::FileSystem")
        assert [r["DeletionPolicy"] for r in efs.values()] == ["Delete"]
        said = Annotations.from_stack(stack).find_warning(
            "*", Match.string_like_regexp("EfaSharedStorage#removal_policy.*write storage_removal_policy")
        )
        assert len(said) == (1 if old else 0), said


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS, ids=IDS)
def test_every_orchestrator_takes_the_catalogues_record_as_the_type(
    orchestrator: Orchestrator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record a caller already looked up (a ready stack does, to check its context) is used as given:
    the catalogue is not read again for it, nor by the ParallelCluster configuration the construct writes."""
    from efa_constructs import instance_type
    from efa_constructs.cdk import options
    from efa_constructs.core import pcluster

    record = instance_type(TYPE)
    reads: list[str] = []
    for module in (options, pcluster):
        monkeypatch.setattr(module, "lookup", lambda name: reads.append(name) or instance_type(name))
    _, _, nodes = make(orchestrator, instance_type=record)
    assert nodes.plan.instance_type is record and reads == []
    _, _, nodes = make(orchestrator)  # by name: looked up once
    assert nodes.plan.instance_type == record and reads == [TYPE]


#: FSx for Lustre's rules for EFA clients (FSx for Lustre user guide, "configure-efa-clients",
#: "efa-file-systems"): no trn2 client; at most 1,024 EFA connections per file system, 8 per p5 client.
LUSTRE_REFUSED = [
    ("trn2.48xlarge", 2, "efa-cdk:fsx-efa-client-type"),
    ("p5.48xlarge", 129, "efa-cdk:fsx-efa-connections"),
]


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS, ids=IDS)
@pytest.mark.parametrize(("itype", "count", "code"), LUSTRE_REFUSED, ids=[c[2] for c in LUSTRE_REFUSED])
def test_every_orchestrator_refuses_efa_lustre_clients_fsx_does_not_serve(
    orchestrator: Orchestrator, itype: str, count: int, code: str
) -> None:
    stack = Stack(new_app(), "Contract")
    vpc = network(stack)
    subnet = vpc.isolated_subnets[0]
    lustre = orchestrator.efa_lustre(stack, vpc, subnet)
    with pytest.raises(EfaConfigError) as err:
        orchestrator.build(stack, vpc, subnet, count, instance_type=ec2.InstanceType(itype), **lustre)
    assert err.value.code == code, str(err.value)


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS, ids=IDS)
def test_every_orchestrator_refuses_a_given_efa_file_system_in_another_zone(
    orchestrator: Orchestrator,
) -> None:
    """Each takes a file system made elsewhere (``lustre=``); FSx serves EFA clients in the file system's zone
    only ("efa-file-systems"): nodes in us-east-1a, the file system in us-east-1b."""
    stack = Stack(new_app(), "Contract")
    vpc = network(stack)
    other = ec2.Subnet.from_subnet_attributes(
        stack, "Other", subnet_id="subnet-0123456789abcdef0", availability_zone="us-east-1b"
    )
    lustre = EfaLustreFileSystem(stack, "Fsx", vpc=vpc, subnet=other, capacity_gib=19200, efa=True)
    with pytest.raises(EfaConfigError) as err:
        orchestrator.build(stack, vpc, vpc.isolated_subnets[0], 2, lustre=lustre)
    assert err.value.code == "efa-cdk:fsx-efa-zone", str(err.value)
    # issue 53 item 18: a file system given is where it is: the fix moves the nodes to it
    assert err.value.fix.startswith("put the nodes in a subnet of us-east-1b"), str(err.value)


# --- issue 52: the contract generated from the register of node rules (efa_constructs/core/node_rules.py)


#: The rules about the node every orchestrator in their scope obeys (from EC2's reservations and VPCs,
#: CloudFormation's regions, gp3's sizes, FSx for Lustre's clients): a rule dropped from the register fails
#: here, not silently.
SHARED_RULES = {
    "efa-cdk:node-counts",
    "efa-cdk:subnet-of-another-vpc",
    "efa-cdk:zone-outside-region",
    "efa-cdk:capacity-other-instance-type",
    "efa-cdk:root-volume-range",
    "efa-cdk:fsx-efa-client-type",
}
RULE_CASES = [(r, o) for r in node_rules.NODE_RULES for o in ORCHESTRATORS if o.name in r.scope]


def _build_example(orchestrator: Orchestrator, example: dict[str, object]) -> Any:
    """`example` (a rule's, in the request's words) as the orchestrator's own keywords."""
    from aws_cdk import Environment

    region = example.get("region")
    stack = Stack(new_app(), "Contract", env=Environment(region=str(region)) if region else None)
    vpc = network(stack)
    subnet = vpc.isolated_subnets[0]
    kw: dict[str, Any] = {k: v for k, v in example.items() if k in ("capacity", "root_volume_gib")}
    if "instance_type" in example:
        kw["instance_type"] = ec2.InstanceType(str(example["instance_type"]))
    if example.get("lustre") == "over EFA":
        kw.update(orchestrator.efa_lustre(stack, vpc, subnet))
    if example.get("subnets") == "of another VPC":
        subnet = network(stack, "Other").isolated_subnets[0]
    count = example.get("count", 2)
    return orchestrator.build(stack, vpc, subnet, count, **kw)


def test_the_register_holds_the_shared_rules_and_binds_every_orchestrator() -> None:
    """The contract below is generated from the register: it covers every rule, and every orchestrator that
    builds on the node base is in it (each call of EfaNodeBase names one of the register's)."""
    import re

    from tests.helpers import ROOT

    assert {r.id for r in node_rules.NODE_RULES} >= SHARED_RULES
    assert [o.name for o in ORCHESTRATORS] == list(node_rules.ORCHESTRATORS)
    code = "".join(p.read_text() for p in (ROOT / "efa_constructs" / "cdk").glob("*.py"))
    calls = re.findall(r'EfaNodeBase\(\s*self,\s*self\.plan,\s*orchestrator="(\w+)"', code)
    assert sorted(calls) == sorted(node_rules.ORCHESTRATORS)


@pytest.mark.parametrize(
    ("rule", "orchestrator"), RULE_CASES, ids=[f"{r.id[8:]}-{o.name}" for r, o in RULE_CASES]
)
def test_every_orchestrator_refuses_each_rules_example(
    rule: node_rules.NodeRule, orchestrator: Orchestrator
) -> None:
    with pytest.raises(EfaConfigError) as err:
        _build_example(orchestrator, dict(rule.example))
    assert err.value.code in {*rule.ids, rule.id, rule.former.get(orchestrator.name)}, str(err.value)
    assert "${Token[" not in str(err.value) and "object at 0x" not in str(err.value)


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS, ids=IDS)
def test_every_orchestrator_refuses_a_reservation_group_of_another_region(orchestrator: Orchestrator) -> None:
    """Issue 52's first drift: EfaPcsCluster and EfaNodegroup synthesized a template that failed at deploy."""
    group = Capacity.reservation_group("arn:aws:resource-groups:eu-west-1:111122223333:group/training")
    with pytest.raises(EfaConfigError) as err:
        _build_example(orchestrator, {"region": "us-east-1", "capacity": group})
    assert err.value.code == "efa-cdk:reservation-group-other-region", str(err.value)


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS, ids=IDS)
def test_every_orchestrator_takes_a_count_known_at_deploy(orchestrator: Orchestrator) -> None:
    """Issue 52's second drift: a count from a CloudFormation parameter is checked at deploy (as aws-cdk-lib's
    own Nodegroup and Auto Scaling take it), never compared or printed at synth. The template refers to the
    parameter where the count goes."""
    from aws_cdk import CfnParameter

    from efa_constructs import NodeGroup

    stack = Stack(new_app(), "Contract")
    vpc = network(stack)
    count = CfnParameter(stack, "NodeCount", type="Number", default=4).value_as_number
    extra = {"node_group": NodeGroup.ASG} if orchestrator.name == "EfaCluster" else {}
    nodes = orchestrator.build(stack, vpc, vpc.isolated_subnets[0], count, **extra)
    text = json.dumps(assertions.Template.from_stack(stack).to_json())
    if (
        orchestrator.name == "EfaParallelCluster"
    ):  # its configuration, which the user's stack outputs or posts
        text = json.dumps(stack.resolve(nodes.config_yaml))
        assert "MaxCount: ', {'Ref': 'NodeCount'}" in str(stack.resolve(nodes.config_yaml))
    assert '{"Ref": "NodeCount"}' in text, orchestrator.name
    assert "e+289" not in text and "Token[" not in text


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS, ids=IDS)
def test_a_refusal_beside_a_count_known_at_deploy_never_prints_its_encoding(
    orchestrator: Orchestrator,
) -> None:
    """A rule that refuses something else while the count is a token says so without the token's number."""
    from aws_cdk import CfnParameter

    from efa_constructs import NodeGroup

    stack = Stack(new_app(), "Contract")
    vpc = network(stack)
    count = CfnParameter(stack, "NodeCount", type="Number").value_as_number
    extra = {"node_group": NodeGroup.ASG} if orchestrator.name == "EfaCluster" else {}
    small = Capacity.reservation(RESERVATION, instance_type="p5.48xlarge", instance_count=1)
    with pytest.raises(EfaConfigError) as err:
        orchestrator.build(stack, vpc, vpc.isolated_subnets[0], count, capacity=small, **extra)
    assert err.value.code == "efa-cdk:capacity-other-instance-type"
    for encoding in ("${Token[", "e+289", "e+28", "object at 0x"):
        assert encoding not in str(err.value), str(err.value)


# --- issue 53 items 1-2: a file system in its own stack (the usual layout), and one whose group is imported


def _two_stacks(orchestrator: Orchestrator, efa: bool) -> tuple[Stack, Stack, Any]:
    """A storage stack (the VPC and the file system, retained) and a cluster stack whose nodes mount it."""
    app = new_app()
    storage = Stack(app, "Storage")
    vpc = network(storage)
    subnet = vpc.isolated_subnets[0]
    fs = EfaLustreFileSystem(
        storage, "Fsx", vpc=vpc, subnet=subnet, capacity_gib=19200 if efa else 2400, efa=efa
    )
    cluster = Stack(app, "Training")
    nodes = orchestrator.build(cluster, vpc, subnet, 2, lustre=fs)
    return storage, cluster, nodes


@pytest.mark.parametrize("efa", [True, False], ids=["efa", "tcp"])
@pytest.mark.parametrize("orchestrator", ORCHESTRATORS, ids=IDS)
def test_every_orchestrator_mounts_a_file_system_of_another_stack(
    orchestrator: Orchestrator, efa: bool
) -> None:
    """The dependency runs one way, cluster -> storage: the file system's stack names nothing of the
    cluster's (before, every orchestrator ended in a DependencyCycle), and the rules between the two groups,
    both ways, are the cluster stack's."""
    storage, cluster, nodes = _two_stacks(orchestrator, efa)
    cluster.node.root.synth()  # no cycle
    assert storage in cluster.dependencies and cluster not in storage.dependencies
    stored_template = assertions.Template.from_stack(storage).to_json()
    stored = json.dumps(stored_template)
    assert "Training" not in stored and "ImportValue" not in stored
    # the servers among themselves, in the file system's stack: Lustre's TCP ports (FSx for Lustre user guide,
    # "limit-access-security-groups"), none with EFA (its group is open to itself from its creation)
    servers = {
        (r["Type"], r["Properties"]["FromPort"], r["Properties"]["ToPort"])
        for r in stored_template["Resources"].values()
        if r["Properties"].get("Description") == "Lustre servers"
    }
    tcp = {
        (f"AWS::EC2::SecurityGroup{way}", lo, hi)
        for way in ("Ingress", "Egress")
        for lo, hi in ((988, 988), (1018, 1023))
    }
    assert servers == (set() if efa else tcp), servers
    nodes_group = cluster.resolve(nodes.security_group.security_group_id)
    port = {"IpProtocol": "-1"} if efa else {"IpProtocol": "tcp", "FromPort": 988, "ToPort": 988}

    def rules(kind: str, peer: str) -> list[dict[str, Any]]:
        """The cluster stack's rules of `kind` on the file system's group (a reference to the storage
        stack's LustreSecurityGroup) whose `peer` is the nodes' group, on Lustre's port."""
        found = assertions.Template.from_stack(cluster).find_resources(kind)
        return [
            r["Properties"] for r in found.values()
            if "FsxLustreSecurityGroup" in json.dumps(r["Properties"]["GroupId"])
            and r["Properties"].get(peer) == nodes_group
            and port.items() <= r["Properties"].items()
        ]  # fmt: skip

    # the file system's group: in from the nodes, and out to them (FSx's servers reach their clients)
    assert rules("AWS::EC2::SecurityGroupIngress", "SourceSecurityGroupId")
    assert rules("AWS::EC2::SecurityGroupEgress", "DestinationSecurityGroupId")


def test_an_imported_file_system_group_gets_its_rules_both_ways() -> None:
    """aws-cdk-lib drops an imported group's egress rules (allow_all_outbound, the default) without a word
    (aws-ec2 security-group.ts, MutableImport.addEgressRule): the rules are written on the group's id, so the
    file system reaches its clients. (A group imported with mutable=False is left unchanged, with the rules
    it needs said: test_lustre's test_an_immutable_file_system_group_is_left_unchanged...)"""
    stack = Stack(new_app(), "Existing")
    vpc = network(stack)
    group = ec2.SecurityGroup.from_security_group_id(stack, "FsGroup", "sg-0123456789abcdef0")
    fs = EfaLustreFileSystem.from_file_system_attributes(
        stack, "Fsx", file_system_id="fs-0123456789abcdef0", dns_name="fs.example", mount_name="abcdefgh",
        security_group=group, availability_zone=ZONE, capacity_gib=19200, efa=True,
    )  # fmt: skip
    nodes = _cluster(stack, vpc, vpc.isolated_subnets[0], 2, lustre=fs)
    t = assertions.Template.from_stack(stack)
    mine = stack.resolve(nodes.security_group.security_group_id)
    both = {"IpProtocol": "-1"}
    t.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress",
        {"GroupId": "sg-0123456789abcdef0", "DestinationSecurityGroupId": mine, **both},
    )
    t.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {"GroupId": "sg-0123456789abcdef0", "SourceSecurityGroupId": mine, **both},
    )
