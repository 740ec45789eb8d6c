"""The ready Trn1 stack with `container_image`, booted on 3 nodes of the one-machine cluster, each with
its own real Docker engine (Debian's docker.io) in its namespaces and the test image (tests/e2e/image.py:
Debian with libfabric, Open MPI and OpenSSH, built once without a registry). The container step runs for
real with the flags ContainerRun renders, on nodes that have 8 EFA devices and 2 other RDMA devices (as
p6-b200 has NVLink controllers beside its EFAs). One stand-in beyond the cluster's: the locked-memory
limit (`--ulimit memlock=-1:-1`) is this machine's hard limit, which no process here may raise.

Skips, naming what is missing, without network namespaces, Docker's engine or debootstrap, or when
Debian's archive cannot be reached to build the image.
"""

from __future__ import annotations

import json
import re
import resource
import time
from pathlib import Path
from typing import Any

import pytest

from efa_constructs.core import instance_type
from tests.e2e import image
from tests.e2e.cluster import ROOT, Cluster, Node, explain, missing_capabilities, sh, synthesize_cluster

MISSING = missing_capabilities() + image.missing()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"this machine lacks: {', '.join(MISSING)}")

TYPE = "trn1.32xlarge"
PORT = 3022


def docker(node: Node, *args: str, timeout: float = 60) -> Any:
    """The docker client against the node's own engine, in the node's namespaces."""
    return node.run_as_root(
        "env", f"DOCKER_HOST=unix://{node.root}/run/docker.sock", "docker", *args, timeout=timeout
    )


def settings(stack: dict[str, Any], **extra: str) -> dict[str, str]:
    """The harness's shorter waits, and memlock capped at this machine's hard limit when it has one."""
    out = {"EFA_CDK_POLL_SECONDS": "2", **extra}
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    if hard != resource.RLIM_INFINITY:
        (args,) = re.findall(r"^EFA_CDK_CONTAINER_ARGS='([^']*)'$", stack["user_data"], re.M)
        out["EFA_CDK_CONTAINER_ARGS"] = args.replace("memlock=-1:-1", f"memlock={hard}:{hard}")
    return out


@pytest.fixture(scope="module")
def built() -> tuple[Path, str]:
    try:
        return image.build()
    except RuntimeError as err:  # no route to Debian's archive: nothing to run the containers with
        pytest.skip(f"the test image cannot be built here: {err}")


@pytest.fixture(scope="module")
def healthy(
    cluster: Cluster, built: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("healthy")
    synthesize_cluster(out, "Trn1EfaContainers", container_image=built[1])
    stack = cluster.create_stack("Trn1EfaContainers", out, "key-0e2e0000000000c01")
    nodes = cluster.boot("c", stack, "ubuntu", [8, 8, 8], settings(stack), other_rdma=2, docker_image=built)
    cluster.wait(nodes)
    return {"stack": stack, "nodes": nodes, "image": built[1]}


def test_every_aws_call_the_nodes_made_is_one_their_role_allows(
    cluster: Cluster, healthy: dict[str, Any]
) -> None:
    """Issue 41 item 16, with the container step: every call the nodes signed is authorized against the
    node role (tests/e2e/node_iam.py)."""
    refused, examined = cluster.unauthorized(healthy["stack"]["role"], healthy["nodes"])
    assert refused == [], "\n".join(refused)
    assert {"ssm:GetParameter", "ssm:PutParameter", "cloudformation:SignalResource"} <= examined, examined


def test_every_node_verifies_efa_and_runs_the_image(cluster: Cluster, healthy: dict[str, Any]) -> None:
    nodes: list[Node] = healthy["nodes"]
    signals = {
        s["LogicalResourceId"]: s["Status"]
        for s in cluster.signals()
        if s["StackName"] == "Trn1EfaContainers"
    }
    assert signals == {n.logical_id: "SUCCESS" for n in nodes}, explain(nodes)
    for n in nodes:
        assert "EFA provider tcp inside (8 EFA devices)" in n.log(), explain([n])


def test_each_container_gets_exactly_the_nodes_efa_devices_and_host_networking(
    healthy: dict[str, Any],
) -> None:
    for n in healthy["nodes"]:
        r = docker(n, "exec", "efa-cdk", "ls", "/dev/infiniband")
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.split()) == [f"uverbs{i}" for i in range(8)]  # not uverbs8, uverbs9 (mlx5)
        config = json.loads(docker(n, "inspect", "efa-cdk").stdout)[0]["HostConfig"]
        assert config["NetworkMode"] == "host" and config["RestartPolicy"]["Name"] == "unless-stopped"
        interfaces = docker(n, "exec", "efa-cdk", "cat", "/proc/net/dev").stdout
        assert re.search(r"^\s*eth0:", interfaces, re.M), interfaces  # the node's own interface


def _container_ssh(leader: Node, host: str) -> Any:
    return docker(
        leader,
        "exec",
        "efa-cdk",
        "ssh",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=5",
        host,
        "hostname",
        "-I",
    )


def test_containers_answer_ssh_on_their_port_with_the_cluster_key(healthy: dict[str, Any]) -> None:
    leader, *others = healthy["nodes"]
    for n in others:
        r = _container_ssh(leader, n.ip)
        assert r.returncode == 0 and n.ip in r.stdout, (n.name, r.stderr)
        listening = sh("ip", "netns", "exec", n.ns, "ss", "-ltnH", f"sport = :{PORT}", check=False).stdout
        assert f":{PORT}" in listening  # sshd inside the image, on the node's address


def test_mpirun_from_the_image_runs_across_the_three_containers(healthy: dict[str, Any]) -> None:
    leader = healthy["nodes"][0]
    r = docker(
        leader, "exec", "efa-cdk", "mpirun", "--allow-run-as-root", "--hostfile", "/efa-cdk/etc/hostfile",
        "-N", "1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "eth0",
        "--mca", "oob_tcp_if_include", "eth0", "sh", "-c", "echo $OMPI_COMM_WORLD_RANK $(hostname -I)",
        timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()[1::2]) == sorted(n.ip for n in healthy["nodes"]), r.stdout


def test_the_benchmark_ran_inside_the_image_and_names_it(cluster: Cluster, healthy: dict[str, Any]) -> None:
    body = cluster.handle(healthy["stack"]["handle"])
    assert body is not None, explain(healthy["nodes"])
    assert body["Status"] == "SUCCESS", body
    result, sweep = json.loads(body["Data"])
    assert result["ok"] is True, (result, explain(healthy["nodes"]))  # a failure's reason, when there is one
    assert sweep["benchmark"] == "fabric-sweep" and sweep["ok"] is True, sweep
    assert (result["benchmark"], result["image"]) == ("fi_pingpong", healthy["image"])
    assert result["provider"] == "tcp" and result["peak_gbytes_s"] > 0


def test_after_the_engine_starts_again_every_container_is_back_with_ssh(healthy: dict[str, Any]) -> None:
    """A node's stop/start, as far as Docker sees it: the engine stops (its containers with it) and
    starts again; the restart policy brings the containers and their SSH servers back."""
    nodes: list[Node] = healthy["nodes"]
    for n in nodes:
        pid = int((n.root / "run/dockerd.pid").read_text())
        n.run_as_root("kill", "-TERM", str(pid))
        deadline = time.time() + 60
        while Path(f"/proc/{pid}").exists():
            assert time.time() < deadline, f"dockerd on {n.name} did not stop"
            time.sleep(0.5)
        assert docker(n, "version").returncode != 0  # the engine is down
    for n in nodes:
        r = n.run_as_root("bash", str(ROOT / "tests/e2e/dockerd.sh"), str(n.root), timeout=90)
        assert r.returncode == 0, r.stderr
    leader, *others = nodes
    deadline = time.time() + 60
    for n in others:
        while (r := _container_ssh(leader, n.ip)).returncode != 0:
            assert time.time() < deadline, (n.name, r.stderr, docker(n, "ps", "-a").stdout)
            time.sleep(1)
    for n in nodes:
        assert docker(n, "inspect", "-f", "{{.State.Running}}", "efa-cdk").stdout.strip() == "true"


def test_an_image_without_libfabric_is_reported_with_its_name_and_the_fix(
    cluster: Cluster, healthy: dict[str, Any]
) -> None:
    """The container step again on node 1 with an image that has no libfabric (the test image with its
    libfabric removed, committed in node 1's engine): the cluster's result names that image and the fix.
    Runs after the tests that use the healthy containers (it replaces node 1's)."""
    node: Node = healthy["nodes"][1]
    bad = "efa-cdk-e2e/no-libfabric:1"
    r = docker(node, "run", "--name", "strip", healthy["image"], "sh", "-c", "rm -f /usr/lib/*/libfabric.so*")
    assert r.returncode == 0, r.stderr
    assert docker(node, "commit", "strip", bad).returncode == 0
    env = node.root / "etc/efa-cdk/node.env"
    env.write_text(env.read_text() + f"EFA_CDK_CONTAINER_IMAGE='{bad}'\n")  # a later line wins
    (node.root / "var/lib/efa-cdk/benchmarks.json").unlink(missing_ok=True)
    r = node.run_as_root(
        "env", f"DOCKER_HOST=unix://{node.root}/run/docker.sock", "bash",
        str(node.root / "opt/efa-cdk/bin/run-steps.sh"), "container", timeout=120,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    body = cluster.handle(healthy["stack"]["handle"])
    assert body is not None and body["Status"] == "SUCCESS", body
    (result,) = json.loads(body["Data"])
    assert (result["benchmark"], result["ok"], result["image"]) == ("container", False, bad)
    assert (
        "fi_info -p tcp finds no EFA" in result["reason"]
        and "efa_installer.sh -y --skip-kmod" in result["reason"]
    )


@pytest.fixture(scope="module")
def unpullable(
    second_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, built: tuple[Path, str]
) -> dict[str, Any]:
    """On its own bridge and endpoint: the healthy nodes hold the addresses moto gives these."""
    out = tmp_path_factory.mktemp("unpullable")
    synthesize_cluster(
        out, "Trn1EfaNoImage", container_image="efa-cdk-e2e/not-in-any-registry:1", node_count="2"
    )
    stack = second_cluster.create_stack("Trn1EfaNoImage", out, "key-0e2e0000000000c02")
    nodes = second_cluster.boot(
        "u", stack, "ubuntu", [8, 8], settings(stack, EFA_CDK_PULL_PAUSE="1"), docker_image=built
    )
    second_cluster.wait(nodes)
    return {"stack": stack, "nodes": nodes}


def test_an_image_that_cannot_be_pulled_is_reported_and_rolls_nothing_back(
    second_cluster: Cluster, unpullable: dict[str, Any]
) -> None:
    nodes: list[Node] = unpullable["nodes"]
    signals = {
        s["LogicalResourceId"]: s["Status"]
        for s in second_cluster.signals()
        if s["StackName"] == "Trn1EfaNoImage"
    }
    assert signals == {n.logical_id: "SUCCESS" for n in nodes}, explain(nodes)  # EFA passed on the host
    body = second_cluster.handle(unpullable["stack"]["handle"])
    assert body is not None and body["Status"] == "SUCCESS", (body, explain(nodes))
    (result,) = json.loads(body["Data"])
    assert (result["benchmark"], result["ok"]) == ("container", False)
    assert result["image"] == "efa-cdk-e2e/not-in-any-registry:1"
    assert "could not pull efa-cdk-e2e/not-in-any-registry:1" in result["reason"]


def test_the_instance_types_devices_are_what_the_layout_attached() -> None:
    assert instance_type(TYPE).max_efa_interfaces == 8  # the 8 devices each node above was given
