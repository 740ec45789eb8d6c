"""The ready Trn1 stack's node software, booted for real on a 3-node cluster on this machine
(tests/e2e/cluster.py says what stands in for what). Runs in `scripts/test` (and so CI) and alone
with `scripts/e2e`; skips, naming what is missing, on a machine without network namespaces.

Healthy cluster: every node signals SUCCESS to the stack, the leader's hostfile lists the 3 nodes in
node order with the catalogue's slots, every node reaches every other over SSH with the key from
SSM, an Open MPI job runs across the 3 namespaces, and the benchmark JSON reaches the wait-condition
handle and parses. Faulty cluster: a node with 7 of 8 EFA devices signals FAILURE with its reason,
and a node that never comes up makes the leader report FAILURE naming it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from efa_constructs.core import instance_type
from tests.e2e.cluster import (
    SWEEP,
    SWEEP_THRESHOLD,
    Cluster,
    Node,
    explain,
    inside,
    kill_namespace,
    missing_capabilities,
    slowed_rate,
    synthesize_cluster,
    throttle,
)

MISSING = missing_capabilities()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"this machine lacks: {', '.join(MISSING)}")

TYPE = "trn1.32xlarge"
SLOTS = instance_type(TYPE).mpi_slots
KEY_PAIR_ID = "key-0e2e0000000000001"


@pytest.fixture(scope="module")
def healthy(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("healthy")
    synthesize_cluster(out, "Trn1EfaCluster")
    stack = cluster.create_stack("Trn1EfaCluster", out, KEY_PAIR_ID)
    nodes = cluster.boot("n", stack, "ubuntu", [8, 8, 8], {"EFA_CDK_POLL_SECONDS": "2"})
    cluster.wait(nodes)
    return {"stack": stack, "nodes": nodes}


def test_every_node_signals_success_to_its_creation_policy(cluster: Cluster, healthy: dict[str, Any]) -> None:
    nodes: list[Node] = healthy["nodes"]
    signals = [s for s in cluster.signals() if s["StackName"] == "Trn1EfaCluster"]
    assert sorted((s["LogicalResourceId"], s["Status"]) for s in signals) == sorted(
        (n.logical_id, "SUCCESS") for n in nodes
    ), explain(nodes)
    assert {s["UniqueId"] for s in signals} == {n.instance_id for n in nodes}


def test_an_efa_counter_rising_between_health_checks_is_named_mended_and_cleared(
    cluster: Cluster, healthy: dict[str, Any]
) -> None:
    """Issue 59: the node's health check (as its timer runs it) reads EFA's own counters from sysfs
    (ports/1/hw_counters, the EFA driver's names) on every check. Failed RDMA reads rising between two
    checks name the device and the reading, publish EfaDeviceFaults to moto's CloudWatch, tag the instance
    (efa-cdk status reads it) and reboot the node (systemctl, a stand-in here); the check after, the counter
    steady, finds it whole and clears the tag. Runs before the IAM test below, which authorizes these calls
    (CreateTags, DeleteTags) against the node role, conditions and all."""
    leader: Node = healthy["nodes"][0]
    device = sorted((leader.root / "sys/class/infiniband").iterdir())[0]
    counters = device / "ports/1/hw_counters"
    counters.mkdir(parents=True, exist_ok=True)
    (counters / "rdma_read_wr_err").write_text("0\n")
    check = str(leader.root / "opt/efa-cdk/bin/health-check.sh")
    assert leader.run_as_root("bash", check).returncode == 0, (
        leader.root / "var/log/efa-cdk-health.log"
    ).read_text()
    (counters / "rdma_read_wr_err").write_text("3\n")
    assert leader.run_as_root("bash", check).returncode == 1
    said = (
        f"EFA {device.name}: RDMA read work requests failed (rdma_read_wr_err +3 since the last check): "
        "mend: reboot"
    )
    assert f"UNHEALTHY: {said}" in (leader.root / "var/log/efa-cdk-health.log").read_text()
    assert f"REBOOTING for: {said}" in (leader.root / "var/log/efa-cdk-devices.log").read_text()
    assert "reboot" in (leader.root / "systemctl.log").read_text().splitlines()
    with inside(cluster.aws_ns):
        aws = cluster.clients()
        tags = aws["ec2"].describe_tags(Filters=[{"Name": "resource-id", "Values": [leader.instance_id]}])[
            "Tags"
        ]
        metrics = aws["cloudwatch"].list_metrics(
            Namespace="EfaCdk/Trn1EfaCluster/Cluster", MetricName="EfaDeviceFaults"
        )["Metrics"]
    assert {t["Key"]: t["Value"] for t in tags}["efa-cdk:device-fault"] == f"rebooting: {said}"
    assert {d["Value"] for m in metrics for d in m["Dimensions"]} == {"watch", "reset", "reboot", "replace"}
    assert leader.run_as_root("bash", check).returncode == 0  # after the reboot: the counter steady
    assert (
        f"MENDED: EFA {device.name}: RDMA read work requests failed"
        in (leader.root / "var/log/efa-cdk-devices.log").read_text()
    )
    with inside(cluster.aws_ns):
        tags = cluster.clients()["ec2"].describe_tags(
            Filters=[{"Name": "resource-id", "Values": [leader.instance_id]}]
        )["Tags"]
    assert "efa-cdk:device-fault" not in {t["Key"] for t in tags}


def test_every_aws_call_the_nodes_made_is_one_their_role_allows(
    cluster: Cluster, healthy: dict[str, Any]
) -> None:
    """Issue 41 item 16: each call the booted nodes signed (kept by the endpoint) is authorized against
    the node role moto's CloudFormation created, with AWS's evaluation logic (tests/e2e/node_iam.py): a
    permission the template forgot fails here. Without the role's ssm:PutParameter statements, the
    same calls are refused (the check can fail)."""
    role, nodes = healthy["stack"]["role"], healthy["nodes"]
    refused, examined = cluster.unauthorized(role, nodes)
    assert refused == [], "\n".join(refused)
    assert {"ssm:GetParameter", "ssm:PutParameter", "ec2:DescribeInstances", "cloudformation:SignalResource",
            "monitoring:PutMetricData", "s3:GetObject", "ec2:CreateTags",
            "ec2:DeleteTags"} <= examined, examined  # fmt: skip
    refused, _ = cluster.unauthorized(role, nodes, without="ssm:PutParameter")
    assert refused and all(line.startswith("ssm:PutParameter on arn:aws:ssm:") for line in refused), refused


def test_the_leader_lists_the_three_nodes_in_order_with_the_catalogues_slots(healthy: dict[str, Any]) -> None:
    nodes: list[Node] = healthy["nodes"]
    expected = "".join(f"{n.ip} slots={SLOTS}\n" for n in nodes)
    assert (nodes[0].root / "etc/efa-cdk/hostfile").read_text() == expected, explain(nodes)
    for n in nodes:  # the leader copied it to every node's login user
        assert (n.root / "home/ubuntu/hostfile").read_text() == expected


def test_passwordless_ssh_between_every_pair_with_the_key_from_ssm(healthy: dict[str, Any]) -> None:
    nodes: list[Node] = healthy["nodes"]
    for a in nodes:
        for b in nodes:
            if a is b:
                continue
            r = a.run_as_user(
                "ubuntu", "ssh", "-o", "BatchMode=yes", b.ip, "ip", "-4", "-o", "addr", "show", "eth0"
            )
            assert r.returncode == 0 and f"inet {b.ip}/" in r.stdout, (a.name, b.name, r.stderr)


def test_instance_metadata_answers_root_and_the_login_user_only(healthy: dict[str, Any]) -> None:
    """Issue 41 item 7: the imds step (prep.sh's rule, real iptables in the node's namespace) lets root
    and the login user reach instance metadata, and nobody else (here `nobody`); the unit that
    reapplies it at every boot is enabled."""
    node = healthy["nodes"][0]
    url = "http://169.254.169.254/latest/api/token"
    token = ("curl", "-s", "-m", "3", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT",
             "-H", "X-aws-ec2-metadata-token-ttl-seconds: 60", url)  # fmt: skip
    assert node.run_as_root(*token).stdout == "200"
    assert node.run_as_user("ubuntu", *token).stdout == "200"
    assert node.run_as_user("nobody", *token).stdout == "000"
    assert (node.root / "var/lib/efa-cdk/imds-restricted").read_text() == "root ubuntu\n"
    assert "enable efa-cdk-imds.service" in (node.root / "systemctl.log").read_text()


def test_an_open_mpi_job_runs_across_the_three_namespaces(healthy: dict[str, Any]) -> None:
    nodes: list[Node] = healthy["nodes"]
    r = nodes[0].run_as_user(
        "ubuntu", "mpirun", "--hostfile", "/home/ubuntu/hostfile", "-N", "1",
        "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "eth0",
        "--mca", "oob_tcp_if_include", "eth0",
        "sh", "-c", "echo $(hostname) $(ip -4 -o addr show eth0 | awk '{print $4}')",
        timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    # each rank on its own node, with that node's own host name (EC2's IP name), as on EC2
    ip_name = {f"ip-{n.ip.replace('.', '-')}": f"{n.ip}/16" for n in nodes}
    assert dict(line.split() for line in r.stdout.splitlines()) == ip_name, r.stdout


def test_the_guard_passed_on_every_node_and_refuses_a_job_that_would_leave_efa(
    healthy: dict[str, Any],
) -> None:
    """Issue 43, the guard against silent fallback with the real libfabric: at boot every node's guard
    passed with the provider the harness configures (tcp), and the same node, expected to use efa (the
    harness's stand-in unset), is refused in one line naming it and what it found."""
    nodes: list[Node] = healthy["nodes"]
    for n in nodes:
        name = f"ip-{n.ip.replace('.', '-')}"
        assert f"efa-cdk guard: {name}: ok: tcp on " in n.log(), n.log()[-2000:]
    guard = str(nodes[0].root / "opt/efa-cdk/bin/fabric-guard.sh")
    r = nodes[0].run_as_root("bash", guard)
    assert r.returncode == 0 and ": ok: tcp on " in r.stdout, r.stdout + r.stderr
    r = nodes[0].run_as_root("env", "-u", "EFA_CDK_TEST_ONLY_PROVIDER", "bash", guard)
    name = f"ip-{nodes[0].ip.replace('.', '-')}"
    # the jobs' FI_PROVIDER=efa, and this machine's libfabric has no efa device to offer
    assert r.returncode == 1 and r.stdout.startswith(
        f"efa-cdk guard: {name}: REFUSED: libfabric offers no reliable-datagram endpoint (FI_PROVIDER=efa): "
        "fi_getinfo: -61"
    ), r.stdout + r.stderr
    assert r.stdout.count("\n") == 1


def test_the_fabric_sweep_names_no_node_of_a_healthy_cluster_and_the_slowed_node_alone(
    cluster: Cluster, healthy: dict[str, Any]
) -> None:
    """Issue 43, the fabric sweep with the real tools (sshd, libfabric's fi_pingpong over tcp, tc): the
    healthy cluster names none; with one node's link slowed by a tbf rate limit on both ends of its veth
    (cluster.SLOWED times below the healthy median), the sweep names that node, with its figure, and no
    other."""
    nodes: list[Node] = healthy["nodes"]
    sweep = str(nodes[0].root / "opt/efa-cdk/bin/fabric-sweep.sh")
    r = nodes[0].run_as_root(*SWEEP, "bash", sweep, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    # the ring's 3 rounds, and one more where a moment of load made a pair look slow (measured again)
    assert re.match(r"efa-cdk sweep: 3 nodes, [3-5] pairs in [3-5] rounds, ", r.stdout.splitlines()[-1]), (
        r.stdout
    )
    assert r.stdout.endswith("; none named\n"), r.stdout
    verdict = json.loads((nodes[0].root / "var/lib/efa-cdk/sweep/verdict.json").read_text())
    assert verdict["threshold"] == float(SWEEP_THRESHOLD)  # node.env's EFA_CDK_SWEEP_THRESHOLD reached it
    throttle(cluster.aws_ns, nodes[1], slowed_rate(nodes[0]))
    try:
        r = nodes[0].run_as_root(*SWEEP, "bash", sweep, timeout=300)
    finally:
        throttle(cluster.aws_ns, nodes[1], None)
    assert r.returncode == 1, r.stdout + r.stderr
    named, summary = r.stdout.splitlines()
    assert named.startswith(f"efa-cdk sweep: SLOW node {nodes[1].ip}: "), r.stdout
    assert summary.endswith("; 1 named"), summary
    assert re.search(r"3 nodes, [4-6] pairs in [4-6] rounds", summary), summary  # ring 3, narrowing 1 (or 2)


def test_the_benchmark_results_reach_the_wait_condition_and_parse(
    cluster: Cluster, healthy: dict[str, Any]
) -> None:
    body = cluster.handle(healthy["stack"]["handle"])
    assert body is not None, explain(healthy["nodes"])
    assert body["Status"] == "SUCCESS" and body["UniqueId"] == "benchmarks", body
    result, sweep = json.loads(body["Data"])
    assert result["benchmark"] == "fi_pingpong" and result["ok"] is True, result
    # the fabric sweep ran at formation too (three nodes): nothing named on the healthy cluster
    assert sweep["benchmark"] == "fabric-sweep" and sweep["ok"] is True, sweep
    assert sweep["slow_nodes"] == {} and sweep["median_gbps"] > 0 and sweep["rounds"] >= 3
    assert result["provider"] == "tcp"  # the stand-in, said so in the results too
    assert result["peak_gbytes_s"] > 0 and result["latency_us"] > 0


@pytest.fixture(scope="module")
def faulty(second_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """On its own bridge and endpoint: the healthy nodes, still up for the tests after these, hold
    the addresses moto gives this stack's nodes."""
    out = tmp_path_factory.mktemp("faulty")
    synthesize_cluster(out, "Trn1EfaFaults")
    stack = second_cluster.create_stack("Trn1EfaFaults", out, "key-0e2e0000000000002")
    # node 1 has 7 of its 8 EFAs; node 2 never comes up. The leader's wait is cut to 20 s.
    nodes = second_cluster.boot(
        "f", stack, "ubuntu", [8, 7, None], {"EFA_CDK_WAIT_SECONDS": "20", "EFA_CDK_POLL_SECONDS": "2"}
    )
    second_cluster.wait(nodes)
    return {"stack": stack, "nodes": nodes}


def test_a_node_with_the_wrong_device_count_signals_failure_with_its_reason(
    second_cluster: Cluster, faulty: dict[str, Any]
) -> None:
    nodes: list[Node] = faulty["nodes"]
    signals = {
        s["LogicalResourceId"]: s for s in second_cluster.signals() if s["StackName"] == "Trn1EfaFaults"
    }
    assert signals[nodes[0].logical_id]["Status"] == "SUCCESS", explain(nodes)
    bad = signals[nodes[1].logical_id]
    assert bad["Status"] == "FAILURE" and "found-7-EFA-devices" in bad["UniqueId"], bad
    assert nodes[2].logical_id not in signals  # never came up: CloudFormation would time it out


def test_a_node_that_never_comes_up_makes_the_leader_fail_naming_it(
    second_cluster: Cluster, faulty: dict[str, Any]
) -> None:
    nodes: list[Node] = faulty["nodes"]
    body = second_cluster.handle(faulty["stack"]["handle"])
    assert body is not None, explain(nodes)
    assert body["Status"] == "FAILURE" and nodes[2].ip in body["Reason"], body


def test_monitoring_configures_the_agent_and_the_health_check_reaches_cloudwatch(
    cluster: Cluster, healthy: dict[str, Any]
) -> None:
    """The monitoring step handed the agent a configuration that parses and asked for the health
    timer; the health check, run as the timer would, publishes this node's verdict to CloudWatch."""
    leader: Node = healthy["nodes"][0]
    assert "fetch-config -m ec2 -s -c file:" in (leader.root / "ctl.log").read_text()
    assert "enable --now efa-cdk-health.timer" in (leader.root / "systemctl.log").read_text()
    r = leader.run_as_root("bash", str(leader.root / "opt/efa-cdk/bin/health-check.sh"))
    assert r.returncode == 0, (leader.root / "var/log/efa-cdk-health.log").read_text()
    with inside(cluster.aws_ns):
        metrics = cluster.clients()["cloudwatch"].list_metrics(Namespace="EfaCdk/Trn1EfaCluster/Cluster")
    names = {(m["MetricName"], tuple(d["Value"] for d in m["Dimensions"])) for m in metrics["Metrics"]}
    assert ("EfaHealthy", (leader.instance_id,)) in names and ("EfaUnhealthyNodes", ()) in names


def test_a_replaced_node_joins_and_every_hostfile_follows_the_cluster(
    cluster: Cluster, healthy: dict[str, Any]
) -> None:
    """Issue 34 item 3 (it ends node 1; the next test replaces the whole cluster). After the cluster
    formed, node 1 dies and is replaced as CloudFormation replaces it: a new instance with node 1's
    tags (its generation's: it joins, issue 41 item 2), the old one still
    listed by EC2. The new node joins: every node's ~/hostfile lists node 0 first (the leader stays),
    the new node, node 2, and not the dead address; the new node runs no benchmarks (the wait
    condition's body is unchanged); the leader's root copy follows ~/hostfile (hostfile-sync.sh, which
    systemd's path unit runs on a node: run here as it would)."""
    nodes: list[Node] = healthy["nodes"]
    settings = dict(
        line.split("=", 1)
        for line in (nodes[0].root / "etc/efa-cdk/node.env").read_text().splitlines()
        if "=" in line
    )
    formed_name = settings["EFA_CDK_FORMED_PARAMETER"].strip("'")
    before = cluster.handle(healthy["stack"]["handle"])
    with inside(cluster.aws_ns):
        aws = cluster.clients()
        generation = aws["ssm"].get_parameter(Name=formed_name)["Parameter"]["Value"]
        tags = healthy["stack"]["instances"][nodes[1].logical_id][2]
        assert generation == tags["efa-cdk:generation"], explain(nodes)
        old = nodes[1]
        kill_namespace(old.ns)  # node 1 dies; its instance still runs until CloudFormation deletes it
        (was,) = [i for r in aws["ec2"].describe_instances(InstanceIds=[old.instance_id])["Reservations"]
                  for i in r["Instances"]]  # fmt: skip
        made = aws["ec2"].run_instances(
            ImageId=was["ImageId"], InstanceType=was["InstanceType"], MinCount=1, MaxCount=1,
            SubnetId=was["SubnetId"], TagSpecifications=[{"ResourceType": "instance", "Tags": was["Tags"]}],
        )["Instances"][0]  # fmt: skip
    tags = {t["Key"]: t["Value"] for t in was["Tags"]}
    replacement = {
        "user_data": healthy["stack"]["user_data"],
        "instances": {old.logical_id: (made["InstanceId"], made["PrivateIpAddress"], tags)},
    }
    (new,) = cluster.boot("r", replacement, "ubuntu", [8], {"EFA_CDK_POLL_SECONDS": "2"})
    cluster.wait([new])
    assert new.process is not None and new.process.returncode == 0, explain([new])
    assert "joined: every member has the hostfile of the 3 nodes" in new.log(), new.log()[-3000:]
    files = {n.name: (n.root / "home/ubuntu/hostfile").read_text() for n in (nodes[0], new, nodes[2])}
    assert len(set(files.values())) == 1, files  # one list on every node
    listed = [line.split()[0] for line in files[new.name].splitlines()]
    assert listed[0] == nodes[0].ip and sorted(listed) == sorted([nodes[0].ip, new.ip, nodes[2].ip])
    assert old.ip not in listed
    assert (
        "the benchmarks ran at its formation" in new.log()
        and cluster.handle(healthy["stack"]["handle"]) == before
    )
    r = nodes[0].run_as_root("bash", str(nodes[0].root / "opt/efa-cdk/bin/hostfile-sync.sh"))
    assert r.returncode == 0, r.stderr
    assert (nodes[0].root / "etc/efa-cdk/hostfile").read_text() == files[new.name]


def test_a_new_generation_of_every_node_forms_again_and_benchmarks_the_new_fabric(
    cluster: Cluster, healthy: dict[str, Any]
) -> None:
    """Issue 41 item 2, last in this module. Every node replaced by a new generation (as an efa-cdk
    upgrade, a new image or any launch template change does: new instances tagged with the new
    template's hash) while the old generation is marked formed and two of its nodes still run. The new
    nodes do not join the old cluster: the new node 0 lists its generation's three, reaches each over
    SSH with EFA verified, benchmarks them (fi_pingpong over the stand-in provider), keeps the results
    in the cluster's results parameter and marks the new generation formed. moto answers every call."""
    nodes: list[Node] = healthy["nodes"]
    env = (nodes[0].root / "etc/efa-cdk/node.env").read_text().splitlines()
    settings = dict(line.split("=", 1) for line in env if "=" in line)
    formed_name = settings["EFA_CDK_FORMED_PARAMETER"].strip("'")
    results_name = settings["EFA_CDK_RESULTS_PARAMETER"].strip("'")
    new_generation = "0e2e0000000000b2"
    instances = {}
    with inside(cluster.aws_ns):
        aws = cluster.clients()
        old = aws["ssm"].get_parameter(Name=formed_name)["Parameter"]["Value"]
        assert old != new_generation
        for logical, (iid, _ip, tags) in healthy["stack"]["instances"].items():
            (was,) = [
                i
                for r in aws["ec2"].describe_instances(InstanceIds=[iid])["Reservations"]
                for i in r["Instances"]
            ]
            new_tags = {**tags, "efa-cdk:generation": new_generation}
            made = aws["ec2"].run_instances(
                ImageId=was["ImageId"], InstanceType=was["InstanceType"], MinCount=1, MaxCount=1,
                SubnetId=was["SubnetId"],
                TagSpecifications=[{"ResourceType": "instance",
                                    "Tags": [{"Key": k, "Value": v} for k, v in new_tags.items()]}],
            )["Instances"][0]  # fmt: skip
            instances[logical] = (made["InstanceId"], made["PrivateIpAddress"], new_tags)
    generation = {"user_data": healthy["stack"]["user_data"], "instances": instances}
    booted = cluster.boot(
        "g",
        generation,
        "ubuntu",
        [8, 8, 8],
        {"EFA_CDK_POLL_SECONDS": "2"},
    )
    cluster.wait(booted)
    assert all(n.process is not None and n.process.returncode == 0 for n in booted), explain(booted)
    leader = booted[0]
    assert "joined" not in leader.log(), leader.log()[-3000:]
    assert f"cluster formed (generation {new_generation})" in leader.log(), leader.log()[-3000:]
    listed = [line.split()[0] for line in (leader.root / "etc/efa-cdk/hostfile").read_text().splitlines()]
    assert sorted(listed) == sorted(n.ip for n in booted)  # the new generation only
    with inside(cluster.aws_ns):
        aws = cluster.clients()
        assert aws["ssm"].get_parameter(Name=formed_name)["Parameter"]["Value"] == new_generation
        kept = json.loads(aws["ssm"].get_parameter(Name=results_name)["Parameter"]["Value"])
    assert kept["generation"] == new_generation
    assert [r["benchmark"] for r in kept["data"]] == ["fi_pingpong", "fabric-sweep"], kept
    assert all(r["ok"] for r in kept["data"]), kept  # the new fabric benchmarked and swept
