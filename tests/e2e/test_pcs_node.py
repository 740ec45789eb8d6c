"""Issue 34 item 10: an EFA node of an EfaPcsCluster whose EFA check failed runs no job. The cluster's
Slurm settings name efa-cdk's Prolog (node/boot/slurm-prolog.sh); here real slurmctld and slurmd (Debian's
Slurm, one node on this machine, auth/none in place of PCS's Slurm authentication) run it: a node that
has not verified EFA is drained with "Prolog error" and the job is requeued, not run; once the node has
verified and is resumed, the next job runs on it. PCS itself cannot run here: that PCS passes the Prolog
setting into its slurm.conf is its documented behaviour for cluster-level custom settings, not run.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from efa_constructs.core.software import EfaUserData
from tests.helpers import ROOT, executable

NEEDS = [
    p for p in ("slurmctld", "slurmd", "sbatch", "scontrol", "sinfo", "squeue") if shutil.which(p) is None
]
pytestmark = pytest.mark.skipif(
    bool(NEEDS) or os.geteuid() != 0, reason=f"needs root and Slurm ({', '.join(NEEDS) or 'root'})"
)
NODE = "compute-1"


@dataclass
class Slurm:
    env: dict[str, str]
    root: Path  # the node's file tree (EFA_CDK_ROOT)
    jobs: Path  # the jobs' working directory (mode 1777, as /shared)
    logs: Path

    def sinfo(self, fmt: str) -> str:
        run = subprocess.run(
            ["sinfo", "-h", "-n", NODE, "-o", fmt], env=self.env, capture_output=True, text=True
        )
        return run.stdout.strip()

    def until(self, check: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(
                    "timed out; slurmd log:\n" + (self.logs / "slurmd.log").read_text()[-2000:]
                )
            time.sleep(0.5)

    def submit(self) -> str:
        run = subprocess.run(
            ["sbatch", "--parsable", "-D", str(self.jobs), "-o", f"{self.jobs}/%j.out",
             "--wrap", "echo ran on $SLURMD_NODENAME"],
            env=self.env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        return run.stdout.strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _conf(tmp: Path, prolog: Path) -> str:
    host = socket.gethostname()
    return (
        "\n".join(
            [
                "ClusterName=efacdk",
                f"SlurmctldHost={host}(127.0.0.1)",
                f"SlurmctldPort={_free_port()}",
                f"SlurmdPort={_free_port()}",
                "SlurmUser=root",
                "AuthType=auth/none",  # stands in for PCS's Slurm authentication
                "CredType=cred/none",
                f"StateSaveLocation={tmp}/state",
                f"SlurmdSpoolDir={tmp}/spool",
                f"SlurmctldPidFile={tmp}/slurmctld.pid",
                f"SlurmdPidFile={tmp}/slurmd.pid",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "JobAcctGatherType=jobacct_gather/none",
                "SchedulerType=sched/builtin",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_CPU",
                "ReturnToService=2",
                "MpiDefault=none",
                f"SlurmctldLogFile={tmp}/slurmctld.log",
                f"SlurmdLogFile={tmp}/slurmd.log",
                f"Prolog={prolog}",
                f"NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN",
                f"PartitionName=compute Nodes={NODE} Default=YES State=UP",
            ]
        )
        + "\n"
    )


@pytest.fixture
def slurm(tmp_path: Path) -> Iterator[Slurm]:
    """slurmctld and one slurmd on this machine, with the Prolog the PCS cluster names."""
    root = tmp_path / "node"
    (root / "var/lib/efa-cdk").mkdir(parents=True)
    (root / "opt/efa-cdk/bin").mkdir(parents=True)
    EfaUserData().stage(root / "opt/efa-cdk/bin")  # the node scripts, as the bootstrap fetches them
    prolog = executable(  # the node's tree is under `root` here; on a node EFA_CDK_ROOT is empty
        tmp_path / "prolog",
        # harness: no EFA device here; the guard expects libfabric's tcp stand-in (as tests/e2e/cluster.py)
        f"#!/bin/bash\nEFA_CDK_ROOT={root} EFA_CDK_TEST_ONLY_PROVIDER=tcp "
        f"exec {root}/opt/efa-cdk/bin/slurm-prolog.sh\n",
    )
    for d in ("state", "spool", "jobs"):
        (tmp_path / d).mkdir()
    (tmp_path / "jobs").chmod(0o1777)
    conf = tmp_path / "slurm.conf"
    conf.write_text(_conf(tmp_path, prolog))
    s = Slurm({**os.environ, "SLURM_CONF": str(conf)}, root, tmp_path / "jobs", tmp_path)
    daemons = [
        subprocess.Popen(["slurmctld", "-D", "-i", "-f", str(conf)], env=s.env),
        subprocess.Popen(["slurmd", "-D", "-f", str(conf), "-N", NODE], env=s.env),
    ]
    try:
        s.until(lambda: s.sinfo("%T") == "idle", 30)
        yield s
    finally:
        for d in daemons:
            d.terminate()
        for d in daemons:
            try:
                d.wait(timeout=15)
            except subprocess.TimeoutExpired:
                d.kill()


def test_a_node_that_has_not_verified_efa_is_drained_and_runs_no_job(slurm: Slurm) -> None:
    reason = "found 7 EFA devices, the launch template attached 8"
    (slurm.root / "var/lib/efa-cdk/failure").write_text(reason + "\n")  # what verify-efa leaves
    job = slurm.submit()
    slurm.until(lambda: slurm.sinfo("%T").startswith("drain"), 60)
    assert slurm.sinfo("%E") == "Prolog error"
    assert reason in (slurm.logs / "slurmd.log").read_text()  # the Prolog's line, for the operator
    out = slurm.jobs / f"{job}.out"
    assert not out.exists() or "ran on" not in out.read_text()
    state = subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%T"], env=slurm.env, capture_output=True, text=True
    )
    assert state.stdout.strip() == "PENDING"  # requeued, not lost

    # verified (the check passed after a fix) and resumed: the next job runs there
    (slurm.root / "var/lib/efa-cdk/verified").write_text("2026-11-25T00:00:00Z\n")
    subprocess.run(["scontrol", "update", f"nodename={NODE}", "state=resume"], env=slurm.env, check=True)
    second = slurm.jobs / f"{slurm.submit()}.out"
    slurm.until(lambda: second.exists() and "ran on" in second.read_text(), 60)
    assert second.read_text() == f"ran on {NODE}\n"

    # issue 43: verified, but the jobs' environment now names another provider: the guard in the Prolog
    # drains the node before a job would run over it, its one line in slurmd's log
    (slurm.root / "etc/efa-cdk").mkdir(parents=True)
    (slurm.root / "etc/efa-cdk/efa.env").write_text("FI_PROVIDER=sockets\n")
    third = slurm.submit()
    slurm.until(lambda: slurm.sinfo("%T").startswith("drain"), 60)
    log = (slurm.logs / "slurmd.log").read_text()
    assert "REFUSED: the jobs' environment sets FI_PROVIDER=sockets: libfabric would use it, not tcp" in log
    out = slurm.jobs / f"{third}.out"
    assert not out.exists() or "ran on" not in out.read_text()


PREP = ROOT / "efa_constructs/node/pcs/prep.sh"
#: In a network namespace of its own: a stand-in for instance metadata at 169.254.169.254:80, the PCS
#: node's IMDS rule (prep.sh imds, run twice as bootcmd and runcmd run it), then one request per user.
IMDS_PROBE = r"""
set -e
ip link set lo up
ip addr add 169.254.169.254/32 dev lo
ip -6 addr add fd00:ec2::254/128 dev lo nodad
python3 -m http.server 80 --bind 169.254.169.254 --directory "$1" >/dev/null 2>&1 &
server=$!
python3 -m http.server 80 --bind fd00:ec2::254 --directory "$1" >/dev/null 2>&1 &
server6=$!
trap 'kill $server $server6' EXIT
up() { curl -s -o /dev/null http://169.254.169.254/ && curl -s -o /dev/null -g 'http://[fd00:ec2::254]/'; }
for _ in $(seq 50); do up && break; sleep 0.1; done
export EFA_CDK_ROOT=$3  # the marker the Prolog requires, in the test's tree
bash "$2" imds root daemon
bash "$2" imds root daemon  # every boot: the chain is rebuilt, the OUTPUT hook not doubled
iptables -S OUTPUT | grep -c efa-cdk-imds
for user in root daemon nobody; do
  for url in http://169.254.169.254/latest/ 'http://[fd00:ec2::254]/latest/'; do
    code=$(runuser -u "$user" -- curl -g -s -m 3 -o /dev/null -w '%{http_code}' "$url" || true)
    echo "$user $code"
  done
done
ip6tables -S OUTPUT | grep -c efa-cdk-imds
"""


@pytest.mark.skipif(
    not (shutil.which("unshare") and shutil.which("iptables") and shutil.which("curl")),
    reason="needs unshare, iptables and curl",
)
def test_instance_metadata_answers_root_and_the_named_users_only(tmp_path: Path) -> None:
    """Issue 34 item 16: any local user who reached the node role through instance metadata could fetch
    the cluster's Slurm key (PCS's RegisterComputeNodeGroupInstance returns it); the PCS nodes' rule lets
    root and the users named through, and refuses everyone else (here `nobody`, a non-root user), over
    IPv4 and IPv6 (issue 41 item 6), and leaves the marker the Prolog requires."""
    (tmp_path / "latest").mkdir()
    (tmp_path / "latest/index.html").write_text("meta-data\n")
    run = subprocess.run(
        ["unshare", "-n", "bash", "-c", IMDS_PROBE, "probe", str(tmp_path), str(PREP),
         str(tmp_path / "node")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    hooks, *answers, hooks6 = run.stdout.split("\n")[:8]
    assert hooks == "1" and hooks6 == "1"
    # issue 41 item 6: the IPv6 endpoint (fd00:ec2::254) is held to the same rule
    want = ["root 200", "root 200", "daemon 200", "daemon 200", "nobody 000", "nobody 000"]
    assert answers == want, run.stdout + run.stderr
    assert "instance metadata: only root daemon" in run.stderr
    assert (tmp_path / "node/var/lib/efa-cdk/imds-restricted").read_text() == "root daemon\n"
