"""The node software's logic, run for real with stub commands first on PATH.

Each test builds a node's file tree under a scratch root ($EFA_CDK_ROOT), writes the settings the
cluster would render, puts stubs for the AWS CLI, IMDS (curl), gpg, fi_info, ssh, mpirun and
friends on PATH, and runs the shipped scripts with bash. The stubs record every call, so the tests
check what a node would have told CloudFormation.

What this proves: the order of steps, fail-closed installer checks, the verification and the
failure signals, the hostfile, the benchmark report. What it does NOT prove: behaviour on a real
EC2 instance (no AWS account here): the stubs answer the way the documented APIs do.
"""

from __future__ import annotations

import http.server
import json
import re
import shutil
import subprocess
import threading
import urllib.parse
from pathlib import Path
from typing import Any, ClassVar

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from efa_constructs import EfaUserData
from efa_constructs.core.benchmarks import Benchmark
from efa_constructs.core.software import EFA_INSTALLER_FINGERPRINT, EFA_INSTALLER_VERSION, bootstrap_script
from tests.helpers import BASH, FIXTURES, GENERATION, THIS_INSTANCE, Node, executable

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free

BOOT = ("install-efa", "efa-env", "ssh-keys", "verify-efa", "signal", "hostfile")


def test_healthy_node_signals_success_and_writes_everything(tmp_path: Path) -> None:
    node = Node(tmp_path)
    r = node.run(*BOOT)
    assert r.returncode == 0, r.log
    (signal,) = node.signals()
    assert "--status SUCCESS" in signal and "--logical-resource-id ClusterNode0ABCD1234" in signal
    assert "--stack-name Trn1EfaCluster" in signal and "--unique-id i-0123456789abcdef0 " in signal + " "
    assert "skipping the installer" in r.log and not node.calls("gpg")  # DLAMI: EFA already there
    assert [line.rsplit(": ", 1)[1] for line in r.log.splitlines() if "==> step" in line] == list(BOOT)
    env = node.read("etc/efa-cdk/efa.env").splitlines()
    assert env == [
        "FI_PROVIDER=efa",
        "FI_EFA_USE_DEVICE_RDMA=1",
        "EFA_LIBDIR=/opt/amazon/efa/lib",
    ]  # trn1: RDMA
    profile = node.read("etc/profile.d/efa-cdk.sh")
    assert "export FI_EFA_USE_DEVICE_RDMA=1" in profile and "/opt/amazon/efa/lib:" in profile
    assert "export FI_PROVIDER" not in profile  # only the cluster's jobs are forced onto EFA
    assert node.read("etc/efa-cdk/hostfile") == "10.0.1.10 slots=32\n10.0.1.11 slots=32\n"
    assert node.read("home/ubuntu/hostfile") == node.read("etc/efa-cdk/hostfile")
    assert node.read("home/ubuntu/.ssh/authorized_keys") == "ssh-ed25519 AAAAC3stub efa-cdk\n"
    assert "Include ~/.ssh/config.efa-cdk" in node.read("home/ubuntu/.ssh/config")
    assert oct((node.root / "home/ubuntu/.ssh/id_efa_cdk").stat().st_mode & 0o777) == "0o600"
    assert (node.root / "var/lib/efa-cdk/verified").exists()
    assert any("/ec2/keypair/key-0123456789abcdef0" in c for c in node.calls("aws"))


@pytest.mark.parametrize(
    ("cidr", "hosts"),
    [("10.0.0.0/16", "10.0.*"), ("172.31.16.0/20", "172.31.*"), ("192.168.7.0/24", "192.168.7.*")],
)
def test_ssh_trusts_the_vpc_addresses_and_remembers_no_host_keys(
    tmp_path: Path, cidr: str, hosts: str
) -> None:
    node = Node(tmp_path, EFA_CDK_VPC_CIDR=cidr)
    r = node.run("ssh-keys")
    assert r.returncode == 0, r.log
    config = node.read("home/ubuntu/.ssh/config.efa-cdk").splitlines()
    assert config[0] == f"Host {hosts}"
    # a replaced node comes back with a new host key at the same address: nothing to refuse it with
    assert "  StrictHostKeyChecking no" in config and "  UserKnownHostsFile /dev/null" in config


def test_rerun_does_not_duplicate_the_authorized_key(tmp_path: Path) -> None:
    node = Node(tmp_path)
    assert node.run("ssh-keys").returncode == 0
    assert node.run("ssh-keys").returncode == 0
    assert node.read("home/ubuntu/.ssh/authorized_keys").count("ssh-ed25519") == 1
    assert node.read("home/ubuntu/.ssh/config").count("Include") == 1


def test_no_rdma_on_p3dn_and_fork_safe_on_old_kernels_and_lib64_on_amazon_linux(tmp_path: Path) -> None:
    node = Node(tmp_path, "p3dn.24xlarge")
    (node.root / "etc/os-release").write_text('ID="amzn"\nVERSION_ID="2"\n')
    r = node.run("efa-env", STUB_KERNEL="5.10.210-201.852.amzn2.x86_64")
    assert r.returncode == 0, r.log
    assert node.read("etc/efa-cdk/efa.env").splitlines() == [
        "FI_PROVIDER=efa",
        "FI_EFA_FORK_SAFE=1",
        "EFA_LIBDIR=/opt/amazon/efa/lib64",
    ]


def test_efa_missing_fails_the_node_with_its_reason(tmp_path: Path) -> None:
    node = Node(tmp_path)
    r = node.run(*BOOT, STUB_FI_INFO="broken")
    assert r.returncode == 1
    (signal,) = node.signals()
    assert "--status FAILURE" in signal
    uid = signal.split("--unique-id ")[1].split(" ")[0]
    assert uid.startswith("i-0123456789abcdef0-verify-efa-fi-info") and len(uid) <= 64
    assert "fi_info -p efa -t FI_EP_RDM failed" in r.log
    assert not (node.root / "var/lib/efa-cdk/verified").exists()
    assert not node.calls("aws") or not any("describe-instances" in c for c in node.calls("aws"))  # stopped


def test_p6_b200_counts_its_8_efas_not_its_nvlink_controllers(tmp_path: Path) -> None:
    """10 entries in /sys/class/infiniband: 8 EFA (driver efa) + 2 NVLink (ibp*, another driver)."""
    node = Node(tmp_path, "p6-b200.48xlarge")
    node.set_devices(8, others={"ibp0s0": "mlx5_core", "ibp1s0": "mlx5_core"})
    r = node.run("efa-env", "verify-efa")  # in boot order: the jobs' paths first
    assert r.returncode == 0, r.log
    assert "EFA verified: provider efa, 8 devices" in r.log
    assert "not EFA, not counted: ibp0s0(mlx5_core) ibp1s0(mlx5_core)" in r.log


def test_p5_verifies_its_32_efas(tmp_path: Path) -> None:
    node = Node(tmp_path, "p5.48xlarge")
    r = node.run("efa-env", "verify-efa")  # in boot order: the jobs' paths first
    assert r.returncode == 0, r.log
    assert "EFA verified: provider efa, 32 devices" in r.log


def test_p6_b200_with_7_of_8_efas_fails_with_the_reason(tmp_path: Path) -> None:
    node = Node(tmp_path, "p6-b200.48xlarge")
    node.set_devices(7, others={"ibp0s0": "mlx5_core", "ibp1s0": "mlx5_core"})
    r = node.run(*BOOT)
    assert r.returncode == 1
    assert "found 7 EFA devices, the launch template attached 8" in r.log
    (signal,) = node.signals()
    assert "--status FAILURE" in signal and "verify-efa" in signal


def test_wrong_device_count_fails_the_node(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.set_devices(7)
    r = node.run(*BOOT)
    assert r.returncode == 1
    assert "found 7 EFA devices, the launch template attached 8" in r.log
    assert "--status FAILURE" in node.signals()[0] and "found-7-EFA-devices" in node.signals()[0]


def test_installer_verified_then_run_with_flags(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.efa_installed(False)
    node.installer_tarball()
    node.setting("EFA_CDK_INSTALLER_FLAGS", "--skip-kmod")
    r = node.run("install-efa")
    assert r.returncode == 0, r.log
    assert node.read("installer-ran").split() == ["-y", "--skip-kmod"]
    assert f"signature by {EFA_INSTALLER_FINGERPRINT} verified" in r.log


@pytest.mark.parametrize(
    ("os_release", "dropped"),
    [('ID=amzn\nVERSION_ID="2"\n', "1.50.0"), ('ID=debian\nVERSION_ID="11"\n', "1.51.0"),
     ('ID=ubuntu\nVERSION_ID="20.04"\n', "1.43.0")],
)  # fmt: skip
def test_installer_refuses_an_os_it_dropped_with_the_reason(
    tmp_path: Path, os_release: str, dropped: str
) -> None:
    node = Node(tmp_path)
    node.efa_installed(False)
    node.installer_tarball()
    (node.root / "etc/os-release").write_text(os_release)
    r = node.run(*BOOT)
    assert r.returncode == 1
    assert (
        f"EFA installer {EFA_INSTALLER_VERSION} does not support" in r.log
        and f"(dropped in {dropped})" in r.log
    )
    assert not (node.root / "installer-ran").exists()
    (signal,) = node.signals()
    assert "--status FAILURE" in signal and "install-efa" in signal


def test_an_older_pinned_installer_still_installs_on_that_os(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.efa_installed(False)
    node.installer_tarball()
    (node.root / "etc/os-release").write_text('ID=amzn\nVERSION_ID="2"\n')
    node.setting("EFA_CDK_INSTALLER_VERSION", "1.49.0")  # the last one with Amazon Linux 2
    for f in (node.stub_dir / "downloads").glob(f"aws-efa-installer-{EFA_INSTALLER_VERSION}*"):
        f.rename(f.with_name(f.name.replace(EFA_INSTALLER_VERSION, "1.49.0")))
    r = node.run("install-efa")
    assert r.returncode == 0, r.log
    assert (node.root / "installer-ran").exists()


def test_installer_without_a_pinned_sha256_is_trusted_on_its_signature(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.efa_installed(False)
    node.installer_tarball(sha256="")
    r = node.run("install-efa")
    assert r.returncode == 0, r.log
    assert "SHA-256" not in r.log and f"signature by {EFA_INSTALLER_FINGERPRINT} verified" in r.log


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("bad-signature", "does not verify against key"),
        ("other-key", "expected " + EFA_INSTALLER_FINGERPRINT),
        ("bad-sha256", "has SHA-256"),
        ("no-download", "could not download"),
    ],
)
def test_installer_fails_closed(tmp_path: Path, case: str, expected: str) -> None:
    node = Node(tmp_path)
    node.efa_installed(False)
    node.installer_tarball(sha256="0" * 64 if case == "bad-sha256" else None)
    env = {"STUB_SIGNATURE": "bad"} if case == "bad-signature" else {}
    if case == "other-key":
        env["STUB_KEY_FPR"] = "0" * 40
    if case == "no-download":
        (node.stub_dir / "downloads" / f"aws-efa-installer-{EFA_INSTALLER_VERSION}.tar.gz.sig").unlink()
    r = node.run(*BOOT, **env)
    assert r.returncode == 1
    assert expected in r.log
    assert not (node.root / "installer-ran").exists()  # nothing from the tarball ran
    (signal,) = node.signals()
    assert "--status FAILURE" in signal and "install-efa" in signal


def test_node_that_never_comes_up_fails_the_hostfile_with_the_missing_count(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.cluster(["10.0.1.10"], count=2)
    r = node.run(*BOOT)
    assert r.returncode == 1
    assert "1 of 2 nodes of this generation came up within 1s (found: 10.0.1.10)" in r.log
    # This node's own signal (SUCCESS) went out before; the stack's benchmark wait condition gets the
    # failure at once, with the reason, instead of timing out an hour later.
    assert [s.split("--status ")[1].split()[0] for s in node.signals()] == ["SUCCESS"]
    body = json.loads((node.stub_dir / "posted.json").read_text())
    assert (
        body["Status"] == "FAILURE" and "hostfile: 1 of 2 nodes of this generation came up" in body["Reason"]
    )


def test_leader_benchmarks_report_to_the_wait_condition(tmp_path: Path) -> None:
    node = Node(tmp_path, "p4d.24xlarge")
    shutil.copy(FIXTURES / "nccl-tests-2x-p4d.txt", node.stub_dir / "bench-output")
    shutil.copy(FIXTURES / "fi_pingpong-efa.txt", node.stub_dir / "pingpong-output")
    tests = _cuda(node, "12.8", "13.0", default="12.8")  # /usr/local/cuda -> cuda-12.8
    r = node.run("hostfile", "benchmarks")
    assert r.returncode == 0, r.log
    body = json.loads((node.stub_dir / "posted.json").read_text())
    assert body["Status"] == "SUCCESS" and body["UniqueId"] == "benchmarks"
    results = json.loads(body["Data"])
    assert [(x["benchmark"], x["peak_gbytes_s"]) for x in results] == [
        ("nccl-tests", 32.84),
        ("fi_pingpong", 2.36),
    ]
    # the collective against the node's 400 Gbps, fi_pingpong (one EFA) against one card's 100 Gbps
    assert [x["line_rate_fraction"] for x in results] == [
        round(32.84 * 8 / 400, 3),
        round(2.359 * 8 / 100, 3),
    ]
    assert json.loads(node.read("var/lib/efa-cdk/benchmarks.json")) == body  # kept on the node
    (mpirun,) = node.calls("mpirun")
    assert "-n 16 -N 8" in mpirun and "-x FI_EFA_USE_DEVICE_RDMA=1" in mpirun and "NCCL_DEBUG=INFO" in mpirun
    # by absolute path with --prefix: remote orted is found over non-interactive SSH
    assert f"--prefix {node.root}/opt/amazon/openmpi " in mpirun
    # the nccl-tests and libraries of the CUDA /usr/local/cuda points to, not another one installed
    assert mpirun.endswith(f"{tests}/all_reduce_perf -b 8 -e 1G -f 2 -g 1 -c 1 -n 100")
    libs = (node.stub_dir / "mpirun-ld-library-path").read_text().split(":")
    cuda = f"{node.root}/usr/local/cuda-12.8"
    assert libs[:3] == [f"{cuda}/efa/lib", f"{cuda}/lib", f"{cuda}/lib64"]


def _cuda(node: Node, *versions: str, default: str) -> Path:
    """The GPU DLAMI's layout: /usr/local/cuda-X.Y/efa/test-cuda-X.Y/all_reduce_perf per CUDA, and
    /usr/local/cuda a link to the default one. Returns the default's test directory."""
    for v in versions:
        executable(node.root / f"usr/local/cuda-{v}/efa/test-cuda-{v}/all_reduce_perf")
    (node.root / "usr/local/cuda").symlink_to(f"cuda-{default}")
    return node.root / f"usr/local/cuda-{default}/efa/test-cuda-{default}"


@pytest.mark.parametrize("strict", ["1", "0"])
def test_benchmark_that_falls_back_to_sockets_is_reported(tmp_path: Path, strict: str) -> None:
    """Strict: the wait condition fails. Not strict (the default): the problem is in the results and
    the verified cluster stays."""
    node = Node(tmp_path, "p4d.24xlarge", EFA_CDK_BENCHMARKS="nccl-tests", EFA_CDK_BENCHMARK_STRICT=strict)
    text = (
        (FIXTURES / "nccl-tests-2x-p4d.txt").read_text().replace("Selected Provider is efa", "Using Socket")
    )
    (node.stub_dir / "bench-output").write_text(text)
    executable(node.stub_dir / "nt" / "all_reduce_perf")
    r = node.run("hostfile", "benchmarks", EFA_CDK_NCCL_TESTS=str(node.stub_dir / "nt"))
    body = json.loads((node.stub_dir / "posted.json").read_text())
    assert "not efa" in body["Reason"] and json.loads(body["Data"])[0]["ok"] is False
    assert (r.returncode, body["Status"]) == ((1, "FAILURE") if strict == "1" else (0, "SUCCESS")), r.log
    assert not node.signals()  # after the node's own signal: reported to the wait condition only


def test_missing_benchmark_tool_is_reported_by_name(tmp_path: Path) -> None:
    node = Node(tmp_path, "p4d.24xlarge", EFA_CDK_BENCHMARKS="nccl-tests")
    r = node.run("hostfile", "benchmarks", EFA_CDK_NCCL_TESTS=str(tmp_path / "nowhere"))
    assert r.returncode == 0, r.log  # not strict: reported, the cluster stays
    body = json.loads((node.stub_dir / "posted.json").read_text())
    assert body["Status"] == "SUCCESS" and "all_reduce_perf not found" in body["Reason"]


def test_trainium_leader_runs_nccom_test_across_all_hosts(tmp_path: Path) -> None:
    node = Node(tmp_path, EFA_CDK_BENCHMARKS=Benchmark.NCCOM_TEST.value)
    shutil.copy(FIXTURES / "nccom-test-2x-trn1.txt", node.stub_dir / "bench-output")
    r = node.run("hostfile", "benchmarks")
    assert r.returncode == 0, r.log
    (call,) = node.calls("nccom-test")
    assert (
        call == "nccom-test -r 64 -N 2 -b 8 -e 1GB -f 2 -n 20 -w 5 -d fp32 allr --hosts 10.0.1.10 10.0.1.11"
    )
    results = json.loads(json.loads((node.stub_dir / "posted.json").read_text())["Data"])
    assert results[0]["peak_gbytes_s"] == 47.09


def test_unreachable_node_stops_the_benchmarks_with_its_address(tmp_path: Path) -> None:
    node = Node(tmp_path)
    (node.stub_dir / "unreachable").write_text("10.0.1.11\n")
    r = node.run("hostfile", "benchmarks")
    assert r.returncode == 1
    assert "node(s) 10.0.1.11 never verified EFA or are unreachable over SSH" in r.log
    assert "step 2/2" not in r.log  # the leader stops in the hostfile step
    body = json.loads((node.stub_dir / "posted.json").read_text())  # an EFA fault: FAILURE, strict or not
    assert body["Status"] == "FAILURE" and "10.0.1.11 never verified EFA" in body["Reason"]


def test_followers_do_not_benchmark_or_poll_ec2(tmp_path: Path) -> None:
    """An explicit follower asks EC2 nothing: the leader lists the nodes and copies it the hostfile. It
    reads one SSM parameter: whether the cluster formed already (then it joins instead)."""
    node = Node(tmp_path, index=1)
    (node.root / "etc/efa-cdk/hostfile").write_text("10.0.1.10 slots=32\n10.0.1.11 slots=32\n")
    r = node.run("hostfile", "benchmarks")
    assert r.returncode == 0, r.log
    assert "not the leader" in r.log and not (node.stub_dir / "posted.json").exists()
    (call,) = node.calls("aws")
    assert " ssm get-parameter --name /efa-cdk/Trn1EfaCluster/Cluster/formed " in call


def test_the_leader_gives_every_node_the_hostfile_in_parallel(tmp_path: Path) -> None:
    node = Node(tmp_path)
    r = node.run("hostfile")
    assert r.returncode == 0, r.log
    copies = [c for c in node.calls("ssh") if c.endswith("10.0.1.11 cat > hostfile")]
    assert len(copies) == 1
    assert "all 2 nodes verified EFA and have the hostfile" in r.log


def test_auto_scaling_nodes_poll_with_jittered_backoff(tmp_path: Path) -> None:
    """Without a node index (Auto Scaling), every node lists the group, less often each time."""
    node = Node(tmp_path, EFA_CDK_WAIT_SECONDS="3", EFA_CDK_POLL_SECONDS="8")
    node.cluster(["10.0.1.10", "10.0.1.11"], count=3, indexed=False)  # 3 wanted, never reached
    r = node.run("hostfile")
    assert r.returncode == 1
    pauses = [int(line.rsplit(" ", 1)[1][:-1]) for line in r.log.splitlines() if "looking again in" in line]
    caps = [8, 16, 32, 64, 128, 128, 128]
    assert pauses and all(c // 2 <= p <= c for p, c in zip(pauses, caps, strict=False)), pauses


def test_single_node_reports_skipped(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.cluster(["10.0.1.10"], count=1)
    r = node.run("hostfile", "benchmarks")
    assert r.returncode == 0, r.log
    body = json.loads((node.stub_dir / "posted.json").read_text())
    assert body["Status"] == "SUCCESS" and "one node" in body["Data"]


def test_user_step_runs_before_verification_and_its_failure_is_signalled(tmp_path: Path) -> None:
    node = Node(tmp_path)
    software = EfaUserData().add_commands("install-tools", 'echo tools > "$EFA_CDK_ROOT/tools"', "false")
    software.stage(node.bin)
    steps = software.step_names(())
    assert steps.index("install-tools") < steps.index("verify-efa")
    r = node.run(*steps)
    assert r.returncode == 1 and node.read("tools") == "tools\n"
    assert "install-tools" in node.signals()[0] and "--status FAILURE" in node.signals()[0]


OLD, NEW = "2026-11-01T10:00:00+00:00", "2026-11-22T10:00:00+00:00"


def test_during_a_replacement_the_hostfile_lists_the_new_nodes_only(tmp_path: Path) -> None:
    """CloudFormation creates the replacement before it deletes the old node: both run for a while."""
    node = Node(tmp_path)
    node.instances(
        [
            (0, "10.0.1.10", OLD, None, "i-00000000000000a00"),
            (1, "10.0.1.11", OLD, None, "i-00000000000000a01"),
            (1, "10.0.1.21", NEW, None, "i-00000000000000b01"),
            (0, "10.0.1.20", NEW, None, THIS_INSTANCE),
            (2, "10.0.1.12", OLD, None, "i-00000000000000a02"),  # node 2 of 3, being removed (count now 2)
        ],
        count=2,
    )
    r = node.run("hostfile")
    assert r.returncode == 0, r.log
    assert node.read("etc/efa-cdk/hostfile").split() == ["10.0.1.20", "slots=32", "10.0.1.21", "slots=32"]


def test_an_auto_scaling_node_counts_its_own_group_only(tmp_path: Path) -> None:
    """A launch-template change replaces the whole group: the old group's nodes still run meanwhile."""
    node = Node(tmp_path)
    node.instances(
        [
            (None, "10.0.1.5", OLD, "Cluster-Nodes-OLD", "i-00000000000000a00"),
            (None, "10.0.1.6", OLD, "Cluster-Nodes-OLD", "i-00000000000000a01"),
            (None, "10.0.1.30", NEW, "Cluster-Nodes-NEW", THIS_INSTANCE),
            (None, "10.0.1.31", NEW, "Cluster-Nodes-NEW", "i-00000000000000b01"),
        ],
        count=2,
    )
    r = node.run("hostfile")
    assert r.returncode == 0, r.log
    assert node.read("etc/efa-cdk/hostfile").split() == ["10.0.1.30", "slots=32", "10.0.1.31", "slots=32"]


def test_auto_scaling_nodes_are_ordered_by_address_and_the_lowest_leads(tmp_path: Path) -> None:
    node = Node(tmp_path, EFA_CDK_BENCHMARKS="fi_pingpong")
    node.cluster(["10.0.1.10", "10.0.1.9", "10.0.2.1"], count=3, indexed=False)  # no node-index tags
    (node.stub_dir / "local-ipv4").write_text("10.0.1.9\n")
    shutil.copy(FIXTURES / "fi_pingpong-efa.txt", node.stub_dir / "pingpong-output")
    r = node.run("hostfile", "benchmarks")
    assert r.returncode == 0, r.log
    assert node.read("etc/efa-cdk/hostfile").split() == [
        "10.0.1.9",
        "slots=32",
        "10.0.1.10",
        "slots=32",
        "10.0.2.1",
        "slots=32",
    ]
    assert json.loads((node.stub_dir / "posted.json").read_text())["Status"] == "SUCCESS"


def test_fi_pingpong_tries_again_while_its_server_is_still_starting(tmp_path: Path) -> None:
    """fabtests' client connects once: refused while the server starts over SSH, it is run again; a
    client that fails another way is not (its failure is the benchmark's reason)."""
    node = Node(tmp_path, EFA_CDK_BENCHMARKS="fi_pingpong")
    node.cluster(["10.0.1.9", "10.0.1.10"], count=2)
    (node.stub_dir / "local-ipv4").write_text("10.0.1.9\n")
    shutil.copy(FIXTURES / "fi_pingpong-efa.txt", node.stub_dir / "pingpong-output")
    refusing = (  # refused twice (fabtests' own message), then the table
        'n=$(cat "$STUB_DIR/pingpong-tries" 2>/dev/null || echo 0)\n'
        'echo $((n + 1)) >"$STUB_DIR/pingpong-tries"\n'
        '[ "$n" -ge 2 ] || { echo "failed to connect: Connection refused"; exit 1; }\n'
        'cat "$STUB_DIR/pingpong-output"\n'
    )
    executable(node.stub_dir / "bin/fi_pingpong", refusing)
    r = node.run("hostfile", "benchmarks")
    assert r.returncode == 0, r.log
    assert (node.stub_dir / "pingpong-tries").read_text().strip() == "3"
    (result,) = json.loads(json.loads((node.stub_dir / "posted.json").read_text())["Data"])
    assert result["ok"] is True and result["peak_gbytes_s"] == 2.36
    # another failure: one try, and its last line is the reason
    node = Node(tmp_path / "other", EFA_CDK_BENCHMARKS="fi_pingpong")
    node.cluster(["10.0.1.9", "10.0.1.10"], count=2)
    (node.stub_dir / "local-ipv4").write_text("10.0.1.9\n")
    executable(
        node.stub_dir / "bin/fi_pingpong",
        'echo x >>"$STUB_DIR/pingpong-tries"; echo "fi_getinfo: -61"; exit 1\n',
    )
    r = node.run("hostfile", "benchmarks")
    assert (node.stub_dir / "pingpong-tries").read_text() == "x\n"
    (result,) = json.loads(json.loads((node.stub_dir / "posted.json").read_text())["Data"])
    assert result["ok"] is False and "fi_getinfo: -61" in result["reason"], r.log


@pytest.mark.parametrize(
    ("iterations", "ok"), [(None, True), ("100", True), ("0", False), ("1; reboot", False)]
)
def test_fi_pingpong_runs_the_iterations_asked_on_both_sides(
    tmp_path: Path, iterations: str | None, ok: bool
) -> None:
    """EFA_CDK_PINGPONG_ITERATIONS (default 1000): the same -I for the server and the client (fabtests'
    pingpong runs the size list with it on both); anything but a count is the benchmark's reason."""
    extra = {} if iterations is None else {"EFA_CDK_PINGPONG_ITERATIONS": iterations}
    node = Node(tmp_path, EFA_CDK_BENCHMARKS="fi_pingpong", **extra)
    node.cluster(["10.0.1.9", "10.0.1.10"], count=2)
    (node.stub_dir / "local-ipv4").write_text("10.0.1.9\n")
    shutil.copy(FIXTURES / "fi_pingpong-efa.txt", node.stub_dir / "pingpong-output")
    r = node.run("hostfile", "benchmarks")
    (result,) = json.loads(json.loads((node.stub_dir / "posted.json").read_text())["Data"])
    assert result["ok"] is ok, r.log
    if ok:
        want = f"-I {iterations or 1000} -S all"
        (client,) = node.calls("fi_pingpong")
        (server,) = [c for c in node.calls("ssh") if "fi_pingpong" in c]
        assert want in client and want in server
    else:
        assert "is not a count" in result["reason"]


def test_a_success_nobody_waits_for_is_not_an_error(tmp_path: Path) -> None:
    """A node an Auto Scaling group adds on a resize: its signal has no CloudFormation operation."""
    node = Node(tmp_path)
    r = node.run("verify-efa", "signal", "hostfile", STUB_SIGNAL_FAILS="1")
    assert r.returncode == 0, r.log
    assert "nothing waits" not in r.log and "no CloudFormation operation waits" in r.log
    failed = node.run("signal", STUB_SIGNAL_FAILS="1")  # run by hand without a reason: still fine
    assert failed.returncode == 0
    bad = node.run("verify-efa", "signal", STUB_SIGNAL_FAILS="1", STUB_FI_INFO="broken")
    assert bad.returncode == 1 and "could not signal FAILURE" in bad.log


# --- an image without the AWS CLI (issue 23 item 9) ------------------------------------------------

ROLE_CREDENTIALS = {
    "Code": "Success",
    "AccessKeyId": "ASIAEXAMPLEEXAMPLE12",
    "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "Token": "IQoJb3JpZ2luX2VjEXAMPLE//token+with/slashes=",
}


class _ImdsAndCloudFormation(http.server.BaseHTTPRequestHandler):
    """IMDS's documented paths, and CloudFormation's query endpoint recording each POST."""

    posts: ClassVar[list[tuple[dict[str, str], bytes]]] = []

    def do_PUT(self) -> None:
        self._answer("tok")

    def do_GET(self) -> None:
        answers = {
            "/latest/meta-data/instance-id": THIS_INSTANCE,
            "/latest/meta-data/tags/instance/efa-cdk:logical-id": "ClusterNode0ABCD1234",
            "/latest/meta-data/iam/security-credentials/": "EfaNodeRole",
            "/latest/meta-data/iam/security-credentials/EfaNodeRole": json.dumps(ROLE_CREDENTIALS, indent=2),
        }
        self._answer(answers[self.path]) if self.path in answers else self.send_error(404)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).posts.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self._answer("<SignalResourceResponse/>")

    def _answer(self, text: str) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(text.encode())

    def log_message(self, *args: Any) -> None:
        pass


def test_an_image_without_the_aws_cli_fails_its_node_at_once_with_a_signed_signal(tmp_path: Path) -> None:
    """No `aws` on PATH: the bootstrap stops before anything else and sends FAILURE to the node's
    CreationPolicy itself, with Debian's real curl signing the request (--aws-sigv4) with the role's
    credentials from IMDS; botocore's SigV4 signer, given the same request, computes the same signature."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ImdsAndCloudFormation)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    (tmp_path / "b.sh").write_text(
        bootstrap_script({"EFA_CDK_STACK": "Trn1EfaCluster", "EFA_CDK_REGION": "us-east-1"})
    )
    try:
        run = subprocess.run(
            [BASH, str(tmp_path / "b.sh")],
            env={"PATH": "/usr/bin:/bin", "EFA_CDK_ROOT": str(tmp_path / "root"), "EFA_CDK_IMDS_URL": url,
                 "AWS_ENDPOINT_URL": url},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        server.shutdown()
    assert run.returncode == 1 and "this image has no AWS CLI" in run.stdout + run.stderr
    (headers, body), *_ = _ImdsAndCloudFormation.posts
    form = urllib.parse.parse_qs(body.decode())
    assert {k: v[0] for k, v in form.items()} == {
        "Action": "SignalResource",
        "Version": "2010-05-15",
        "StackName": "Trn1EfaCluster",
        "LogicalResourceId": "ClusterNode0ABCD1234",
        "UniqueId": f"{THIS_INSTANCE}-no-aws-cli",
        "Status": "FAILURE",
    }
    assert headers["x-amz-security-token"] == ROLE_CREDENTIALS["Token"]
    scope, signed, signature = re.fullmatch(
        r"AWS4-HMAC-SHA256 Credential=(\S+), SignedHeaders=(\S+), Signature=(\w+)", headers["authorization"]
    ).groups()  # type: ignore[union-attr]
    assert scope.startswith(ROLE_CREDENTIALS["AccessKeyId"] + "/") and scope.endswith(
        "/us-east-1/cloudformation/aws4_request"
    )
    request = AWSRequest(
        method="POST", url=url + "/", data=body, headers={h: headers[h] for h in signed.split(";")}
    )
    request.context["timestamp"] = headers["x-amz-date"]
    signer = SigV4Auth(
        Credentials(
            ROLE_CREDENTIALS["AccessKeyId"], ROLE_CREDENTIALS["SecretAccessKey"], ROLE_CREDENTIALS["Token"]
        ),
        "cloudformation",
        "us-east-1",
    )
    canonical = signer.canonical_request(request)
    assert signer.signature(signer.string_to_sign(request, canonical), request) == signature


def test_twelve_nodes_are_listed_in_numeric_index_order(tmp_path: Path) -> None:
    """Node 10 comes after node 9, not after node 1 (a text sort of the index would put it there), and
    index order is not address order here (addresses descend)."""
    node = Node(tmp_path)
    ips = [f"10.0.1.{100 - i}" for i in range(12)]
    node.cluster(ips, count=12)
    r = node.run("hostfile")
    assert r.returncode == 0, r.log
    hosts = [line.split()[0] for line in node.read("etc/efa-cdk/hostfile").splitlines()]
    assert hosts == ips


def test_verify_efa_refuses_a_libfabric_that_lists_another_provider(tmp_path: Path) -> None:
    """fi_info exits 0 but lists tcp, not efa (the EFA provider missing from the libfabric on PATH)."""
    node = Node(tmp_path)
    executable(
        node.stub_dir / "bin" / "fi_info", "#!/bin/bash\nprintf 'provider: tcp\\n    fabric: tcp\\n'\n"
    )
    r = node.run("verify-efa", "signal")
    assert r.returncode == 1 and "fi_info did not list the efa provider" in r.log
    (signal,) = node.signals()
    assert "--status FAILURE" in signal


# --- issue 34 item 3: hostfiles that follow the cluster after it formed


def test_the_leader_marks_the_cluster_formed_once_every_node_has_the_hostfile(tmp_path: Path) -> None:
    """Formed by its generation (issue 41 item 2): the explicit nodes' efa-cdk:generation tag."""
    node = Node(tmp_path)
    assert node.run("hostfile").returncode == 0
    assert (node.stub_dir / "formed").read_text() == f"{GENERATION}\n"


def test_a_new_generation_forms_anew_from_its_own_nodes_and_benchmarks(tmp_path: Path) -> None:
    """Issue 41 item 2: every node replaced (a new launch template: its hash is the new generation)
    while the old generation is marked formed and its nodes still run. The new node 0 does not join:
    it lists only its generation's nodes (never an old one, though the old one of index 2 is newer
    than nothing), reaches each over SSH, marks its generation formed and runs the benchmarks, which
    it keeps in the results parameter (the wait condition completed at creation: best effort)."""
    node = Node(tmp_path, EFA_CDK_BENCHMARKS="fi_pingpong",
                EFA_CDK_RESULTS_PARAMETER="/efa-cdk/Trn1EfaCluster/Cluster/benchmark-results")  # fmt: skip
    (node.stub_dir / "formed").write_text("00000000000000aa\n")  # the old generation
    node.instances(
        [
            (0, "10.0.1.5", OLD, None, "i-00000000000000a00", "00000000000000aa"),
            (1, "10.0.1.6", OLD, None, "i-00000000000000a01", "00000000000000aa"),
            (2, "10.0.1.7", NEW, None, "i-00000000000000a02", "00000000000000aa"),
            (0, "10.0.1.10", NEW, None, THIS_INSTANCE),
            (1, "10.0.1.11", NEW, None, "i-00000000000000b01"),
        ],
        count=2,
    )
    r = node.run("hostfile", "benchmarks")
    assert r.returncode == 0, r.log
    assert node.read("etc/efa-cdk/hostfile").split()[::2] == ["10.0.1.10", "10.0.1.11"]
    assert (node.stub_dir / "formed").read_text() == f"{GENERATION}\n"
    assert "joined" not in r.log and "running fi_pingpong" in r.log
    kept = json.loads((node.stub_dir / "results").read_text())
    assert kept["generation"] == GENERATION and kept["data"][0]["benchmark"] == "fi_pingpong"


def test_an_old_generations_node_never_stands_in_for_a_new_one_not_yet_launched(tmp_path: Path) -> None:
    """While CloudFormation launches the new generation, the old node 1 still runs and the new node 1
    is not there yet: the leader waits for its own generation's node 1 (here until its short deadline)
    instead of forming with the old one."""
    node = Node(tmp_path, EFA_CDK_WAIT_SECONDS="1", EFA_CDK_POLL_SECONDS="1")
    (node.stub_dir / "formed").write_text("00000000000000aa\n")
    node.instances([(0, "10.0.1.5", OLD, None, "i-00000000000000a00", "00000000000000aa"),
                    (1, "10.0.1.6", OLD, None, "i-00000000000000a01", "00000000000000aa"),
                    (0, "10.0.1.10", NEW, None, THIS_INSTANCE)], count=2)  # fmt: skip
    r = node.run("hostfile")
    assert r.returncode == 1
    assert "1 of 2 nodes of this generation came up within 1s (found: 10.0.1.10)" in r.log, r.log


def test_a_new_auto_scaling_group_forms_anew(tmp_path: Path) -> None:
    """Issue 41 item 2: a replacing update makes a new group; its oldest node leads a new formation
    (the formed parameter names the old group), and marks its group formed."""
    node = Node(tmp_path)
    (node.stub_dir / "tags" / "efa-cdk:node-index").unlink()
    (node.stub_dir / "formed").write_text("group:Cluster-Old\n")
    node.instances([(None, "10.0.1.10", OLD, "Cluster-New", THIS_INSTANCE),
                    (None, "10.0.1.11", NEW, "Cluster-New", "i-00000000000000b01"),
                    (None, "10.0.1.5", OLD, "Cluster-Old", "i-00000000000000a00")], count=2)  # fmt: skip
    r = node.run("hostfile")
    assert r.returncode == 0, r.log
    assert "joined" not in r.log
    assert (node.stub_dir / "formed").read_text() == "group:Cluster-New\n"


def test_a_replaced_node_joins_and_gives_every_member_the_new_hostfile(tmp_path: Path) -> None:
    """Node 1 replaced after the cluster formed: the new node 1 lists the members (the newest instance of
    each index: not the old node 1, still running while CloudFormation replaces it), writes the hostfile
    with the leader first and hands it to node 0 and node 2; it runs no benchmarks."""
    node = Node(tmp_path, index=1, EFA_CDK_BENCHMARKS="fi_pingpong")
    (node.stub_dir / "formed").write_text(f"{GENERATION}\n")
    (node.stub_dir / "local-ipv4").write_text("10.0.1.21\n")
    node.instances(
        [
            (0, "10.0.1.10", OLD, None, "i-00000000000000a00"),
            (1, "10.0.1.11", OLD, None, "i-00000000000000a01"),  # the broken node, not yet deleted
            (1, "10.0.1.21", NEW, None, THIS_INSTANCE),
            (2, "10.0.1.12", OLD, None, "i-00000000000000a02"),
        ],
        count=3,
    )
    r = node.run("hostfile", "benchmarks")
    assert r.returncode == 0, r.log
    expected = ["10.0.1.10", "slots=32", "10.0.1.21", "slots=32", "10.0.1.12", "slots=32"]
    assert node.read("home/ubuntu/hostfile").split() == expected
    pushed = sorted(c.split()[-4] for c in node.calls("ssh") if c.endswith("cat > hostfile"))
    assert pushed == ["10.0.1.10", "10.0.1.12"]  # every member but itself; never the old node 1
    assert "joined a formed cluster: the benchmarks ran at its formation" in r.log
    assert not (node.stub_dir / "posted.json").exists()


def test_in_a_group_the_oldest_node_leads_not_the_lowest_address(tmp_path: Path) -> None:
    """A replacement in an Auto Scaling group can get the lowest address: it must not take the lead
    (and re-run the benchmarks) under running jobs. The group's oldest node leads."""
    node = Node(tmp_path)
    (node.stub_dir / "tags" / "efa-cdk:node-index").unlink()  # a group's nodes have no index
    (node.stub_dir / "formed").write_text("group:Cluster-Nodes\n")
    (node.stub_dir / "local-ipv4").write_text("10.0.1.2\n")
    node.instances(
        [
            (None, "10.0.1.9", OLD, "Cluster-Nodes", "i-00000000000000a00"),
            (None, "10.0.1.10", OLD, "Cluster-Nodes", "i-00000000000000a01"),
            (None, "10.0.1.2", NEW, "Cluster-Nodes", THIS_INSTANCE),  # the replacement
        ],
        count=3,
    )
    r = node.run("hostfile", "benchmarks")
    assert r.returncode == 0, r.log
    assert node.read("etc/efa-cdk/hostfile").split()[::2] == ["10.0.1.9", "10.0.1.10", "10.0.1.2"]
    assert "joined a formed cluster: the benchmarks ran at its formation" in r.log


@pytest.mark.debian
def test_the_root_copy_of_the_hostfile_follows_the_one_a_joining_node_hands_out(tmp_path: Path) -> None:
    """A joining node writes members' ~/hostfile as the login user; a path unit (systemd.path(5)) runs
    hostfile-sync.sh, which copies it to /etc/efa-cdk/hostfile (on-demand benchmarks and a container's
    /efa-cdk/etc read that), refusing anything but "<ip> slots=<ranks>" lines."""
    node = Node(tmp_path)
    assert node.run("hostfile").returncode == 0
    units = node.root / "etc/systemd/system"
    path_unit = (units / "efa-cdk-hostfile.path").read_text()
    assert "PathChanged=/home/ubuntu/hostfile\n" in path_unit and "WantedBy=paths.target" in path_unit
    assert "ExecStart=/opt/efa-cdk/bin/hostfile-sync.sh\n" in (units / "efa-cdk-hostfile.service").read_text()
    assert "systemctl enable --now efa-cdk-hostfile.path" in node.calls("systemctl")
    handed = "10.0.1.10 slots=32\n10.0.1.21 slots=32\n10.0.1.12 slots=32\n"
    (node.root / "home/ubuntu/hostfile").write_text(handed)
    assert node.run("hostfile-sync").returncode == 0
    assert node.read("etc/efa-cdk/hostfile") == handed
    (node.root / "home/ubuntu/hostfile").write_text("10.0.1.10 slots=32\n; rm -rf /\n")
    r = node.run("hostfile-sync")
    assert r.returncode == 1 and "is not '<ip> slots=<ranks>'" in r.log
    assert node.read("etc/efa-cdk/hostfile") == handed
    assert node.systemd_verify("efa-cdk-hostfile.path", "efa-cdk-hostfile.service") == ""  # last: may skip


@pytest.mark.debian
def test_the_imds_step_restricts_metadata_to_root_and_the_login_user_at_every_boot(tmp_path: Path) -> None:
    """Issue 41 item 7: the imds step runs prep.sh's rule for root and the login user (iptables and
    ip6tables, stand-ins here; the real ones run on the one-machine cluster), and installs a unit that
    systemd-analyze accepts and that reapplies the rule at every boot; without the rule the step fails
    (the node signals FAILURE)."""
    node = Node(tmp_path)
    for tool in ("iptables", "ip6tables"):  # record; no rule exists yet (-C); STUB_<TOOL>_FAILS: refuse
        executable(
            node.stub_dir / "bin" / tool,
            f'#!{BASH}\necho "{tool} $*" >>"$STUB_DIR/calls.log"\n'
            f'[ -z "${{STUB_{tool.upper()}_FAILS:-}}" ] || exit 4\ncase "$*" in *" -C "*) exit 1 ;; esac\n',
        )
    executable(
        node.stub_dir / "bin/id",
        f'#!{BASH}\ncase "$*" in "-u root") echo 0 ;; "-u ubuntu") echo 1000 ;; *) exit 1 ;; esac\n',
    )
    r = node.run("imds")
    assert r.returncode == 0, r.log
    calls = node.calls("iptables") + node.calls("ip6tables")
    assert "iptables -w -A efa-cdk-imds -m owner --uid-owner 1000 -j ACCEPT" in calls
    assert "ip6tables -w -I OUTPUT 1 -d fd00:ec2::254/128 -j efa-cdk-imds" in calls
    assert node.read("var/lib/efa-cdk/imds-restricted") == "root ubuntu\n"
    unit = node.read("etc/systemd/system/efa-cdk-imds.service")
    assert "ExecStart=/opt/efa-cdk/bin/prep.sh imds root ubuntu" in unit and "WantedBy=sysinit.target" in unit
    assert node.systemd_verify("efa-cdk-imds.service") == ""
    assert not (node.root / "etc/nologin").exists()  # users may log in once the rule holds
    assert node.run("imds", STUB_IP6TABLES_FAILS="1").returncode == 1
    assert not (node.root / "var/lib/efa-cdk/imds-restricted").exists()
    # issue 53 item 17: a login node runs no job, so the Prolog's marker guards nothing there: until the rule
    # holds only root may log in (pam_nologin reads /etc/nologin), and an administrator's own nologin stays
    assert "instance metadata is not yet restricted" in node.read("etc/nologin")
    assert node.run("imds").returncode == 0 and not (node.root / "etc/nologin").exists()
    (node.root / "etc/nologin").write_text("maintenance until 18:00\n")
    assert node.run("imds").returncode == 0
    assert node.read("etc/nologin") == "maintenance until 18:00\n"


# --- issue 43: the guard against silent fallback (node/boot/fabric-guard.sh)

P4D_DEVICES = ["rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27"]  # as its recorded listing names them
LISTINGS = FIXTURES.parent / "fi_info"  # recorded listings, each with its source (README.md there)


def guard(node: Node, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The guard as a job's node runs it (after efa-env wrote the jobs' environment)."""
    return subprocess.run(
        [BASH, str(node.bin / "fabric-guard.sh"), *args], env={**node.env, **env},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_the_guard_passes_a_p4d_whose_recorded_listing_covers_its_4_efas(tmp_path: Path) -> None:
    node = Node(tmp_path, "p4d.24xlarge")
    node.set_devices(4, names=P4D_DEVICES)
    assert node.run("efa-env").returncode == 0
    r = guard(node, STUB_FI_INFO_FILE=str(LISTINGS / "p4d.24xlarge.txt"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (
        r.stdout.startswith("efa-cdk guard: ")
        and ": ok: efa on 4 endpoint domains (rdmap144s27-rdm," in r.stdout
    )
    assert "NCCL plugin /opt/amazon/ofi-nccl/lib64/libnccl-net-ofi.so" in r.stdout


def test_the_guard_refuses_a_device_libfabric_offers_no_endpoint_on(tmp_path: Path) -> None:
    """One of the node's EFAs is not in the listing: NCCL would stripe over 3 of 4 without a word."""
    node = Node(tmp_path, "p4d.24xlarge")
    node.set_devices(4, names=[*P4D_DEVICES[:3], "rdmap176s27"])
    node.run("efa-env")
    r = guard(node, STUB_FI_INFO_FILE=str(LISTINGS / "p4d.24xlarge.txt"))
    assert r.returncode == 1
    assert (
        r.stdout.count("\n") == 1
        and "REFUSED: libfabric's efa provider offers no endpoint on rdmap176s27" in r.stdout
    )
    assert "jobs would use 3 of 4 EFAs" in r.stdout


def test_the_guard_counts_a_device_listed_twice_by_libfabric_2_once(tmp_path: Path) -> None:
    """libfabric 2 lists each device's RDM domain under the efa-direct fabric and again under efa
    (ofiwg/libfabric#10735); the stub lists each device once, so it is doubled here as that rule says."""
    node = Node(tmp_path, "p5.48xlarge")
    node.run("efa-env")
    once = subprocess.run([str(node.stub_dir / "bin/fi_info")], env=node.env, capture_output=True, text=True)
    twice = once.stdout.replace("fabric: efa\n", "fabric: efa-direct\n") + once.stdout
    (tmp_path / "listing").write_text(twice)
    r = guard(node, STUB_FI_INFO_FILE=str(tmp_path / "listing"))
    assert r.returncode == 0 and "ok: efa on 32 endpoint domains" in r.stdout, r.stdout


def test_the_guard_refuses_when_libfabric_offers_another_provider_first(tmp_path: Path) -> None:
    """The listing recorded on a machine without EFA: a job with no FI_PROVIDER would get tcp."""
    node = Node(tmp_path)
    r = guard(node, STUB_FI_INFO_FILE=str(LISTINGS / "debian-libfabric-1.17-no-efa.txt"))
    assert r.returncode == 1
    assert (
        "REFUSED: libfabric offers tcp;ofi_rxm first (eth0,lo), not efa: a job would run over tcp;ofi_rxm"
        in r.stdout
    )


def test_the_guard_refuses_a_jobs_environment_that_names_another_provider(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.run("efa-env")
    env_file = node.root / "etc/efa-cdk/efa.env"
    env_file.write_text(env_file.read_text().replace("FI_PROVIDER=efa", "FI_PROVIDER=sockets"))
    r = guard(node)
    assert r.returncode == 1 and "sets FI_PROVIDER=sockets: libfabric would use it, not efa" in r.stdout


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("plugin", "NCCL's EFA plugin (aws-ofi-nccl) is on none of the jobs' library paths"),
        ("NCCL_NET=Socket", "sets NCCL_NET=Socket: NCCL would not use EFA"),
        # NCCL compares the name case-insensitively (src/plugin/net.cc, strcasecmp): lower case forces it too
        ("NCCL_NET=socket", "sets NCCL_NET=socket: NCCL would not use EFA"),
        ("NCCL_NET=ib", "sets NCCL_NET=ib: NCCL would not use EFA"),
        ("NCCL_NET=GDR", "sets NCCL_NET=GDR: NCCL would not use EFA"),
    ],
)
def test_the_guard_refuses_nccl_without_its_efa_plugin(tmp_path: Path, change: str, said: str) -> None:
    """Without aws-ofi-nccl on its library path NCCL falls back to TCP sockets (NVIDIA-NeMo/RL#2359)."""
    node = Node(tmp_path, "p5.48xlarge")
    if change == "plugin":
        (node.root / "opt/amazon/ofi-nccl/lib64/libnccl-net-ofi.so").unlink()
    node.run("efa-env")
    if change != "plugin":
        with (node.root / "etc/efa-cdk/efa.env").open("a") as f:
            f.write(change + "\n")
    r = guard(node)
    assert r.returncode == 1 and said in r.stdout, r.stdout


@pytest.mark.parametrize("name", ["Libfabric", "libfabric", "AWS Libfabric", "OFI", "ofi"])
def test_the_guard_passes_nccl_net_naming_the_efa_plugin_in_any_case(tmp_path: Path, name: str) -> None:
    """aws-ofi-nccl's network is Libfabric; it answers to "AWS Libfabric" (its name to 1.11) and "OFI" too
    (nvidia_plugin_name_fixup), NCCL comparing case-insensitively."""
    node = Node(tmp_path, "p5.48xlarge")
    node.run("efa-env")
    with (node.root / "etc/efa-cdk/efa.env").open("a") as f:
        f.write(f"NCCL_NET='{name}'\n")
    r = guard(node)
    assert r.returncode == 0, r.stdout


def test_efa_env_puts_the_plugin_where_the_image_keeps_it_on_the_jobs_path(tmp_path: Path) -> None:
    """An image that built aws-ofi-nccl into its CUDA tree (older Deep Learning AMIs): efa-env finds it
    there, so the jobs' NCCL does, and the guard passes instead of refusing a working node."""
    node = Node(tmp_path, "p5.48xlarge")
    (node.root / "opt/amazon/ofi-nccl/lib64/libnccl-net-ofi.so").unlink()
    plugin = node.root / "usr/local/cuda-12.4/efa/lib/libnccl-net.so"
    plugin.parent.mkdir(parents=True)
    plugin.write_bytes(b"")
    node.run("efa-env")
    assert "/usr/local/cuda-12.4/efa/lib" in node.read("etc/profile.d/efa-cdk.sh")
    r = guard(node)
    assert r.returncode == 0 and "NCCL plugin /usr/local/cuda-12.4/efa/lib/libnccl-net.so" in r.stdout, (
        r.stdout
    )


def test_the_guard_does_not_look_for_nccl_on_trainium(tmp_path: Path) -> None:
    node = Node(tmp_path)  # trn1: Neuron's collectives, no NCCL plugin to find
    (node.root / "opt/amazon/ofi-nccl/lib64/libnccl-net-ofi.so").unlink()
    node.run("efa-env")
    r = guard(node)
    assert r.returncode == 0 and "ok: efa on 8 endpoint domains" in r.stdout and "NCCL" not in r.stdout


def test_verify_efa_fails_the_node_with_the_guards_reason(tmp_path: Path) -> None:
    node = Node(tmp_path, "p5.48xlarge")
    (node.root / "opt/amazon/ofi-nccl/lib64/libnccl-net-ofi.so").unlink()
    r = node.run("efa-env", "verify-efa", "signal")
    assert r.returncode == 1 and "FAILED: NCCL's EFA plugin (aws-ofi-nccl) is on none" in r.log
    (signal,) = node.signals()
    assert "--status FAILURE" in signal
    assert not (node.root / "var/lib/efa-cdk/verified").exists()


def test_the_guard_checks_every_node_of_a_hostfile_over_ssh(tmp_path: Path) -> None:
    node = Node(tmp_path)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("10.0.1.10 slots=32\n10.0.1.11 slots=32\n10.0.1.12 slots=32\n")
    (node.stub_dir / "guard-refuses").write_text("10.0.1.11\n")
    (node.stub_dir / "unreachable").write_text("10.0.1.12\n")
    r = guard(node, "--hostfile", str(hostfile))
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        "efa-cdk guard: 10.0.1.11: REFUSED: stand-in refusal",
        "efa-cdk guard: 10.0.1.12: REFUSED: not reached over SSH",
    ]
    assert [c.split()[-1] for c in node.calls("ssh")] == ["/opt/efa-cdk/bin/fabric-guard.sh"] * 3


@pytest.mark.debian
@pytest.mark.skipif(shutil.which("fi_info") is None, reason="Debian's libfabric-bin is not installed")
@pytest.mark.parametrize(
    ("stand_in", "jobs_provider", "said"),
    [
        # the provider the test configures, standing in for the efa the jobs name: passed
        ("tcp", "efa", "ok: tcp on"),
        # efa expected, no FI_PROVIDER: libfabric's first offer is tcp
        ("", "", "REFUSED: libfabric offers tcp;ofi_rxm first"),
        # efa expected and named: this machine's libfabric has no efa device to offer
        (
            "",
            "efa",
            "REFUSED: libfabric offers no reliable-datagram endpoint (FI_PROVIDER=efa): fi_getinfo: -61",
        ),
    ],
)
def test_the_guard_with_the_real_libfabric(
    tmp_path: Path, stand_in: str, jobs_provider: str, said: str
) -> None:
    """Debian's real fi_info (no EFA device here): the pass with the provider the test configures, and the
    refusals a node without EFA gets."""
    node = Node(tmp_path)
    node.efa_installed(False)
    (node.stub_dir / "bin/fi_info").unlink()  # the real one on PATH
    env = {"EFA_CDK_TEST_ONLY_PROVIDER": stand_in} if stand_in else {}
    node.run("efa-env", **env)
    env_file = node.root / "etc/efa-cdk/efa.env"
    lines = [x for x in env_file.read_text().splitlines() if not x.startswith("FI_PROVIDER=")]
    env_file.write_text(
        "\n".join([*lines, *([f"FI_PROVIDER={jobs_provider}"] if jobs_provider else [])]) + "\n"
    )
    r = guard(node, **env)
    assert r.returncode == (0 if said.startswith("ok") else 1), r.stdout + r.stderr
    assert said in r.stdout, r.stdout
