"""A cluster on one machine: the synthesized stack created in moto, its nodes booted for real.

Each node is a network namespace with its own address (the private IP moto gave the instance) on a
bridge, a real OpenSSH server, its own instance-metadata service, and the user data moto stored in
the launch template, run as root by bash. The AWS side (moto's server plus SignalResource and
wait-condition handles, :mod:`tests.e2e.aws_endpoint`) lives in one more namespace on the same
bridge. Nothing leaves these namespaces; every process started is stopped by its PID.

What stands in for what, and nothing else (each is also in the README):

* EFA device: libfabric's ``tcp`` provider (``EFA_CDK_TEST_ONLY_PROVIDER=tcp``) and a fake
  ``/sys/class/infiniband`` under the node's root with the layout's count of ``efa``-bound devices.
* The image's EFA software: Debian's libfabric (fi_info, fi_pingpong) linked at /opt/amazon/efa/bin.
* Credentials: the AWS CLI gets fixed keys and moto's endpoint (AWS_ENDPOINT_URL), not a role from
  IMDS. The key pair: created here (ssh-keygen) and stored where EC2 keeps it (/ec2/keypair/<id>),
  since moto's CloudFormation does not model AWS::EC2::KeyPair.
* The CloudWatch agent and systemd (no init system in a namespace): a stand-in
  ``amazon-cloudwatch-agent-ctl`` that checks the configuration it is given parses, and a
  ``systemctl`` that records the timer it is asked to start. The health check itself runs for real
  and publishes to moto's CloudWatch.
* Node paths: the node software runs with EFA_CDK_ROOT (its documented test root) so three nodes
  share one file system; /home and /var/lib/efa-cdk, which other nodes reach over SSH, are
  bind-mounted per node.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import itertools
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e import node_iam, progress
from tests.e2e.aws_endpoint import NODE_KEY
from tests.helpers import cdk_json_context, executable
from tests.moto_compat import moto_compatible

ROOT = Path(__file__).resolve().parents[2]
_NUMBERS = itertools.count(1)  # the clusters of this process
AWS_IP, PORT = "10.0.255.254", 4566
ENDPOINT = f"http://{AWS_IP}:{PORT}"
ACCOUNT, REGION = "123456789012", "us-east-1"
LOGIN_UID = 4242
CLONE_NEWNET = 0x40000000


def missing_capabilities() -> list[str]:
    """What this machine lacks for the harness (empty: it can run)."""
    needs = {
        "root": os.geteuid() == 0,
        "ip (iproute2)": shutil.which("ip") is not None,
        "unshare, nsenter (util-linux)": bool(shutil.which("unshare") and shutil.which("nsenter")),
        "sshd (openssh-server)": Path("/usr/sbin/sshd").exists(),
        "mpirun (openmpi-bin)": shutil.which("mpirun") is not None,
        "fi_pingpong (libfabric-bin)": shutil.which("fi_pingpong") is not None,
        "AWS CLI (.venv-e2e, scripts/setup --dev)": (ROOT / ".venv-e2e/bin/aws").exists(),
    }
    missing = [k for k, ok in needs.items() if not ok]
    if not missing:
        name = f"efa-e2e-probe-{os.getpid()}"
        probe = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
        if probe.returncode != 0:
            missing.append(f"network namespaces ({probe.stderr.strip()})")
    return missing


def sh(*cmd: str, check: bool = True, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


@contextlib.contextmanager
def inside(ns: str) -> Iterator[None]:
    """Run this thread inside network namespace `ns` (so the harness talks to moto on the bridge)."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {ns}")
        yield
    finally:
        libc.setns(home, CLONE_NEWNET)
        os.close(home)
        os.close(target)


def synthesize_cluster(outdir: Path, name: str, **context: str) -> None:
    """A ready cluster stack as the one-machine nodes boot it: three trn1.32xlarge in us-east-1a with the
    benchmark that needs no accelerator; `context` adds keys or overrides these."""
    import aws_cdk as cdk

    from stacks.cluster_stack import EfaClusterStack
    from stacks.params import ClusterParams

    app = cdk.App(outdir=str(outdir), context=cdk_json_context())
    params = ClusterParams.from_context(
        {"node_count": "3", "availability_zone": "us-east-1a", "benchmarks": "fi_pingpong", **context},
        default_instance_type="trn1.32xlarge",
    )
    EfaClusterStack(app, name, params=params)
    app.synth()


@dataclass
class Node:
    """One booted (or deliberately not booted) node."""

    name: str
    ns: str
    ip: str
    instance_id: str
    logical_id: str
    root: Path
    process: subprocess.Popen[bytes] | None = None

    def pid(self, what: str) -> int | None:
        path = self.root / "run" / f"{what}.pid"
        return int(path.read_text().split()[0]) if path.exists() else None

    def _enter(self) -> list[str]:
        """The prefix that runs a command in this node's network, mount and UTS namespaces (its sshd's)."""
        pid = self.pid("sshd")
        assert pid, f"{self.name} has no sshd"
        return ["nsenter", "--target", str(pid), "--net", "--mount", "--uts"]

    def run_as_user(self, user: str, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A command as the login user in this node's namespaces."""
        return sh(*self._enter(), "runuser", "-u", user, "--", *cmd, check=False, timeout=timeout)

    def run_as_root(self, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A command as root in this node's namespaces, with the node's AWS settings and root."""
        env = dict(line.split("=", 1) for line in (self.root / "aws.env").read_text().splitlines())
        # the node's own PATH (node.sh): the stand-ins (systemctl) before this machine's commands
        path = f"{ROOT}/.venv-e2e/bin:{self.root}/harness-bin:{os.environ['PATH']}"
        env |= {"EFA_CDK_ROOT": str(self.root), "PATH": path}
        return sh(
            *self._enter(), "env", *(f"{k}={v}" for k, v in env.items()), *cmd, check=False, timeout=timeout
        )

    def log(self) -> str:
        path = self.root / "var/log/efa-cdk.log"
        return path.read_text(errors="replace") if path.exists() else "(no log)"


#: The fabric sweep's bar on this host (EFA_CDK_SWEEP_THRESHOLD; a cluster's default is half the median).
#: Every node shares two cores with the others and, in CI, with the rest of the suite: a fresh-clone
#: run measured a healthy link of the three-node cluster at 3.05 Gbit/s both ways against a median of
#: 6.14 (half: 3.07), one pair alone in each round. A node `throttle` slows runs `SLOWED` times below the
#: median, far under a quarter.
SWEEP_THRESHOLD = "0.25"

#: How far below the slowest node of the cluster's last sweep `slowed_rate` sets a slowed node's link. Not a
#: fixed rate: another fresh-clone run measured the whole bridge at 0.305 Gbit/s (the machine under load),
#: where a fixed 100 Mbit/s was a third of the median, above the bar, and the slowed node was not named.
#: The reference is a sweep with the slowed sweep's own message size, just before it: a fresh-clone run
#: that set the rate from the formation's sweep (4 MiB messages) saw the healthy pair of the slowed sweep
#: (1 MiB) under four times the slowed ones, and named none.
SLOWED = 20

#: The sweeps the tests run themselves (a healthy one, then one with nodes slowed), on the leader: 1 MiB
#: messages (the one-machine cluster's tcp stand-in measures 0.3 to 6 Gbit/s here), 10 round trips a pair.
#: A node's figure is its best pair's (efa_constructs/node/sweep.py), so a moment of load on one pair costs
#: a narrowing round, not a name. A slowed pair runs `SLOWED` times longer than the slowest healthy one with
#: both ends spinning (fi_pingpong polls its completion queue): fresh-clone runs sampled every 5 s spent about
#: 130 and 210 CPU-seconds in these sweeps at 30 round trips (most of both cores for three minutes), 33 to
#: 50 at 10.
SWEEP = ("env", "EFA_CDK_SWEEP_BYTES=1048576", "EFA_CDK_SWEEP_ITERATIONS=10")

#: The formation benchmark's fi_pingpong iterations per message size (EFA_CDK_PINGPONG_ITERATIONS; a
#: cluster's default is 1000): the harness proves the results reach the wait condition and parse, not a
#: figure. Every size of `-S all` still runs; fi_pingpong spins on its completion queue, so over the tcp
#: stand-in each iteration is CPU the rest of the suite shares: a fresh-clone run spent about 115 CPU-seconds
#: in the formations' fi_pingpong at 100 and 1000 iterations, 61 of them on the sweep's five nodes.
PINGPONG_ITERATIONS = "10"


def slowed_rate(leader: Node) -> str:
    """A `tc` rate `SLOWED` times below the slowest node's figure in the leader's last fabric sweep (its
    verdict.json): run a healthy sweep with the same settings first."""
    verdict = leader.root / "var/lib/efa-cdk/sweep/verdict.json"
    assert verdict.exists(), f"{verdict}: no sweep on the leader yet to measure the healthy fabric"
    slowest = min(float(g) for g in json.loads(verdict.read_text())["nodes"].values())
    assert slowest > 0, f"{verdict}: the healthy sweep measured a node at nothing ({slowest} Gbit/s)"
    return f"{max(1, round(slowest * 1000 / SLOWED))}mbit"


def throttle(aws_ns: str, node: Node, rate: str | None) -> None:
    """Slow one node's link with Linux traffic control: a ``tbf`` rate limit on both ends of its veth
    (the node's eth0, and the bridge's end in the AWS namespace), so its traffic is limited both ways;
    `rate` None takes the limits off. This machine's kernel has tbf and htb, not netem (no added delay)."""
    link = sh("ip", "-n", node.ns, "-o", "link", "show", "eth0").stdout
    peer = re.search(r"eth0@if(\d+)", link)
    assert peer, link
    bridge_end = next(
        line.split(":")[1].strip().split("@")[0]
        for line in sh("ip", "-n", aws_ns, "-o", "link").stdout.splitlines()
        if line.split(":")[0] == peer.group(1)
    )
    for ns, dev in ((node.ns, "eth0"), (aws_ns, bridge_end)):
        sh("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root", check=False)
        if rate is not None:
            sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root",
               "tbf", "rate", rate, "burst", "64kb", "latency", "50ms")  # fmt: skip


@dataclass
class Cluster:
    """The harness: namespaces, the AWS endpoint, stacks and nodes; `close()` stops everything.

    Every namespace name carries the cluster's `run_id` (the process id and the cluster's number in
    it), so two runs on one machine (a test suite and a second checkout), and two clusters of one
    run, never touch each other's namespaces; addresses repeat freely between clusters, since each
    has its own bridge in its own AWS namespace, and never on one bridge (`_attach` refuses)."""

    work: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="efa-e2e-")))
    namespaces: list[str] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    run_id: str = field(default_factory=lambda: f"{os.getpid()}-{next(_NUMBERS)}")

    @property
    def aws_ns(self) -> str:
        """The namespace of the AWS endpoint and the bridge."""
        return f"efa-e2e-{self.run_id}-aws"

    def ns(self, name: str) -> str:
        """This run's name for a node's namespace."""
        return f"efa-e2e-{self.run_id}-{name}"

    # -- network -------------------------------------------------------------------------------
    def start(self) -> None:
        aws_ns = self.aws_ns
        self._netns(aws_ns)
        sh("ip", "-n", aws_ns, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", aws_ns, "addr", "add", f"{AWS_IP}/16", "dev", "br0")
        sh("ip", "-n", aws_ns, "link", "set", "br0", "up")
        state = self.work / "aws"
        state.mkdir()
        log = (self.work / "aws.log").open("wb")
        self.processes.append(
            subprocess.Popen(
                ["ip", "netns", "exec", aws_ns, str(ROOT / ".venv/bin/python"),
                 "-m", "tests.e2e.aws_endpoint", AWS_IP, str(PORT), str(state)],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            )
        )  # fmt: skip
        deadline = time.time() + 60
        while not (state / "ready").exists():
            assert time.time() < deadline, (self.work / "aws.log").read_text()
            time.sleep(0.2)
        self.state = state

    def _netns(self, name: str) -> None:
        sh("ip", "netns", "del", name, check=False)  # left over from an interrupted run
        sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        sh("ip", "-n", name, "link", "set", "lo", "up")

    def _attach(self, ns: str, ip: str, index: int) -> None:
        # Two nodes with one address on the bridge take each other's replies (whichever answered ARP
        # last gets them): a flaky hang, not a failure. moto gives every new subnet the same first
        # addresses, so a second stack boots on a Cluster of its own, as two VPCs never share a link.
        for other in self.namespaces[1:]:  # every node namespace on this bridge, ParallelCluster's too
            shown = sh("ip", "-n", other, "-4", "-o", "addr", "show", "dev", "eth0", check=False)
            if f" {ip}/" in shown.stdout:
                raise AssertionError(
                    f"{ip} is already {other}'s on this bridge; boot this stack on its own Cluster"
                )
        self._netns(ns)
        sh(
            "ip",
            "-n",
            self.aws_ns,
            "link",
            "add",
            f"v{index}",
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            ns,
        )
        sh("ip", "-n", self.aws_ns, "link", "set", f"v{index}", "master", "br0", "up")
        sh("ip", "-n", ns, "addr", "add", f"{ip}/16", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "addr", "add", "169.254.169.254/32", "dev", "lo")

    def clients(self) -> dict[str, Any]:
        import boto3
        from botocore.config import Config

        cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2})
        keys = {"aws_access_key_id": "e2e", "aws_secret_access_key": "e2e", "region_name": REGION}
        return {
            s: boto3.client(s, endpoint_url=ENDPOINT, config=cfg, **keys)  # type: ignore[call-overload]
            for s in ("ec2", "ssm", "s3", "cloudformation", "cloudwatch", "iam", "autoscaling")
        }

    # -- a stack and its nodes -------------------------------------------------------------------
    def deploy(self, name: str, assembly: Path, key_pair_id: str) -> dict[str, Any]:
        """Create the synthesized stack `name` (from the cloud assembly) in moto: its assets in S3,
        its key pair in SSM, the template rewritten as tests/moto_compat.py says (a wait-condition
        handle's URL is the endpoint's). Returns the template, the physical ids by logical id, the
        outputs and one of moto's AMIs."""
        template = json.loads((assembly / f"{name}.template.json").read_text())
        assets = json.loads((assembly / f"{name}.assets.json").read_text())["files"]
        with inside(self.aws_ns):
            aws = self.clients()
            for asset in assets.values():
                dest = next(iter(asset["destinations"].values()))
                bucket = (
                    dest["bucketName"].replace("${AWS::AccountId}", ACCOUNT).replace("${AWS::Region}", REGION)
                )
                with contextlib.suppress(aws["s3"].exceptions.BucketAlreadyOwnedByYou):
                    aws["s3"].create_bucket(Bucket=bucket)
                source = assembly / asset["source"]["path"]
                body = _zip(source) if asset["source"].get("packaging") == "zip" else source.read_bytes()
                aws["s3"].put_object(Bucket=bucket, Key=dest["objectKey"], Body=body)
            key = self.work / f"{name}.key"
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
            aws["ssm"].put_parameter(
                Name=f"/ec2/keypair/{key_pair_id}", Value=key.read_text(), Type="SecureString", Overwrite=True
            )
            ami = aws["ec2"].describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
            res = template["Resources"]
            stand_ins = {r: key_pair_id for r, v in res.items() if v["Type"] == "AWS::EC2::KeyPair"}
            stand_ins |= {  # the endpoint serves wait-condition handles
                r: f"{ENDPOINT}/wait-condition/{r}"
                for r, v in res.items()
                if v["Type"] == "AWS::CloudFormation::WaitConditionHandle"
            }
            body = moto_compatible(template, ami, aws["ssm"], stand_ins)
            instances = [r for r in body["Resources"].values() if r["Type"] == "AWS::EC2::Instance"]
            if instances:  # moto reads no subnet from a launch template
                lt = next(v for v in body["Resources"].values() if v["Type"] == "AWS::EC2::LaunchTemplate")
                subnet = lt["Properties"]["LaunchTemplateData"]["NetworkInterfaces"][0]["SubnetId"]
                for r in instances:
                    r["Properties"]["SubnetId"] = subnet
            params = [
                {"ParameterKey": k, "ParameterValue": "us-east-1a"}
                for k, p in body.get("Parameters", {}).items()
                if "Default" not in p
            ]
            cfn = aws["cloudformation"]
            cfn.create_stack(
                StackName=name,
                TemplateBody=json.dumps(body),
                Parameters=params,
                Capabilities=["CAPABILITY_IAM"],
            )
            status = cfn.describe_stacks(StackName=name)["Stacks"][0]
            assert status["StackStatus"] == "CREATE_COMPLETE", status.get("StackStatusReason")
            physical = {
                r["LogicalResourceId"]: r["PhysicalResourceId"]
                for r in cfn.list_stack_resources(StackName=name)["StackResourceSummaries"]
            }
        outputs = {o["OutputKey"]: o["OutputValue"] for o in status.get("Outputs", [])}
        return {"template": template, "physical": physical, "outputs": outputs, "ami": ami}

    def create_stack(self, name: str, assembly: Path, key_pair_id: str) -> dict[str, Any]:
        """Create the synthesized EFA cluster stack `name` in moto (:meth:`deploy`). Returns the
        instances: logical id -> (instance id, private ip, tags), the user data and the handle."""
        deployed = self.deploy(name, assembly, key_pair_id)
        res, physical = deployed["template"]["Resources"], deployed["physical"]
        with inside(self.aws_ns):
            aws = self.clients()
            nodes = sorted(r for r, v in res.items() if v["Type"] == "AWS::EC2::Instance")
            found = aws["ec2"].describe_instances(InstanceIds=[physical[n] for n in nodes])["Reservations"]
            by_id = {i["InstanceId"]: i for r in found for i in r["Instances"]}
            (lt_id,) = [r for r, v in res.items() if v["Type"] == "AWS::EC2::LaunchTemplate"]
            version = aws["ec2"].describe_launch_template_versions(LaunchTemplateId=physical[lt_id])
            user_data = base64.b64decode(
                version["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"]
            )
        profile = res[lt_id]["Properties"]["LaunchTemplateData"]["IamInstanceProfile"]["Arn"]["Fn::GetAtt"][0]
        (role,) = res[profile]["Properties"]["Roles"]
        return {
            "name": name,
            "role": physical[role["Ref"]],
            "user_data": user_data.decode(),
            "instances": {
                n: (physical[n], by_id[physical[n]]["PrivateIpAddress"],
                    {t["Key"]: t["Value"] for t in by_id[physical[n]]["Tags"]})
                for n in nodes
            },
            "handle": next(
                r for r, v in res.items() if v["Type"] == "AWS::CloudFormation::WaitConditionHandle"
            ),
        }  # fmt: skip

    def boot(
        self,
        prefix: str,
        stack: dict[str, Any],
        user: str,
        efa_devices: list[int | None],
        settings: dict[str, str],
        *,
        other_rdma: int = 0,
        docker_image: tuple[Path, str] | None = None,
    ) -> list[Node]:
        """Boot one node per instance, in node-index order; efa_devices[i] is node i's EFA count
        (None: the node never comes up: its namespace exists, nothing runs in it). `settings`
        replace values in the user data's settings (the harness's shorter waits). `other_rdma`
        RDMA devices not bound to efa sit beside the EFAs (p6-b200's NVLink controllers).
        `docker_image` (a root file system tar, its tag): each node runs its own Docker engine in its
        namespaces, with that image imported."""
        user_data = stack["user_data"]
        # a later line of the settings heredoc wins
        harness = {
            "EFA_CDK_SWEEP_THRESHOLD": SWEEP_THRESHOLD,
            "EFA_CDK_PINGPONG_ITERATIONS": PINGPONG_ITERATIONS,
        }
        for key, value in {**harness, **settings}.items():
            user_data = user_data.replace("\nEFA_CDK_SETTINGS\n", f"\n{key}='{value}'\nEFA_CDK_SETTINGS\n", 1)
        ordered = sorted(stack["instances"].items(), key=lambda kv: int(kv[1][2]["efa-cdk:node-index"]))
        booted = []
        for i, (logical, (iid, ip, tags)) in enumerate(ordered):
            ns = self.ns(f"{prefix}{i}")
            node = Node(f"{prefix}{i}", ns, ip, iid, logical, self.work / f"{prefix}{i}")
            self._attach(ns, ip, len(self.nodes) + 1)
            self.nodes.append(node)
            booted.append(node)
            if efa_devices[i] is None:
                continue
            _node_files(node, user, user_data, tags, efa_devices[i] or 0, other_rdma)
            if docker_image is not None:
                (node.root / "docker").mkdir()
                (node.root / "docker/image.tar").symlink_to(docker_image[0])
                (node.root / "docker/image.tag").write_text(docker_image[1])
                # the accelerators' device files the container step passes (--device=/dev/neuron<i>)
                devices = dict.fromkeys(re.findall(r"--device=(/dev/neuron\d+)", user_data))
                (node.root / "docker/accelerators").write_text("".join(f"{d}\n" for d in devices))
            log = (node.root / "console.log").open("wb")
            # nsenter, not `ip netns exec`, which mounts a new /sys without the cgroups Docker needs
            node.process = subprocess.Popen(
                ["nsenter", f"--net=/var/run/netns/{ns}", "unshare", "--mount", "--uts",
                 "--propagation", "private", "bash", str(ROOT / "tests/e2e/node.sh"), str(node.root)],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        return booted

    def wait(
        self, nodes: list[Node], *, stall: float = progress.STALL, ceiling: float = progress.CEILING
    ) -> None:
        """Until every booted node's user data has finished, for as long as the nodes make progress
        (tests/e2e/progress.py): a stuck node fails naming its step, a slow machine says so."""
        booted = [n for n in nodes if n.process is not None]

        def where() -> str:
            running = [n for n in booted if n.process is not None and n.process.poll() is None]
            return "; ".join(f"{n.name} ({n.ip}) {last_step(n.log())}" for n in running)

        progress.until(
            lambda: all(n.process is not None and n.process.poll() is not None for n in booted),
            lambda: progress.activity(
                [n.ns for n in booted],
                [f for n in booted for f in (n.root / "var/log/efa-cdk.log", n.root / "console.log")],
            ),
            where,
            what=f"booting {', '.join(n.name for n in booted)}",
            stall=stall,
            ceiling=ceiling,
        )

    def unauthorized(self, role: str, nodes: list[Node], without: str = "") -> tuple[list[str], set[str]]:
        """The calls `nodes` made that role `role` (its name in moto's IAM) does not allow, as IAM
        decides (tests/e2e/node_iam.py), and the services and operations examined. `without`: the
        role as if its statements naming that action were gone (to see the check refuse)."""
        made = node_iam.calls(self.state, {n.ip for n in nodes})
        with inside(self.aws_ns):
            aws = self.clients()
            statements = [
                st for st in node_iam.role_statements(aws["iam"], role)
                if not without or without not in json.dumps(st.get("Action", ""))
            ]  # fmt: skip

            def lookup(kind: str, name: str) -> str:
                if kind == "stack":
                    return str(aws["cloudformation"].describe_stacks(StackName=name)["Stacks"][0]["StackId"])
                if kind == "cluster-tag":  # the instance's efa-cdk:cluster tag (its launch template's)
                    tags = aws["ec2"].describe_tags(Filters=[{"Name": "resource-id", "Values": [name]}])[
                        "Tags"
                    ]
                    return next((t["Value"] for t in tags if t["Key"] == "efa-cdk:cluster"), "")
                (found,) = aws["autoscaling"].describe_auto_scaling_instances(InstanceIds=[name])[
                    "AutoScalingInstances"
                ]
                (group,) = aws["autoscaling"].describe_auto_scaling_groups(
                    AutoScalingGroupNames=[found["AutoScalingGroupName"]]
                )["AutoScalingGroups"]
                return str(group["AutoScalingGroupARN"])

            return node_iam.denied(made, statements, lookup), {f"{c['service']}:{c['action']}" for c in made}

    def signals(self) -> list[dict[str, str]]:
        path = self.state / "signals.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def handle(self, rid: str) -> dict[str, Any] | None:
        path = self.state / "handles" / f"{rid}.json"
        return json.loads(path.read_text()) if path.exists() else None

    # -- teardown --------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every process by its PID, delete every namespace."""
        for node in self.nodes:
            kill_namespace(node.ns)  # Docker and its containers, job processes
            for what in ("imds", "sshd"):
                pid = node.pid(what)
                if pid:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGTERM)
            if node.process is not None and node.process.poll() is None:
                os.killpg(node.process.pid, signal.SIGTERM)
                node.process.wait(timeout=10)
        for proc in self.processes:
            proc.terminate()
            proc.wait(timeout=10)
        for ns in reversed(self.namespaces):
            sh("ip", "netns", "del", ns, check=False)


def kill_namespace(ns: str) -> None:
    """Kill every process in network namespace `ns` (SIGKILL: a node that ends, or the run's end)."""
    for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


def explain(nodes: list[Node]) -> str:
    """The end of each node's efa-cdk log, for an assertion's message."""
    return "\n".join(f"--- {n.name} ({n.ip})\n{n.log()[-3000:]}" for n in nodes)


def last_step(log: str) -> str:
    """Where a node's efa-cdk log stopped: its last step line and last line."""
    lines = log.splitlines()
    steps = [line for line in lines if "==> step" in line]
    step = steps[-1] if steps else "(none started)"
    return f"last step: {step}; last line: {lines[-1] if lines else '(empty)'}"


def _zip(folder: Path) -> bytes:
    out = Path(tempfile.mkstemp(suffix=".zip")[1])
    with zipfile.ZipFile(out, "w") as zf:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(folder))
    data = out.read_bytes()
    out.unlink()
    return data


def _node_files(
    node: Node, user: str, user_data: str, tags: dict[str, str], efa_devices: int, other_rdma: int = 0
) -> None:
    """The node's root: user data, IMDS answers, AWS CLI settings, login user, sshd, EFA stand-ins."""
    r = node.root
    for d in ("etc/ssh", "etc/profile.d", "var/lib/efa-cdk", "var/log", "run", "opt/amazon/efa/bin", "home"):
        (r / d).mkdir(parents=True, exist_ok=True)
    (r / "user-data").write_text(user_data)
    metadata = {"meta-data/instance-id": node.instance_id, "meta-data/local-ipv4": node.ip}
    metadata |= {f"meta-data/tags/instance/{k}": v for k, v in tags.items()}
    (r / "imds.json").write_text(json.dumps(metadata))
    # EC2's IP-based host name (EC2 user guide, "Hostname types": the IP name), one per node as
    # on EC2: nodes that shared one (this machine's) would share Open MPI's session directory,
    # /tmp/ompi.<host>.<uid>, and two daemons creating it at once fail ("mkdir ... File exists").
    (r / "hostname").write_text("ip-" + node.ip.replace(".", "-") + "\n")
    # Short timeouts: a request moto's threaded server leaves hanging is retried in seconds, not 60.
    (r / "aws-config").write_text(
        "[default]\nregion = us-east-1\ncli_read_timeout = 10\ncli_connect_timeout = 5\n"
        "s3 =\n    addressing_style = path\n"
    )
    (r / "aws.env").write_text(
        f"AWS_ENDPOINT_URL={ENDPOINT}\nAWS_ACCESS_KEY_ID={NODE_KEY}\nAWS_SECRET_ACCESS_KEY=e2e\n"
        f"AWS_DEFAULT_REGION={REGION}\nAWS_CONFIG_FILE={r}/aws-config\nEFA_CDK_TEST_ONLY_PROVIDER=tcp\n"
    )
    users = {"passwd": f"{user}:x:{LOGIN_UID}:{LOGIN_UID}::/home/{user}:/bin/bash",
             "group": f"{user}:x:{LOGIN_UID}:", "shadow": f"{user}:*:19000:0:99999:7:::"}  # fmt: skip
    for f, line in users.items():
        host = Path("/etc", f).read_text()
        (r / f).write_text(
            host if any(x.startswith(f"{user}:") for x in host.splitlines()) else host + line + "\n"
        )
    home = r / "home" / user
    home.mkdir(exist_ok=True)
    os.chown(home, LOGIN_UID, LOGIN_UID)
    shutil.copy("/etc/os-release", r / "etc/os-release")
    for tool in ("fi_info", "fi_pingpong"):
        (r / "opt/amazon/efa/bin" / tool).symlink_to(shutil.which(tool) or tool)
    # Each RDMA device as sysfs shows it (its driver; its verbs device uverbs<i>, Linux's
    # sysfs-class-infiniband ABI) and its character device (the uverbs major, 231) under ROOT/dev
    devices = [(f"rdmap{i}s0", "efa") for i in range(efa_devices)]
    devices += [(f"ibp{i}s0", "mlx5_core") for i in range(other_rdma)]
    (r / "dev/infiniband").mkdir(parents=True)
    # The accelerators' device files the type has (accelerator-check.sh counts them; a later line of
    # the settings heredoc wins, as in node.env): empty stand-ins, as no driver is here
    said = dict(re.findall(r"^(EFA_CDK_ACCELERATOR(?:_COUNT)?)='([^']*)'$", user_data, re.M))
    prefix = {"neuron": "neuron", "nvidia-gpu": "nvidia"}.get(said.get("EFA_CDK_ACCELERATOR", ""))
    for i in range(int(said.get("EFA_CDK_ACCELERATOR_COUNT", "0")) if prefix else 0):
        (r / f"dev/{prefix}{i}").touch()
    for i, (name, driver) in enumerate(devices):
        drivers = r / "sys/bus/pci/drivers" / driver
        drivers.mkdir(parents=True, exist_ok=True)
        dev = r / f"sys/class/infiniband/{name}/device"
        dev.mkdir(parents=True)
        (dev / "driver").symlink_to(drivers)
        verbs = r / f"sys/class/infiniband_verbs/uverbs{i}"
        verbs.mkdir(parents=True)
        (verbs / "ibdev").write_text(name + "\n")
        os.mknod(r / f"dev/infiniband/uverbs{i}", 0o666 | stat.S_IFCHR, os.makedev(231, 192 + i))
    executable(
        r / "opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl",
        f'#!/bin/bash\necho "$*" >>{r}/ctl.log\n'
        'exec python3 -c "import json,sys; json.load(open(sys.argv[1][5:]))" "${@: -1}"\n',
    )
    # the image's agent is new enough for EFA metrics (an older one is upgraded: tests/test_monitoring.py)
    (r / "opt/aws/amazon-cloudwatch-agent/bin/CWAGENT_VERSION").write_text("1.300068.0b1500\n")
    executable(r / "harness-bin/systemctl", f'#!/bin/bash\necho "$*" >>{r}/systemctl.log\n')
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(r / "etc/ssh/host_key"))
    (r / "etc/ssh/sshd_config").write_text(
        f"ListenAddress {node.ip}\nHostKey {r}/etc/ssh/host_key\nPidFile {r}/run/sshd.pid\n"
        "UsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
    )
