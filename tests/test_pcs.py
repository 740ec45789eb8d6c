"""AWS PCS: `EfaPcsCluster` (cdk/pcs.py) and the ready `Trn1PcsCluster` stack.

Expected values come from the sources the construct's docstring names: EFA counts from EFA-FACTS.md
(8 on trn1.32xlarge), PCS rules from the PCS API reference and user guide, CloudFormation's
AWS::PCS::* schemas (cfn-lint's). What these tests do not prove: that PCS accepts the templates (no
account here) or that PCS's agent runs the user data; cloud-init runs the cloud-config part here, and
the MIME document is parsed with Python's email package, the parser cloud-init itself uses. The node's
Slurm side runs against real slurmctld/slurmd in tests/e2e/test_pcs_node.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3

from efa_constructs.cdk import EfaPcsCluster
from efa_constructs.core import EfaConfigError
from efa_constructs.core.capacity import Capacity
from efa_constructs.core.layout import Layout
from tests.helpers import (
    ROOT,
    by_type,
    efa_group,
    efa_launch_template,
    executable,
    isolated_vpc,
    mime_parts,
    new_app,
    new_template,
    pcs_image,
    user_data,
)
from tests.iam_eval import ANONYMOUS, Request, allowed, role_statements


@pytest.fixture(scope="module")
def pcs(templates: dict[str, Any]) -> dict[str, Any]:
    return templates["Trn1PcsCluster"]


def test_pcs_cluster_runs_the_default_slurm_in_a_small_cluster(pcs: dict[str, Any]) -> None:
    (cluster,) = by_type(pcs, "AWS::PCS::Cluster")
    assert cluster["Properties"]["Scheduler"] == {"Type": "SLURM", "Version": "25.11"}
    assert cluster["Properties"]["Size"] == "SMALL"
    assert cluster["Properties"]["Networking"]["SecurityGroupIds"] == [
        {"Fn::GetAtt": [efa_group(pcs), "GroupId"]}
    ]


def test_pcs_instance_profile_and_role_are_where_pcs_accepts_them(pcs: dict[str, Any]) -> None:
    (profile,) = by_type(pcs, "AWS::IAM::InstanceProfile")
    assert profile["Properties"]["Path"] == "/aws-pcs/"
    (role_id,) = [r["Ref"] for r in profile["Properties"]["Roles"]]
    assert pcs["Resources"][role_id]["Properties"]["Path"] == "/aws-pcs/"
    actions = {
        a
        for p in by_type(pcs, "AWS::IAM::Policy")
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert "pcs:RegisterComputeNodeGroupInstance" in actions
    for group in by_type(pcs, "AWS::PCS::ComputeNodeGroup"):
        assert group["Properties"]["IamInstanceProfileArn"]["Fn::GetAtt"][1] == "Arn"


def test_pcs_efa_template_has_the_layout_and_nothing_pcs_sets_itself(pcs: dict[str, Any]) -> None:
    compute_id = efa_launch_template(pcs)
    data = pcs["Resources"][compute_id]["Properties"]["LaunchTemplateData"]
    assert "IamInstanceProfile" not in data and "ImageId" not in data  # the node group's own fields
    efas = [n for n in data["NetworkInterfaces"] if n.get("InterfaceType") in ("efa", "efa-only")]
    assert len(efas) == 8  # trn1.32xlarge (EFA-FACTS.md)
    group_id = efa_group(pcs)
    for nic in data["NetworkInterfaces"]:  # groups on each interface, not SecurityGroupIds
        assert nic["Groups"] == [{"Fn::GetAtt": [group_id, "GroupId"]}]
        assert "SubnetId" in nic
    assert "SecurityGroupIds" not in data
    assert "GroupName" in data["Placement"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"

    (compute,) = [
        g
        for g in by_type(pcs, "AWS::PCS::ComputeNodeGroup")
        if g["Properties"]["Name"].startswith("compute-")
    ]
    props = compute["Properties"]
    assert props["CustomLaunchTemplate"]["TemplateId"] == {"Ref": compute_id}
    assert props["InstanceConfigs"] == [{"InstanceType": "trn1.32xlarge"}]
    assert props["ScalingConfiguration"] == {"MinInstanceCount": 0, "MaxInstanceCount": 2}
    assert props["AmiId"] == {"Ref": "ImageId"}  # asked for at deploy
    assert props["PurchaseOption"] == "ONDEMAND"
    (queue,) = by_type(pcs, "AWS::PCS::Queue")
    compute_logical = next(k for k, v in pcs["Resources"].items() if v is compute)
    assert queue["Properties"]["ComputeNodeGroupConfigurations"] == [
        {"ComputeNodeGroupId": {"Fn::GetAtt": [compute_logical, "Id"]}}
    ]
    assert pcs["Parameters"]["ImageId"]["Type"] == "AWS::EC2::Image::Id"


PREP = ROOT / "efa_constructs/node/pcs/prep.sh"


def test_pcs_user_data_prepares_the_node_then_checks_efa(pcs: dict[str, Any]) -> None:
    """MIME multi-part (PCS user guide): a cloud-config part (node/pcs/prep.sh written in; the
    instance-metadata rule at every boot and at first boot's end; the EFS at /shared over TLS), then a
    shell part running efa-cdk's efa-env and verify-efa for 8 EFAs. The login node gets the same
    cloud-config and no shell part."""
    parts = mime_parts(pcs["Resources"][efa_launch_template(pcs)])
    assert list(parts) == ["text/cloud-config", "text/x-shellscript"]
    config = yaml.safe_load(parts["text/cloud-config"])
    ((written,),) = [config["write_files"]]
    assert written["path"] == "/opt/efa-cdk/pcs/prep.sh" and written["content"] == PREP.read_text()
    (bootcmd,) = config["bootcmd"]
    assert bootcmd.startswith(
        "if [ -x /opt/efa-cdk/pcs/prep.sh ]; then /opt/efa-cdk/pcs/prep.sh imds root; else"
    )
    (efs,) = [k for k, v in pcs["Resources"].items() if v["Type"] == "AWS::EFS::FileSystem"]
    assert config["runcmd"] == [
        ["/opt/efa-cdk/pcs/prep.sh", "imds", "root"],
        ["/opt/efa-cdk/pcs/prep.sh", "shared", f"<{efs}>", "/shared"],
    ]
    shell = parts["text/x-shellscript"]
    assert shell.startswith("#!/bin/bash")
    assert "EFA_CDK_STEPS='efa-env,verify-efa,devices'" in shell
    assert "EFA_CDK_EFA_COUNT='8'" in shell
    assert "EFA_CDK_STACK" not in shell.split("EFA_CDK_SETTINGS", 2)[1]  # no CloudFormation signals
    (login,) = [
        v
        for v in by_type(pcs, "AWS::EC2::LaunchTemplate")
        if "NetworkInterfaces" not in v["Properties"]["LaunchTemplateData"]
    ]
    assert mime_parts(login) == {"text/cloud-config": parts["text/cloud-config"]}


def test_pcs_login_template_is_secure_by_default(pcs: dict[str, Any]) -> None:
    (login,) = [
        v
        for v in by_type(pcs, "AWS::EC2::LaunchTemplate")
        if "NetworkInterfaces" not in v["Properties"]["LaunchTemplateData"]
    ]
    data = login["Properties"]["LaunchTemplateData"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    # 1 hop, as the compute template: an image registered IMDSv2-only defaults to 2 (EC2 user guide,
    # "Configure the instance metadata options"), which lets a bridged container reach the node role
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
    ((volume,),) = [[m["Ebs"] for m in data["BlockDeviceMappings"]]]
    assert volume == {"DeleteOnTermination": True, "Encrypted": True, "VolumeSize": 200, "VolumeType": "gp3"}
    assert "IamInstanceProfile" not in data and "ImageId" not in data


def test_the_pcs_cluster_has_a_valid_name_from_the_stack(pcs: dict[str, Any]) -> None:
    """Name is create-only (PCS API reference, CreateCluster: 3-40 characters, a letter first, letters,
    digits and '-', not pcs_): the cluster gets a stable one from its path, never CloudFormation's."""
    (cluster,) = by_type(pcs, "AWS::PCS::Cluster")
    name = cluster["Properties"]["Name"]
    assert re.fullmatch(r"(?!pcs_)[A-Za-z][A-Za-z0-9-]{2,39}", name) and name.startswith("Trn1PcsCluster"), (
        name
    )


def test_a_long_stack_name_still_gives_a_valid_pcs_cluster_name() -> None:
    stack = Stack(new_app(), "A" + "VeryLongStackNameForTrainingTrainiumNodes" * 3)
    cluster = EfaPcsCluster(
        stack, "Cluster", instance_type=ec2.InstanceType("trn1.32xlarge"), machine_image=pcs_image(),
        availability_zone="us-east-1c",
    )  # fmt: skip
    name = stack.resolve(cluster.cluster.name)
    assert re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{2,39}", name), name
    given = EfaPcsCluster(
        stack, "Named", instance_type=ec2.InstanceType("trn1.32xlarge"), machine_image=pcs_image(),
        availability_zone="us-east-1c", cluster_name="trn1-training",
    )  # fmt: skip
    assert given.cluster.name == "trn1-training"


def test_pcs_max_count_change_touches_only_the_scaling_configuration() -> None:
    import app as app_module

    def synth(**context: str) -> dict[str, Any]:
        app = app_module.build(new_app(context))
        return app.synth().get_stack_by_name("Trn1PcsCluster").template  # type: ignore[no-any-return]

    small, large = synth(), synth(**{"Trn1PcsCluster:max_count": "8"})
    assert small["Resources"].keys() == large["Resources"].keys()
    changed = [k for k in small["Resources"] if small["Resources"][k] != large["Resources"][k]]
    assert len(changed) == 1
    assert large["Resources"][changed[0]]["Properties"]["ScalingConfiguration"]["MaxInstanceCount"] == 8


def _pcs(**kwargs: Any) -> EfaPcsCluster:
    stack = Stack(new_app(), "Scratch")
    args: dict[str, Any] = {
        "instance_type": ec2.InstanceType("trn1.32xlarge"),
        "machine_image": pcs_image(),
        "availability_zone": "us-east-1c",
    }
    return EfaPcsCluster(stack, "Pcs", **{**args, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"slurm_version": "22.05"}, "slurm_version='22.05': not a Slurm version AWS PCS runs"),
        ({"max_count": 40}, "a SMALL PCS cluster manages up to 32 instances"),
        ({"max_count": 40}, "create the cluster with size MEDIUM"),
        ({"min_count": 3, "max_count": 2}, "0 <= min_count <= max_count"),
        ({"cluster_name": "pcs_x"}, "cluster_name='pcs_x'"),
        ({"cluster_name": "1abc"}, "starting with a letter"),
        ({"cluster_name": "a" * 41}, "3-40 letters"),  # one past the limit (40 passes: below)
        ({"cluster_name": "ab"}, "3-40 letters"),
        # Queue names: PCS user guide, "Creating a queue in AWS PCS" (a letter first, letters,
        # digits and '-', at most 25 characters).
        ({"queue_name": "1q"}, "queue_name='1q': a PCS queue name is at most 25"),
        ({"queue_name": "gpu_queue"}, "queue_name='gpu_queue'"),
        ({"queue_name": "q" * 26}, "at most 25 letters"),
        ({"queue_name": ""}, "queue_name=''"),
        (
            {"instance_type": ec2.InstanceType("p6e-gb200.36xlarge")},
            "launches on PCS from a Capacity Block only",
        ),
        (
            {
                "instance_type": ec2.InstanceType("p6e-gb200.36xlarge"),
                "slurm_version": "24.11",
                "capacity": Capacity.capacity_block("cr-0123456789abcdef0"),
            },
            "needs Slurm 25.05 or later",
        ),
        (
            {"capacity": Capacity.capacity_block("cr-0123456789abcdef0", instance_count=1)},
            "holds 1 instances",
        ),
    ],
)
def test_pcs_refuses_what_pcs_refuses(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(EfaConfigError) as err:
        _pcs(**kwargs)
    assert says in str(err.value), str(err.value)


@pytest.mark.parametrize("name", ["a", "trn1-train", "Q" + "q" * 24])
def test_pcs_takes_the_queue_names_pcs_takes(name: str) -> None:
    from efa_constructs.core.pcs import check_queue_name

    check_queue_name(name)  # PCS user guide: a letter first, letters, digits, '-', up to 25


@pytest.mark.parametrize(
    ("counts", "size", "fits"),
    [
        ((0, 31, 1), "SMALL", True),  # 32 instances: exactly a SMALL cluster (PCS user guide)
        ((0, 32, 1), "SMALL", False),
        ((2, 2, 1), "SMALL", True),  # min_count == max_count: a static group
        ((0, 1, 1), "SMALL", True),
        ((0, 0, 1), "SMALL", False),  # a node group of no nodes
        ((0, 2, 0), "SMALL", True),  # no login node
        ((0, 2, -1), "SMALL", False),
        ((0, 511, 1), "MEDIUM", True),
        ((0, 2047, 1), "LARGE", True),
        ((0, 2048, 1), "LARGE", False),
    ],
)
def test_pcs_node_counts_at_the_size_limits(counts: tuple[int, int, int], size: str, fits: bool) -> None:
    """The node group's counts (the register's count rule, as the node base runs it for PCS) and PCS's own
    rules of the cluster's size and its login nodes."""
    from efa_constructs import instance_type
    from efa_constructs.core.node_rules import NodeRequest, node_rule, run_node_rules
    from efa_constructs.core.pcs import PcsClusterSize, check_node_counts

    lo, hi, login = counts

    def check() -> None:
        request = NodeRequest("EfaPcsCluster", instance_type("trn1.32xlarge"), hi, "max_count", min_count=lo,
                              min_name="min_count")  # fmt: skip
        run_node_rules(request, rules=(node_rule("efa-cdk:node-counts"),))
        check_node_counts(hi, login, PcsClusterSize(size), Capacity.on_demand(), "trn1.32xlarge")

    if fits:
        check()
    else:
        with pytest.raises(EfaConfigError):
            check()


@pytest.mark.parametrize(
    ("max_count", "names"), [(32, "MEDIUM"), (511, "MEDIUM"), (512, "LARGE"), (2048, None)]
)
def test_pcs_too_many_nodes_names_the_size_that_fits(max_count: int, names: str | None) -> None:
    from efa_constructs.core.pcs import PcsClusterSize, check_node_counts

    with pytest.raises(EfaConfigError) as err:  # max_count + 1 login node
        check_node_counts(max_count, 1, PcsClusterSize.SMALL, Capacity.on_demand(), "trn1.32xlarge")
    assert (f"create the cluster with size {names}" if names else "a LARGE cluster manages 2048") in str(
        err.value
    )


@pytest.mark.parametrize(("version", "ok"), [("24.11", False), ("25.05", True), ("25.11", True)])
def test_ultraservers_need_slurm_25_05(version: str, ok: bool) -> None:
    """PCS user guide, capacity-blocks-nvidia-imex: Slurm 25.05 or later for P6e-GB200/GB300."""
    from efa_constructs.core.pcs import check_slurm_version

    if ok:
        check_slurm_version(version, "p6e-gb200.36xlarge")
    else:
        with pytest.raises(EfaConfigError, match=r"needs Slurm 25\.05 or later"):
            check_slurm_version(version, "p6e-gb200.36xlarge")
    check_slurm_version(version, "trn1.32xlarge")  # any listed version for other types


def test_pcs_size_is_an_enum_and_the_context_key_reads_it() -> None:
    from efa_constructs.core import PcsClusterSize
    from stacks.params import PcsParams

    assert PcsParams.from_context({"pcs_size": "medium"}, default_instance_type="trn1.32xlarge").pcs_size is (
        PcsClusterSize.MEDIUM
    )
    with pytest.raises(EfaConfigError, match="pcs_size='HUGE': not a PCS cluster size"):
        PcsParams.from_context({"pcs_size": "HUGE"}, default_instance_type="trn1.32xlarge")
    assert [s.instances for s in PcsClusterSize] == [32, 512, 2048]  # PCS user guide, "Cluster size"


def test_pcs_refuses_a_role_pcs_would_not_accept_and_gives_one_it_takes_what_nodes_need() -> None:
    stack = Stack(new_app(), "Scratch")
    itype, ami = ec2.InstanceType("trn1.32xlarge"), pcs_image()
    plain = iam.Role(stack, "Plain", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    misnamed = iam.Role(
        stack, "Misnamed", role_name="trainers", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com")
    )
    for role in (plain, misnamed):
        with pytest.raises(EfaConfigError, match="starts with AWSPCS or its path is /aws-pcs/"):
            EfaPcsCluster(stack, f"Pcs{role.node.id}", instance_type=itype, machine_image=ami, role=role)
    named = iam.Role(
        stack, "Named", role_name="AWSPCS-trainers", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com")
    )
    EfaPcsCluster(stack, "Pcs2", instance_type=itype, machine_image=ami, role=named, login_count=0)
    t = new_template(stack)
    named_id = next(
        k for k, v in t["Resources"].items() if v["Properties"].get("RoleName") == "AWSPCS-trainers"
    )
    granted = [
        s
        for p in by_type(t, "AWS::IAM::Policy")
        if {"Ref": named_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    actions = {a for s in granted for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert {
        "pcs:RegisterComputeNodeGroupInstance",
        "s3:GetObject",
        "elasticfilesystem:ClientMount",
    } <= actions
    # login_count=0: the compute node group only
    assert [g["Properties"]["Name"][:-7] for g in by_type(t, "AWS::PCS::ComputeNodeGroup")] == ["compute"]


def test_pcs_defaults_and_a_half_given_network() -> None:
    t = new_template(Stack.of(_pcs()))
    groups = {g["Properties"]["Name"][:-7]: g["Properties"] for g in by_type(t, "AWS::PCS::ComputeNodeGroup")}
    assert groups["compute"]["ScalingConfiguration"] == {"MinInstanceCount": 0, "MaxInstanceCount": 2}
    assert groups["login"]["ScalingConfiguration"] == {"MinInstanceCount": 1, "MaxInstanceCount": 1}
    assert groups["login"]["InstanceConfigs"] == [{"InstanceType": "c7i.xlarge"}]
    stack = Stack(new_app(), "Half")
    with pytest.raises(EfaConfigError, match="subnet=None: an existing network is a VPC and the one subnet"):
        _pcs(vpc=isolated_vpc(stack))


def test_pcs_cluster_composes_with_aws_cdk_lib() -> None:
    cluster = _pcs()
    stack = Stack.of(cluster)
    bucket = s3.Bucket(stack, "Data")
    bucket.grant_read(cluster)
    db = ec2.SecurityGroup(stack, "Db", vpc=cluster.vpc)
    db.connections.allow_from(cluster, ec2.Port.tcp(5432))
    t = new_template(stack)
    (role_id,) = [k for k, v in t["Resources"].items() if v["Type"] == "AWS::IAM::Role" and "NodeRole" in k]
    assert any(
        {"Ref": role_id} in p["Properties"]["Roles"] and "s3:GetObject*" in json.dumps(p)
        for p in by_type(t, "AWS::IAM::Policy")
    )
    assert any(
        r["Properties"].get("FromPort") == 5432 and "PcsSecurityGroup" in json.dumps(r["Properties"])
        for r in by_type(t, "AWS::EC2::SecurityGroupIngress")
    )


CLOUD_INIT = shutil.which("cloud-init")


def _cloud_init(pcs: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """The PCS compute node's user data through tests/cloud_init_check.py (cloud-init's own code)."""
    compute = pcs["Resources"][efa_launch_template(pcs)]
    (efs,) = [k for k, v in pcs["Resources"].items() if v["Type"] == "AWS::EFS::FileSystem"]
    (tmp_path / "user-data").write_text(user_data(compute, {efs: "fs-0123456789abcdef0"}))
    run = subprocess.run(
        [
            "/usr/bin/python3",
            str(ROOT / "tests/cloud_init_check.py"),
            str(tmp_path / "user-data"),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={
            **os.environ,
            **_prep_env(tmp_path),
        },  # bootcmd runs for real: in a scratch root, stand-ins first
    )
    assert run.returncode == 0, run.stderr[-2000:]
    seen: dict[str, Any] = json.loads(run.stdout)
    return seen


NO_CLOUD_INIT = pytest.mark.skipif(
    CLOUD_INIT is None, reason="cloud-init is not installed (scripts/setup --dev installs it as root)"
)


#: Stand-ins for what prep.sh calls on a node: the EFS mount helper is there; `mount` records and
#: mounts (STUB_MOUNT_FAILS: it fails), `mountpoint` answers from that; iptables and sleep record.
PREP_STUBS = {
    "mount.efs": "exit 0",
    "mount": '[ -z "${STUB_MOUNT_FAILS:-}" ] || exit 32\n'
    'echo "mount $*" >>"$STUB_DIR/calls"; touch "$STUB_DIR/mounted"',
    "mountpoint": '[ -e "$STUB_DIR/mounted" ]',
    "iptables": 'echo "iptables $*" >>"$STUB_DIR/calls"; case "$*" in *" -C "*) exit 1 ;; esac\n'
    '[ -z "${STUB_IPTABLES_FAILS:-}" ] || exit 4',
    "ip6tables": 'echo "ip6tables $*" >>"$STUB_DIR/calls"; case "$*" in *" -C "*) exit 1 ;; esac',
    "sleep": "exit 0",
    "dnf": 'echo "dnf $*" >>"$STUB_DIR/calls"; exit 1',  # the package manager has no such package
}


def _prep_env(tmp_path: Path) -> dict[str, str]:
    stubs = tmp_path / "stubs"
    for name, body in PREP_STUBS.items():
        executable(stubs / name, f"#!/bin/bash\n{body}\n")
    (tmp_path / "node/etc").mkdir(parents=True, exist_ok=True)
    return {"PATH": f"{stubs}:/usr/bin:/bin", "EFA_CDK_ROOT": str(tmp_path / "node"), "STUB_DIR": str(stubs)}


@pytest.mark.debian
@NO_CLOUD_INIT
def test_cloud_init_runs_the_pcs_cloud_config_and_the_node_mounts_efs_over_tls(
    pcs: dict[str, Any], tmp_path: Path
) -> None:
    """Debian's cloud-init (22.4), its own code: the MIME parts are types its handlers take; the
    cloud-config passes its strict schema; bootcmd runs on a first boot, before write_files, without
    failing; write_files writes prep.sh executable; runcmd's script, run as the final stage runs it (here
    with stand-ins for mount, mountpoint and iptables), mounts the EFS with the EFS mount helper over TLS
    from /etc/fstab (issue 34 item 14), makes /shared mode 1777 (item 9) and sets the metadata rule."""
    seen = _cloud_init(pcs, tmp_path)
    assert seen["types"] == ["text/cloud-config", "text/x-shellscript"]
    assert set(seen["types"]) <= set(seen["handled"])
    # issue 34 item 8: plain text, as AWS's PCS examples (PCS merges the document with its own), and
    # cloud-init still reads the shell part whole: the bootstrap that runs the EFA check
    raw = (tmp_path / "user-data").read_text()
    assert "Content-Transfer-Encoding: base64" not in raw
    assert seen["encodings"] == ["7bit", "7bit"]
    (shell,) = seen["shell"]
    assert shell.startswith("#!/bin/bash\n") and "EFA_CDK_STEPS='efa-env,verify-efa,devices'" in shell
    assert seen["schema_errors"] == [] and seen["warnings"] == []
    assert seen["bootcmd_ok"] is True
    # issue 60 item 9: on a first boot bootcmd runs before write_files has written prep.sh, and sshd may start
    # before runcmd: bootcmd locks on its own (only root may log in; instance metadata for root alone)
    assert seen["nologin_after_bootcmd"].startswith("efa-cdk: instance metadata is not yet restricted")
    first = (tmp_path / "stubs/calls").read_text()
    assert "iptables -w -A efa-cdk-imds -m owner --uid-owner 0 -j ACCEPT" in first
    assert "ip6tables -w -I OUTPUT 1 -d fd00:ec2::254/128 -j efa-cdk-imds" in first
    assert seen["written"] == {"/opt/efa-cdk/pcs/prep.sh": "0o755"}
    prep = tmp_path / "root/opt/efa-cdk/pcs/prep.sh"
    assert prep.read_text() == PREP.read_text()
    runcmd = seen["runcmd"]
    assert "'/opt/efa-cdk/pcs/prep.sh' 'shared' 'fs-0123456789abcdef0' '/shared'" in runcmd
    script = tmp_path / "runcmd"
    script.write_text(runcmd.replace("/opt/efa-cdk/pcs/prep.sh", str(prep)))
    run = subprocess.run(["/bin/sh", str(script)], env=_prep_env(tmp_path), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    node = tmp_path / "node"
    assert (node / "etc/fstab").read_text() == "fs-0123456789abcdef0:/ /shared efs _netdev,tls,iam 0 0\n"
    assert (node / "shared").stat().st_mode & 0o7777 == 0o1777
    calls = (tmp_path / "stubs/calls").read_text()
    assert f"mount {node}/shared" in calls
    assert "-m owner --uid-owner 0 -j ACCEPT" in calls and "-A efa-cdk-imds -j REJECT" in calls
    assert "ip6tables -w -I OUTPUT 1 -d fd00:ec2::254/128 -j efa-cdk-imds" in calls  # issue 41 item 6
    assert (node / "var/lib/efa-cdk/imds-restricted").read_text() == "root\n"
    assert not (node / "etc/nologin").exists()  # the rule holds: prep.sh lifted its own lock
    assert "fs-0123456789abcdef0 mounted at /shared over TLS as the node role, mode 1777" in run.stderr


def test_an_efs_that_cannot_be_mounted_leaves_shared_alone_and_says_why(tmp_path: Path) -> None:
    """A mount target that never answers: six tries, then one line naming the file system; /shared is
    not opened up. The same line when the image has no EFS mount helper and none can be installed."""
    env = _prep_env(tmp_path)
    run = subprocess.run(
        ["bash", str(PREP), "shared", "fs-0123456789abcdef0", "/shared"],
        env={**env, "STUB_MOUNT_FAILS": "1"}, capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 1 and "could not mount fs-0123456789abcdef0 at /shared over TLS as" in run.stderr
    assert (tmp_path / "node/shared").stat().st_mode & 0o7777 != 0o1777
    (tmp_path / "stubs/mount.efs").unlink()
    run = subprocess.run(["bash", str(PREP), "shared", "fs-0123456789abcdef0", "/shared"], env=env,
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 1 and "no EFS mount helper (amazon-efs-utils) on this image" in run.stderr
    assert "dnf -y -q install amazon-efs-utils" in (tmp_path / "stubs/calls").read_text()  # tried first


def _mount_principal(tmp_path: Path, role: str) -> str:
    """Who the EFS mount helper mounts /shared as: the options prep.sh writes to /etc/fstab (run here
    with stand-ins), `iam` meaning the node role (Amazon EFS user guide, "Mounting with IAM
    authorization"), none meaning an anonymous NFS client."""
    run = subprocess.run(["bash", str(PREP), "shared", "fs-0123456789abcdef0", "/shared"],
                         env=_prep_env(tmp_path), capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    (line,) = (tmp_path / "node/etc/fstab").read_text().splitlines()
    options = line.split()[3].split(",")
    return role if "iam" in options else ANONYMOUS


def test_pcs_nodes_may_mount_shared_as_the_file_system_policy_and_their_role_decide(
    pcs: dict[str, Any], tmp_path: Path
) -> None:
    """Issue 41 item 1: the EFS policy (aws-cdk-lib's, under @aws-cdk/aws-efs:denyAnonymousAccess, plus
    efa-cdk's TLS-only deny) and the node role's policies, evaluated together for the principal the
    mount uses (iam_eval: AWS's evaluation logic): a node's mount, its writes and root's chmod 1777 are
    allowed over TLS; an anonymous client and a mount without TLS are refused."""
    (role,) = [k for k, v in pcs["Resources"].items()
               if v["Type"] == "AWS::IAM::Role" and k.startswith("PcsNodeRole")]  # fmt: skip
    (efs,) = [k for k, v in pcs["Resources"].items() if v["Type"] == "AWS::EFS::FileSystem"]
    file_system_policy = pcs["Resources"][efs]["Properties"]["FileSystemPolicy"]["Statement"]
    identity = role_statements(pcs, role)
    principal = _mount_principal(tmp_path, role)
    over_tls = {"aws:SecureTransport": "true", "elasticfilesystem:AccessedViaMountTarget": "true"}
    for action in ("ClientMount", "ClientWrite", "ClientRootAccess"):
        request = Request(principal, f"elasticfilesystem:{action}", f"arn:{efs}", over_tls)
        assert allowed(request, identity, file_system_policy), action
    plain = {**over_tls, "aws:SecureTransport": "false"}
    assert not allowed(Request(principal, "elasticfilesystem:ClientMount", f"arn:{efs}", plain),
                       identity, file_system_policy)  # fmt: skip
    anonymous = Request(ANONYMOUS, "elasticfilesystem:ClientMount", f"arn:{efs}", over_tls)
    assert not allowed(anonymous, identity, file_system_policy)


@pytest.mark.parametrize("missing", ["iptables", "ip6tables", "a rule"])
def test_a_node_whose_metadata_restriction_fails_runs_no_job(tmp_path: Path, missing: str) -> None:
    """Issue 41 item 6: fail closed. iptables or ip6tables missing (and none installable) or refusing a
    rule: prep.sh exits 1 naming it, the marker is gone (also one left from an earlier boot), and the
    Slurm Prolog refuses every job on the node, naming why; with the rules in place it lets EFA decide."""
    env = _prep_env(tmp_path)
    node = tmp_path / "node"
    (node / "var/lib/efa-cdk").mkdir(parents=True)
    (node / "var/lib/efa-cdk/imds-restricted").write_text("root\n")  # an earlier boot's
    (node / "var/lib/efa-cdk/verified").write_text("2026-11-25T00:00:00Z\n")
    executable(node / "opt/efa-cdk/pcs/prep.sh", PREP.read_text())
    if missing == "a rule":
        env["STUB_IPTABLES_FAILS"] = "1"
    else:  # PATH is the stand-ins, /usr/bin and /bin: the host's own are in /usr/sbin
        (tmp_path / "stubs" / missing).unlink()
    run = subprocess.run(["bash", str(PREP), "imds", "root"], env=env, capture_output=True, text=True)
    assert run.returncode == 1 and "this node runs no job" in run.stderr, run.stderr
    assert not (node / "var/lib/efa-cdk/imds-restricted").exists()
    prolog = ROOT / "efa_constructs/node/boot/slurm-prolog.sh"
    job = subprocess.run(["bash", str(prolog)], env={**env, "SLURMD_NODENAME": "compute-1"},
                         capture_output=True, text=True)  # fmt: skip
    assert job.returncode == 1 and "instance metadata is not restricted to root" in job.stderr
    env.pop("STUB_IPTABLES_FAILS", None)
    if missing != "a rule":
        executable(tmp_path / "stubs" / missing, f"#!/bin/bash\n{PREP_STUBS[missing]}\n")
    assert subprocess.run(["bash", str(PREP), "imds", "root"], env=env, capture_output=True).returncode == 0
    # ... and the guard (issue 43), here with libfabric's tcp standing in for efa (no EFA device)
    guarded = subprocess.run(["bash", str(prolog)], env={**env, "EFA_CDK_TEST_ONLY_PROVIDER": "tcp"},
                             capture_output=True, text=True)  # fmt: skip
    assert guarded.returncode == 0 and ": ok: tcp on " in guarded.stderr, guarded.stderr


@pytest.mark.parametrize("change", ["instance_type", "login_instance_type"])
def test_a_type_change_replaces_the_node_group_under_a_new_name(change: str) -> None:
    """Issue 34 item 6: InstanceConfigs and Name are create-only (CloudFormation's schema) and the new
    group is created before the old one is deleted, in the same cluster: the name changes with the type,
    so the two never collide, and template-diff shows the group replaced."""
    from efa_constructs.tools.template_diff import diff_templates

    new_type = {"instance_type": "trn1n.32xlarge", "login_instance_type": "c7i.2xlarge"}[change]
    old = new_template(Stack.of(_pcs()))
    new = new_template(Stack.of(_pcs(**{change: ec2.InstanceType(new_type)})))

    def names(t: dict[str, Any]) -> dict[str, str]:
        groups = t["Resources"].items()
        return {k: g["Properties"]["Name"] for k, g in groups if g["Type"] == "AWS::PCS::ComputeNodeGroup"}

    before, after = names(old), names(new)
    (changed,) = [k for k in before if before[k] != after[k]]
    assert before[changed][:-7] == after[changed][:-7] and len(after[changed]) <= 25
    d = diff_templates(old, new)
    assert changed in d.replaced and "InstanceConfigs" in json.dumps(d.replaced[changed])


def test_pcs_nodes_get_the_layout_pcs_documents_and_the_other_on_request(pcs: dict[str, Any]) -> None:
    """Issue 34 item 7: every PCS source (user guide, "Using EFA with AWS PCS"; aws-hpc-recipes
    recipes/pcs/enable_efa) puts an `efa` interface on each card, card 0 at DeviceIndex 0 and the others
    at 1; none shows efa-only. trn1.32xlarge has 8 cards (EFA-FACTS.md)."""
    data = pcs["Resources"][efa_launch_template(pcs)]["Properties"]["LaunchTemplateData"]
    placed = sorted(
        (n["NetworkCardIndex"], n["DeviceIndex"], n["InterfaceType"]) for n in data["NetworkInterfaces"]
    )
    assert placed == [(0, 0, "efa")] + [(card, 1, "efa") for card in range(1, 8)]
    t = new_template(Stack.of(_pcs(nic_layout=Layout.recommended())))
    data = t["Resources"][efa_launch_template(t)]["Properties"]["LaunchTemplateData"]
    assert {n.get("InterfaceType", "interface") for n in data["NetworkInterfaces"]} == {
        "interface",
        "efa-only",
    }


def test_pcs_cluster_prolog_storage_policy_and_node_group_order(pcs: dict[str, Any]) -> None:
    """Issue 34 items 10, 14, 11: the cluster names efa-cdk's Prolog (a node that has not verified EFA
    is drained, tests/e2e/test_pcs_node.py runs it under real slurmd); the EFS refuses connections
    without TLS (Amazon EFS user guide: aws:SecureTransport); every node group waits for the EFS mount
    target its nodes mount at first boot."""
    (cluster,) = by_type(pcs, "AWS::PCS::Cluster")
    assert cluster["Properties"]["SlurmConfiguration"]["SlurmCustomSettings"] == [
        {"ParameterName": "Prolog", "ParameterValue": "/opt/efa-cdk/bin/slurm-prolog.sh"}
    ]
    assert (ROOT / "efa_constructs/node/boot/slurm-prolog.sh").exists()  # staged to /opt/efa-cdk/bin
    (efs,) = by_type(pcs, "AWS::EFS::FileSystem")
    (deny,) = [s for s in efs["Properties"]["FileSystemPolicy"]["Statement"] if s["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} and deny["Action"] == "*"
    targets = {k for k, v in pcs["Resources"].items() if v["Type"] == "AWS::EFS::MountTarget"}
    assert targets
    for group in by_type(pcs, "AWS::PCS::ComputeNodeGroup"):
        assert targets <= set(group["DependsOn"])


def test_pcs_metadata_users_and_a_second_hop_on_request() -> None:
    """Issue 34 items 16 and 11: more users than root through to instance metadata, and hop limit 2 for
    bridged containers, on the login and the compute templates alike; a bad user name is refused."""
    t = new_template(Stack.of(_pcs(imds_users=["ec2-user"], bridged_containers=True)))
    templates = by_type(t, "AWS::EC2::LaunchTemplate")
    assert len(templates) == 2
    for lt in templates:
        assert lt["Properties"]["LaunchTemplateData"]["MetadataOptions"]["HttpPutResponseHopLimit"] == 2
        config = yaml.safe_load(mime_parts(lt, {})["text/cloud-config"])
        assert config["runcmd"][0] == ["/opt/efa-cdk/pcs/prep.sh", "imds", "root", "ec2-user"]
    for bad in ("root", "Ec2 User", ""):
        with pytest.raises(EfaConfigError, match=r"imds_users=.*not a local user name besides root"):
            _pcs(imds_users=[bad])


@pytest.mark.parametrize("name", ["abc", "a" * 40])
def test_pcs_cluster_names_at_both_edges_of_the_rule_pass(name: str) -> None:
    """3 and 40 characters are PCS's edges (API reference, CreateCluster clusterName)."""
    t = new_template(Stack.of(_pcs(cluster_name=name)))
    (cluster,) = by_type(t, "AWS::PCS::Cluster")
    assert cluster["Properties"]["Name"] == name


def test_a_pcs_node_may_register_with_its_own_cluster_only_and_launches_after_the_grant(
    pcs: dict[str, Any],
) -> None:
    """Issue 41 item 8: the Service Authorization Reference gives RegisterComputeNodeGroupInstance one
    resource type, the cluster (required): the node role's policies, evaluated (iam_eval), allow it on
    this cluster's ARN and not on another's; every node group waits for the role's policy (which waits
    for the cluster's ARN, as the group does)."""
    (role,) = [k for k, v in pcs["Resources"].items()
               if v["Type"] == "AWS::IAM::Role" and k.startswith("PcsNodeRole")]  # fmt: skip
    (cluster,) = [k for k, v in pcs["Resources"].items() if v["Type"] == "AWS::PCS::Cluster"]
    identity = role_statements(pcs, role)
    register = "pcs:RegisterComputeNodeGroupInstance"
    assert allowed(Request(role, register, f"arn:{cluster}"), identity, [])
    other = "arn:aws:pcs:us-east-1:123456789012:cluster/pcs_0ther0ne"
    assert not allowed(Request(role, register, other), identity, [])
    policies = {k for k, v in pcs["Resources"].items() if v["Type"] == "AWS::IAM::Policy"
                and {"Ref": role} in v["Properties"]["Roles"]}  # fmt: skip
    for group in by_type(pcs, "AWS::PCS::ComputeNodeGroup"):
        assert policies <= set(group["DependsOn"]), group["DependsOn"]
