"""Containers over EFA: the run line per accelerator, the container step with stubs, the stacks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from aws_cdk import Stack, assertions
from aws_cdk import aws_ec2 as ec2

from efa_constructs import EfaCluster
from efa_constructs.core import ContainerRun, instance_type
from stacks.cluster_stack import READY_CLUSTERS, EfaClusterStack
from stacks.params import ClusterParams
from tests.helpers import Node, by_type, executable, isolated_vpc, new_app

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free

FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"

COMMON = ["--net=host", "--ipc=host", "memlock=-1:-1", "--restart=unless-stopped", "/etc/efa-cdk/efa.env"]


@pytest.mark.parametrize(
    ("itype", "accelerator"),
    [
        ("p5.48xlarge", ["--gpus", "all"]),
        ("trn1.32xlarge", [f"--device=/dev/neuron{i}" for i in range(16)]),
        ("dl1.24xlarge", ["--runtime=habana", "-e", "HABANA_VISIBLE_DEVICES=all", "--cap-add=sys_nice"]),
        ("c5n.18xlarge", []),
    ],
)
def test_the_run_line_gives_the_container_every_efa_device_and_the_accelerators(
    itype: str, accelerator: list[str]
) -> None:
    args = ContainerRun("registry.example/train:1", ssh_port=3022).run_args(instance_type(itype))
    assert all(a in args for a in COMMON)
    assert "EFA_CDK_SSH_PORT=3022" in args
    assert args[len(args) - len(accelerator) :] == accelerator


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_the_ready_stacks_run_the_images_users_train_in() -> None:
    """Dl1 with a Gaudi image, P5 with an NGC PyTorch image, Trn1 with a Neuron DLC (issue 15)."""
    images = {
        "Dl1EfaCluster": "vault.habana.ai/gaudi-docker/example/pytorch-installer:example",
        "P5EfaCluster": "nvcr.io/nvidia/pytorch:example-py3",
        "Trn1EfaCluster": "123456789012.dkr.ecr.us-east-1.amazonaws.com/pytorch-training-neuronx:example",
    }
    for name, image in images.items():
        params = ClusterParams.from_context(
            {"availability_zone": "us-east-1a", "container_image": image},
            default_instance_type=READY_CLUSTERS[name],
        )
        t = assertions.Template.from_stack(EfaClusterStack(new_app(), name, params=params)).to_json()
        (lt,) = by_type(t, "AWS::EC2::LaunchTemplate")
        user_data = json.dumps(lt["Properties"]["LaunchTemplateData"]["UserData"])
        assert f"EFA_CDK_CONTAINER_IMAGE='{image}'" in user_data
        assert "hostfile container" in user_data  # after the hostfile, before the benchmarks


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_a_gaudi_container_on_the_default_image_is_warned_at_synth_and_a_chosen_image_is_not() -> None:
    """The default dl1 image has no Gaudi driver or habana runtime, so the container step would stop
    the deploy: synthesis says so first, naming the fix; with an image the user chose it is silent."""
    image = "vault.habana.ai/gaudi-docker/example/pytorch-installer:example"
    chosen = {"ami_id": "ami-0123456789abcdef0", "ami_os": "ubuntu"}
    for context, warned in (({}, True), ({"ami_refresh": "2026-12-01"}, True), (chosen, False)):
        params = ClusterParams.from_context(
            {"availability_zone": "us-east-1a", "container_image": image, **context},
            default_instance_type=READY_CLUSTERS["Dl1EfaCluster"],
        )
        stack = EfaClusterStack(new_app(), "Dl1EfaCluster", params=params)
        found = assertions.Annotations.from_stack(stack)
        warnings = found.find_warning("*", assertions.Match.string_like_regexp("Gaudi"))
        assert len(warnings) == (1 if warned else 0)  # once, in the ready stack's words (issue 41 item 14)
        if warned:
            said = str(warnings[0].entry.data)
            assert "-c <Stack>:ami_id=ami-..." in said and "1.21.0" in said and "machine_image=" not in said
    # in a user's own app: the construct's words, no -c
    stack = Stack(new_app(), "Mine")
    EfaCluster(stack, "C", vpc=isolated_vpc(stack), instance_type=ec2.InstanceType("dl1.24xlarge"),
               container=ContainerRun(image))  # fmt: skip
    (warning,) = assertions.Annotations.from_stack(stack).find_warning(
        "*", assertions.Match.string_like_regexp("Gaudi")
    )
    assert "machine_image=EfaMachineImage.from_ami_id(...)" in str(warning.entry.data)
    assert "-c " not in str(warning.entry.data)


def _node(
    tmp_path: Path, itype: str = "trn1.32xlarge", image: str = "registry.example/train:1", **settings: str
) -> Node:
    """A node of this type whose settings run `image` (and `settings` on top)."""
    node = Node(tmp_path, itype)
    for key, value in {**ContainerRun(image).settings(instance_type(itype)), **settings}.items():
        node.setting(key, value)
    return node


def _habana_runtime(node: Node) -> None:
    """The node image has the Gaudi container runtime."""
    executable(node.root / "usr/bin/habana-container-runtime")


def test_the_container_starts_with_ssh_inside_and_efa_checked_inside(tmp_path: Path) -> None:
    node = _node(tmp_path)
    node.run("hostfile")
    r = node.run("container")
    assert r.returncode == 0, r.log
    calls = node.calls("docker")
    assert any(c.startswith("docker pull -q registry.example/train:1") for c in calls)
    (run,) = [c for c in calls if c.startswith("docker run ")]
    efa = [f"--device={node.root}/dev/infiniband/uverbs{i}:/dev/infiniband/uverbs{i}" for i in range(8)]
    assert all(d in run.split() for d in efa) and "--device=/dev/infiniband " not in run
    assert "--device=/dev/neuron15" in run and "--net=host" in run and "--restart=unless-stopped" in run
    assert "registry.example/train:1 bash -c" in run and "sshd -D -e -p 3022" in run
    assert any("fi_info -p efa -t FI_EP_RDM" in c for c in calls)
    assert any(
        c.endswith("ssh -o BatchMode=yes -o ConnectTimeout=10 10.0.1.11 true") for c in calls
    )  # the leader
    assert "every node's container reachable on port 3022" in r.log


def test_only_the_efa_devices_reach_the_container_not_the_nvlink_controllers(tmp_path: Path) -> None:
    """p6-b200: 8 EFA devices and 2 mlx5 NVLink controllers under /sys/class/infiniband; passing the
    controllers' devices made fi_info -p efa fail inside the container (aws-samples/aws-do-eks PR #63)."""
    node = _node(tmp_path, "p6-b200.48xlarge")
    node.set_devices(8, others={"ibp0s1": "mlx5_core", "ibp1s1": "mlx5_core"})
    r = node.run("container")
    assert r.returncode == 0, r.log
    (run,) = [c for c in node.calls("docker") if c.startswith("docker run ")]
    devices = sorted(a.split(":")[-1] for a in run.split() if a.startswith("--device=") and "infiniband" in a)
    assert devices == [f"/dev/infiniband/uverbs{i}" for i in range(8)]  # uverbs8 and 9: the mlx5 ones


@pytest.mark.parametrize(
    ("fault", "env", "said"),
    [
        ("no EFA in the image", {"STUB_CONTAINER_EFA": "missing"}, "efa_installer.sh -y --skip-kmod"),
        ("cannot be pulled", {"STUB_PULL": "denied"}, "could not pull registry.example/train:1"),
    ],
)
def test_an_image_fault_is_the_clusters_result_and_rolls_nothing_back(
    tmp_path: Path, fault: str, env: dict[str, str], said: str
) -> None:
    """The node verified EFA on the host before: the stack completes, its BenchmarkResults name the
    image and the reason, and the steps that need the container do not run."""
    node = _node(tmp_path, EFA_CDK_PULL_PAUSE="0")
    r = node.run("container", "benchmarks", **env)
    assert r.returncode == 1 and said in r.log, fault
    posted = json.loads((node.stub_dir / "posted.json").read_text())
    assert posted["Status"] == "SUCCESS" and said in posted["Reason"]
    (result,) = json.loads(posted["Data"])
    assert (result["benchmark"], result["ok"], result["image"]) == (
        "container",
        False,
        "registry.example/train:1",
    )
    assert "step 2/2: benchmarks" not in r.log


def test_an_image_fault_fails_the_stack_with_strict_benchmarks(tmp_path: Path) -> None:
    node = _node(tmp_path, EFA_CDK_BENCHMARK_STRICT="1")
    r = node.run("container", STUB_CONTAINER_EFA="missing")
    assert r.returncode == 1 and "efa_installer.sh -y --skip-kmod --skip-limit-conf --no-verify" in r.log
    posted = json.loads((node.stub_dir / "posted.json").read_text())
    assert posted["Status"] == "FAILURE" and "efa_installer.sh" in posted["Reason"]


def test_an_unreachable_container_is_named(tmp_path: Path) -> None:
    node = _node(tmp_path, EFA_CDK_WAIT_SECONDS="1")
    node.run("hostfile")
    (node.stub_dir / "unreachable").write_text("10.0.1.11\n")
    r = node.run("container")
    assert r.returncode == 1 and "the container on 10.0.1.11 is not reachable over SSH on port 3022" in r.log


def test_the_benchmarks_run_inside_the_image_and_say_so(tmp_path: Path) -> None:
    node = _node(tmp_path, "p4d.24xlarge")
    shutil.copy(FIXTURES / "nccl-tests-2x-p4d.txt", node.stub_dir / "bench-output")
    shutil.copy(FIXTURES / "fi_pingpong-efa.txt", node.stub_dir / "pingpong-output")
    r = node.run("hostfile", "container", "benchmarks")
    assert r.returncode == 0, r.log
    results = json.loads(json.loads((node.stub_dir / "posted.json").read_text())["Data"])
    assert [(x["benchmark"], x["ok"], x["image"]) for x in results] == [
        ("nccl-tests", True, "registry.example/train:1"),
        ("fi_pingpong", True, "registry.example/train:1"),
    ]
    calls = node.calls("docker")
    (mpirun,) = [c for c in calls if c.startswith("docker exec efa-cdk mpirun")]
    assert "--allow-run-as-root" in mpirun and "--hostfile /efa-cdk/etc/hostfile" in mpirun
    assert mpirun.endswith("/opt/nccl-tests/build/all_reduce_perf -b 8 -e 1G -f 2 -g 1 -c 1 -n 100")
    assert not node.calls("mpirun")  # nothing on the host


def test_gaudi_registers_the_habana_runtime_or_says_what_the_image_lacks(tmp_path: Path) -> None:
    node = _node(tmp_path, "dl1.24xlarge", "registry.example/gaudi:1")
    r = node.run("container")
    assert r.returncode == 1 and "no habana-container-runtime on this image" in r.log
    _habana_runtime(node)
    (node.root / "etc/docker").mkdir(parents=True)
    (node.root / "etc/docker/daemon.json").write_text('{"log-driver": "json-file"}')
    r = node.run("container")
    assert r.returncode == 0, r.log
    daemon = json.loads(node.read("etc/docker/daemon.json"))
    assert daemon["log-driver"] == "json-file"  # the image's own settings are kept
    assert daemon["runtimes"]["habana"]["path"] == "/usr/bin/habana-container-runtime"
    assert "restart docker" in " ".join(node.calls("systemctl"))


def test_gaudi_runs_hccl_demo_in_the_image(tmp_path: Path) -> None:
    """hccl_demo (opt-in: it must be built in the image) over the hostfile, parsed like the others."""
    node = _node(tmp_path, "dl1.24xlarge", "registry.example/gaudi:1", EFA_CDK_BENCHMARKS="hccl_demo")
    _habana_runtime(node)
    shutil.copy(FIXTURES / "hccl_demo-2x-dl1.txt", node.stub_dir / "bench-output")
    r = node.run("hostfile", "container", "benchmarks")
    assert r.returncode == 0, r.log
    (result,) = json.loads(json.loads((node.stub_dir / "posted.json").read_text())["Data"])
    assert (result["benchmark"], result["peak_gbytes_s"], result["algo_gbytes_s"]) == (
        "hccl_demo",
        21.73,
        11.59,
    )
    (demo,) = [c for c in node.calls("docker") if "run_hccl_demo.py --test" in c]
    assert "-mpi --hostfile /efa-cdk/etc/hostfile" in demo
