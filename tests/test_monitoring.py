"""Operating a cluster after day one: the agent's configuration, the dashboard, the alarms, the health
timer, benchmarks on demand and topology-ordered ranks, all checked without AWS.

The agent and dashboard JSON are rendered and compared with what the agent emits (CloudWatch user
guide, "Collect EFA metrics"); the node scripts run with stub commands and recorded API answers.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import assertions

from efa_constructs.core.catalogue import AcceleratorKind
from efa_constructs.core.monitoring import (
    EFA_METRICS,
    GREY_FAILURE_METRICS,
    agent_config,
    dashboard_body,
    dashboard_svg,
    emitted_metrics,
)
from efa_constructs.node.topology import order, slurm_tree
from stacks.cluster_stack import EfaClusterStack
from stacks.params import ClusterParams
from tests.helpers import BASH, ROOT, THIS_INSTANCE, Node, by_type, executable, new_app

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free

FIXTURES = Path(__file__).parent / "fixtures"


def _stack(itype: str = "p5.48xlarge", **context: str) -> dict[str, Any]:
    params = ClusterParams.from_context(
        {"availability_zone": "us-east-1a", **context}, default_instance_type=itype
    )
    return assertions.Template.from_stack(EfaClusterStack(new_app(), "Mon", params=params)).to_json()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def p5() -> dict[str, Any]:
    return _stack(alarm_email="ops@example.com")


# --- agent and dashboard ----------------------------------------------------------------------


def test_the_agent_collects_every_efa_counter_per_node_and_for_the_cluster() -> None:
    config = agent_config("EfaCdk/S/Cluster", "logs", AcceleratorKind.NEURON)
    metrics = config["metrics"]
    assert metrics["metrics_collected"]["efa"]["measurement"] == list(EFA_METRICS)
    assert "nvidia_gpu" not in metrics["metrics_collected"]  # no GPU, no GPU section
    assert metrics["aggregation_dimensions"] == [["InstanceId"], []]  # per node, and the cluster total
    assert metrics["append_dimensions"] == {"InstanceId": "${aws:InstanceId}"}
    files = config["logs"]["logs_collected"]["files"]["collect_list"]
    assert [f["file_path"] for f in files] == [
        "/var/log/efa-cdk.log",
        "/var/log/efa-cdk-health.log",
        "/var/log/efa-cdk-devices.log",
    ]
    gpu = agent_config("ns", "logs", AcceleratorKind.NVIDIA_GPU)["metrics"]["metrics_collected"]
    assert "utilization_gpu" in gpu["nvidia_gpu"]["measurement"]


@pytest.mark.parametrize("accelerator", [AcceleratorKind.NVIDIA_GPU, AcceleratorKind.NEURON])
def test_every_metric_the_dashboard_graphs_is_one_that_lands_in_the_namespace(
    accelerator: AcceleratorKind,
) -> None:
    body = dashboard_body("EfaCdk/S/Cluster", "us-east-1", "S/Cluster")
    expressions = [m[0]["expression"] for w in body["widgets"] for m in w["properties"].get("metrics", [])]
    graphed = {re.search(r'MetricName="([^"]+)"', e).group(1) for e in expressions}  # type: ignore[union-attr]
    assert graphed and graphed <= emitted_metrics(accelerator)
    assert set(GREY_FAILURE_METRICS) <= graphed
    assert all('{"EfaCdk/S/Cluster"' in e for e in expressions)  # this cluster's namespace only
    cells = [
        (x, y)
        for w in body["widgets"]
        for x in range(w["x"], w["x"] + w["width"])
        for y in range(w["y"], w["y"] + w["height"])
    ]
    assert len(cells) == len(set(cells)) and max(x for x, _ in cells) < 24  # no overlap, 24 columns


def test_the_readme_picture_is_the_dashboard() -> None:
    """docs/dashboard.svg is drawn from the dashboard's own body (`python -m efa_constructs dashboard`)."""
    expected = dashboard_svg(dashboard_body("EfaCdk/<stack>/<cluster>", "<region>", "<stack>/<cluster>"))
    assert (ROOT / "docs/dashboard.svg").read_text() == expected
    assert "](dashboard.svg)" in (ROOT / "docs" / "operate.md").read_text()


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_the_stack_has_the_dashboard_alarms_topic_and_document(p5: dict[str, Any]) -> None:
    (dashboard,) = by_type(p5, "AWS::CloudWatch::Dashboard")
    assert "efa_retrans_timeout_events" in json.dumps(dashboard["Properties"]["DashboardBody"])
    alarms = by_type(p5, "AWS::CloudWatch::Alarm")
    assert sorted(a["Properties"]["MetricName"] for a in alarms) == sorted(
        [*GREY_FAILURE_METRICS, "EfaUnhealthyNodes"]
    )
    assert all(a["Properties"]["Threshold"] == 0 and a["Properties"]["AlarmActions"] for a in alarms)
    (topic,) = by_type(p5, "AWS::SNS::Topic")
    assert "KmsMasterKeyId" in topic["Properties"]
    (key,) = by_type(p5, "AWS::KMS::Key")
    assert key["Properties"]["EnableKeyRotation"] is True
    assert "cloudwatch.amazonaws.com" in json.dumps(key["Properties"]["KeyPolicy"])  # alarms may publish
    (sub,) = by_type(p5, "AWS::SNS::Subscription")
    assert sub["Properties"]["Endpoint"] == "ops@example.com"
    (doc,) = by_type(p5, "AWS::SSM::Document")
    assert "EFA_CDK_ON_DEMAND=1 /opt/efa-cdk/bin/run-steps.sh benchmarks" in json.dumps(
        doc["Properties"]["Content"]
    )
    assert {"DashboardUrl", "AlarmTopicArn", "BenchmarkDocument"} <= set(p5["Outputs"])
    (lt,) = by_type(p5, "AWS::EC2::LaunchTemplate")
    user_data = json.dumps(lt["Properties"]["LaunchTemplateData"]["UserData"])
    assert "efa-env monitoring ssh-keys" in user_data and "EFA_CDK_AGENT_CONFIG=" in user_data


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_only_an_auto_scaling_node_may_mark_itself_unhealthy_and_only_in_its_group() -> None:
    t = _stack("trn1.32xlarge", node_group="asg", node_count="4")
    (group_id,) = [k for k, v in t["Resources"].items() if v["Type"] == "AWS::AutoScaling::AutoScalingGroup"]
    statements = [
        s for p in by_type(t, "AWS::IAM::Policy") for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    (health,) = [s for s in statements if s["Action"] == "autoscaling:SetInstanceHealth"]
    assert {"Ref": group_id} in health["Resource"]["Fn::Join"][1]
    explicit = _stack("trn1.32xlarge")
    assert "autoscaling:SetInstanceHealth" not in json.dumps(explicit)


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_monitoring_off() -> None:
    t = _stack("trn1.32xlarge", monitoring="false")
    assert not by_type(t, "AWS::CloudWatch::Dashboard") and "DashboardUrl" not in t["Outputs"]
    assert "monitoring" not in json.dumps(by_type(t, "AWS::EC2::LaunchTemplate"))


# --- node scripts -----------------------------------------------------------------------------


def _monitored(node: Node, **extra: str) -> None:
    for key, value in {
        "EFA_CDK_METRICS_NAMESPACE": "EfaCdk/Trn1EfaCluster/Cluster",
        "EFA_CDK_AGENT_CONFIG": json.dumps(
            agent_config("EfaCdk/Trn1EfaCluster/Cluster", "lg", AcceleratorKind.NEURON)
        ),
        "EFA_CDK_CW_AGENT_FINGERPRINT": "937616F3450B7D806CBD9725D58167303B789C72",
        "EFA_CDK_CW_AGENT_MIN_VERSION": "1.300068.0",  # the agent's release notes: EFA metrics from here
        **extra,
    }.items():
        node.setting(key, value)


def _agent_downloads(node: Node) -> None:
    """AWS's agent package, its signature and its key, where the node downloads them from."""
    for f in (
        "amazon-cloudwatch-agent.deb",
        "amazon-cloudwatch-agent.deb.sig",
        "amazon-cloudwatch-agent.gpg",
    ):
        (node.stub_dir / "downloads" / f).write_text("x")


@pytest.mark.debian
def test_monitoring_step_configures_the_agent_and_starts_the_health_timer(tmp_path: Path) -> None:
    node = Node(tmp_path)
    _monitored(node)
    executable(  # the image has the agent
        node.root / "opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl",
        '#!/bin/bash\necho "ctl $*" >>"$STUB_DIR/calls.log"\n',
    )
    (node.root / "opt/aws/amazon-cloudwatch-agent/bin/CWAGENT_VERSION").write_text("1.300068.0b1500\n")
    r = node.run("monitoring")
    assert r.returncode == 0, r.log
    assert not node.calls("dpkg") and not node.calls("curl")  # a new enough agent is kept
    config = json.loads(node.read("opt/aws/amazon-cloudwatch-agent/etc/efa-cdk.json"))
    assert config["metrics"]["namespace"] == "EfaCdk/Trn1EfaCluster/Cluster"
    (fetch,) = node.calls("ctl")
    assert "-a fetch-config -m ec2 -s -c file:" in fetch
    timer = node.read("etc/systemd/system/efa-cdk-health.timer")
    assert "OnUnitActiveSec=5min" in timer
    service = node.read("etc/systemd/system/efa-cdk-health.service")
    assert "ExecStart=/opt/efa-cdk/bin/health-check.sh" in service
    # a hung check is stopped (a oneshot has no start timeout of its own: systemd.service(5)) well
    # before the next is due, or the timer would never start another (systemd.timer(5))
    assert "TimeoutStartSec=150\n" in service
    assert "systemctl enable --now efa-cdk-health.timer" in node.calls("systemctl")
    assert node.systemd_verify("efa-cdk-health.service", "efa-cdk-health.timer") == ""  # last: may skip


@pytest.mark.parametrize(
    ("image_has", "installs"), [("1.300064.0b1337", "1.300070.1b1600"), ("", "1.300070.1")]
)
def test_an_agent_older_than_the_first_with_efa_metrics_is_upgraded(
    tmp_path: Path, image_has: str, installs: str
) -> None:
    """Issue 23 item 3: an image's agent older than 1.300068.0 (or of unknown version) would refuse the
    `efa` section and fail the deploy; the step installs AWS's signed package over it."""
    node = Node(tmp_path)
    _monitored(node)
    bin_dir = node.root / "opt/aws/amazon-cloudwatch-agent/bin"
    executable(
        bin_dir / "amazon-cloudwatch-agent-ctl", '#!/bin/bash\necho "ctl $*" >>"$STUB_DIR/calls.log"\n'
    )
    if image_has:
        (bin_dir / "CWAGENT_VERSION").write_text(image_has + "\n")
    _agent_downloads(node)
    version = bin_dir / "CWAGENT_VERSION"
    executable(
        node.stub_dir / "bin" / "dpkg",
        f'#!/bin/bash\necho "dpkg $*" >>"$STUB_DIR/calls.log"\necho {installs} >"{version}"\n',
    )
    node.setting("EFA_CDK_REGION", "eu-central-1")
    r = node.run("monitoring", STUB_KEY_FPR="937616F3450B7D806CBD9725D58167303B789C72")
    assert r.returncode == 0, r.log
    assert len(node.calls("dpkg")) == 1 and node.calls("ctl")
    # from the region's bucket (CloudWatch user guide), not the global (us-east-1) one: issue 34 item 4
    regional = "https://amazoncloudwatch-agent-eu-central-1.s3.eu-central-1.amazonaws.com"
    for f in ("ubuntu/amd64/latest/amazon-cloudwatch-agent.deb", "assets/amazon-cloudwatch-agent.gpg"):
        assert any(f"{regional}/{f}" in c for c in node.calls("curl")), node.calls("curl")
    if image_has:
        assert "(1.300064.0) is older than 1.300068.0, the first with EFA metrics: upgrading" in r.log


def test_the_agent_key_comes_from_the_global_bucket_when_the_region_has_none(tmp_path: Path) -> None:
    """Issue 41 item 5: a region whose bucket has no assets/amazon-cloudwatch-agent.gpg: the key comes
    from the global bucket the CloudWatch user guide names; the package still from the region's; the
    pinned fingerprint is checked either way. Neither reachable: one line naming both."""
    node = Node(tmp_path)
    _monitored(node)
    _agent_downloads(node)
    executable(
        node.stub_dir / "bin/dpkg",
        f'#!/bin/bash\necho 1.300070.1 >"{node.root}/opt/aws/amazon-cloudwatch-agent/bin/CWAGENT_VERSION"\n',
    )
    executable(node.root / "opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl", "#!/bin/bash\n")
    node.setting("EFA_CDK_REGION", "me-central-1")
    regional = "https://amazoncloudwatch-agent-me-central-1.s3.me-central-1.amazonaws.com"
    fpr = "937616F3450B7D806CBD9725D58167303B789C72"
    r = node.run("monitoring", STUB_KEY_FPR=fpr, STUB_CURL_FAILS=f"{regional}/assets/")
    assert r.returncode == 0, r.log
    calls = node.calls("curl")
    assert any(
        "https://amazoncloudwatch-agent.s3.amazonaws.com/assets/amazon-cloudwatch-agent.gpg" in c
        for c in calls
    )
    assert any(f"{regional}/ubuntu/amd64/latest/amazon-cloudwatch-agent.deb" in c for c in calls)
    (node.root / "opt/aws/amazon-cloudwatch-agent/bin/CWAGENT_VERSION").unlink()  # no agent again
    r = node.run("monitoring", STUB_KEY_FPR=fpr, STUB_CURL_FAILS="https://amazoncloudwatch-agent")
    assert r.returncode == 1 and "could not download" in r.log


def test_an_agent_still_too_old_after_the_install_stops_the_node(tmp_path: Path) -> None:
    node = Node(tmp_path)
    _monitored(node)
    _agent_downloads(node)
    bin_dir = node.root / "opt/aws/amazon-cloudwatch-agent/bin"
    executable(
        node.stub_dir / "bin" / "dpkg",
        f'#!/bin/bash\nmkdir -p "{bin_dir}"; echo 1.300067.9 >"{bin_dir}/CWAGENT_VERSION"\n',
    )
    r = node.run("monitoring", STUB_KEY_FPR="937616F3450B7D806CBD9725D58167303B789C72")
    assert r.returncode == 1 and "is 1.300067.9, older than 1.300068.0 (EFA metrics)" in r.log


def test_the_agent_package_is_refused_unless_its_pinned_key_signed_it(tmp_path: Path) -> None:
    node = Node(tmp_path)
    _monitored(node)
    _agent_downloads(node)
    r = node.run("monitoring", STUB_KEY_FPR="0000000000000000000000000000000000000000")
    assert r.returncode == 1 and "expected 937616F3450B7D806CBD9725D58167303B789C72; not installing" in r.log
    assert not node.calls("dpkg")


@pytest.mark.parametrize("group", ["explicit", "asg"])
def test_health_check_publishes_the_verdict_and_an_asg_node_asks_to_be_replaced(
    tmp_path: Path, group: str
) -> None:
    node = Node(tmp_path)
    _monitored(node, EFA_CDK_NODE_GROUP=group, **ASG_LIMITS)
    (node.root / "var/lib/efa-cdk/verified").write_text("2026-11-24T00:00:00Z\n")
    node.setting("EFA_CDK_UNHEALTHY_AFTER", "1")
    r = node.run("health-check")
    assert r.returncode == 0, node.read("var/log/efa-cdk-health.log")
    metrics = node.stub_dir / "metrics.log"
    healthy_call = metrics.read_text().splitlines()[-1]  # this run's put-metric-data, both metrics
    assert (
        f"MetricName=EfaHealthy,Dimensions=[{{Name=InstanceId,Value={THIS_INSTANCE}}}],Value=1"
        in healthy_call
    )
    assert "MetricName=EfaUnhealthyNodes,Value=0" in healthy_call
    node.set_devices(7)  # one EFA gone
    r = node.run("health-check")
    assert r.returncode == 1
    unhealthy_call = next(c for c in reversed(metrics.read_text().splitlines()) if "EfaHealthy," in c)
    assert f"Value={THIS_INSTANCE}}}],Value=0" in unhealthy_call
    assert "MetricName=EfaUnhealthyNodes,Value=1" in unhealthy_call
    assert "UNHEALTHY (1 in a row): 7 of 8 EFA devices" in node.read("var/log/efa-cdk-health.log")
    replaced = (node.stub_dir / "health.log").exists()
    assert replaced is (group == "asg")
    if replaced:
        assert (
            f"--instance-id {THIS_INSTANCE} --health-status Unhealthy"
            in (node.stub_dir / "health.log").read_text()
        )


#: An Auto Scaling node's replacement limits, as EfaClusterMonitoring sets them by default.
def test_health_check_counts_a_libfabric_that_offers_no_endpoint(tmp_path: Path) -> None:
    """libfabric's side of the health check is the guard's (node/boot/fabric-guard.sh): when fi_info lists
    nothing, the node is unhealthy with the guard's reason, once."""
    node = Node(tmp_path)
    _monitored(node)
    node.run("efa-env")
    r = node.run("health-check", STUB_FI_INFO="broken")
    assert r.returncode == 1
    log = node.read("var/log/efa-cdk-health.log")
    assert (
        "UNHEALTHY (1 in a row): libfabric offers no reliable-datagram endpoint (FI_PROVIDER=efa): "
        "fi_getinfo: -61 (No data available)"
    ) in log, log


ASG_LIMITS = {
    "EFA_CDK_UNHEALTHY_AFTER": "3",
    "EFA_CDK_REPLACE_MINUTES": "60",
    "EFA_CDK_REPLACEMENT_PARAMETER": "/efa-cdk/Trn1EfaCluster/Cluster/last-replacement",
}


def _failing_asg_node(tmp_path: Path, *, verified: bool = True) -> Node:
    node = Node(tmp_path)
    _monitored(node, EFA_CDK_NODE_GROUP="asg", **ASG_LIMITS)
    if verified:
        (node.root / "var/lib/efa-cdk/verified").write_text("2026-11-24T00:00:00Z\n")
    node.set_devices(7)
    return node


def _health_log(node: Node) -> str:
    return node.read("var/log/efa-cdk-health.log")


def test_an_asg_node_asks_for_replacement_only_after_three_failures_in_a_row(tmp_path: Path) -> None:
    """Issue 23 item 5: one failed check no longer replaces an expensive node; a pass resets the count."""
    node = _failing_asg_node(tmp_path)
    for _ in range(2):
        assert node.run("health-check").returncode == 1
    assert not (node.stub_dir / "health.log").exists()
    assert "not asking for a replacement yet: 2 of 3 failed checks in a row" in _health_log(node)
    node.set_devices(8)
    assert node.run("health-check").returncode == 0
    node.set_devices(7)
    for _ in range(2):
        node.run("health-check")
    assert not (node.stub_dir / "health.log").exists()  # the pass started the count again
    node.run("health-check")
    assert "--health-status Unhealthy" in (node.stub_dir / "health.log").read_text()
    when, instance = (node.stub_dir / "last-replacement").read_text().split()
    assert instance == THIS_INSTANCE and abs(int(when) - time.time()) < 60


def test_a_node_still_verifying_is_not_replaced_and_one_whose_check_failed_is(tmp_path: Path) -> None:
    """Issue 41 item 5: while its own steps run, a node is left to them; once its EFA check failed (a
    replacement the group launched outside any CloudFormation operation, whose FAILURE signal no one
    hears) it is replaced like a node that failed later, within the same one-per-window limit."""
    node = _failing_asg_node(tmp_path, verified=False)
    for _ in range(4):
        node.run("health-check")
    assert not (node.stub_dir / "health.log").exists()
    assert "has not finished verifying EFA" in _health_log(node)
    (node.root / "var/lib/efa-cdk/failure").write_text("7 of 8 EFA devices\n")  # verify-efa's die
    # as the timer's unit runs it (run-steps.sh, which clears the failure at each step, is not in between)
    subprocess.run([BASH, str(node.bin / "health-check.sh")], env=node.env, check=False)
    assert "--health-status Unhealthy" in (node.stub_dir / "health.log").read_text()
    assert "never verified EFA (7 of 8 EFA devices): asking for a replacement" in _health_log(node)


@pytest.mark.parametrize(("seconds_ago", "replaced"), [(600, False), (3630, True)])
def test_one_replacement_per_group_per_hour_and_a_held_back_one_is_published(
    tmp_path: Path, seconds_ago: int, replaced: bool
) -> None:
    """60 minutes is 3,600 seconds: a replacement 60.5 minutes ago no longer holds the next one back."""
    node = _failing_asg_node(tmp_path)
    (node.root / "var/lib/efa-cdk/health-failures").write_text("2\n")
    last = int(time.time()) - seconds_ago
    (node.stub_dir / "last-replacement").write_text(f"{last} i-0aaaaaaaaaaaaaaaa\n")
    assert node.run("health-check").returncode == 1
    assert (node.stub_dir / "health.log").exists() is replaced
    held = "MetricName=EfaReplacementsHeldBack,Value=1" in (node.stub_dir / "metrics.log").read_text()
    assert held is not replaced
    if not replaced:
        assert (
            "NOT REPLACED: the group's last replacement was claimed by i-0aaaaaaaaaaaaaaaa 10 min ago"
            in _health_log(node)
        )


def test_of_two_nodes_failing_at_once_the_one_that_lost_the_claim_waits(tmp_path: Path) -> None:
    """Another node's write landed between this node's read and its write: Parameter Store gave this
    write the version after next, so this node did not win the claim (tests/e2e/test_replacement.py runs
    the race for real against the emulator)."""
    node = _failing_asg_node(tmp_path)
    (node.root / "var/lib/efa-cdk/health-failures").write_text("2\n")
    winner = f"{int(time.time())} i-0bbbbbbbbbbbbbbbb"
    assert node.run("health-check", STUB_RACE=winner).returncode == 1
    assert not (node.stub_dir / "health.log").exists()
    assert "another node of the group claimed the replacement first (version 2 of" in _health_log(node)
    # issue 41 item 5: its own write (version 3) hid the winner's claim; the winner's value is on top again
    assert (node.stub_dir / "last-replacement").read_text().strip() == winner


def test_a_claim_whose_set_instance_health_fails_is_given_back(tmp_path: Path) -> None:
    """Issue 34 item 1: a node that claimed the replacement but could not mark itself Unhealthy was
    not replaced, so the group must not be held back for the hour: the old value is written back."""
    node = _failing_asg_node(tmp_path)
    (node.root / "var/lib/efa-cdk/health-failures").write_text("2\n")
    earlier = f"{int(time.time()) - 7200} i-0aaaaaaaaaaaaaaaa"
    (node.stub_dir / "last-replacement").write_text(earlier + "\n")
    assert node.run("health-check", STUB_HEALTH_FAILS="1").returncode == 1
    assert "giving the replacement claim back" in _health_log(node)
    assert (node.stub_dir / "last-replacement").read_text().strip() == earlier
    assert (node.stub_dir / "last-replacement-version").read_text().strip() == "3"  # claimed, given back


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_the_replacement_limit_is_in_the_template_with_its_alarm_and_least_privilege() -> None:
    t = _stack("c5n.18xlarge", node_group="asg")
    (param,) = [k for k, r in t["Resources"].items() if r["Type"] == "AWS::SSM::Parameter" and
                "last-replacement" in json.dumps(r["Properties"]["Name"])]  # fmt: skip
    assert "EfaReplacementsHeldBack" in [
        a["Properties"]["MetricName"] for a in by_type(t, "AWS::CloudWatch::Alarm")
    ]
    statements = [
        s for p in by_type(t, "AWS::IAM::Policy") for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    (ssm_put,) = [s for s in statements if "ssm:PutParameter" in s["Action"] and param in json.dumps(s)]
    assert json.dumps(ssm_put["Resource"]).count(param) == 1 and "*" not in json.dumps(ssm_put["Resource"])
    user_data = json.dumps(by_type(t, "AWS::EC2::LaunchTemplate"))
    assert "EFA_CDK_UNHEALTHY_AFTER='3'" in user_data and "EFA_CDK_REPLACE_MINUTES='60'" in user_data


def test_benchmarks_publish_their_figures_and_on_demand_posts_nothing_to_cloudformation(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path, EFA_CDK_BENCHMARKS="fi_pingpong")
    _monitored(node)
    shutil.copy(FIXTURES / "benchmarks" / "fi_pingpong-efa.txt", node.stub_dir / "pingpong-output")
    assert node.run("hostfile", "benchmarks").returncode == 0
    published = (node.stub_dir / "metrics.log").read_text()
    assert "BenchmarkPeakGBps" in published and "BenchmarkLineRateFraction" in published
    (node.stub_dir / "posted.json").unlink()
    node.setting("EFA_CDK_RESULTS_PARAMETER", "/efa-cdk/Trn1EfaCluster/Cluster/benchmark-results")
    r = node.run("benchmarks", EFA_CDK_ON_DEMAND="1")
    assert r.returncode == 0, r.log
    assert not (node.stub_dir / "posted.json").exists()  # the wait condition is not touched
    assert list((node.root / "var/lib/efa-cdk").glob("benchmarks-*.json"))  # a dated copy
    # the newest results are kept (status shows them, the health checks read a fabric sweep's verdict)
    kept = json.loads((node.stub_dir / "results").read_text())
    assert [r["benchmark"] for r in kept["data"]] == ["fi_pingpong"]


# --- topology ---------------------------------------------------------------------------------


def _answer(ids_paths: list[tuple[str, list[str]]]) -> dict[str, Any]:
    return {
        "Instances": [
            {"InstanceId": i, "InstanceType": "p5.48xlarge", "NetworkNodes": p} for i, p in ids_paths
        ]
    }


def test_topology_groups_ranks_under_their_switch_and_keeps_the_leader_first() -> None:
    """A p6-b200 answer has 4 layers; nodes under the same bottom node end up next to each other."""
    nodes = [(str(i), f"10.0.0.{i}", f"i-{i}") for i in range(6)]
    layers = {0: "c", 1: "a", 2: "b", 3: "a", 4: "c", 5: "b"}  # bottom switch per node
    answer = _answer([(f"i-{i}", ["nn-spine", "nn-1", "nn-2", f"nn-{layers[i]}"]) for i in range(6)])
    ordered = order(nodes, [answer])
    assert ordered[0] == ("0", "10.0.0.0")  # the leader stays first
    groups = [layers[int(i)] for i, _ in ordered]
    assert groups == [
        "c",
        "c",
        "a",
        "a",
        "b",
        "b",
    ]  # each switch's nodes together (the ring turned to node 0)


def test_topology_falls_back_to_listed_order_for_uncovered_nodes() -> None:
    nodes = [("0", "10.0.0.1", "i-0"), ("1", "10.0.0.2", "i-1"), ("2", "10.0.0.3", "i-2")]
    ordered = order(nodes, [_answer([("i-0", ["a", "b", "c"]), ("i-2", ["a", "b", "c"])])])
    assert ordered == [("0", "10.0.0.1"), ("2", "10.0.0.3"), ("1", "10.0.0.2")]


def test_a_150_node_cluster_is_asked_in_two_calls_and_ordered(tmp_path: Path) -> None:
    node = Node(tmp_path)
    ips = [f"10.0.{1 + i // 200}.{10 + i % 200}" for i in range(150)]
    node.cluster(ips, count=150)
    ids = [THIS_INSTANCE if i == 0 else f"i-{i:017x}" for i in range(150)]
    rack = {i: f"nn-leaf-{(i * 7) % 10}" for i in range(150)}  # nodes scattered over 10 switches
    for call, chunk in enumerate((range(100), range(100, 150))):  # at most 100 ids per call
        (node.stub_dir / f"topology-{call}.json").write_text(
            json.dumps(_answer([(ids[i], ["nn-spine", "nn-mid", rack[i]]) for i in chunk]))
        )
    r = node.run("hostfile")
    assert r.returncode == 0, r.log
    topology_calls = [c for c in node.calls("aws") if "describe-instance-topology" in c]
    assert [c.count(" i-") for c in topology_calls] == [100, 50]
    hosts = [line.split()[0] for line in node.read("etc/efa-cdk/hostfile").splitlines()]
    assert hosts[0] == ips[0] and sorted(hosts) == sorted(ips)
    by_ip = {ip: rack[i] for i, ip in enumerate(ips)}
    switches = [by_ip[h] for h in hosts]
    assert sum(a != b for a, b in itertools.pairwise(switches)) <= 10  # contiguous groups
    assert "nodes ordered by instance topology" in r.log


def test_without_an_answer_the_hostfile_keeps_node_order_and_says_why(tmp_path: Path) -> None:
    node = Node(tmp_path)
    r = node.run("hostfile")
    assert r.returncode == 0, r.log
    assert (
        "no instance topology (An error occurred (UnsupportedOperation)): node index / address order" in r.log
    )


# --- Slurm topology (ParallelCluster head node) -----------------------------------------------


def test_slurm_tree_puts_each_node_under_its_switch_and_every_switch_under_one_root() -> None:
    nodes = [
        ("q-st-a-1", "10.0.0.1", "i-1"),
        ("q-st-a-2", "10.0.0.2", "i-2"),
        ("q-st-a-3", "10.0.0.3", "i-3"),
    ]
    answer = _answer(
        [
            ("i-1", ["nn-s", "nn-m", "nn-l1"]),
            ("i-2", ["nn-s", "nn-m", "nn-l2"]),
            ("i-3", ["nn-s", "nn-m", "nn-l1"]),
        ]
    )
    assert slurm_tree(nodes, [answer]).splitlines()[1:] == [
        "SwitchName=nn-l1 Nodes=q-st-a-1,q-st-a-3",
        "SwitchName=nn-l2 Nodes=q-st-a-2",
        "SwitchName=efa-cdk-root Switches=nn-s",
        "SwitchName=nn-m Switches=nn-l1,nn-l2",
        "SwitchName=nn-s Switches=nn-m",
    ]
    unplaced = slurm_tree(nodes, [])
    assert "SwitchName=efa-cdk-unplaced Nodes=q-st-a-1,q-st-a-2,q-st-a-3" in unplaced


@pytest.mark.debian
def test_the_head_node_writes_the_topology_of_its_running_compute_nodes(tmp_path: Path) -> None:
    node = Node(tmp_path)
    (node.stub_dir / "scontrol-nodes").write_text(
        "NodeName=q-st-a-1 Arch=x86_64 NodeAddr=10.0.1.10 NodeHostName=q-st-a-1 State=IDLE\n"
        "NodeName=q-dy-a-1 NodeAddr=q-dy-a-1 NodeHostName=q-dy-a-1 State=IDLE+CLOUD+POWERED_DOWN\n"
    )
    (node.stub_dir / "instances").write_text("10.0.1.10\ti-0000000000000000a\n")
    for call in (0, 1):  # one recorded answer per run
        answer = _answer([("i-0000000000000000a", ["s", "m", "l"])])
        (node.stub_dir / f"topology-{call}.json").write_text(json.dumps(answer))
    r = node.run("slurm-topology")
    assert r.returncode == 0, r.log
    conf = node.read("opt/slurm/etc/topology.conf").splitlines()
    assert "SwitchName=l Nodes=q-st-a-1" in conf
    # the powered-down node has no instance, but every node must sit under a switch (topology.conf(5))
    assert "SwitchName=efa-cdk-unplaced Nodes=q-dy-a-1" in conf
    assert "SwitchName=efa-cdk-root Switches=efa-cdk-unplaced,s" in conf
    assert "reconfigure" in " ".join(node.calls("scontrol"))
    assert node.read("etc/systemd/system/efa-cdk-slurm-topology.timer").count("OnUnitActiveSec=10min") == 1
    assert "TimeoutStartSec=300\n" in node.read("etc/systemd/system/efa-cdk-slurm-topology.service")
    r = node.run("slurm-topology")  # nothing changed: no reconfigure
    assert "unchanged" in r.log
    # last: skips where systemd-analyze is missing
    assert node.systemd_verify("efa-cdk-slurm-topology.service", "efa-cdk-slurm-topology.timer") == ""


def test_without_running_compute_nodes_every_node_sits_under_the_unplaced_switch(tmp_path: Path) -> None:
    node = Node(tmp_path)
    (node.stub_dir / "scontrol-nodes").write_text(
        "NodeName=q-dy-a-1 NodeAddr=q-dy-a-1 State=IDLE+CLOUD\n"
        "NodeName=q-dy-a-2 NodeAddr=q-dy-a-2 State=IDLE+CLOUD\n"
    )
    r = node.run("slurm-topology")
    assert r.returncode == 0, r.log
    assert node.read("opt/slurm/etc/topology.conf").splitlines()[1:] == [
        "SwitchName=efa-cdk-unplaced Nodes=q-dy-a-1,q-dy-a-2",
        "SwitchName=efa-cdk-root Switches=efa-cdk-unplaced",
    ]
    assert not node.calls("aws")  # nothing running: no instance to look up


def test_slurm_commands_are_called_where_parallelcluster_installs_them(tmp_path: Path) -> None:
    """ParallelCluster puts /opt/slurm/bin on PATH for login shells only; custom actions and timers
    must not rely on PATH (the Node helper has no scontrol on PATH)."""
    node = Node(tmp_path)
    (node.root / "opt/slurm/bin/scontrol").unlink()
    (node.stub_dir / "scontrol-nodes").write_text("NodeName=q-dy-a-1 NodeAddr=q-dy-a-1 State=IDLE+CLOUD\n")
    r = node.run("slurm-topology")
    assert r.returncode == 1 and "scontrol could not list the Slurm nodes" in r.log


def test_the_first_topology_names_every_node_before_slurmctld_starts(tmp_path: Path) -> None:
    """OnNodeStart: no slurmctld to ask, so the nodes come from the configuration (hostlist
    expressions); Slurm is not called. An existing file is kept."""
    node = Node(tmp_path, EFA_CDK_SLURM_NODES="q-st-a-[1-2] q-dy-a-[1-6] gpu-dy-b-[1-4]")
    r = node.run("slurm-topology-init")
    assert r.returncode == 0, r.log
    assert node.read("opt/slurm/etc/topology.conf").splitlines()[1:] == [
        "SwitchName=efa-cdk-unplaced Nodes=gpu-dy-b-[1-4],q-dy-a-[1-6],q-st-a-[1-2]",
        "SwitchName=efa-cdk-root Switches=efa-cdk-unplaced",
    ]
    assert not node.calls("scontrol")
    (node.root / "opt/slurm/etc/topology.conf").write_text("kept\n")
    assert node.run("slurm-topology-init").returncode == 0
    assert node.read("opt/slurm/etc/topology.conf") == "kept\n"


def test_an_image_without_the_agent_gets_it_installed_and_is_not_called_old(tmp_path: Path) -> None:
    node = Node(tmp_path)
    _monitored(node)
    _agent_downloads(node)
    bin_dir = node.root / "opt/aws/amazon-cloudwatch-agent/bin"
    staged = node.stub_dir / "agent-ctl"  # what the package installs
    executable(staged, '#!/bin/bash\necho "ctl $*" >>"$STUB_DIR/calls.log"\n')
    executable(
        node.stub_dir / "bin" / "dpkg",
        f'#!/bin/bash\necho "dpkg $*" >>"$STUB_DIR/calls.log"\nmkdir -p "{bin_dir}"\n'
        f'cp "{staged}" "{bin_dir}/amazon-cloudwatch-agent-ctl"\n'
        f'echo 1.300070.1 >"{bin_dir}/CWAGENT_VERSION"\n',
    )
    node.setting("EFA_CDK_REGION", "eu-central-1")
    r = node.run("monitoring", STUB_KEY_FPR="937616F3450B7D806CBD9725D58167303B789C72")
    assert r.returncode == 0, r.log
    assert len(node.calls("dpkg")) == 1 and node.calls("ctl")
    # from the region's bucket (CloudWatch user guide), not the global (us-east-1) one: issue 34 item 4
    regional = "https://amazoncloudwatch-agent-eu-central-1.s3.eu-central-1.amazonaws.com"
    for f in ("ubuntu/amd64/latest/amazon-cloudwatch-agent.deb", "assets/amazon-cloudwatch-agent.gpg"):
        assert any(f"{regional}/{f}" in c for c in node.calls("curl")), node.calls("curl")
    assert "the image's CloudWatch agent" not in r.log  # there was none to call old


@pytest.mark.parametrize("group", ["explicit", "asg"])
def test_a_node_the_fabric_sweep_named_fails_its_health_check_and_is_replaced_like_one_without_efa(
    tmp_path: Path, group: str
) -> None:
    """Issue 43: the leader's newest results (the results parameter) name this node slow: its health check
    fails with the sweep's figures, and an Auto Scaling node asks to be replaced, as when an EFA is gone;
    a sweep that named another node leaves it healthy."""
    node = Node(tmp_path)
    results = "/efa-cdk/S/Cluster/benchmark-results"
    _monitored(node, EFA_CDK_NODE_GROUP=group, EFA_CDK_RESULTS_PARAMETER=results, **ASG_LIMITS)
    (node.root / "var/lib/efa-cdk/verified").write_text("2026-11-24T00:00:00Z\n")
    node.setting("EFA_CDK_UNHEALTHY_AFTER", "1")

    def kept(slow: dict[str, float]) -> None:
        result = {"benchmark": "fabric-sweep", "ok": not slow, "median_gbps": 96.5, "slow_nodes": slow}
        (node.stub_dir / "results").write_text(json.dumps({"generation": "g", "data": [result]}))

    this = (node.stub_dir / "local-ipv4").read_text().strip()  # IMDS's local-ipv4, as in the hostfile
    kept({"10.0.1.11": 9.1})
    assert node.run("health-check").returncode == 0, node.read("var/log/efa-cdk-health.log")
    kept({this: 9.1})
    assert node.run("health-check").returncode == 1
    said = "UNHEALTHY (1 in a row): the fabric sweep measured it at 9.1 Gbps, the cluster's median 96.5 Gbps"
    assert said in node.read("var/log/efa-cdk-health.log")
    assert (node.stub_dir / "health.log").exists() is (group == "asg")


def test_the_leaders_health_timer_runs_the_fabric_sweep_at_its_interval_and_no_other_node_does(
    tmp_path: Path,
) -> None:
    """EFA_CDK_SWEEP_MINUTES (EfaCluster's sweep_interval): the leader's health check starts the sweep
    (the benchmarks step with the sweep alone, on demand) when it is due, not again within the interval;
    a follower never does. Two nodes here: the step says a sweep needs three (its run with three is the
    one-machine cluster's, tests/e2e)."""
    leader, follower = Node(tmp_path / "0", index=0), Node(tmp_path / "1", index=1)
    for node in (leader, follower):
        _monitored(node, EFA_CDK_SWEEP_MINUTES="60")
        assert node.run("hostfile").returncode == 0, node.read("var/log/efa-cdk.log")
    leader.run("health-check")
    said = leader.read("var/log/efa-cdk-health.log")
    assert (
        "fabric sweep due (every 60 minutes)" in said and "a fabric sweep needs three nodes: 2 here" in said
    )
    leader.run("health-check")
    assert leader.read("var/log/efa-cdk-health.log").count("fabric sweep due") == 1  # not again within 60
    follower.run("health-check")
    assert "fabric sweep" not in follower.read("var/log/efa-cdk-health.log")


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_the_sweep_interval_reaches_the_nodes_settings() -> None:
    user_data = json.dumps(by_type(_stack("trn1.32xlarge", sweep_minutes="360"), "AWS::EC2::LaunchTemplate"))
    assert "EFA_CDK_SWEEP_MINUTES='360'" in user_data
    assert "EFA_CDK_SWEEP_MINUTES" not in json.dumps(
        by_type(_stack("trn1.32xlarge"), "AWS::EC2::LaunchTemplate")
    )
