"""Issue 34 item 1: the one-replacement-per-window limit holds when two nodes of an Auto Scaling group
fail at the same moment. Two nodes' health checks (node/boot/health-check.sh, as the timer runs it) run at
once against moto's server with the real AWS CLI, and both read the group's last-replacement parameter
before either writes it: the interleaving that let both nodes go when the claim was a write read back.
Parameter Store's version numbers make the claim a compare-and-swap: exactly one node marks itself
Unhealthy, the other is held back. A stand-in shim around the CLI only orders the calls (both reads before
any write, the second node's write 2 s after the first's, so each node's read-back would see its own
value); every answer is moto's.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.helpers import ROOT, Node, executable, moto_server

AWS = ROOT / ".venv-e2e/bin/aws"
pytestmark = pytest.mark.skipif(not AWS.exists(), reason="the AWS CLI (.venv-e2e, scripts/setup --dev)")
PARAM = "/efa-cdk/Trn1EfaCluster/Cluster/last-replacement"

#: The AWS CLI, after this node's reads of the parameter and before its write waiting for the other
#: node's read (files in $BARRIER), the write delayed by $WRITE_DELAY seconds.
SHIM = f"""#!/bin/bash
case " $* " in
  *" put-parameter "*)
    until [ "$(ls "$BARRIER" | wc -l)" -ge 2 ]; do /bin/sleep 0.05; done
    /bin/sleep "$WRITE_DELAY" ;;
esac
{AWS} "$@"; rc=$?
case " $* " in *" get-parameter "*) touch "$BARRIER/$(cat "$STUB_DIR/instance-id")" ;; esac
exit $rc
"""


@pytest.fixture(scope="module")
def aws() -> Iterator[dict[str, Any]]:
    with moto_server("e2e") as env:
        kw = {"endpoint_url": env["AWS_ENDPOINT_URL"], "region_name": "us-east-1",
              "aws_access_key_id": "e2e", "aws_secret_access_key": "e2e"}  # fmt: skip
        yield {"env": env, **{s: boto3.client(s, **kw) for s in ("ssm", "autoscaling", "ec2")}}


def _group(aws: dict[str, Any], name: str) -> list[str]:
    """An Auto Scaling group of two instances in moto; their ids."""
    image = aws["ec2"].describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    aws["autoscaling"].create_launch_configuration(
        LaunchConfigurationName=name, ImageId=image, InstanceType="trn1.32xlarge"
    )
    aws["autoscaling"].create_auto_scaling_group(
        AutoScalingGroupName=name, LaunchConfigurationName=name, MinSize=2, MaxSize=2,
        DesiredCapacity=2, AvailabilityZones=["us-east-1a"],
    )  # fmt: skip
    group = aws["autoscaling"].describe_auto_scaling_groups(AutoScalingGroupNames=[name])
    return [i["InstanceId"] for i in group["AutoScalingGroups"][0]["Instances"]]


def _health(aws: dict[str, Any], name: str) -> dict[str, str]:
    group = aws["autoscaling"].describe_auto_scaling_groups(AutoScalingGroupNames=[name])
    return {i["InstanceId"]: i["HealthStatus"] for i in group["AutoScalingGroups"][0]["Instances"]}


def _group_node(tmp: Path, instance: str, itype: str, stack: str) -> Node:
    """A verified node of the stack's Auto Scaling group, monitored: unhealthy after one failed check,
    replaced at most once an hour through the group's claim parameter."""
    node = Node(
        tmp,
        itype,
        EFA_CDK_NODE_GROUP="asg",
        EFA_CDK_UNHEALTHY_AFTER="1",
        EFA_CDK_REPLACE_MINUTES="60",
        EFA_CDK_REPLACEMENT_PARAMETER=PARAM,
        EFA_CDK_METRICS_NAMESPACE=f"EfaCdk/{stack}/Cluster",
    )
    (node.root / "var/lib/efa-cdk/verified").write_text("2026-11-25T00:00:00Z\n")
    (node.stub_dir / "instance-id").write_text(instance + "\n")
    return node


def _failing_node(tmp: Path, instance: str, barrier: Path, delay: str, env: dict[str, str]) -> Node:
    node = _group_node(tmp, instance, "trn1.32xlarge", "Trn1EfaCluster")
    executable(node.stub_dir / "bin/aws", SHIM)
    node.set_devices(7)  # one EFA device gone: the check fails
    node.env |= env | {"BARRIER": str(barrier), "WRITE_DELAY": delay}
    return node


def test_two_nodes_failing_at_the_same_moment_replace_exactly_one(
    tmp_path: Path, aws: dict[str, Any]
) -> None:
    ids = _group(aws, "race")
    aws["ssm"].put_parameter(Name=PARAM, Value="none", Type="String")  # the template's value
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    nodes = [
        _failing_node(tmp_path / i, i, barrier, d, aws["env"]) for i, d in zip(ids, ("0", "2"), strict=True)
    ]
    runs = [subprocess.Popen([str(n.bin / "health-check.sh")], env=n.env) for n in nodes]
    assert [r.wait(timeout=120) for r in runs] == [1, 1]  # a failed check exits 1 either way
    logs = {i: (n.root / "var/log/efa-cdk-health.log").read_text() for i, n in zip(ids, nodes, strict=True)}
    health = _health(aws, "race")
    assert sorted(health.values()) == ["Healthy", "Unhealthy"], logs
    (replaced,) = [i for i, h in health.items() if h == "Unhealthy"]
    (held,) = [i for i in ids if i != replaced]
    assert replaced == ids[0]  # the first write after both reads is version 2: node 0's
    assert "marked Unhealthy" in logs[replaced]
    assert "another node of the group claimed the replacement first (version 2" in logs[held], logs[held]
    history = aws["ssm"].get_parameter_history(Name=PARAM)["Parameters"]
    # issue 41 item 5: the loser's write hid the winner's claim; it puts the winner's value back on top
    assert [h["Value"].split()[-1] for h in history] == ["none", ids[0], ids[1], ids[0]]
    assert aws["ssm"].get_parameter(Name=PARAM)["Parameter"]["Value"].split()[-1] == replaced


def test_a_later_failure_in_the_window_is_held_back(tmp_path: Path, aws: dict[str, Any]) -> None:
    ids = _group(aws, "later")
    now = int(time.time())
    aws["ssm"].put_parameter(
        Name=PARAM, Value=f"{now - 120} i-0aaaaaaaaaaaaaaaa", Type="String", Overwrite=True
    )
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    (barrier / "other").touch()  # one node alone: no one else to wait for
    node = _failing_node(tmp_path, ids[0], barrier, "0", aws["env"])
    assert subprocess.run([str(node.bin / "health-check.sh")], env=node.env).returncode == 1
    assert _health(aws, "later") == dict.fromkeys(ids, "Healthy")
    assert (
        "claimed by i-0aaaaaaaaaaaaaaaa 2 min ago" in (node.root / "var/log/efa-cdk-health.log").read_text()
    )


# --- issue 59: the device ladder's replace and reboot, through the same group and claim ------------------


def _gpu_node(tmp: Path, instance: str, env: dict[str, str], fault: dict[str, str]) -> tuple[Node, Path]:
    """A monitored p5 node of an Auto Scaling group with the real AWS CLI against moto, nvidia-smi the
    stand-in built from the recorded H200 (tests/nvidia_smi.py) serving `fault` on GPU 1."""
    from tests import nvidia_smi

    node = _group_node(tmp, instance, "p5.48xlarge", "P5EfaCluster")
    executable(node.stub_dir / "bin/aws", f'#!/bin/bash\nexec {AWS} "$@"\n')
    executable(node.stub_dir / "bin/journalctl", "#!/bin/bash\nexit 0\n")
    smi = node.nvidia_smi(8)
    (smi / "gpus.csv").write_text(nvidia_smi.with_fault((smi / "gpus.csv").read_text(), 1, **fault))
    node.env |= env
    return node, smi


def _tags(aws: dict[str, Any], instance: str) -> dict[str, str]:
    found = aws["ec2"].describe_tags(Filters=[{"Name": "resource-id", "Values": [instance]}])["Tags"]
    return {t["Key"]: t["Value"] for t in found}


def test_a_failed_row_remapping_replaces_the_node_through_its_group(
    tmp_path: Path, aws: dict[str, Any]
) -> None:
    """NVIDIA: a remapping failure is past the RMA threshold. The health check's device ladder marks the
    node Unhealthy in moto's Auto Scaling group (the same claim as any replacement) and tags it."""
    ids = _group(aws, "remap-failure")
    aws["ssm"].put_parameter(Name=PARAM, Value="none", Type="String", Overwrite=True)
    node, _ = _gpu_node(tmp_path, ids[0], aws["env"], {"remapped_rows.failure": "Yes"})
    assert subprocess.run([str(node.bin / "health-check.sh")], env=node.env).returncode == 1
    assert _health(aws, "remap-failure") == {ids[0]: "Unhealthy", ids[1]: "Healthy"}
    log = (node.root / "var/log/efa-cdk-devices.log").read_text()
    assert "marked Unhealthy (GPU 1 (00000000:00:07.0): row remapping failed" in log, log
    assert _tags(aws, ids[0])["efa-cdk:device-fault"].startswith("replace: GPU 1 (00000000:00:07.0)")
    assert aws["ssm"].get_parameter(Name=PARAM)["Parameter"]["Value"].endswith(ids[0])


def test_a_reboot_takes_the_groups_claim_and_a_second_in_the_window_waits(
    tmp_path: Path, aws: dict[str, Any]
) -> None:
    """Pages pending retirement are retired at the next reboot (NVIDIA): the node takes the group's claim and
    reboots (systemctl, a stand-in here); the group's other node, the same fault a minute later, is held back
    and says so. Neither is marked Unhealthy."""
    ids = _group(aws, "reboot")
    aws["ssm"].put_parameter(Name=PARAM, Value="none", Type="String", Overwrite=True)
    first, _ = _gpu_node(tmp_path / "a", ids[0], aws["env"], {"retired_pages.pending": "Yes"})
    second, _ = _gpu_node(tmp_path / "b", ids[1], aws["env"], {"retired_pages.pending": "Yes"})
    for node in (first, second):
        subprocess.run([str(node.bin / "health-check.sh")], env=node.env, check=False)
    assert "systemctl reboot" in (first.stub_dir / "calls.log").read_text()
    assert "systemctl reboot" not in (second.stub_dir / "calls.log").read_text()
    held = (second.root / "var/log/efa-cdk-devices.log").read_text()
    assert f"HELD BACK: the group's last replacement was claimed by {ids[0]}" in held, held
    assert _tags(aws, ids[1])["efa-cdk:device-fault"].startswith("reboot held back: GPU 1")
    assert _health(aws, "reboot") == dict.fromkeys(ids, "Healthy")
