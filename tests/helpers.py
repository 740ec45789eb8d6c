"""Helpers shared by the test modules (the one place they live; test modules import only this).

* ``new_app`` / ``isolated_vpc``: Apps as `cdk synth` builds them, and the cheapest VPC.
* ``lint`` / ``by_type``: stock cfn-lint over a template; resources of one type.
* ``Node``: a scratch node (file tree, settings, stub commands) to run the node scripts with bash.
"""

from __future__ import annotations

import base64
import contextlib
import email
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from aws_cdk import Stack

from efa_constructs import EfaUserData, instance_type, plan_layout
from efa_constructs.core.software import EFA_INSTALLER_FINGERPRINT, EFA_INSTALLER_VERSION

ROOT = Path(__file__).resolve().parent.parent
#: The generation tag of the stand-in nodes (a launch template's hash, as the cluster tags its nodes).
GENERATION = "0123456789abcdef"


def cdk_json_context() -> dict[str, Any]:
    """cdk.json's feature flags: an App built in pytest does not read cdk.json by itself."""
    context: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]
    return context


def new_app(extra_context: dict[str, Any] | None = None) -> Any:
    """An App as `cdk synth` builds it, minus the bootstrap-version rule (snapshot churn)."""
    import aws_cdk as cdk

    return cdk.App(
        context={**cdk_json_context(), **(extra_context or {})},
        default_stack_synthesizer=cdk.DefaultStackSynthesizer(generate_bootstrap_version_rule=False),
    )


def pcs_image() -> Any:
    """An image for AWS PCS nodes in tests (Amazon Linux 2023: the family of AWS's PCS sample AMIs)."""
    from efa_constructs import EfaMachineImage, OsFamily

    return EfaMachineImage.from_ami_id("ami-0123456789abcdef0", os_family=OsFamily.AMAZON_LINUX_2023)


def isolated_vpc(stack: Any) -> Any:
    """A one-AZ VPC with one isolated subnet: the cheapest VPC the constructs accept."""
    from aws_cdk import aws_ec2 as ec2

    return ec2.Vpc(
        stack,
        "Vpc",
        max_azs=1,
        nat_gateways=0,
        subnet_configuration=[ec2.SubnetConfiguration(name="P", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
    )


LINT_IGNORED = [
    (
        "W3010",
        "",
        "a user-chosen availability_zone is pinned on purpose: an EFA cluster lives in one AZ",
    ),
]


def lint(template: dict[str, Any], *, stock: bool = False) -> list[str]:
    """cfn-lint findings (errors and warnings) for a synthesized template, in us-east-1; with `stock`,
    all of them (what a user's own cfn-lint reports), else less LINT_IGNORED."""
    from cfnlint.api import ManualArgs
    from cfnlint.api import lint as cfn_lint

    matches = cfn_lint(json.dumps(template), config=ManualArgs(regions=["us-east-1"]))
    return [
        f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})"
        for m in matches
        if stock
        or not any(
            m.rule.id == rule and str(m.path[1]).startswith(prefix) for rule, prefix, _ in LINT_IGNORED
        )
    ]


def masked(template: dict[str, Any]) -> dict[str, Any]:
    """The template with asset hashes masked wherever they stand (object keys, S3 URLs in user data and
    in the ParallelCluster config), so a snapshot diff shows what changed, not a new hash. What the
    assets hold is tested on its own (shellcheck, the stub runs of the scripts)."""
    text = re.sub(r"[0-9a-f]{64}(?=\.(?:zip|sh))", "<asset-hash>", json.dumps(template))
    # the nodes' generation hashes their launch template, asset hashes included
    text = re.sub(r'("Key": "efa-cdk:generation", "Value": ")[0-9a-f]{16}"', r'\1<generation>"', text)
    result: dict[str, Any] = json.loads(text)
    return result


#: The stack every other cluster snapshot is written against (its parts shared by all are stored once).
SNAPSHOT_BASE = "Trn1EfaCluster"


def readable(value: Any) -> Any:
    """A template as a reviewer reads it in a snapshot diff: text with newlines (user data: the bootstrap
    and its settings) as a list of lines, so a one-line change is one line; long one-line JSON
    (dashboards, agent configuration) cut after each comma that starts a new member, one piece a line."""
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [readable(v) for v in value]
    if isinstance(value, str) and "\n" in value:
        out: list[str] = []
        for line in value.split("\n"):
            out.extend(readable(line) if len(line) > 120 else [line])
        return {"<text>": out}
    if isinstance(value, str) and len(value) > 120:
        return re.split(r'(?<=,)(?=["{\[])', value)
    return value


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        return {k: v for key, item in value.items() for k, v in _leaves(item, f"{path}/{key}").items()}
    if isinstance(value, list) and value:
        return {k: v for i, item in enumerate(value) for k, v in _leaves(item, f"{path}/{i}").items()}
    return {path: value}


def against(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """`other` written as what differs from `base`: changed or added leaves by path, removed paths."""
    a, b = _leaves(base), _leaves(other)
    return {
        "base": SNAPSHOT_BASE,
        "changed": {k: v for k, v in b.items() if a.get(k, object()) != v},
        "removed": sorted(k for k in a if k not in b),
    }


def by_type(template: dict[str, Any], cfn_type: str) -> list[dict[str, Any]]:
    return [r for r in template["Resources"].values() if r["Type"] == cfn_type]


def efa_launch_template(template: dict[str, Any]) -> str:
    """The logical id of the template's one launch template with network interfaces (the EFA nodes';
    a PCS login template has none)."""
    (logical_id,) = [
        k
        for k, v in template["Resources"].items()
        if v["Type"] == "AWS::EC2::LaunchTemplate"
        and "NetworkInterfaces" in v["Properties"]["LaunchTemplateData"]
    ]
    return logical_id


def without_pcs(template: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """A copy of `template` without its AWS::PCS::* resources and the outputs naming them (moto models
    no PCS), and the logical ids left out. What else refers to them (the node role's registration
    statement names the cluster's ARN) gets a stand-in ARN."""
    pcs = {k for k, v in template["Resources"].items() if v["Type"].startswith("AWS::PCS::")}
    rest = {k: v for k, v in template.items() if k not in ("Resources", "Outputs")}
    rest["Resources"] = {k: v for k, v in template["Resources"].items() if k not in pcs}
    rest["Outputs"] = {
        k: v for k, v in template.get("Outputs", {}).items() if not pcs & set(json.dumps(v).split('"'))
    }

    def stand_in(node: Any) -> Any:
        if isinstance(node, dict):
            if node.get("Ref") in pcs or (node.get("Fn::GetAtt") or [None])[0] in pcs:
                return "arn:aws:pcs:us-east-1:123456789012:cluster/pcs_standin"
            return {k: stand_in(v) for k, v in node.items()}
        if isinstance(node, list):
            return [stand_in(v) for v in node]
        return node

    return stand_in(json.loads(json.dumps(rest))), pcs


FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"
#: The instance id the IMDS stub answers: the node under test.
THIS_INSTANCE = "i-0123456789abcdef0"
BASH = shutil.which("bash") or "/bin/bash"

# Each stub appends "<name> <args>" to $STUB_LOG, then behaves as below.
STUBS = {
    "curl": r"""
out="" ; data="" ; url=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out=$2; shift ;;
    --data-binary) data=${2#@}; shift ;;
    -H|-X) shift ;;
    http*) url=$1 ;;
  esac
  shift
done
if [ -n "${STUB_CURL_FAILS:-}" ]; then  # a URL beginning with this is refused (as curl -f: exit 22)
  case "$url" in "$STUB_CURL_FAILS"*) exit 22 ;; esac
fi
case "$url" in
  */api/token) echo tok ;;
  */meta-data/instance-id)  # THIS_INSTANCE unless the test names another
    cat "$STUB_DIR/instance-id" 2>/dev/null || echo i-0123456789abcdef0 ;;
  */meta-data/local-ipv4) cat "$STUB_DIR/local-ipv4" ;;
  */meta-data/tags/instance/*) cat "$STUB_DIR/tags/${url##*/}" 2>/dev/null || exit 22 ;;
  https://stand-in/handle) cp "$data" "$STUB_DIR/posted.json" ;;
  *) [ -f "$STUB_DIR/downloads/${url##*/}" ] || exit 22; cp "$STUB_DIR/downloads/${url##*/}" "$out" ;;
esac
""",
    "aws": r"""
args=" $* "
case "$args" in
  *" signal-resource "*) [ -z "${STUB_SIGNAL_FAILS:-}" ] || exit 254; echo "$*" >>"$STUB_DIR/signals.log" ;;
  *" get-parameter "*"/ec2/keypair/"*) echo "-----BEGIN OPENSSH PRIVATE KEY-----"; echo fake ;;
  *" get-parameter "*"last-replacement:"*)  # name:version, as SSM selects a version (else it refuses)
    n=${args#*last-replacement:}; n=${n%% *}
    cat "$STUB_DIR/last-replacement-v$n" 2>/dev/null \
      || { echo "An error occurred (ParameterVersionNotFound)" >&2; exit 254; } ;;
  *" get-parameter "*"last-replacement"*)  # --query [Parameter.Version,Parameter.Value], as text
    printf '%s\t%s\n' "$(cat "$STUB_DIR/last-replacement-version" 2>/dev/null || echo 1)" \
      "$(cat "$STUB_DIR/last-replacement" 2>/dev/null || echo none)" ;;
  *" put-parameter "*"last-replacement"*)  # --value "<epoch> <id>": the new Version; STUB_RACE: another
    v=${args#* --value }; v=${v% --overwrite *}  # node's write (STUB_RACE's value) landed first
    n=$(($(cat "$STUB_DIR/last-replacement-version" 2>/dev/null || echo 1) + 1))
    if [ -n "${STUB_RACE:-}" ] && [ ! -e "$STUB_DIR/raced" ]; then
      touch "$STUB_DIR/raced"; echo "$STUB_RACE" >"$STUB_DIR/last-replacement-v$n"; n=$((n + 1))
    fi
    echo "$n" >"$STUB_DIR/last-replacement-version"
    echo "$v" >"$STUB_DIR/last-replacement"
    echo "$v" >"$STUB_DIR/last-replacement-v$n"
    echo "$n" ;;
  *" put-parameter "*)  # SSM refuses to overwrite without --overwrite (every parameter here exists)
    case "$args" in
      *" --overwrite "*) ;;
      *) echo "An error occurred (ParameterAlreadyExists)" >&2; exit 254 ;;
    esac
    v=${args#* --value }; v=${v%% --*}; v=${v% }
    case "$args" in
      *"/formed "*) printf '%s\n' "$v" >"$STUB_DIR/formed" ;;
      *"/benchmark-results "*) cat "${v#file://}" >"$STUB_DIR/results" ;;
      *) exit 99 ;;
    esac ;;
  *" get-parameter "*"/formed"*) cat "$STUB_DIR/formed" 2>/dev/null || echo no ;;
  *" get-parameter "*"/benchmark-results"*) cat "$STUB_DIR/results" 2>/dev/null || echo none ;;
  *" get-parameter "*) cat "$STUB_DIR/node-count" ;;
  *" describe-instances --instance-ids "*)  # this node's Auto Scaling group (column 4)
    id=${args#* --instance-ids }; id=${id%% *}
    awk -v id="$id" '$5 == id {print $4}' "$STUB_DIR/instances" ;;
  *" describe-instances "*) cat "$STUB_DIR/instances" ;;
  *" put-metric-data "*)
    echo "$*" >>"$STUB_DIR/metrics.log"
    for a in "$@"; do case "$a" in file://*) cat "${a#file://}" >>"$STUB_DIR/metrics.log" ;; esac; done ;;
  *" set-instance-health "*)
    [ -z "${STUB_HEALTH_FAILS:-}" ] || exit 254
    echo "$*" >>"$STUB_DIR/health.log" ;;
  *" create-tags "* | *" delete-tags "*) echo "$*" >>"$STUB_DIR/ec2-tags.log" ;;  # the device-fault tag
  *" describe-instance-topology "*)  # recorded answers, one per call: topology-0.json, topology-1.json, ...
    n=$(find "$STUB_DIR" -maxdepth 1 -name 'topology-served-*' | wc -l); touch "$STUB_DIR/topology-served-$n"
    cat "$STUB_DIR/topology-$n.json" 2>/dev/null \
      || { echo "An error occurred (UnsupportedOperation)" >&2; exit 254; } ;;
  *) exit 99 ;;
esac
""",
    # the instance-metadata rule (imds step): recorded; no rule exists before it is added (-C fails)
    "iptables": 'case "$*" in *" -C "*) exit 1 ;; esac',
    "ip6tables": 'case "$*" in *" -C "*) exit 1 ;; esac',
    # the image's users: root and the login user exist on a node (not on this machine)
    "id": 'case "$*" in "-u root") echo 0 ;; "-u ubuntu" | "-u ec2-user") echo 1000 ;;\n'
    '  *) exec /usr/bin/id "$@" ;; esac',
    "gpg": r"""
case " $* " in
  *" --import "*) exit 0 ;;
  *" --fingerprint "*) echo "pub:-:4096:1:${STUB_KEY_FPR:24}:::::::"; echo "fpr:::::::::${STUB_KEY_FPR}:" ;;
  *" --verify "*)
    [ "${STUB_SIGNATURE:-good}" = good ] || { echo "[GNUPG:] BADSIG A05480B1DD2D3CCC EFA installer"; exit 1; }
    echo "[GNUPG:] VALIDSIG ${STUB_KEY_FPR} 2024-01-01 0 4 0 1 10 00 ${STUB_KEY_FPR}" ;;
esac
""",
    # As libfabric's efa provider lists a node's devices (libfabric prov/efa: one RDM domain per device,
    # named <device>-rdm), from the devices bound to efa under the node's sysfs; STUB_FI_INFO_FILE: a
    # recorded listing instead.
    "fi_info": r"""
[ -z "${STUB_FI_INFO_FILE:-}" ] || exec cat "$STUB_FI_INFO_FILE"
[ "${STUB_FI_INFO:-ok}" = ok ] || { echo "fi_getinfo: -61 (No data available)"; exit 1; }
case "${FI_PROVIDER:-efa}" in efa) ;; *) echo "fi_getinfo: -61 (No data available)"; exit 1 ;; esac
listed=0
for dev in "$EFA_CDK_ROOT"/sys/class/infiniband/*; do
  [ "$(basename "$(readlink -f "$dev/device/driver")")" = efa ] || continue
  printf 'provider: efa\n    fabric: efa\n    domain: %s-rdm\n    version: 120.0\n' "${dev##*/}"
  printf '    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA\n'
  listed=1
done
[ "$listed" = 1 ] || { echo "fi_getinfo: -61 (No data available)"; exit 1; }
""",
    "ssh-keygen": 'echo "ssh-ed25519 AAAAC3stub efa-cdk"',
    "chown": "exit 0",
    "apt-get": "exit 0",
    "systemctl": "exit 0",
    # the node list (scontrol-nodes); one node's state and reason as drain and resume leave them
    "scontrol": r"""
case "$*" in
  "show nodes -o") cat "$STUB_DIR/scontrol-nodes" ;;
  "show node "*" -o") printf 'NodeName=%s State=%s Reason=%s\n' "$3" \
    "$(cat "$STUB_DIR/slurm-state" 2>/dev/null || echo IDLE)" \
    "$(cat "$STUB_DIR/slurm-reason" 2>/dev/null || echo '(null)')" ;;
  "update "*state=drain*) echo IDLE+DRAIN >"$STUB_DIR/slurm-state"; r="$*"
    echo "${r#*reason=} [root@2026-11-28T10:00:00]" >"$STUB_DIR/slurm-reason" ;;
  "update "*state=resume*) echo IDLE >"$STUB_DIR/slurm-state"; rm -f "$STUB_DIR/slurm-reason" ;;
esac
""",
    "docker": r"""
case "$1" in
  image) exit 1 ;;  # not on the node yet: pulled
  pull) [ "${STUB_PULL:-ok}" = ok ] || { echo "pull access denied" >&2; exit 1; } ;;
  exec)
    shift 2
    case "$*" in
      mpirun*) cat "$STUB_DIR/bench-output" ;;
      *"run_hccl_demo.py --test"*) cat "$STUB_DIR/bench-output" ;;
      *"command -v all_reduce_perf"*) echo /opt/nccl-tests/build/all_reduce_perf ;;
      env*fi_pingpong*) cat "$STUB_DIR/pingpong-output" ;;
      *fi_info*)
        [ "${STUB_CONTAINER_EFA:-ok}" = ok ] || { echo "fi_getinfo: -61 (No data available)"; exit 1; }
        printf 'provider: efa\n    fabric: efa\n' ;;
      ssh*)
        for a in "$@"; do grep -qxF -- "$a" "$STUB_DIR/unreachable" 2>/dev/null && exit 255; done; exit 0 ;;
    esac ;;
esac
exit 0
""",
    "uname": 'echo "${STUB_KERNEL:-6.8.0-1015-aws}"',
    "runuser": 'shift 3; exec "$@"',
    "ssh": r"""
for a in "$@"; do
  grep -qxF -- "$a" "$STUB_DIR/unreachable" 2>/dev/null && exit 255
done
# the guard on a node listed in guard-refuses answers as a refusing node does
for a in "$@"; do
  if grep -qxF -- "$a" "$STUB_DIR/guard-refuses" 2>/dev/null && [[ "$*" == *fabric-guard.sh* ]]; then
    echo "efa-cdk guard: $a: REFUSED: stand-in refusal"
    exit 1
  fi
done
exit 0
""",
    "mpirun": """
printf %s "$LD_LIBRARY_PATH" >"$STUB_DIR/mpirun-ld-library-path"
cat "$STUB_DIR/bench-output"
""",
    "nccom-test": 'cat "$STUB_DIR/bench-output"',
    "fi_pingpong": 'cat "$STUB_DIR/pingpong-output"',
    "sleep": "exec /bin/sleep 0.02",
}


def executable(path: Path, body: str = "") -> Path:
    """An executable file (parents made): a stub program, or a tool an image has."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(0o755)
    return path


@dataclass
class Run:
    returncode: int
    log: str


#: Stubs of Slurm's commands: reachable only at $EFA_CDK_ROOT/opt/slurm/bin, as on ParallelCluster.
SLURM_COMMANDS = ("scontrol",)


class Node:
    """A scratch node: file tree, settings, stubs; `run(*steps)` runs run-steps.sh."""

    def __init__(self, root: Path, itype: str = "trn1.32xlarge", *, index: int = 0, **settings: str) -> None:
        self.root, self.stub_dir = root / "node", root / "stub"
        self.index = index
        it = instance_type(itype)
        layout = plan_layout(it)
        software = EfaUserData(wait_seconds=60)
        values = {
            **software.settings(it, layout, "ubuntu"),
            "EFA_CDK_STACK": "Trn1EfaCluster",
            "EFA_CDK_REGION": "us-east-1",
            "EFA_CDK_CLUSTER": "Trn1EfaCluster/Cluster",
            "EFA_CDK_KEY_PAIR_ID": "key-0123456789abcdef0",
            "EFA_CDK_NODE_COUNT_PARAMETER": "/efa-cdk/Trn1EfaCluster/Cluster/node-count",
            "EFA_CDK_FORMED_PARAMETER": "/efa-cdk/Trn1EfaCluster/Cluster/formed",
            "EFA_CDK_BENCHMARK_URL": "https://stand-in/handle",
            "EFA_CDK_WAIT_SECONDS": "1",
            **settings,
        }
        self.bin = self.root / "opt/efa-cdk/bin"
        for d in ("etc/efa-cdk", "etc/profile.d", "var/lib/efa-cdk", "home/ubuntu", "dev", "opt/efa-cdk/bin"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        software.stage(self.bin)
        (self.root / "etc/efa-cdk/node.env").write_text("".join(f"{k}='{v}'\n" for k, v in values.items()))
        (self.root / "etc/os-release").write_text('ID=ubuntu\nVERSION_ID="22.04"\n')
        self.set_devices(layout.efa_count)
        self.set_accelerators(int(values.get("EFA_CDK_ACCELERATOR_COUNT", "0")))
        self.efa_installed(True)
        # Slurm's commands where ParallelCluster installs them (not on PATH: steps must call them there)
        executable(self.root / "opt/slurm/bin/scontrol", f'#!{BASH}\nexec "$STUB_DIR/slurm/scontrol" "$@"\n')
        for d in ("bin", "slurm", "tags", "downloads"):
            (self.stub_dir / d).mkdir(parents=True, exist_ok=True)
        for name, body in STUBS.items():
            executable(
                self.stub_dir / ("slurm" if name in SLURM_COMMANDS else "bin") / name,
                f'#!{BASH}\necho "{name} $*" >>"$STUB_DIR/calls.log"\n{body.strip()}\n',
            )
        self.tags(**{"efa-cdk:node-index": str(index), "efa-cdk:logical-id": f"ClusterNode{index}ABCD1234",
                     "efa-cdk:generation": GENERATION})  # fmt: skip
        self.cluster(["10.0.1.10", "10.0.1.11"], count=2)
        (self.stub_dir / "local-ipv4").write_text(f"10.0.1.1{index}\n")
        self.env = {
            "PATH": f"{self.stub_dir / 'bin'}:{os.environ['PATH']}",
            "EFA_CDK_ROOT": str(self.root),
            "STUB_DIR": str(self.stub_dir),
            "STUB_KEY_FPR": EFA_INSTALLER_FINGERPRINT,
            "HOME": str(self.root / "home/ubuntu"),
        }

    def set_accelerators(self, n: int) -> None:
        """`n` device files of the node's accelerator (/dev/neuronN, /dev/nvidiaN, /dev/accel/accelN), the
        others removed: what accelerator-check.sh counts."""
        said = dict(re.findall(r"^(\w+)='([^']*)'$", (self.root / "etc/efa-cdk/node.env").read_text(), re.M))
        kind = said.get("EFA_CDK_ACCELERATOR", "none")
        for pattern in ("dev/neuron*", "dev/nvidia*", "dev/accel/*"):
            for old in self.root.glob(pattern):
                old.unlink()
        prefix = {"neuron": "dev/neuron", "nvidia-gpu": "dev/nvidia", "gaudi": "dev/accel/accel"}.get(kind)
        for i in range(n if prefix else 0):
            (self.root / f"{prefix}{i}").parent.mkdir(parents=True, exist_ok=True)
            (self.root / f"{prefix}{i}").touch()

    def nvidia_smi(self, count: int) -> Path:
        """nvidia-smi on the node's PATH: the stand-in built from the recorded H200 (tests/nvidia_smi.py),
        serving `count` GPUs; returns its state folder (gpus.csv, after-reset.csv, nvlink.txt, ...)."""
        from tests import nvidia_smi

        state = self.stub_dir / "nvidia-smi"
        state.mkdir(exist_ok=True)
        (state / "gpus.csv").write_text(nvidia_smi.serve(count))
        executable(
            self.stub_dir / "bin/nvidia-smi",
            f'#!{BASH}\nNVIDIA_SMI_DIR="$STUB_DIR/nvidia-smi" '
            f'exec {sys.executable} {ROOT}/tests/nvidia_smi.py "$@"\n',
        )
        return state

    def set_devices(
        self, n: int, *, others: dict[str, str] | None = None, names: list[str] | None = None
    ) -> None:
        """A sysfs with `n` EFA devices (``rdmap*``, or `names`, bound to the ``efa`` driver) and `others`
        (name -> driver), laid out as the kernel does: class/infiniband/<dev>/device ->
        bus/pci/devices/<addr>, whose ``driver`` -> bus/pci/drivers/<driver>."""
        sys_root = self.root / "sys"
        shutil.rmtree(sys_root, ignore_errors=True)
        ib = sys_root / "class/infiniband"
        ib.mkdir(parents=True)
        efa = names or [f"rdmap{16 + i}s{27 + i}" for i in range(n)]
        devices = dict.fromkeys(efa, "efa") | (others or {})
        for i, (name, driver) in enumerate(devices.items()):
            pci = sys_root / f"bus/pci/devices/0000:{i:02x}:00.0"
            pci.mkdir(parents=True)
            (sys_root / f"bus/pci/drivers/{driver}").mkdir(parents=True, exist_ok=True)
            (pci / "driver").symlink_to(sys_root / f"bus/pci/drivers/{driver}")
            (ib / name).mkdir()
            (ib / name / "device").symlink_to(pci)
            verbs = (
                sys_root / f"class/infiniband_verbs/uverbs{i}"
            )  # its verbs device: /dev/infiniband/uverbs<i>
            verbs.mkdir(parents=True)
            (verbs / "ibdev").write_text(name + "\n")

    def efa_installed(self, yes: bool) -> None:
        fi_info = self.root / "opt/amazon/efa/bin/fi_info"
        if yes:
            executable(fi_info, f'#!{BASH}\nexec "$STUB_DIR/bin/fi_info" "$@"\n')  # "installed" = our stub
            # the installer's NCCL plugin (aws-ofi-nccl), where installer 1.44.0 and later put it
            plugin = self.root / "opt/amazon/ofi-nccl/lib64/libnccl-net-ofi.so"
            plugin.parent.mkdir(parents=True, exist_ok=True)
            plugin.write_bytes(b"")
            # the installer's Open MPI
            executable(
                self.root / "opt/amazon/openmpi/bin/mpirun", f'#!{BASH}\nexec "$STUB_DIR/bin/mpirun" "$@"\n'
            )
        else:
            fi_info.unlink(missing_ok=True)

    def tags(self, **tags: str) -> None:
        for key, value in tags.items():
            (self.stub_dir / "tags" / key).write_text(value + "\n")

    def cluster(self, ips: list[str], count: int, *, indexed: bool = True) -> None:
        """Instances as DescribeInstances lists them: one generation, this node's at its index.
        Not indexed: an Auto Scaling group's (no node-index tags, this node's among them too)."""
        if not indexed:
            (self.stub_dir / "tags" / "efa-cdk:node-index").unlink(missing_ok=True)
        rows = [
            (
                i if indexed else None,
                ip,
                "2026-11-22T10:00:00+00:00",
                None if indexed else "asg-1",
                self._id(i),
                GENERATION if indexed else None,
            )
            for i, ip in enumerate(ips)
        ]
        self.instances(rows, count)

    def instances(self, rows: list[tuple[Any, ...]], count: int) -> None:
        """(node index, private ip, launch time, Auto Scaling group, instance id[, generation tag]) per
        instance; an explicit row without a generation is of this node's (GENERATION)."""
        rows = [row if len(row) == 6 or row[0] is None else (*row, GENERATION) for row in rows]
        text = "".join("\t".join("None" if v is None else str(v) for v in row) + "\n" for row in rows)
        (self.stub_dir / "instances").write_text(text)
        (self.stub_dir / "node-count").write_text(f"{count}\n")

    def _id(self, i: int) -> str:
        return THIS_INSTANCE if i == self.index else f"i-{i:017x}"

    def installer_tarball(self, *, sha256: str | None = None) -> str:
        """A real tarball whose efa_installer.sh records its flags and 'installs' fi_info."""
        script = b'#!/bin/bash\necho "$@" > "$EFA_CDK_ROOT/installer-ran"\n'
        script += b'mkdir -p "$EFA_CDK_ROOT/opt/amazon/efa/bin"\n'
        script += b'ln -s "$STUB_DIR/bin/fi_info" "$EFA_CDK_ROOT/opt/amazon/efa/bin/fi_info"\n'
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            info = tarfile.TarInfo("aws-efa-installer/efa_installer.sh")
            info.size, info.mode = len(script), 0o755
            tar.addfile(info, io.BytesIO(script))
        name = f"aws-efa-installer-{EFA_INSTALLER_VERSION}.tar.gz"
        for f, data in ((name, buf.getvalue()), (f"{name}.sig", b"sig"), ("aws-efa-installer.key", b"key")):
            (self.stub_dir / "downloads" / f).write_bytes(data)
        digest = hashlib.sha256(buf.getvalue()).hexdigest()
        self.setting("EFA_CDK_INSTALLER_SHA256", sha256 if sha256 is not None else digest)
        return digest

    def setting(self, key: str, value: str) -> None:
        env = self.root / "etc/efa-cdk/node.env"
        env.write_text(env.read_text() + f"{key}='{value}'\n")

    def run(self, *steps: str, **env: str) -> Run:
        proc = subprocess.run(
            [BASH, str(self.bin / "run-steps.sh"), *steps],
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        return Run(proc.returncode, proc.stdout + proc.stderr)

    def systemd_verify(self, *units: str) -> str:
        """What systemd's own parser (`systemd-analyze verify`) says of these units in the node's
        /etc/systemd/system: empty when every line parses and every ExecStart is there. The host's
        targets are copied in for the units' default dependencies (sysinit.target, timers.target)."""
        tool = shutil.which("systemd-analyze")
        if tool is None:
            pytest.skip("systemd-analyze is not installed (Debian's systemd; scripts/setup --dev adds it)")
        targets = self.root / "usr/lib/systemd/system"
        targets.mkdir(parents=True, exist_ok=True)
        for target in Path("/usr/lib/systemd/system").glob("*.target"):
            shutil.copy(target, targets)
        paths = [f"/etc/systemd/system/{u}" for u in units]
        r = subprocess.run([tool, "verify", f"--root={self.root}", *paths], capture_output=True, text=True)
        return (r.stdout + r.stderr).strip() + ("" if r.returncode == 0 else f" (exit {r.returncode})")

    def signals(self) -> list[str]:
        path = self.stub_dir / "signals.log"
        return path.read_text().splitlines() if path.exists() else []

    def calls(self, name: str) -> list[str]:
        path = self.stub_dir / "calls.log"
        return (
            [c for c in path.read_text().splitlines() if c.split(" ", 1)[0] == name] if path.exists() else []
        )

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text()


@contextlib.contextmanager
def moto_server(key: str) -> Iterator[dict[str, str]]:
    """moto's server on a free port of this machine, stopped after: the environment of credentials
    (`key` as both key id and secret) that reach only it, in us-east-1."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield {
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
            "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": key,
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    finally:
        server.stop()


# --- Templates of the orchestrators (AWS PCS, Amazon EKS): tests/test_pcs.py, tests/test_eks.py ---


#: What an EKS managed node group's launch template must not contain (EKS API reference,
#: LaunchTemplateSpecification): SubnetId (on any interface), IamInstanceProfile, a Spot request
#: (InstanceMarketOptions with spot), HibernationOptions, and a terminate shutdown behaviour.
EKS_FORBIDDEN = ("IamInstanceProfile", "HibernationOptions", "InstanceInitiatedShutdownBehavior")


#: Stand-ins for the values CloudFormation fills into user data at deploy.
DEPLOY_VALUES = {
    "AWS::Partition": "aws",
    "AWS::Region": "us-east-1",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::AccountId": "123456789012",
}


def render(value: Any, refs: dict[str, str]) -> str:
    """A user-data value as CloudFormation renders it: Fn::Join joined, Fn::Base64 encoded, each Ref,
    GetAtt and Sub variable from `refs` (else DEPLOY_VALUES, else ``<name>``)."""

    def name(n: str) -> str:
        return refs.get(n, DEPLOY_VALUES.get(n, f"<{n}>"))

    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        return "".join(render(v, refs) for v in value["Fn::Join"][1])
    if "Fn::Base64" in value:
        return base64.b64encode(render(value["Fn::Base64"], refs).encode()).decode()
    if "Ref" in value:
        return name(value["Ref"])
    if "Fn::GetAtt" in value:
        return name(".".join(value["Fn::GetAtt"]))
    if "Fn::Sub" in value:
        return re.sub(r"\$\{([^}]+)\}", lambda m: name(m.group(1)), value["Fn::Sub"])
    raise AssertionError(f"unexpected user-data value {value!r}")


def user_data(launch_template: dict[str, Any], refs: dict[str, str] | None = None) -> str:
    """The launch template's user data, decoded, as a node receives it."""
    return base64.b64decode(
        render(launch_template["Properties"]["LaunchTemplateData"]["UserData"], refs or {})
    ).decode()


def mime_parts(launch_template: dict[str, Any], refs: dict[str, str] | None = None) -> dict[str, str]:
    """The user data's MIME parts by content type, decoded."""
    message = email.message_from_string(user_data(launch_template, refs))
    assert message.is_multipart()
    return {p.get_content_type(): p.get_payload(decode=True).decode() for p in message.get_payload()}


def efa_group(template: dict[str, Any], prefix: str = "PcsSecurityGroup") -> str:
    """The logical id of the EFA security group (the EFS has a group of its own)."""
    (group,) = [
        k
        for k, v in template["Resources"].items()
        if v["Type"] == "AWS::EC2::SecurityGroup" and k.startswith(prefix) and len(k) == len(prefix) + 8
    ]
    return group


def ready_cluster_template(
    name: str, context: dict[str, str], instance_type: str = "trn1.32xlarge"
) -> dict[str, Any]:
    """A ready cluster stack's synthesized template, from context as `cdk synth -c ...` gives it."""
    from stacks.cluster_stack import EfaClusterStack
    from stacks.params import ClusterParams

    params = ClusterParams.from_context(context, default_instance_type=instance_type)
    app = new_app()
    stack = EfaClusterStack(app, name, params=params)
    return app.synth().get_stack_by_name(stack.stack_name).template  # type: ignore[no-any-return]


def eks_cluster_with_kubectl(stack: Stack, vpc: Any) -> Any:
    """An aws_eks_v2 cluster in `vpc`'s isolated subnets, with the kubectl provider its charts and manifests
    need, and no default capacity."""
    from aws_cdk import aws_ec2 as ec2
    from aws_cdk import aws_eks_v2 as eks
    from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer

    return eks.Cluster(
        stack, "Cluster", version=eks.KubernetesVersion.V1_35, vpc=vpc,
        default_capacity_type=eks.DefaultCapacityType.NODEGROUP, default_capacity=0,
        vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
        kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(stack, "Kubectl")),
    )  # fmt: skip


def new_template(stack: Stack) -> dict[str, Any]:
    from aws_cdk import assertions

    return assertions.Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def policy_statements(t: Any, role_prefix: str) -> list[dict[str, Any]]:
    """Statements of the IAM policies attached to the role whose logical id starts with role_prefix."""
    out = []
    for policy in t.find_resources("AWS::IAM::Policy").values():
        if any(r["Ref"].startswith(role_prefix) for r in policy["Properties"]["Roles"]):
            out += policy["Properties"]["PolicyDocument"]["Statement"]
    return out
