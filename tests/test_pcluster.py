"""ParallelCluster: the pure config model, its validation by ParallelCluster's own schema, the
ready stack (network, EFA group, placement group, retained storage, key pair, config output) and
the node bootstrap scripts.

The schema check runs aws-parallelcluster 3.16.1 (the newest on PyPI; configurations target 3.16.3)
in its own venv (`.venv-pcluster`, made by
`scripts/setup --dev`; `scripts/test` points EFA_CDK_PCLUSTER_PYTHON at it). What it proves: the
YAML we render is a configuration ParallelCluster loads. What it does not: `pcluster
create-cluster`'s AWS-side validators (they need an account) or a running cluster.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk import Stack, assertions
from aws_cdk import aws_ec2 as ec2

from efa_constructs.cdk import EfaParallelCluster
from efa_constructs.core.errors import EfaConfigError
from efa_constructs.core.pcluster import (
    PCLUSTER_SCHEMA_VERSION,
    ComputeResource,
    ParallelClusterConfig,
    SharedStorage,
    SlurmQueue,
)
from efa_constructs.core.software import NEURON_REPO_KEY_ID, NEURON_SDK_PACKAGES, bootstrap_script
from stacks.parallel_cluster_stack import EfaParallelClusterStack
from stacks.params import PclusterParams
from tests.helpers import BASH, ROOT, Node, by_type, executable, lint, new_app

SUBNETS = ("subnet-0123456789abcdef0", "subnet-0123456789abcdef1")


def config(itype: str, **queue: Any) -> ParallelClusterConfig:
    cr = ComputeResource(itype.replace(".", "-"), (itype,), min_count=0, max_count=4)
    return ParallelClusterConfig(
        region="us-east-1",
        image_os="ubuntu2204",
        head_node_instance_type="c5.2xlarge",
        head_node_subnet_id=SUBNETS[0],
        key_name="efa-key",
        queues=(
            SlurmQueue(
                **{
                    "name": "compute",
                    "subnet_ids": (SUBNETS[1],),
                    "compute_resources": (cr,),
                    "placement_group": "efa-pg",
                    "security_group_ids": ("sg-0123456789abcdef0",),
                    "on_node_configured": "s3://bucket/bootstrap.sh",
                    "on_node_configured_args": ("us-east-1", "s3://bucket/scripts.zip", "1", "32", "efa-env"),
                    "s3_read": (("bucket", "bootstrap.sh"),),
                    **queue,
                }
            ),
        ),
        shared_storage=(
            SharedStorage("shared", "/shared", "Efs", "fs-0123456789abcdef0"),
            SharedStorage("lustre", "/fsx", "FsxLustre", "fs-0123456789abcdef1"),
        ),
        head_node_security_group_ids=("sg-0123456789abcdef0",),
        ssh_cidr="203.0.113.0/24",
    )


def schema_check(configs: list[dict[str, Any]]) -> list[str]:
    python = os.environ.get("EFA_CDK_PCLUSTER_PYTHON")
    if not python:
        pytest.skip(
            "EFA_CDK_PCLUSTER_PYTHON is not set: run through scripts/test (it sets up .venv-pcluster)"
        )
    assert Path(python).exists(), f"{python} is missing: run scripts/setup --dev"
    run = subprocess.run(
        [python, str(ROOT / "tests" / "pcluster_schema_check.py")],
        input=json.dumps(configs),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)  # type: ignore[no-any-return]


def test_the_schema_check_installs_the_version_the_model_names() -> None:
    """scripts/setup pins the aws-parallelcluster whose schema the configurations are checked against."""
    assert (
        f'pcluster_pin="aws-parallelcluster=={PCLUSTER_SCHEMA_VERSION}"'
        in (ROOT / "scripts/setup").read_text()
    )


QUEUE_TYPES = ["trn1.32xlarge", "trn1n.32xlarge", "p4d.24xlarge", "p5.48xlarge"]


def test_configs_pass_parallelclusters_own_schema() -> None:
    configs = [yaml.safe_load(config(t).to_yaml()) for t in QUEUE_TYPES]
    flexible = ComputeResource("gpu", ("p5.48xlarge", "p5e.48xlarge"), min_count=1, max_count=2)
    block = ComputeResource("block", ("p5.48xlarge",), 2, 2, capacity_reservation_id="cr-0123456789abcdef0")
    configs.append(yaml.safe_load(config("p5.48xlarge", compute_resources=(flexible,)).to_yaml()))
    configs.append(
        yaml.safe_load(
            dataclasses.replace(  # with the tag the Capacity Block warning finds the head node by
                config(
                    "p5.48xlarge",
                    compute_resources=(block,),
                    capacity_type="CAPACITY_BLOCK",
                    use_placement_group=False,
                ),
                tags=(("efa-cdk:cluster", "Trn1ParallelCluster/ParallelCluster"),),
            ).to_yaml()
        )
    )
    reserved = ComputeResource(
        "odcr", ("trn1.32xlarge",), 0, 4, capacity_reservation_id="cr-0123456789abcdef1"
    )
    configs.append(  # an On-Demand Capacity Reservation made without a placement group
        yaml.safe_load(
            config("trn1.32xlarge", compute_resources=(reserved,), use_placement_group=False).to_yaml()
        )
    )
    broken = yaml.safe_load(config("trn1.32xlarge").to_yaml())
    broken["Image"]["Os"] = "alinux2"  # the check can fail: the schema refuses a retired OS
    results = schema_check([*configs, broken])
    assert results[:-1] == ["OK"] * len(configs), results
    assert results[-1] != "OK" and "alinux2" in results[-1]


def test_rendered_yaml_is_the_model() -> None:
    c = config("trn1.32xlarge")
    text = c.to_yaml()
    assert text.startswith("# ParallelCluster 3.16.3 configuration")  # the GitHub release of 2026-11-17
    assert yaml.safe_load(text) == c.to_dict()
    queue = c.to_dict()["Scheduling"]["SlurmQueues"][0]
    assert queue["ComputeResources"][0]["Efa"] == {"Enabled": True}
    assert queue["Networking"]["PlacementGroup"] == {"Enabled": True, "Name": "efa-pg"}


def test_slurm_node_names_are_parallelclusters() -> None:
    """Static and dynamic node names as ParallelCluster's cookbook renders them
    (``<queue>-st|dy-<compute resource>-[1-n]``), e.g. queue1-dy-t2micro-1 in the user guide."""
    cr = ComputeResource("trn1-32xlarge", ("trn1.32xlarge",), min_count=2, max_count=6)
    assert cr.slurm_nodes("q1") == ["q1-st-trn1-32xlarge-[1-2]", "q1-dy-trn1-32xlarge-[1-4]"]
    assert ComputeResource("a", ("trn1.32xlarge",), min_count=3, max_count=3).slurm_nodes("q") == [
        "q-st-a-[1-3]"
    ]
    assert config("trn1.32xlarge").slurm_nodes == ["compute-dy-trn1-32xlarge-[1-4]"]


def test_the_head_node_runs_a_script_before_parallelcluster_configures_it() -> None:
    c = dataclasses.replace(
        config("trn1.32xlarge"),
        head_node_on_node_start="s3://bucket/bootstrap.sh",
        head_node_on_node_start_args=("EFA_CDK_STEPS=slurm-topology-init",),
        head_node_on_node_configured="s3://bucket/bootstrap.sh",
        topology_tree=True,
    )
    actions = c.to_dict()["HeadNode"]["CustomActions"]
    assert actions["OnNodeStart"] == {
        "Script": "s3://bucket/bootstrap.sh",
        "Args": ["EFA_CDK_STEPS=slurm-topology-init"],
    }
    assert actions["OnNodeConfigured"] == {"Script": "s3://bucket/bootstrap.sh"}
    assert schema_check([c.to_dict()]) == ["OK"]


def test_topology_tree_without_a_first_topology_conf_is_refused() -> None:
    """slurmctld stops when topology/tree cannot read topology.conf (seen with the real slurmctld
    in tests/e2e), and ParallelCluster starts it before OnNodeConfigured."""
    with pytest.raises(EfaConfigError, match=r"^topology_tree=True: .*before OnNodeConfigured"):
        dataclasses.replace(config("trn1.32xlarge"), topology_tree=True)


def test_ultraservers_keep_the_topology_plugin_parallelcluster_sets_up() -> None:
    with pytest.raises(EfaConfigError, match="own Slurm topology plugin"):
        dataclasses.replace(
            config("p6e-gb200.36xlarge"), head_node_on_node_start="s3://b/k", topology_tree=True
        )
    text = synth_construct("p6e-gb200.36xlarge").to_yaml()
    assert "TopologyPlugin" not in text and "slurm-topology" not in text and "OnNodeStart" not in text


@pytest.mark.parametrize(
    ("build", "key", "why"),
    [
        (lambda: ComputeResource("x", ("m5.large",)), "instance_type", "does not support EFA"),
        (
            lambda: ComputeResource("x", ("p4d.24xlarge", "p5.48xlarge")),
            "instance_types",
            "different network cards",
        ),
        (
            lambda: ComputeResource("x", ("trn1.32xlarge",), min_count=3, max_count=2),
            "max_count",
            "min_count <= max_count",
        ),
        (lambda: ComputeResource("Trn1", ("trn1.32xlarge",)), "compute_resource_name", "lowercase"),
        (lambda: config("trn1.32xlarge", subnet_ids=SUBNETS), "subnet_ids", "one subnet"),
        (lambda: config("trn1.32xlarge", capacity_type="CAPACITY_BLOCK"), "capacity_type", "reservation"),
        (lambda: SharedStorage("s", "/home", "Efs", "fs-1"), "mount_dir", "mount over"),
        (
            lambda: ParallelClusterConfig(
                "us-east-1", "alinux2", "c5.xlarge", SUBNETS[0], "k", queues=(), ssh_cidr="10.0.0.0/16"
            ),
            "image_os",
            "no longer supported",
        ),
    ],
)
def test_bad_configurations_fail_when_built(build: Any, key: str, why: str) -> None:
    with pytest.raises(EfaConfigError) as err:
        build()
    assert str(err.value).startswith(f"{key}=") and why in str(err.value), str(err.value)


# --- the ready stack --------------------------------------------------------------------------


def synth(**context: Any) -> dict[str, Any]:
    params = PclusterParams.from_context(context, default_instance_type="trn1.32xlarge")
    stack = EfaParallelClusterStack(new_app(), "Trn1ParallelCluster", params=params)
    return assertions.Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def synth_construct(itype: str) -> ParallelClusterConfig:
    """The construct's configuration for a compute type."""
    return EfaParallelCluster(
        Stack(new_app(), "S"), "P", instance_type=ec2.InstanceType(itype), availability_zone="us-east-1a"
    ).config


@pytest.fixture(scope="module")
def stack() -> dict[str, Any]:
    return synth(fsx_lustre_capacity_gib="1200", availability_zone="us-east-1d")


def test_storage_is_elastic_encrypted_and_retained(stack: dict[str, Any]) -> None:
    (fs,) = [r for r in stack["Resources"].values() if r["Type"] == "AWS::EFS::FileSystem"]
    assert fs["Properties"]["ThroughputMode"] == "elastic"  # billed by use, not by the hour
    assert "ProvisionedThroughputInMibps" not in fs["Properties"]
    assert fs["Properties"]["Encrypted"] is True
    (lustre,) = by_type(stack, "AWS::FSx::FileSystem")
    for resource in (fs, lustre):
        assert resource["DeletionPolicy"] == "Retain" and resource["UpdateReplacePolicy"] == "Retain"


def test_what_stack_deletion_keeps_holds_nothing_in_the_subnet_but_lustre(stack: dict[str, Any]) -> None:
    """Deleting the stack keeps the file systems and the log groups only; EFS's mount targets (its
    network interfaces) go with the stack, so only a kept FSx still holds the subnet (next test).
    moto 5.2.5 cannot show this: its stack deletion does not follow CloudFormation's order."""
    kept = sorted({r["Type"] for r in stack["Resources"].values() if r.get("DeletionPolicy") == "Retain"})
    assert kept == ["AWS::EFS::FileSystem", "AWS::FSx::FileSystem", "AWS::Logs::LogGroup"]
    assert all("DeletionPolicy" not in r for r in by_type(stack, "AWS::EFS::MountTarget"))


def test_a_kept_lustre_file_system_says_how_stack_deletion_finishes() -> None:
    """EFS is kept on its own; a kept FSx keeps its interfaces in the subnet, so synthesis says how
    `cdk destroy` completes (and says nothing without FSx)."""
    found = {}
    for fsx_gib in (None, "1200"):
        ctx = {"availability_zone": "us-east-1d", **({"fsx_lustre_capacity_gib": fsx_gib} if fsx_gib else {})}
        params = PclusterParams.from_context(ctx, default_instance_type="trn1.32xlarge")
        stack = EfaParallelClusterStack(new_app(), "Fsx", params=params)
        found[fsx_gib] = assertions.Annotations.from_stack(stack).find_warning(
            "*", assertions.Match.string_like_regexp("--retain-resources")
        )
    assert len(found["1200"]) == 1 and not found[None]


def test_provisioned_throughput_is_what_was_asked_and_warns_of_its_cost() -> None:
    app = new_app()
    params = PclusterParams.from_context(
        {"efs_throughput_mibps": "1024"}, default_instance_type="trn1.32xlarge"
    )
    stack = EfaParallelClusterStack(app, "Provisioned", params=params)
    t = assertions.Template.from_stack(stack)
    t.has_resource_properties(
        "AWS::EFS::FileSystem", {"ThroughputMode": "provisioned", "ProvisionedThroughputInMibps": 1024}
    )
    warnings = assertions.Annotations.from_stack(stack).find_warning(
        "*",
        assertions.Match.string_like_regexp("EFS provisioned throughput of 1024 MiB/s is billed every hour"),
    )
    assert len(warnings) == 1


def test_storage_security_groups_allow_their_ports_both_ways(stack: dict[str, Any]) -> None:
    """ParallelCluster's EfsIdValidator and ExistingFsxNetworkingValidator check inbound AND outbound."""
    res = stack["Resources"]
    (efa_sg,) = [
        k
        for k, v in res.items()
        if k.startswith("ParallelClusterSecurityGroup") and v["Type"] == "AWS::EC2::SecurityGroup"
    ]
    groups = {k for k, v in res.items() if v["Type"] == "AWS::EC2::SecurityGroup"}
    (efs_sg,) = [k for k in groups if k.startswith("ParallelClusterStorageEfsSecurityGroup")]
    (lustre_sg,) = [k for k in groups if k.startswith("ParallelClusterStorageLustreSecurityGroup")]

    def rules(kind: str, group: str, port: int) -> set[str]:
        peer = "SourceSecurityGroupId" if kind.endswith("Ingress") else "DestinationSecurityGroupId"
        return {
            r["Properties"][peer]["Fn::GetAtt"][0]
            for r in by_type(stack, kind)
            if r["Properties"]["GroupId"]["Fn::GetAtt"][0] == group
            and r["Properties"].get("FromPort") == port
        }

    for port in (2049,):
        assert rules("AWS::EC2::SecurityGroupIngress", efs_sg, port) == {efa_sg}
        assert rules("AWS::EC2::SecurityGroupEgress", efs_sg, port) == {efa_sg}
    for port in (988, 1018):
        assert rules("AWS::EC2::SecurityGroupIngress", lustre_sg, port) == {efa_sg, lustre_sg}
        assert rules("AWS::EC2::SecurityGroupEgress", lustre_sg, port) == {efa_sg, lustre_sg}
    for group in (efs_sg, lustre_sg):  # no inline egress would leave EC2's default allow-all egress
        assert [e["CidrIp"] for e in res[group]["Properties"]["SecurityGroupEgress"]] == [
            "255.255.255.255/32"
        ]
    # the file system waits for its rules (ParallelCluster issue #6181: port 988 checked at creation)
    (lustre,) = [v for v in res.values() if v["Type"] == "AWS::FSx::FileSystem"]
    rule_ids = {
        k for k, v in res.items() if v["Type"].startswith("AWS::EC2::SecurityGroup") and "Lustre" in k
    }
    assert rule_ids - {lustre_sg} <= set(lustre["DependsOn"])


def test_head_node_ssh_is_never_open_to_the_world(stack: dict[str, Any]) -> None:
    """ParallelCluster opens SSH to 0.0.0.0/0 when AllowedIps is missing: here it is the VPC's CIDR."""
    joined = stack["Outputs"]["ParallelClusterConfig"]["Value"]["Fn::Join"][1]
    i = next(n for n, p in enumerate(joined) if isinstance(p, str) and p.rstrip().endswith("AllowedIps:"))
    (vpc,) = [k for k, v in stack["Resources"].items() if v["Type"] == "AWS::EC2::VPC"]
    assert joined[i + 1] == {"Fn::GetAtt": [vpc, "CidrBlock"]}


def test_only_the_cluster_reaches_the_file_systems(stack: dict[str, Any]) -> None:
    (efa_sg,) = [
        k
        for k, v in stack["Resources"].items()
        if k.startswith("ParallelClusterSecurityGroup") and v["Type"] == "AWS::EC2::SecurityGroup"
    ]
    ingress = by_type(stack, "AWS::EC2::SecurityGroupIngress")
    nfs = [r["Properties"] for r in ingress if r["Properties"].get("FromPort") == 2049]
    assert [r["SourceSecurityGroupId"]["Fn::GetAtt"][0] for r in nfs] == [efa_sg]
    lustre = [r["Properties"] for r in ingress if r["Properties"].get("FromPort") in (988, 1018)]
    assert {r["SourceSecurityGroupId"]["Fn::GetAtt"][0] for r in lustre} >= {efa_sg}


def test_config_output_refers_to_the_stack(stack: dict[str, Any]) -> None:
    joined = stack["Outputs"]["ParallelClusterConfig"]["Value"]["Fn::Join"][1]
    refs = {json.dumps(p) for p in joined if isinstance(p, dict)}
    resources = stack["Resources"]
    for kind in ("AWS::EC2::Subnet", "AWS::EFS::FileSystem", "AWS::FSx::FileSystem", "AWS::EC2::KeyPair"):
        assert any(k in r for r in refs for k, v in resources.items() if v["Type"] == kind), kind
    text = "".join(p if isinstance(p, str) else "X" for p in joined)
    assert "InstanceType: trn1.32xlarge" in text and "efa-env,pcluster-hosts,neuron-sdk,pyxis" in text
    assert "efa-env,slurm-jobs,pyxis,slurm-topology" in text  # the head node: Pyxis, the Slurm topology
    assert "TopologyPlugin: topology/tree" in text
    # the first topology.conf, before ParallelCluster starts slurmctld, names the queue's nodes
    assert "EFA_CDK_STEPS=slurm-topology-init" in text
    assert "EFA_CDK_SLURM_NODES=compute-dy-trn1-32xlarge-[1-2]" in text
    assert "KeyPairParameter" in stack["Outputs"] and "SharedFileSystemId" in stack["Outputs"]


@pytest.fixture(scope="module")
def efa_lustre_stack() -> dict[str, Any]:
    """FSx for Lustre over EFA: the compute nodes' OnNodeStart runs lustre-lnet, their OnNodeConfigured also
    lustre-client."""
    return synth(fsx_lustre_capacity_gib="19200", fsx_lustre_efa="true", availability_zone="us-east-1d")


@pytest.fixture(scope="module")
def gds_lustre_stack() -> dict[str, Any]:
    """... and GPUDirect Storage on p5 compute nodes: one more setting of lustre-client's."""
    return synth(instance_type="p5.48xlarge", fsx_lustre_capacity_gib="19200", fsx_lustre_efa="true",
                 fsx_lustre_gds="true", availability_zone="us-east-1d")  # fmt: skip


@pytest.mark.parametrize("which", ["stack", "efa_lustre_stack", "gds_lustre_stack"])
def test_resolved_config_passes_the_schema(which: str, request: pytest.FixtureRequest) -> None:
    """The output with every reference replaced by a plausible id is still a valid configuration (and a
    CloudFormation output: under 4,096 characters)."""
    stack = request.getfixturevalue(which)
    ids = iter(range(10**6))

    def resolve(part: Any) -> str:
        if isinstance(part, str):
            return part
        text = json.dumps(part)
        if "AWS::Region" in text and "s3://" not in text:
            return "us-east-1"
        if "Subnet" in text:
            return f"subnet-{next(ids):017x}"
        if "SecurityGroup" in text:
            return f"sg-{next(ids):017x}"
        if "PlacementGroup" in text:
            return "efa-pg"
        if "s3://" in text:
            return "s3://cdk-assets/key.zip"
        if "cdk-hnb659fds" in text:
            return "cdk-assets"
        if "KeyPair" in text:
            return "efa-key"
        if "CidrBlock" in text:
            return "10.0.0.0/16"
        if "HeadNodeTopology" in text:
            return "arn:aws:iam::123456789012:policy/efa-cdk-head-node-topology"
        return f"fs-{next(ids):017x}"

    text = "".join(resolve(p) for p in stack["Outputs"]["ParallelClusterConfig"]["Value"]["Fn::Join"][1])
    assert len(text) < 4096  # a CloudFormation output value
    config = yaml.safe_load(text)
    assert schema_check([config]) == ["OK"]
    (queue,) = config["Scheduling"]["SlurmQueues"]
    args = queue["CustomActions"]["OnNodeConfigured"]["Args"]
    efa, gds = which != "stack", which == "gds_lustre_stack"
    assert ("lustre-client" in next(a for a in args if a.startswith("EFA_CDK_STEPS="))) is efa
    assert (f"EFA_CDK_LUSTRE_EFA_INTERFACES={8 if gds else 2}" in args) is efa
    assert ("EFA_CDK_LUSTRE_GDS=1" in args) is gds
    # Issue 53 item 11: LNet over EFA at OnNodeStart, which ParallelCluster runs before its own bootstrap
    # actions, its mount among them (ParallelCluster user guide, "Custom bootstrap actions"); the same
    # settings, the one step lustre-lnet
    start = queue["CustomActions"].get("OnNodeStart")
    assert (start is not None) is efa, queue["CustomActions"]
    if efa:
        assert start["Script"] == queue["CustomActions"]["OnNodeConfigured"]["Script"]
        assert "EFA_CDK_STEPS=lustre-lnet" in start["Args"]
        settings = [a.split("=")[0] for a in args if a.startswith("EFA_CDK_LUSTRE_")]
        assert [a.split("=")[0] for a in start["Args"] if a.startswith("EFA_CDK_LUSTRE_")] == settings


def test_ready_stack_is_lint_clean_and_has_the_efa_pieces(stack: dict[str, Any]) -> None:
    assert lint(stack) == []
    assert by_type(stack, "AWS::EC2::PlacementGroup")[0]["Properties"]["Strategy"] == "cluster"
    (efa_sg,) = [
        k
        for k, v in stack["Resources"].items()
        if k.startswith("ParallelClusterSecurityGroup") and v["Type"] == "AWS::EC2::SecurityGroup"
    ]
    egress = [r["Properties"] for r in by_type(stack, "AWS::EC2::SecurityGroupEgress")]
    assert any(e.get("DestinationSecurityGroupId", {}).get("Fn::GetAtt", [None])[0] == efa_sg for e in egress)
    subnets = by_type(stack, "AWS::EC2::Subnet")
    assert {s["Properties"]["AvailabilityZone"] for s in subnets} == {"us-east-1d"}


def test_create_cluster_uses_the_published_provider() -> None:
    t = synth(create_cluster="true")
    (nested,) = by_type(t, "AWS::CloudFormation::Stack")
    url = json.dumps(nested["Properties"]["TemplateURL"])
    assert (
        "aws-parallelcluster" in url
        and "/parallelcluster/3.16.3/templates/custom_resource/cluster.yaml" in url
    )
    (cluster,) = by_type(t, "Custom::PclusterCluster")
    props = cluster["Properties"]
    assert props["ServiceToken"]["Fn::GetAtt"][1] == "Outputs.ServiceToken"
    assert props["ClusterConfiguration"]["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]["Efa"] == {
        "Enabled": True
    }
    assert props["ClusterName"] == "c-Trn1ParallelCluster"
    assert t["Outputs"]["HeadNodeIp"]["Value"] == {
        "Fn::GetAtt": [_id(t, cluster), "headNode.publicIpAddress"]
    }
    assert lint(t) == []


def _id(t: dict[str, Any], resource: dict[str, Any]) -> str:
    return next(k for k, v in t["Resources"].items() if v is resource)


def test_capacity_block_queue() -> None:
    t = synth(
        capacity_block="cr-0123456789abcdef0", availability_zone="us-east-2a", min_count="4", max_count="4"
    )
    text = "".join(
        p for p in t["Outputs"]["ParallelClusterConfig"]["Value"]["Fn::Join"][1] if isinstance(p, str)
    )
    assert "CapacityType: CAPACITY_BLOCK" in text and "CapacityReservationId: cr-0123456789abcdef0" in text
    assert not by_type(t, "AWS::EC2::PlacementGroup")


@pytest.mark.parametrize(
    ("context", "key", "why"),
    [
        ({"instance_type": "m5.large"}, "instance_type", "does not support EFA"),
        ({"image_os": "alinux2"}, "image_os", "no longer supported"),
        ({"min_count": "3", "max_count": "2"}, "max_count", "min_count <= max_count"),
        ({"ssh_peers": "10.0.0.0/8,192.168.0.0/16"}, "ssh_peers", "takes one CIDR"),
        ({"create_cluster": "yes"}, "create_cluster", "not true or false"),
        ({"fsx_lustre_capacity_gib": "1000"}, "fsx_lustre_capacity_gib", "multiple of 2400"),
        (
            {
                "capacity_reservation": "arn:aws:resource-groups:us-east-1:123456789012:group/g",
                "availability_zone": "us-east-1a",
            },
            "capacity",
            "not a group",
        ),
        ({"fsx_lustre_capacity_gib": "1300"}, "fsx_lustre_capacity_gib", "multiple of 2400"),
        (
            {"capacity_block": "cr-0123456789abcdef0", "availability_zone": "us-east-1a"},
            "capacity_type",
            "static nodes",
        ),
    ],
)
def test_bad_context_fails_at_synth(context: dict[str, str], key: str, why: str) -> None:
    with pytest.raises(EfaConfigError) as err:
        synth(**context)
    assert str(err.value).startswith(f"{key}=") and why in str(err.value), str(err.value)


# --- the bootstrap scripts ------------------------------------------------------------------


def test_hosts_workaround_drops_only_the_queues_pcluster_names(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.setting("EFA_CDK_QUEUES", "compute")
    hosts = "10.0.1.5 compute-st-trn1-32xlarge-1.mycluster.pcluster ip-10-0-1-5\n10.0.0.9 head.local\n"
    (node.root / "etc/hosts").write_text(hosts)
    r = node.run("pcluster-hosts")
    assert r.returncode == 0, r.log
    assert node.read("etc/hosts") == "10.0.1.5 ip-10-0-1-5\n10.0.0.9 head.local\n"


def test_trainium_compute_nodes_install_the_pinned_neuron_sdk(tmp_path: Path) -> None:
    """ParallelCluster's images have no Neuron SDK: the compute nodes' neuron-sdk step adds the
    Neuron repository with its key and installs exactly the pinned packages."""
    node = Node(tmp_path)
    (node.root / "etc/os-release").write_text('ID=ubuntu\nVERSION_ID="22.04"\nVERSION_CODENAME=jammy\n')
    node.setting("EFA_CDK_NEURON_PACKAGES", " ".join(NEURON_SDK_PACKAGES))
    node.setting("EFA_CDK_NEURON_KEY_ID", NEURON_REPO_KEY_ID)
    (node.stub_dir / "downloads" / "GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB").write_text("key")
    r = node.run("neuron-sdk", STUB_KEY_FPR="0" * 24 + "5749CAD8646D9185")  # the Neuron docs' key id
    assert r.returncode == 0, r.log
    assert node.read("etc/apt/sources.list.d/neuron.list") == (
        "deb [signed-by=/usr/share/keyrings/aws-neuron.gpg] "
        "https://apt.repos.neuron.amazonaws.com jammy main\n"
    )
    (install,) = [c for c in node.calls("apt-get") if " install " in c]
    assert install.endswith(" ".join(NEURON_SDK_PACKAGES)) and "aws-neuronx-tools=2.33.38.0" in install
    assert any("--dearmor" in c for c in node.calls("gpg"))


def test_the_neuron_sdk_step_refuses_a_repository_key_that_is_not_neurons(tmp_path: Path) -> None:
    """Issue 23 item 3: the key is pinned to the long key id the Neuron docs publish."""
    node = Node(tmp_path)
    (node.root / "etc/os-release").write_text('ID=ubuntu\nVERSION_ID="22.04"\nVERSION_CODENAME=jammy\n')
    node.setting("EFA_CDK_NEURON_PACKAGES", " ".join(NEURON_SDK_PACKAGES))
    node.setting("EFA_CDK_NEURON_KEY_ID", NEURON_REPO_KEY_ID)
    (node.stub_dir / "downloads" / "GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB").write_text("key")
    r = node.run("neuron-sdk", STUB_KEY_FPR="A" * 40)
    assert r.returncode == 1 and "expected one ending with 5749CAD8646D9185; not trusting it" in r.log
    assert not node.calls("apt-get") and not (node.root / "etc/apt/sources.list.d/neuron.list").exists()


def test_key_fingerprints_reads_real_gpg_output(tmp_path: Path) -> None:
    """lib.sh's key_fingerprints against Debian's gpg: a made key with a subkey gives its primary
    fingerprint alone, and a file that is not a key fails."""
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    gpg = ["gpg", "--batch", "--passphrase", ""]
    subprocess.run([*gpg, "--quick-gen-key", "t <t@x.org>", "ed25519", "sign", "1d"], env=env, check=True)
    listing = subprocess.run([*gpg, "--with-colons", "-k"], env=env, capture_output=True, text=True)
    fpr = next(line.split(":")[9] for line in listing.stdout.splitlines() if line.startswith("fpr:"))
    subprocess.run([*gpg, "--quick-add-key", fpr, "cv25519", "encr", "1d"], env=env, check=True)
    key = tmp_path / "key.pub"
    key.write_bytes(subprocess.run(["gpg", "--export", "--armor"], env=env, capture_output=True).stdout)
    lib = ROOT / "efa_constructs/node/boot/lib.sh"
    run = subprocess.run(["bash", "-c", f'. "{lib}"; key_fingerprints "$1"', "-", str(key)],
                         capture_output=True, text=True)  # fmt: skip
    assert (run.returncode, run.stdout) == (0, fpr + "\n"), run.stderr
    (tmp_path / "junk").write_text("not a key")
    run = subprocess.run(["bash", "-c", f'. "{lib}"; key_fingerprints "$1"', "-", str(tmp_path / "junk")])
    assert run.returncode == 1


def test_neuron_sdk_step_skips_an_image_that_has_it_and_refuses_other_oses(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.setting("EFA_CDK_NEURON_PACKAGES", "aws-neuronx-tools=2.29.18.0")
    (node.root / "etc/os-release").write_text('ID="amzn"\nVERSION_ID="2023"\n')
    r = node.run("neuron-sdk")
    assert r.returncode == 1 and "installs on Ubuntu only" in r.log
    executable(node.root / "opt/aws/neuron/bin/nccom-test")
    r = node.run("neuron-sdk")
    assert r.returncode == 0 and "already installed" in r.log and not node.calls("apt-get")


def test_gpu_compute_nodes_get_no_neuron_step() -> None:
    stack = Stack(new_app(), "P5Pc")
    pc = EfaParallelCluster(
        stack, "Pc", instance_type=ec2.InstanceType("p5.48xlarge"), availability_zone="us-east-1a"
    )
    text = json.dumps(stack.resolve(pc.config_yaml))
    assert "efa-env,pcluster-hosts" in text and "neuron-sdk" not in text


def _pcluster_examples(node: Node, node_type: str) -> None:
    """What a ParallelCluster 3.11+ image ships: the Enroot/Pyxis samples, and its node type."""
    for rel in ("enroot/enroot.conf", "spank/plugstack.conf", "pyxis/pyxis.conf"):
        path = node.root / "opt/parallelcluster/examples" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# sample {rel}\n")
    (node.root / "etc/parallelcluster").mkdir(parents=True)
    (node.root / "etc/parallelcluster/cfnconfig").write_text(f"cfn_node_type={node_type}\n")


@pytest.mark.parametrize("node_type", ["HeadNode", "ComputeFleet"])
def test_pyxis_is_switched_on_with_the_images_own_samples(tmp_path: Path, node_type: str) -> None:
    node = Node(tmp_path)
    _pcluster_examples(node, node_type)
    assert node.run("efa-env").returncode == 0
    r = node.run("pyxis")
    assert r.returncode == 0, r.log
    assert node.read("etc/enroot/enroot.conf") == "# sample enroot/enroot.conf\n"
    # the hook checks images on EFA nodes; the compute nodes' containers get their EFA environment,
    # the head node's (no EFA) none
    assert os.access(node.root / "etc/enroot/hooks.d/90-efa-cdk.sh", os.X_OK)
    for d in ("var/enroot", "run/enroot", "run/pyxis"):
        assert oct((node.root / d).stat().st_mode & 0o7777) == "0o1777"
    head = node_type == "HeadNode"
    environ = node.root / "etc/enroot/environ.d/50-efa-cdk.env"
    assert environ.exists() is not head
    if not head:
        assert environ.read_text().splitlines()[0] == "FI_PROVIDER=efa"
    assert (node.root / "opt/slurm/etc/plugstack.conf.d/pyxis.conf").exists() is head
    assert bool(node.calls("scontrol")) is head


def test_pyxis_refuses_an_enroot_that_hides_the_efa_devices(tmp_path: Path) -> None:
    node = Node(tmp_path)
    _pcluster_examples(node, "ComputeFleet")
    (node.root / "opt/parallelcluster/examples/enroot/enroot.conf").write_text("ENROOT_RESTRICT_DEV  yes\n")
    assert node.run("efa-env").returncode == 0
    r = node.run("pyxis")
    assert r.returncode == 1 and "ENROOT_RESTRICT_DEV" in r.log


def _enroot_hook(
    tmp_path: Path, rootfs_libs: tuple[str, ...], **env: str
) -> subprocess.CompletedProcess[str]:
    """Run the EFA hook as Enroot would (ENROOT_ROOTFS: the image's root) on a node with EFA devices."""
    host = tmp_path / "host"
    (host / "dev/infiniband").mkdir(parents=True)
    (host / "dev/infiniband/uverbs0").touch()
    rootfs = tmp_path / "rootfs"
    for lib in rootfs_libs:
        (rootfs / lib).parent.mkdir(parents=True, exist_ok=True)
        (rootfs / lib).touch()
    rootfs.mkdir(exist_ok=True)
    return subprocess.run(
        [BASH, str(ROOT / "efa_constructs/node/pcluster/enroot-efa-hook.sh")],
        env={"PATH": "/usr/bin:/bin", "EFA_CDK_ROOT": str(host), "ENROOT_ROOTFS": str(rootfs), **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    "lib", ["opt/amazon/efa/lib/libfabric.so.1", "usr/lib/x86_64-linux-gnu/libfabric.so.1.27.0"]
)
def test_enroot_hook_starts_an_image_with_libfabric(tmp_path: Path, lib: str) -> None:
    run = _enroot_hook(tmp_path, (lib,))
    assert run.returncode == 0, run.stderr


def test_enroot_hook_stops_an_image_without_libfabric_on_an_efa_node(tmp_path: Path) -> None:
    run = _enroot_hook(tmp_path, ("usr/lib/x86_64-linux-gnu/libc.so.6",))
    assert run.returncode == 1 and "no libfabric" in run.stderr and "--skip-kmod" in run.stderr
    assert _enroot_hook(tmp_path / "optout", (), EFA_CDK_CONTAINER_EFA="0").returncode == 0


def test_enroot_hook_leaves_nodes_without_efa_alone(tmp_path: Path) -> None:
    run = subprocess.run(
        [BASH, str(ROOT / "efa_constructs/node/pcluster/enroot-efa-hook.sh")],
        env={"PATH": "/usr/bin:/bin", "EFA_CDK_ROOT": str(tmp_path), "ENROOT_ROOTFS": str(tmp_path / "none")},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr


def test_pyxis_refuses_an_image_without_it(tmp_path: Path) -> None:
    r = Node(tmp_path).run("pyxis")
    assert r.returncode == 1 and "older than ParallelCluster 3.11" in r.log


def test_head_node_gets_the_job_templates(tmp_path: Path) -> None:
    node = Node(tmp_path)
    r = node.run("slurm-jobs")
    assert r.returncode == 0, r.log
    jobs = sorted(p.name for p in (node.root / "shared/jobs").iterdir())
    assert jobs == ["nccl-tests.sbatch", "nccom-test.sbatch", "train-trn1.sbatch"]


@pytest.mark.parametrize("planted", ["a link to /etc", "a writable directory with links in it"])
def test_the_job_templates_never_go_through_what_a_user_put_in_shared(tmp_path: Path, planted: str) -> None:
    """/shared is every user's and is retained with the file system: a user's /shared/jobs (a link to a root
    folder, or their own directory holding links named as the templates) must not make the head node's root
    overwrite or chmod what the links point to. It is moved aside and the templates go into a fresh one."""
    import os

    node = Node(tmp_path)
    secret = node.root / "etc-shadow"
    secret.write_text("root:hash\n")
    os.chmod(secret, 0o600)
    jobs = node.root / "shared/jobs"
    jobs.parent.mkdir(mode=0o1777, parents=True, exist_ok=True)
    if planted == "a link to /etc":
        (node.root / "elsewhere").mkdir()
        jobs.symlink_to(node.root / "elsewhere")
    else:
        jobs.mkdir(mode=0o777)
        os.chmod(jobs, 0o777)
        (jobs / "nccl-tests.sbatch").symlink_to(secret)
    r = node.run("slurm-jobs")
    assert r.returncode == 0, r.log
    assert secret.read_text() == "root:hash\n" and oct(secret.stat().st_mode & 0o777) == "0o600"
    assert not jobs.is_symlink() and (jobs / "nccl-tests.sbatch").read_text().startswith("#!")
    assert "moved /shared/jobs aside" in r.log


def test_a_user_cannot_steer_where_root_moves_their_jobs_entry(tmp_path: Path) -> None:
    """Issue 60 item 6: root moved a user's entry aside to a name the user could guess
    (jobs.not-root-only.<epoch>): a link there to a root folder (here a stand-in for /etc/cron.hourly) had
    root move the user's directory, executable and all, into it; a plain file there failed the step. Links
    and a file at every such name for the next minute: nothing reaches the folder, the step succeeds, and the
    user's entry is kept aside under a name no one foresaw."""
    import os
    import time

    node = Node(tmp_path)
    cron = node.root / "etc-cron-hourly"
    cron.mkdir()
    shared = node.root / "shared"
    shared.mkdir(mode=0o1777, parents=True, exist_ok=True)
    os.chmod(shared, 0o1777)
    jobs = shared / "jobs"
    jobs.mkdir()
    os.chmod(jobs, 0o777)
    (jobs / "run-me").write_text("#!/bin/sh\necho pwned\n")
    now = int(time.time())
    for t in range(now - 5, now + 60):
        (shared / f"jobs.not-root-only.{t}").symlink_to(cron)
    (shared / "jobs.not-root-only").write_text("a user's file\n")
    r = node.run("slurm-jobs")
    assert r.returncode == 0, r.log
    assert list(cron.iterdir()) == []
    (aside,) = [p for p in shared.iterdir() if p.name.startswith(".efa-cdk-moved-aside.")]
    assert (aside / "jobs/run-me").read_text().endswith("pwned\n") and aside.stat().st_uid == 0
    assert f"moved /shared/jobs aside to /shared/{aside.name}/jobs" in r.log
    assert (jobs / "nccl-tests.sbatch").read_text().startswith("#!") and not (jobs / "run-me").exists()


def test_nccom_test_job_refuses_a_container_image_instead_of_benchmarking_the_host() -> None:
    """nccom-test launches its own workers on the other nodes, out of Pyxis' reach: with CONTAINER_IMAGE
    the template stops (exit 2) saying so, before touching the host's Neuron SDK."""
    job = ROOT / "efa_constructs/node/slurm/nccom-test.sbatch"
    run = subprocess.run(
        [BASH, str(job)],
        env={"PATH": "/usr/bin:/bin", "CONTAINER_IMAGE": "public.ecr.aws/neuron/pytorch-training-neuronx:x"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (
        run.returncode == 2
        and "CONTAINER_IMAGE='public.ecr.aws/neuron/pytorch-training-neuronx:x'" in run.stderr
    )
    assert "train-trn1.sbatch" in run.stderr and "container_image" in run.stderr


def test_bootstrap_fetches_scripts_and_runs_the_steps(tmp_path: Path) -> None:
    node = Node(tmp_path)
    zip_path = node.stub_dir / "downloads" / "scripts.zip"
    shutil.make_archive(str(zip_path.with_suffix("")), "zip", node.bin)
    (node.stub_dir / "bin" / "aws").write_text(
        f'#!{BASH}\ncp "$STUB_DIR/downloads/scripts.zip" "${{@: -1}}"\n'
    )
    (node.root / "etc/hosts").write_text("10.0.1.5 compute-st-x-1.c.pcluster ip-10-0-1-5\n")
    shutil.rmtree(node.bin)
    settings = {"EFA_CDK_RDMA_READ": "1", "EFA_CDK_SLOTS": "32", "EFA_CDK_QUEUES": "compute"}
    (tmp_path / "pcluster-bootstrap.sh").write_text(bootstrap_script(settings))
    run = subprocess.run(
        [
            BASH,
            str(tmp_path / "pcluster-bootstrap.sh"),
            "EFA_CDK_REGION=us-east-1",
            "EFA_CDK_SCRIPTS_URL=s3://b/scripts.zip",
            "EFA_CDK_STEPS=efa-env,pcluster-hosts",
        ],
        env={**node.env, "EFA_CDK_ROOT": str(node.root)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "FI_EFA_USE_DEVICE_RDMA=1" in node.read("etc/efa-cdk/efa.env")
    assert node.read("etc/hosts") == "10.0.1.5 ip-10-0-1-5\n"
    assert re.search(r"EFA_CDK_SLOTS='32'", node.read("etc/efa-cdk/node.env"))
    assert not node.signals()  # ParallelCluster tracks its nodes: no CloudFormation signal
    assert "EFA_CDK_SCRIPTS_URL='s3://b/scripts.zip'" in node.read("etc/efa-cdk/node.env")


def test_the_benchmark_handle_is_readable_by_root_alone(tmp_path: Path) -> None:
    """Issue 53 item 14: the benchmark wait condition's presigned URL lets whoever reads it fail the stack or
    forge the results efa-cdk status prints. It goes to /etc/efa-cdk/node.secret.env (0600), which the steps
    read as root; node.env (0644, read by users' jobs for EFA_CDK_SLOTS) no longer holds it."""
    import stat

    root = tmp_path / "root"
    url = "https://cloudformation-waitcondition-us-east-1.s3.amazonaws.com/arn%3Aaws?X-Amz-Signature=abc"
    (tmp_path / "b.sh").write_text(bootstrap_script({"EFA_CDK_SLOTS": "32", "EFA_CDK_BENCHMARK_URL": url}))
    run = subprocess.run(
        [BASH, str(tmp_path / "b.sh")],
        env={"PATH": "/usr/bin:/bin", "EFA_CDK_ROOT": str(root)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    env, secret = root / "etc/efa-cdk/node.env", root / "etc/efa-cdk/node.secret.env"
    assert "EFA_CDK_SLOTS='32'" in env.read_text() and "X-Amz-Signature" not in env.read_text(), run.stdout
    assert secret.read_text() == f"EFA_CDK_BENCHMARK_URL='{url}'\n"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    lib = Path(__file__).parent.parent / "efa_constructs/node/boot/lib.sh"
    seen = subprocess.run(
        [BASH, "-c", f'. "{lib}"; echo "$EFA_CDK_BENCHMARK_URL"'],
        env={"PATH": "/usr/bin:/bin", "EFA_CDK_ROOT": str(root)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert seen.stdout.strip() == url  # the steps (root) still read it


def test_bootstrap_refuses_an_argument_that_is_not_a_setting(tmp_path: Path) -> None:
    (tmp_path / "b.sh").write_text(bootstrap_script({}))
    run = subprocess.run(
        [BASH, str(tmp_path / "b.sh"), "us-east-1"],
        env={"PATH": "/usr/bin:/bin", "EFA_CDK_ROOT": str(tmp_path / "root")},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 1 and "not EFA_CDK_*=VALUE: us-east-1" in run.stdout + run.stderr


def test_efs_is_mounted_with_iam_because_its_policy_refuses_anonymous_clients(stack: dict[str, Any]) -> None:
    """The synthesized policy grants ClientWrite/ClientRootAccess to IAM principals through mount
    targets and nothing to anonymous clients, so ParallelCluster must mount with IAM (and TLS)."""
    (fs,) = by_type(stack, "AWS::EFS::FileSystem")
    statements = fs["Properties"]["FileSystemPolicy"]["Statement"]
    (statement,) = [s for s in statements if s["Effect"] == "Allow"]
    (deny,) = [s for s in statements if s["Effect"] == "Deny"]
    assert statement["Effect"] == "Allow" and "elasticfilesystem:ClientMount" not in statement["Action"]
    assert statement["Condition"] == {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}}
    # and no connection without TLS (issue 34 item 14), which ParallelCluster's EncryptionInTransit meets
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    joined = stack["Outputs"]["ParallelClusterConfig"]["Value"]["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else "X" for p in joined)
    efs = text.split("EfsSettings:")[1].split("Name:")[0]
    assert "EncryptionInTransit: true" in efs and "IamAuthorization: true" in efs


def _queue_placement(template: dict[str, Any]) -> str:
    joined = template["Outputs"]["ParallelClusterConfig"]["Value"]["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else "<ref>" for p in joined)
    return text.split("PlacementGroup:")[1].split("ComputeResources:")[0].split("Name: compute")[0]


def test_a_reservation_without_its_group_disables_placement_instead_of_making_one() -> None:
    """ParallelCluster's PlacementGroupCapacityReservationValidator refuses a group the reservation
    is not in: with an On-Demand Capacity Reservation and no placement_group, none is used."""
    t = synth(capacity_reservation="cr-0123456789abcdef0", availability_zone="us-east-1d")
    assert not by_type(t, "AWS::EC2::PlacementGroup")
    assert "Enabled: false" in _queue_placement(t) and "Name:" not in _queue_placement(t)


def test_a_reservation_with_its_group_names_that_group() -> None:
    t = synth(
        capacity_reservation="cr-0123456789abcdef0", availability_zone="us-east-1d", placement_group="resv-pg"
    )
    assert not by_type(t, "AWS::EC2::PlacementGroup")
    placement = _queue_placement(t)
    assert "Enabled: true" in placement and "Name: resv-pg" in placement


def test_a_capacity_block_refuses_a_placement_group() -> None:
    with pytest.raises(EfaConfigError, match="placement_group='blk-pg': a Capacity Block"):
        synth(capacity_block="cr-0123456789abcdef0", availability_zone="us-east-1d", placement_group="blk-pg")


def test_an_existing_vpc_is_used_as_given() -> None:
    t = synth(
        vpc_id="vpc-0123456789abcdef0",
        subnet_id="subnet-0123456789abcdef1",
        public_subnet_id="subnet-0123456789abcdef2",
        availability_zone="us-east-1d",
        ssh_peers="203.0.113.0/24",
    )
    assert not by_type(t, "AWS::EC2::VPC") and not by_type(t, "AWS::EC2::NatGateway")
    text = "".join(
        p for p in t["Outputs"]["ParallelClusterConfig"]["Value"]["Fn::Join"][1] if isinstance(p, str)
    )
    assert "SubnetId: subnet-0123456789abcdef2" in text  # the head node, public
    assert "- subnet-0123456789abcdef1" in text  # the compute queue
    assert "AllowedIps: 203.0.113.0/24" in text


@pytest.mark.parametrize(
    ("context", "key", "why"),
    [
        ({"vpc_id": "vpc-0123456789abcdef0", "subnet_id": "subnet-0123456789abcdef1",
          "availability_zone": "us-east-1d"}, "vpc_id", "public_subnet_id"),
        ({"vpc_id": "vpc-0123456789abcdef0", "subnet_id": "subnet-0123456789abcdef1",
          "public_subnet_id": "subnet-0123456789abcdef2", "availability_zone": "us-east-1d"},
         "ssh_peers", "CIDR is not known at synth"),
    ],
)  # fmt: skip
def test_an_existing_vpc_needs_its_subnets_and_an_ssh_source(
    context: dict[str, str], key: str, why: str
) -> None:
    with pytest.raises(EfaConfigError) as err:
        synth(**context)
    assert str(err.value).startswith(f"{key}=") and why in str(err.value)


def test_the_trn1_job_compiles_into_a_private_cache_per_user() -> None:
    """Issue 41 item 9: the job template's cache lines, run by two users on a /shared of mode 1777 (as
    the head node makes it): each gets its own directory, mode 700, that the other cannot enter."""
    import pwd

    job = (ROOT / "efa_constructs/node/slurm/train-trn1.sbatch").read_text()
    lines = [line for line in job.splitlines() if line.startswith(("cache=", 'mkdir -p "$cache"'))]
    assert len(lines) == 2, lines
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="efa-cdk-shared-", dir="/tmp"))  # pytest's tree is root's only
    shared.chmod(0o1777)
    script = "\n".join(lines).replace("/shared/", f"{shared}/") + '\necho "$cache"\n'
    made = {}
    for user in ("root", "nobody"):
        pwd.getpwnam(user)
        run = subprocess.run(["runuser", "-u", user, "--", "bash", "-euc", script],
                             capture_output=True, text=True, check=True)  # fmt: skip
        made[user] = Path(run.stdout.strip())
    assert made == {u: shared / f"neuron-cache-{u}" for u in ("root", "nobody")}
    assert all(p.stat().st_mode & 0o777 == 0o700 for p in made.values())
    peek = subprocess.run(["runuser", "-u", "nobody", "--", "ls", str(made["root"])], capture_output=True)
    assert peek.returncode != 0
    shutil.rmtree(shared)


@pytest.mark.parametrize("create_cluster", ["false", "true"])
def test_preflight_reads_the_queues_from_the_output_or_the_cluster_resource(create_cluster: str) -> None:
    """The output's YAML (references written back as Refs) or Custom::PclusterCluster's configuration:
    one node group per EFA compute resource, counted once when the stack has both."""
    from efa_constructs.tools.preflight import parallelcluster_configs, parallelcluster_groups

    template = synth(availability_zone="us-east-1c", create_cluster=create_cluster, max_count="4")
    configs, notes = parallelcluster_configs("P", template)
    assert len(configs) == 1 and notes == []
    (group,) = parallelcluster_groups("P", template, configs)
    assert (group.name, group.instance_type, group.count, group.zone) == (
        "queue compute/trn1-32xlarge",
        "trn1.32xlarge",
        4,
        "us-east-1c",
    )


def test_a_parallelcluster_node_tells_the_guard_its_collectives_and_passes_with_every_efa(
    tmp_path: Path,
) -> None:
    """Issue 43: ParallelCluster attaches its compute nodes' EFAs itself, so their settings carry no EFA
    count; the guard in the job templates then checks an endpoint on every EFA the node has (before, it
    stopped on the missing count and every job with it), and NCCL's plugin on a GPU queue."""
    import aws_cdk as cdk

    app = cdk.App(outdir=str(tmp_path / "out"))
    cluster = EfaParallelCluster(Stack(app, "S"), "P", instance_type=ec2.InstanceType("p5.48xlarge"),
                                 availability_zone="us-east-1a")  # fmt: skip
    app.synth()
    asset = cluster.node.find_child("Bootstrap")
    text = (tmp_path / "out" / asset.asset_path).read_text()  # type: ignore[attr-defined]
    assert "EFA_CDK_COLLECTIVES='nccl'" in text and "EFA_CDK_EFA_COUNT" not in text
    node = Node(tmp_path / "node", "p5.48xlarge")
    settings = node.root / "etc/efa-cdk/node.env"
    settings.write_text("".join(f"{x}\n" for x in settings.read_text().splitlines() if "EFA_COUNT" not in x))
    assert node.run("efa-env").returncode == 0
    guard = subprocess.run(
        [BASH, str(node.bin / "fabric-guard.sh")], env=node.env, capture_output=True, text=True
    )
    assert guard.returncode == 0 and "ok: efa on 32 endpoint domains" in guard.stdout, (
        guard.stdout + guard.stderr
    )
    assert "NCCL plugin /opt/amazon/ofi-nccl/lib64/libnccl-net-ofi.so" in guard.stdout


def test_a_compute_resource_uses_the_records_given_and_refuses_others() -> None:
    from efa_constructs import instance_type

    trn1, p4d = instance_type("trn1.32xlarge"), instance_type("p4d.24xlarge")
    assert ComputeResource("c", ("trn1.32xlarge",), catalogue=(trn1,)).types[0] is trn1
    with pytest.raises(EfaConfigError, match=r"catalogue=\['p4d.24xlarge'\]: the records are not those of"):
        ComputeResource("c", ("trn1.32xlarge",), catalogue=(p4d,))
