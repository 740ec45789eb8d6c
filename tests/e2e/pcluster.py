"""ParallelCluster on one machine: the head node and the compute nodes of the rendered cluster
configuration, run with real munged, slurmctld, slurmd, srun and Open MPI in network namespaces.

What ParallelCluster does, and what stands in for it here (each also in the README):

* The configuration: the ``ParallelClusterConfig`` output of the stack moto created (CloudFormation
  resolved every reference), the YAML a user hands to ``pcluster create-cluster``.
* Slurm as ParallelCluster lays it out (aws-parallelcluster-cookbook: slurm.conf.erb,
  slurm_parallelcluster.conf, config_renderer.py, pcluster_custom_slurm_settings_include_file_generator.py):
  Slurm under /opt/slurm (commands in /opt/slurm/bin only; Debian's copies in /usr/bin are hidden in
  every node), the configuration in /opt/slurm/etc (here /etc/slurm, Debian's compiled-in path, is a
  link to it), /opt/slurm exported from the head node to the compute nodes (NFS there, a bind mount
  here), /home shared the same way, ``State=CLOUD`` dynamic nodes ``<queue>-dy-<resource>-[1-n]`` with
  power saving, and ``CustomSlurmSettings`` in their own include file. Differences, all in
  :func:`slurm_configs`: shorter power-saving timers, proctrack/linuxproc and no task plugin (the
  nodes share one cgroup tree), ``SlurmdParameters=config_overrides`` (a trn1.32xlarge's 128 vCPUs on
  a 2-core machine), no Prolog/Epilog, SlurmUser's programs are the harness's.
* The order of a node's setup (ParallelCluster's cfn-init config sets): OnNodeStart, the config phase
  (slurmctld started on the head node), OnNodeConfigured, the finalize phase (slurmd started on a compute
  node). Custom actions run as ParallelCluster's custom_action_executor runs them: the script fetched
  from S3, run as root with its Args, not through a login shell, with the minimal PATH.
* EC2 (ResumeProgram's RunInstances): the harness's ``slurm_resume`` asks moto for an instance, writes its
  Route 53 record (dnsmasq in the AWS namespace serves them, the nodes search ``<cluster>.pcluster``),
  sets the node's NodeAddr as ParallelCluster's does, and asks the harness to boot it: a namespace with
  the instance's address, the node's name as its host name and its /etc/hosts line as ParallelCluster
  writes it. ``slurm_suspend`` resets NodeAddr (ParallelCluster's clustermgtd) and asks for the node's end.
* Each node is a chroot: /usr from this machine (read-only programs: Slurm, munge, Open MPI, libfabric),
  its own copy of /etc, its own /opt, /var, /run and /tmp. The AWS CLI is /usr/local/bin/aws with moto's
  endpoint and fixed keys (the instance profile's stand-in). systemd is not running: ``systemctl``
  records what it is asked; the harness runs a timer's service as systemd would (its ExecStart, the
  default PATH). The accelerator programs (nccom-test, all_reduce_perf, torchrun,
  neuron_parallel_compile) are named stubs that record what they were given.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import signal
import stat
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from efa_constructs.core import instance_type
from tests.e2e import progress
from tests.e2e.cluster import AWS_IP, ENDPOINT, REGION, ROOT, Cluster, inside, kill_namespace, sh
from tests.helpers import executable

MINIMAL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # custom actions, systemd
CLUSTER_NAME = "trn1-pc"
DNS_DOMAIN = f"{CLUSTER_NAME}.pcluster"  # ParallelCluster's Route 53 zone: <cluster name>.pcluster
SLURM_CLIENT = ("sacct", "sacctmgr", "salloc", "sattach", "sbatch", "sbcast", "scancel", "scontrol", "sdiag",
                "sinfo", "sprio", "squeue", "sreport", "srun", "sshare", "sstat", "strigger")  # fmt: skip
HARNESS = Path(__file__).resolve().parent
LOGIN_UID = 4242


def missing_programs() -> list[str]:
    """Slurm, munge, PMIx and dnsmasq: what the ParallelCluster harness needs beyond the cluster's."""
    needs = {
        "slurmctld": "/usr/sbin/slurmctld", "slurmd": "/usr/sbin/slurmd", "slurm-client": "/usr/bin/sbatch",
        "munge": "/usr/sbin/munged", "libpmix-dev": "/usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so",
        "dnsmasq-base": "/usr/sbin/dnsmasq", "chroot": "/usr/sbin/chroot",
    }  # fmt: skip
    return [f"{k} (scripts/setup --dev)" for k, path in needs.items() if not Path(path).exists()]


# -- Slurm's configuration, as ParallelCluster renders it --------------------------------------------------


def slurm_configs(config: dict[str, Any], head: tuple[str, str], timers: dict[str, int]) -> dict[str, str]:
    """The files ParallelCluster's config phase writes in /opt/slurm/etc, from the cluster YAML.
    `head` is (host name, address); `timers` the shortened power-saving timers (seconds)."""
    scheduling = config["Scheduling"]
    queues = scheduling["SlurmQueues"]
    files: dict[str, str] = {}
    files["slurm.conf"] = "\n".join(
        [
            f"ClusterName={CLUSTER_NAME}",
            "SlurmUser=slurm",
            "SlurmctldPort=6820-6829",
            "SlurmdPort=6818",
            "AuthType=auth/munge",
            "StateSaveLocation=/var/spool/slurm.state",
            "SlurmdSpoolDir=/var/spool/slurmd",
            "SwitchType=switch/none",
            "SlurmctldPidFile=/var/run/slurmctld.pid",
            "SlurmdPidFile=/var/run/slurmd.pid",
            "ReconfigFlags=KeepPartState",
            # harness: power_save_min_interval 30 -> 1 (resume within a second, not up to 30)
            "SlurmctldParameters=idle_on_node_suspend,power_save_min_interval=1",
            "TreeWidth=65533",
            "SuspendProgram=/opt/parallelcluster/scripts/slurm/slurm_suspend",
            "ResumeProgram=/opt/parallelcluster/scripts/slurm/slurm_resume",
            "ResumeFailProgram=/opt/parallelcluster/scripts/slurm/slurm_suspend",
            f"SuspendTimeout={timers['suspend_timeout']}",  # ParallelCluster: 120
            "PrivateData=cloud",
            "ResumeRate=0",
            "SuspendRate=0",
            "SchedulerParameters=nohold_on_prolog_fail",
            "BatchStartTimeout=180",
            "SlurmctldTimeout=300",
            "SlurmdTimeout=180",
            "InactiveLimit=0",
            "MinJobAge=300",
            "KillWait=30",
            "Waittime=0",
            "MessageTimeout=60",
            "AuthInfo=cred_expire=70",
            "EnforcePartLimits=ALL",
            "SchedulerType=sched/backfill",
            "ProctrackType=proctrack/linuxproc",  # ParallelCluster: proctrack/cgroup
            "MpiDefault=none",
            "ReturnToService=1",
            "TaskPlugin=task/none",  # ParallelCluster: task/affinity,task/cgroup
            "SlurmdParameters=config_overrides",  # harness only: the nodes' hardware is this machine's
            "GresTypes=gpu",
            "SelectType=select/cons_tres",
            "SlurmctldDebug=verbose",
            "SlurmctldLogFile=/var/log/slurmctld.log",
            "SlurmdDebug=info",
            "SlurmdLogFile=/var/log/slurmd.log",
            "DebugFlags=Power",
            "JobCompType=jobcomp/none",
            "include slurm_parallelcluster.conf",
            "include pcluster/custom_slurm_settings_include_file_slurm.conf",
        ]
    )
    lines = [
        f"SlurmctldHost={head[0]}({head[1]})",
        f"SuspendTime={timers['suspend_time']}",  # ParallelCluster: ScaledownIdletime (10 min) * 60
        f"ResumeTimeout={timers['resume_timeout']}",  # ParallelCluster: 1800
        "SelectTypeParameters=CR_CPU",
    ]
    static: list[str] = []
    for index, queue in enumerate(queues):
        lines.append(f"include /opt/slurm/etc/pcluster/slurm_parallelcluster_{queue['Name']}_partition.conf")
        nodes, nodeset = [], []
        for cr in queue["ComputeResources"]:
            itype = instance_type(cr["InstanceType"])
            features = f"{cr['InstanceType']},{cr['Name']}" + (
                ",efa" if cr.get("Efa", {}).get("Enabled") else ""
            )
            memory = int(itype.memory_mib * 0.95)  # ParallelCluster's default RealMemory ratio
            for kind, count, weight in (
                ("st", cr["MinCount"], 1),
                ("dy", cr["MaxCount"] - cr["MinCount"], 1000),
            ):
                if count < 1:
                    continue
                name = f"{queue['Name']}-{kind}-{cr['Name']}-[1-{count}]"
                state = "static" if kind == "st" else "dynamic"
                nodes.append(
                    f"NodeName={name} CPUs={itype.vcpus} RealMemory={memory} State=CLOUD "
                    f"Feature={state},{features} Weight={weight}"
                )
                nodeset.append(name)
                if kind == "st":
                    static.append(name)
        default = " Default=YES" if index == 0 else ""
        files[f"pcluster/slurm_parallelcluster_{queue['Name']}_partition.conf"] = "\n".join(
            [
                *nodes,
                f"NodeSet={queue['Name']}_nodes Nodes={','.join(nodeset)}",
                f"PartitionName={queue['Name']} Nodes={queue['Name']}_nodes MaxTime=INFINITE "
                f"State=UP{default}",
            ]
        )
    if static:
        lines.append(f"SuspendExcNodes={','.join(static)}")
    files["slurm_parallelcluster.conf"] = "\n".join(lines)
    custom = scheduling.get("SlurmSettings", {}).get("CustomSlurmSettings", [])
    files["pcluster/custom_slurm_settings_include_file_slurm.conf"] = "\n".join(
        ["# This file is automatically generated by pcluster", *(_setting(p) for p in custom)]
    )
    return {k: v + "\n" for k, v in files.items()}


def _setting(param: dict[str, Any]) -> str:
    """One CustomSlurmSettings entry as a line; NodeName/PartitionName/NodeSet/DownNodes first."""
    first = [k for k in param if k.lower() in ("nodename", "partitionname", "nodeset", "downnodes")]
    return " ".join(f"{k}={param[k]}" for k in [*first, *(k for k in param if k not in first)])


# -- nodes ------------------------------------------------------------------------------------------


@dataclass
class PcNode:
    """A head or compute node: its namespace, chroot and the name Slurm knows it by."""

    name: str  # Slurm node name (compute) or host name (head)
    role: str  # HeadNode | ComputeFleet
    ip: str
    ns: str
    root: Path
    instance_id: str = ""
    process: subprocess.Popen[bytes] | None = None
    shared: dict[str, Path] = field(default_factory=dict)  # mount point -> the harness's directory

    def run(self, *cmd: str, user: str = "root", env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """A command in the node (its network, mount and UTS namespaces, its root), as `user`,
        with the minimal PATH unless `env` says otherwise; `bash -lc` gives a login shell."""
        pid = self.pid()
        assert pid, f"{self.name} is not running"
        variables = {"PATH": MINIMAL_PATH, "HOME": "/root" if user == "root" else f"/home/{user}"} | (
            env or {}
        )
        return sh(
            "nsenter", "--target", str(pid), "--net", "--mount", "--uts", "--root", "--wd=/",
            "runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in variables.items()), *cmd,
            check=False, timeout=timeout,
        )  # fmt: skip

    def pid(self) -> int | None:
        """The node's anchor process (a sleep in its namespaces, started by pcluster-node.sh)."""
        path = self.root / ".harness/anchor.pid"
        return int(path.read_text()) if path.exists() else None

    def file(self, rel: str) -> Path:
        """Where the node's path `rel` is on this machine (its root, or a shared directory)."""
        rel = rel.lstrip("/")
        for mount, there in self.shared.items():
            if rel == mount or rel.startswith(mount + "/"):
                return there / rel[len(mount) :].lstrip("/")
        return self.root / rel

    def log(self) -> str:
        parts = []
        for rel in (
            ".harness/boot.log",
            "var/log/efa-cdk.log",
            "var/log/slurmctld.log",
            "var/log/slurmd.log",
        ):
            path = self.file(rel)
            if path.exists():
                parts.append(f"--- {self.name}:{rel}\n{path.read_text(errors='replace')[-4000:]}")
        return "\n".join(parts)

    def ready(self) -> bool:
        return self.file(".harness/ready").exists()

    def failed(self) -> str | None:
        path = self.file(".harness/failed")
        return path.read_text() if path.exists() else None


@dataclass
class ParallelClusterHarness:
    """The head node, the fleet of compute nodes Slurm resumes and suspends, and Route 53's stand-in."""

    cluster: Cluster
    config: dict[str, Any]
    ami: str
    user: str = "ubuntu"
    timers: dict[str, int] = field(
        # SuspendTime: long enough that a node a job resumed is still up while the tests read it on a loaded
        # CI machine (20 s was not: the states, /etc/hosts and the topology read after the first job saw
        # the nodes already powering down, in a fresh clone's CI with the floor run beside it)
        default_factory=lambda: {"suspend_time": 60, "suspend_timeout": 5, "resume_timeout": 180}
    )
    nodes: dict[str, PcNode] = field(default_factory=dict)
    launched: list[str] = field(default_factory=list)  # Slurm names, in launch order
    terminated: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.work = self.cluster.work / "pcluster"
        for d in ("slurm/etc/pcluster", "slurm/bin", "home", "shared", "route53", "fleet/launch",
                  "fleet/terminate", "scripts"):  # fmt: skip
            (self.work / d).mkdir(parents=True, exist_ok=True)
        for d in ("route53", "fleet/launch", "fleet/terminate"):
            (self.work / d).chmod(0o1777)  # written by slurm_resume/slurm_suspend as SlurmUser
        self._stop = threading.Event()
        self._fleet = threading.Thread(target=self._fleet_loop, name="pcluster-fleet", daemon=True)
        self._errors: list[str] = []
        self._made = itertools.count(1)  # each node's number, never reused (a node may end and another begin)

    # -- AWS side --------------------------------------------------------------------------------------
    def _fetch(self, url: str) -> bytes:
        bucket, key = url.removeprefix("s3://").split("/", 1)
        with inside(self.cluster.aws_ns):
            body = self.cluster.clients()["s3"].get_object(Bucket=bucket, Key=key)["Body"].read()
        return body  # type: ignore[no-any-return]

    def start_dns(self) -> None:
        """Route 53's private zone: dnsmasq answers the records slurm_resume writes (one file a node)."""
        log = self.work / "dnsmasq.log"
        self.cluster.processes.append(
            subprocess.Popen(
                ["ip", "netns", "exec", self.cluster.aws_ns, "dnsmasq", "--keep-in-foreground", "--no-resolv",
                 "--no-hosts", f"--hostsdir={self.work / 'route53'}", f"--listen-address={AWS_IP}",
                 "--bind-interfaces", "--user=root", f"--log-facility={log}",
                 f"--pid-file={self.work / 'dns.pid'}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            )
        )  # fmt: skip

    def _run_instance(self, subnet: str, itype: str, name: str) -> tuple[str, str]:
        with inside(self.cluster.aws_ns):
            ec2 = self.cluster.clients()["ec2"]
            found = ec2.run_instances(
                ImageId=self.ami, InstanceType=itype, SubnetId=subnet, MinCount=1, MaxCount=1,
                TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": name}]}],
            )["Instances"][0]  # fmt: skip
        return found["InstanceId"], found["PrivateIpAddress"]

    # -- boot --------------------------------------------------------------------------------------------
    def start(self) -> PcNode:
        """Lay out Slurm, boot the head node (OnNodeStart, slurmctld, OnNodeConfigured), start the fleet."""
        head_cfg = self.config["HeadNode"]
        iid, ip = self._run_instance(head_cfg["Networking"]["SubnetId"], head_cfg["InstanceType"], "HeadNode")
        hostname = "ip-" + ip.replace(".", "-")  # the EC2 host name, which ParallelCluster keeps on the head
        slurm = self.work / "slurm"
        for rel, text in slurm_configs(self.config, (hostname, ip), self.timers).items():
            (slurm / "etc" / rel).write_text(text)
        for command in SLURM_CLIENT:  # ParallelCluster builds Slurm into /opt/slurm
            shutil.copy2(f"/usr/bin/{command}", slurm / "bin" / command)
        (slurm / "etc/slurm.sh").write_text(
            "PATH=$PATH:/opt/slurm/bin\nexport PATH\n"
        )  # cookbook slurm.sh.erb
        head = self._node(hostname, "HeadNode", ip, iid)
        self._resume_programs(head)
        self._boot(head)
        self._wait_ready(head)
        self._fleet.start()
        return head

    def _node(self, name: str, role: str, ip: str, iid: str) -> PcNode:
        index = next(self._made)
        node = PcNode(name, role, ip, self.cluster.ns(f"pc{index}"), self.work / f"node{index}" / "root", iid)
        node.shared = {
            m: self.work / d for m, d in (("opt/slurm", "slurm"), ("home", "home"), ("shared", "shared"))
        }
        self.nodes[name] = node
        r = node.root
        r.mkdir(parents=True)
        for link, target in (
            ("bin", "usr/bin"),
            ("sbin", "usr/sbin"),
            ("lib", "usr/lib"),
            ("lib64", "usr/lib64"),
        ):
            if Path("/", link).is_symlink():
                (r / link).symlink_to(target)
        for d in ("usr", "dev", "proc", "sys", "home", "shared", "root", "opt/slurm",
                  "var/log/parallelcluster",
                  "var/lib", "var/spool/slurmd", "var/tmp", "run", "tmp", ".harness/actions"):  # fmt: skip
            (r / d).mkdir(parents=True, exist_ok=True)
        (r / "tmp").chmod(0o1777)
        slurm_user = pwd.getpwnam("slurm")  # the copied /etc has the same user
        os.chown(
            r / "var/log/parallelcluster", slurm_user.pw_uid, slurm_user.pw_gid
        )  # its programs log there
        (r / "var/tmp").chmod(0o1777)
        (r / "var/run").symlink_to("/run")
        sh("cp", "-a", "/etc", str(r / "etc"))  # ownership kept: munge's key, its directory
        etc = r / "etc"
        shutil.rmtree(etc / "slurm", ignore_errors=True)
        (etc / "slurm").symlink_to("/opt/slurm/etc")  # Slurm's compiled-in config path -> ParallelCluster's
        (etc / "hostname").write_text(name + "\n")
        (etc / "resolv.conf").write_text(f"search {DNS_DOMAIN}\nnameserver {AWS_IP}\n")
        fqdn = f"{name}.{DNS_DOMAIN}" if role == "ComputeFleet" else f"{name}.ec2.internal"
        # init_dns.rb: the node's own address lines removed, then "<ip> <fqdn> <short name>" appended
        (etc / "hosts").write_text(f"127.0.0.1 localhost\n{ip} {fqdn} {name}\n")
        (etc / "parallelcluster").mkdir(exist_ok=True)
        (etc / "parallelcluster/cfnconfig").write_text(f"cfn_node_type={role}\n")
        (etc / "profile.d/slurm.sh").write_text(". /opt/slurm/etc/slurm.sh\n")
        for f, line in (("passwd", f"{self.user}:x:{LOGIN_UID}:{LOGIN_UID}::/home/{self.user}:/bin/bash"),
                        ("group", f"{self.user}:x:{LOGIN_UID}:"),
                        ("shadow", f"{self.user}:*:19000:0:99999:7:::")):  # fmt: skip
            with (etc / f).open("a") as fh:
                fh.write(line + "\n")
        home = self.work / "home" / self.user
        if not home.exists():
            home.mkdir()
            os.chown(home, LOGIN_UID, LOGIN_UID)
        harness = r / ".harness"
        (harness / "role").write_text(role)
        (harness / "name").write_text(name)
        local = harness / "usr-local-bin"
        local.mkdir()
        executable(
            local / "aws",
            "#!/bin/sh\n# harness: the AWS CLI against moto, fixed keys (the instance profile's stand-in)\n"
            f"export AWS_ENDPOINT_URL={ENDPOINT} AWS_ACCESS_KEY_ID=e2e AWS_SECRET_ACCESS_KEY=e2e "
            f"AWS_DEFAULT_REGION={REGION} AWS_CONFIG_FILE=/.harness/aws-config\n"
            f'exec {ROOT}/.venv-e2e/bin/aws "$@"\n',
        )
        (harness / "aws-config").write_text("[default]\ncli_read_timeout = 10\ncli_connect_timeout = 5\n"
                                            "s3 =\n    addressing_style = path\n")  # fmt: skip
        # The node's /usr/bin is an overlay over this machine's: whiteouts remove Debian's Slurm commands
        # (absent, as on a ParallelCluster node), and systemctl is the stand-in that records its calls
        usr_bin = harness / "usr-bin"
        usr_bin.mkdir()
        for command in SLURM_CLIENT:
            os.mknod(usr_bin / command, stat.S_IFCHR, os.makedev(0, 0))
        executable(usr_bin / "systemctl", '#!/bin/sh\necho "$*" >>/.harness/systemctl.log\n')
        samples = r / "opt/parallelcluster/examples"  # ParallelCluster 3.11+ images (cookbook templates)
        for rel, text in (
            (
                "enroot/enroot.conf",
                "ENROOT_RUNTIME_PATH /run/enroot/user-$(id -u)\nENROOT_ROOTFS_WRITABLE yes\n",
            ),
            ("spank/plugstack.conf", "include /opt/slurm/etc/plugstack.conf.d/*\n"),
            # harness: Pyxis is not in Debian, so the sample's `required` would stop every srun; `optional`
            ("pyxis/pyxis.conf", "optional /usr/local/lib/slurm/spank_pyxis.so runtime_path=/run/pyxis\n"),
        ):
            (samples / rel).parent.mkdir(parents=True, exist_ok=True)
            (samples / rel).write_text(text)
        if role == "ComputeFleet":  # the compute image's Neuron tools (stubs) and the benchmark stand-ins
            self._stubs(r)
        for event, (script, args) in self._actions(role).items():
            path = harness / "actions" / event
            path.write_bytes(self._fetch(script))
            path.chmod(0o755)
            (harness / "actions" / f"{event}.args").write_text("".join(a + "\n" for a in args))
        return node

    def _actions(self, role: str) -> dict[str, tuple[str, list[str]]]:
        """The node's custom actions from the YAML: event -> (script URL, args)."""
        if role == "HeadNode":
            actions = self.config["HeadNode"].get("CustomActions", {})
        else:
            actions = self.config["Scheduling"]["SlurmQueues"][0].get("CustomActions", {})
        return {e: (a["Script"], list(a.get("Args", []))) for e, a in actions.items()}

    def _stubs(self, r: Path) -> None:
        record = 'echo "$(basename "$0") $* | rank=${SLURM_PROCID:-} node=$(hostname)"'
        # nccom-test: what it was given, where its root rank's address resolves, Neuron's recorded output
        executable(r / "opt/aws/neuron/bin/nccom-test", f"#!/bin/bash\n# harness stub\n{record}\n"
                   'echo "root comm $NEURON_RT_ROOT_COMM_ID -> '
                   '$(getent hosts "${NEURON_RT_ROOT_COMM_ID%:*}")"\n'
                   f"cat {ROOT}/tests/fixtures/benchmarks/nccom-test-2x-trn1.txt\n")  # fmt: skip
        for name in ("torchrun", "neuron_parallel_compile"):  # a Neuron venv's tools
            executable(r / "opt/aws/neuron/bin" / name,
                       f'#!/bin/bash\n# harness stub\n{record}\n'
                       '[ "$(basename "$0")" = torchrun ] || exec "$@"\n')  # fmt: skip

    def _resume_programs(self, head: PcNode) -> None:
        """ResumeProgram / SuspendProgram at ParallelCluster's paths (its scripts_dir)."""
        queue = self.config["Scheduling"]["SlurmQueues"][0]
        cr = queue["ComputeResources"][0]
        d = head.root / "opt/parallelcluster/scripts/slurm"
        d.mkdir(parents=True)
        executable(
            d / "slurm_resume",
            f"""#!/bin/bash
# harness stand-in for ParallelCluster's slurm_resume: RunInstances, the Route 53 record, NodeAddr
set -euo pipefail
exec >>/var/log/parallelcluster/slurm_resume.log 2>&1
echo "$(date +%T) resume $1"
for name in $(/opt/slurm/bin/scontrol show hostnames "$1"); do
  read -r iid ip < <(aws --output text ec2 run-instances --image-id {self.ami} \\
    --instance-type {cr["InstanceType"]} --subnet-id {queue["Networking"]["SubnetIds"][0]} --count 1 \\
    --query 'Instances[0].[InstanceId,PrivateIpAddress]')
  echo "$ip $name.{DNS_DOMAIN}" >/.harness/route53/$name
  /opt/slurm/bin/scontrol update nodename=$name nodeaddr=$ip
  echo "$iid $ip" >/.harness/fleet/launch/$name
done
""",
        )
        executable(
            d / "slurm_suspend",
            """#!/bin/bash
# harness stand-in for ParallelCluster's slurm_suspend and clustermgtd: NodeAddr reset, instance ended
set -euo pipefail
exec >>/var/log/parallelcluster/slurm_suspend.log 2>&1
echo "$(date +%T) suspend $1"
for name in $(/opt/slurm/bin/scontrol show hostnames "$1"); do
  /opt/slurm/bin/scontrol update nodename=$name nodeaddr=$name nodehostname=$name
  touch /.harness/fleet/terminate/$name
done
""",
        )

    def _boot(self, node: PcNode) -> None:
        index = len(self.cluster.nodes) + 10 + int(node.ns.rsplit("pc", 1)[1])  # its number, never reused
        self.cluster._attach(node.ns, node.ip, index)
        log = (node.root / ".harness/console.log").open("wb")
        # A time namespace whose boot clock starts now: slurmctld takes a resumed node as up only when it
        # registers with a boot time after the resume request (this machine booted long before).
        uptime = int(float(Path("/proc/uptime").read_text().split()[0]))  # the node's uptime starts at 0-1 s
        node.process = subprocess.Popen(
            ["nsenter", f"--net=/var/run/netns/{node.ns}", "unshare", "--mount", "--uts",
             "--propagation", "private", "--time", "--fork", f"--boottime={-uptime}",
             "bash", str(HARNESS / "pcluster-node.sh"), str(node.root), str(self.work), str(ROOT),
             os.path.realpath(Path(ROOT, ".venv-e2e/bin/python").resolve().parents[1])],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def _wait_ready(self, node: PcNode) -> None:
        """Until the node's boot is done, for as long as it makes progress (tests/e2e/progress.py)."""

        def done() -> bool:
            failed = node.failed()
            assert failed is None, f"{node.name} failed in {failed}\n{node.log()}"
            if node.ready():
                return True
            assert node.process is not None and node.process.poll() is None, (
                f"{node.name} exited\n{node.log()}"
            )
            return False

        progress.until(
            done,
            lambda: progress.activity(
                [node.ns], [node.file("var/log/efa-cdk.log"), node.root / ".harness/console.log"]
            ),
            lambda: node.log()[-3000:],
            what=f"{node.name} booting",
            poll=0.3,
        )

    # -- the fleet: EC2 for slurm_resume / slurm_suspend ---------------------------------------------------
    def _fleet_loop(self) -> None:
        while not self._stop.wait(0.3):
            try:
                for request in sorted((self.work / "fleet/launch").iterdir()):
                    # boot clocks count whole seconds: start the node a second after the resume request,
                    # so its boot time is not before the request's (see _boot)
                    time.sleep(max(0.0, request.stat().st_mtime + 1.5 - time.time()))
                    iid, ip = request.read_text().split()
                    request.unlink()
                    node = self._node(request.name, "ComputeFleet", ip, iid)
                    self.launched.append(request.name)
                    self._boot(node)
                for request in sorted((self.work / "fleet/terminate").iterdir()):
                    request.unlink()
                    node = self.nodes.pop(request.name, None)
                    if node is not None:
                        self._terminate(node)
                        self.terminated.append(request.name)
            except Exception as err:  # reported by check_fleet, not lost in a thread
                self._errors.append(repr(err))

    def check_fleet(self) -> None:
        assert not self._errors, self._errors

    def compute(self) -> list[PcNode]:
        return [n for n in self.nodes.values() if n.role == "ComputeFleet"]

    def _terminate(self, node: PcNode) -> None:
        """The instance ends: every process in its namespace, then the namespace."""
        kill_namespace(node.ns)
        if node.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.process.wait(timeout=10)
        sh("ip", "netns", "del", node.ns, check=False)
        if node.ns in self.cluster.namespaces:
            self.cluster.namespaces.remove(node.ns)
        with inside(self.cluster.aws_ns):
            self.cluster.clients()["ec2"].terminate_instances(InstanceIds=[node.instance_id])

    def close(self) -> None:
        self._stop.set()
        if self._fleet.is_alive():
            self._fleet.join(timeout=5)
        for node in list(self.nodes.values()):
            kill_namespace(node.ns)
            if node.process is not None and node.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.process.pid, signal.SIGKILL)


def config_from_output(text: str) -> dict[str, Any]:
    """The cluster YAML of the stack's output."""
    return yaml.safe_load(text)  # type: ignore[no-any-return]


def run_timer(node: PcNode, unit: str) -> subprocess.CompletedProcess[str]:
    """Run a timer's service as systemd would: its ExecStart, as root, systemd's default PATH."""
    service = node.file(f"etc/systemd/system/{unit}.service").read_text()
    (command,) = [line.split("=", 1)[1] for line in service.splitlines() if line.startswith("ExecStart=")]
    return node.run(*command.split())
