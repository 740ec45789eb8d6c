"""Trn1PcsCluster's EFA node user data, booted on the one-machine cluster (tests/e2e/cluster.py says what
stands in for what). AWS PCS itself cannot run here and moto has no PCS: the stack is created in moto
without its AWS::PCS::* resources, and each node runs the shell part of the compute launch template's
MIME user data (what PCS's nodes run after registering, before slurmd), taken from the template moto
stored. The cloud-config part (the EFS mount) is read by cloud-init's own code in
tests/test_pcs.py; nothing here mounts NFS.

A node with the launch template's 8 EFAs writes the EFA environment and verifies EFA; a node with 7
fails, saying so in its log, and its user data exits non-zero.
"""

from __future__ import annotations

import base64
import email
import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cluster import Cluster, explain, inside, missing_capabilities
from tests.helpers import cdk_json_context, efa_launch_template, without_pcs

MISSING = missing_capabilities()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"this machine lacks: {', '.join(MISSING)}")

NAME = "Trn1PcsCluster"
KEY_PAIR_ID = "key-0e2e0000000000003"


def synthesize_pcs(outdir: Path) -> None:
    """Trn1PcsCluster in us-east-1a with an image given, minus what moto cannot create (AWS::PCS::*)."""
    import aws_cdk as cdk

    from stacks.params import PcsParams
    from stacks.pcs_stack import EfaPcsClusterStack

    app = cdk.App(outdir=str(outdir), context=cdk_json_context())
    params = PcsParams.from_context(
        {"availability_zone": "us-east-1a", "ami_id": "ami-0123456789abcdef0"},
        default_instance_type="trn1.32xlarge",
    )
    EfaPcsClusterStack(app, NAME, params=params)
    app.synth()
    path = outdir / f"{NAME}.template.json"
    path.write_text(json.dumps(without_pcs(json.loads(path.read_text()))[0]))


@pytest.fixture(scope="module")
def booted(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("pcs")
    synthesize_pcs(out)
    deployed = cluster.deploy(NAME, out, KEY_PAIR_ID)
    compute = deployed["physical"][efa_launch_template(deployed["template"])]
    with inside(cluster.aws_ns):
        versions = cluster.clients()["ec2"].describe_launch_template_versions(LaunchTemplateId=compute)
    stored = base64.b64decode(
        versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"]
    ).decode()
    message = email.message_from_string(stored)
    parts = {p.get_content_type(): p.get_payload(decode=True).decode() for p in message.get_payload()}
    stack = {
        "user_data": parts["text/x-shellscript"],
        "instances": {  # what PCS would launch: two nodes of the group, one short of an EFA
            "ComputeNode0": ("i-0e2e0000000000a01", "10.0.200.10", {"efa-cdk:node-index": "0"}),
            "ComputeNode1": ("i-0e2e0000000000a02", "10.0.200.11", {"efa-cdk:node-index": "1"}),
        },
    }
    nodes = cluster.boot("pcs", stack, "ec2-user", [8, 7], {})
    cluster.wait(nodes)
    res = deployed["template"]["Resources"]
    (role,) = {
        r["Properties"]["Roles"][0]["Ref"] for r in res.values() if r["Type"] == "AWS::IAM::InstanceProfile"
    }
    return {"nodes": nodes, "parts": parts, "role": deployed["physical"][role]}


def test_every_aws_call_the_nodes_made_is_one_their_role_allows(
    cluster: Cluster, booted: dict[str, Any]
) -> None:
    """Issue 41 item 16 on the PCS nodes: every call they signed is authorized against the node role the
    compute node group's instance profile names (tests/e2e/node_iam.py)."""
    refused, examined = cluster.unauthorized(booted["role"], booted["nodes"])
    assert refused == [], "\n".join(refused)
    assert examined, "the PCS nodes made no AWS call the harness saw"


def test_the_user_data_is_a_cloud_config_then_a_shell_part(booted: dict[str, Any]) -> None:
    assert list(booted["parts"]) == ["text/cloud-config", "text/x-shellscript"]


def test_a_node_with_every_efa_writes_the_environment_and_verifies(booted: dict[str, Any]) -> None:
    node = booted["nodes"][0]
    assert node.process is not None and node.process.returncode == 0, explain([node])
    assert "EFA verified" in node.log() and "8 devices" in node.log(), node.log()[-2000:]
    env = (node.root / "etc/efa-cdk/efa.env").read_text()
    assert "FI_PROVIDER=efa" in env and "FI_EFA_USE_DEVICE_RDMA=1" in env  # trn1 reads with RDMA
    assert "efa-cdk guard: " in node.log() and ": ok: tcp on " in node.log(), node.log()[-2000:]


def test_a_node_short_of_an_efa_fails_saying_why(booted: dict[str, Any]) -> None:
    node = booted["nodes"][1]
    assert node.process is not None and node.process.returncode != 0, explain([node])
    assert "found 7 EFA devices, the launch template attached 8" in node.log(), node.log()[-2000:]
