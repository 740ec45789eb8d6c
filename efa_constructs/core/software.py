"""`EfaUserData`: the node software, composed from the files in ``efa_constructs/node``.

The scripts are real files shipped as package data: ``node/boot`` (the bootstrap and the boot
steps), ``node/pcluster`` (ParallelCluster hooks), ``node/slurm`` (Slurm job templates) and the
benchmark parser. The builder decides which steps run, in which order, and with which settings
(pure Python, tested over every instance type); the cluster ships the scripts as one S3 asset,
and the user data is ``node/boot/bootstrap.sh`` with the settings rendered in: it fetches the
scripts, writes the settings to ``/etc/efa-cdk/node.env`` and runs the steps, logging each one.

Steps, in order: ``imds`` (instance metadata for root and the login user only, every boot),
``install-efa`` (skipped when the image has EFA), ``efa-env``, ``ssh-keys``,
the user's own steps, ``verify-efa``, ``signal`` (CloudFormation CreationPolicy), then
``hostfile`` and, on the leader, ``benchmarks``.
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from .benchmarks import (
    CHECKED,
    DCGM_DURATION,
    Benchmark,
    _benchmarks,
    check_benchmarks,
    collectives,
    default_benchmarks,
    has_nvlink,
    signal_minutes_for,
)
from .catalogue import AcceleratorKind, InstanceType
from .errors import EfaConfigError
from .layout import NicLayout
from .settings import NodeEnv

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

#: The EFA installer this library installs where the image has no EFA software: 1.51.0, released
#: 2026-10-22 (EC2 user guide, "Elastic Fabric Adapter release notes": libfabric 2.7.0amzn2.0, EFA
#: driver 3.3.1, rdma-core 65.0, aws-ofi-nccl 1.22.0). AWS publishes a SHA-256 per installer version
#: (EC2 user guide, "Verify the EFA installer using a checksum"), but no copy of that page listing
#: 1.51.0 was within reach when this was pinned (ParallelCluster's cookbook, which pins the same
#: checksums, was at 1.41.0), so the default checks the detached signature against the pinned key
#: fingerprint below, always; pass ``EfaInstaller(sha256=...)`` from that page to check both.
EFA_INSTALLER_VERSION = "1.51.0"
EFA_INSTALLER_SHA256 = ""
#: Fingerprint of the key that signs the EFA installer (AWS EFA documentation).
EFA_INSTALLER_FINGERPRINT = "4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC"

#: The Neuron SDK system packages a ParallelCluster compute node with Trainium gets (step
#: ``neuron-sdk``): Neuron 2.33.0 (2026-10-19), the Neuron documentation's "Release content" page,
#: Trn1 packages (awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/release-notes/releasecontent.html).
#: A 2.33.1 exists (its docs list 2.33.0 under previous releases); its own package list was not seen.
NEURON_SDK_PACKAGES = (
    "aws-neuronx-dkms=2.31.7.0",
    "aws-neuronx-collectives=2.35.43.0",
    "aws-neuronx-runtime-lib=2.35.30.0",
    "aws-neuronx-tools=2.33.38.0",
)
#: The Neuron apt repository's signing key, as the Neuron docs name it: long key id 5749CAD8646D9185
#: ("Amazon AWS Neuron <neuron-maintainers@amazon.com>"; Neuron setup troubleshooting, "How to update
#: Neuron repository GNU Privacy Guard (GPG) key for Ubuntu installation"). No full fingerprint is
#: published; the step trusts the downloaded key only when it is one key whose fingerprint ends so.
NEURON_REPO_KEY_ID = "5749CAD8646D9185"

#: Steps the library ships, in the order they run; user steps go before ``verify-efa``.
SETUP_STEPS = ("imds", "install-efa", "efa-env", "ssh-keys")
VERIFY_STEPS = ("verify-efa", "signal")
AFTER_SIGNAL_STEPS = ("hostfile",)


def pcluster_compute_steps(it: InstanceType) -> tuple[str, ...]:
    """A ParallelCluster compute node's steps (OnNodeConfigured): the EFA environment, the hosts fix,
    the Neuron SDK on Trainium/Inferentia (ParallelCluster's images carry none), Enroot and Pyxis, and the
    devices' own checks and mends (a timer: devices.sh)."""
    neuron = ("neuron-sdk",) if it.accelerator.kind is AcceleratorKind.NEURON else ()
    return ("efa-env", "pcluster-hosts", *neuron, "pyxis", "devices")


def pcluster_head_steps(*, topology_tree: bool) -> tuple[str, ...]:
    """The head node's steps (OnNodeConfigured); with Slurm's topology/tree, its timer too. Its first
    topology.conf is written earlier, at OnNodeStart (:data:`PCLUSTER_HEAD_START_STEPS`)."""
    return ("efa-env", "slurm-jobs", "pyxis", *(("slurm-topology",) if topology_tree else ()))


#: The head node's OnNodeStart steps with topology/tree (before ParallelCluster starts slurmctld).
PCLUSTER_HEAD_START_STEPS = ("slurm-topology-init",)
#: Where the scripts and settings live on a node.
NODE_BIN = "/opt/efa-cdk/bin"
NODE_ENV = "/etc/efa-cdk/node.env"
NODE_LOG = "/var/log/efa-cdk.log"
#: The folders of ``efa_constructs/node`` whose files are staged (flat) into the scripts asset.
NODE_FOLDERS = ("boot", "pcluster", "pcs", "slurm", ".")  # pcs: prep.sh's metadata rule (imds step)
#: The line of ``node/boot/bootstrap.sh`` that the settings replace.
SETTINGS_MARK = "# efa-cdk:settings"
#: The line of ``node/eks/join-gate.sh`` that the rendered bootstrap replaces.
BOOTSTRAP_MARK = "# efa-cdk:bootstrap"
_STEP_NAME = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
_SETTING = re.compile(r"^EFA_CDK_[A-Z0-9_]+$")


def node_settings(it: InstanceType, layout: NicLayout, benchmarks: Sequence[Benchmark]) -> NodeEnv:
    """The facts a node's scripts need about its type and layout (no tokens: pure and testable)."""
    efa_cards = [layout.instance_type.card(s.network_card_index) for s in layout.interfaces if s.is_efa]
    card_gbps = max((c.peak_bandwidth_gbps for c in efa_cards), default=0)
    return {
        "EFA_CDK_INSTANCE_TYPE": it.name,
        "EFA_CDK_EFA_COUNT": str(layout.efa_count),
        "EFA_CDK_RDMA_READ": "1" if it.rdma_read else "0",
        "EFA_CDK_SLOTS": str(it.mpi_slots),
        "EFA_CDK_LINE_RATE_GBPS": f"{layout.efa_bandwidth_gbps:g}",
        # One EFA (fi_pingpong) runs no faster than its card, nor than the whole node's line rate.
        "EFA_CDK_CARD_GBPS": f"{min(card_gbps, layout.efa_bandwidth_gbps):g}",
        "EFA_CDK_BENCHMARKS": " ".join(b.value for b in benchmarks),
        # which collective library the node's jobs use, for the guard against silent fallback
        "EFA_CDK_COLLECTIVES": collectives(it),
        **accelerator_settings(it),
    }


def accelerator_settings(it: InstanceType) -> NodeEnv:
    """What the accelerator checks count and read (accelerator-check.sh, device-health.sh)."""
    return {
        "EFA_CDK_ACCELERATOR": it.accelerator.kind.value if it.accelerator.kind in CHECKED else "none",
        "EFA_CDK_ACCELERATOR_COUNT": str(it.accelerator.count if it.accelerator.kind in CHECKED else 0),
        "EFA_CDK_NVLINK": "1" if has_nvlink(it) else "0",
    }


@dataclass(frozen=True)
class EfaInstaller:
    """Which EFA installer to run on images without EFA software, and how.

    Args:
        version: installer version (pinned: "latest" would make nodes differ).
        sha256: expected SHA-256 of the tarball; empty skips that check (the signature is
            always checked). Default: empty for 1.51.0 (the EC2 user guide's checksum for it was
            not within reach when it was pinned: copy it from "Verify the EFA installer using a
            checksum").
        fingerprint: the signing key's fingerprint.
        skip_kmod: pass ``--skip-kmod`` (container hosts whose kernel module comes elsewhere).
        minimal: pass ``--minimal`` (kernel module and rdma-core only, no Open MPI/libfabric tools).
    """

    version: str = EFA_INSTALLER_VERSION
    sha256: str = EFA_INSTALLER_SHA256
    fingerprint: str = EFA_INSTALLER_FINGERPRINT
    skip_kmod: bool = False
    minimal: bool = False

    def __post_init__(self) -> None:
        if not re.fullmatch(r"\d+\.\d+\.\d+", self.version):
            raise EfaConfigError(
                "version",
                code="efa-cdk:installer-version-form",
                value=self.version,
                why="not a pinned installer version",
                fix="pass e.g. '1.51.0'",
            )
        if self.sha256 and not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise EfaConfigError(
                "sha256",
                code="efa-cdk:installer-sha256-form",
                value=self.sha256,
                why="not a SHA-256",
                fix="pass 64 lowercase hex digits",
            )
        if not re.fullmatch(r"[0-9A-F]{40}", self.fingerprint):
            raise EfaConfigError(
                "fingerprint",
                code="efa-cdk:installer-fingerprint-form",
                value=self.fingerprint,
                why="not a key fingerprint",
                fix="pass 40 uppercase hex digits",
            )

    def settings(self) -> NodeEnv:
        """The installer's node settings."""
        flags = [f for f, on in (("--skip-kmod", self.skip_kmod), ("--minimal", self.minimal)) if on]
        return {
            "EFA_CDK_INSTALLER_VERSION": self.version,
            "EFA_CDK_INSTALLER_SHA256": self.sha256,
            "EFA_CDK_INSTALLER_FINGERPRINT": self.fingerprint,
            "EFA_CDK_INSTALLER_FLAGS": " ".join(flags),
        }


class EfaUserData:
    """The node software: library steps, the user's own steps and their settings.

    Args:
        installer: the EFA installer for images without EFA. Default: :class:`EfaInstaller`
            (pinned version, SHA-256 and signature checked).
        benchmarks: cross-node benchmarks the leader runs after every node verified EFA;
            ``()`` runs none. Default: by accelerator (nccl-tests or nccom-test, then fi_pingpong).
        wait_seconds: how long hostfile and benchmarks wait for the other nodes. Default: 1800.
        signal_timeout_minutes: how long CloudFormation waits for each node's signal.
            Default: 45 (image boot, EFA install and verification).
        benchmark_timeout_minutes: how long CloudFormation waits for the benchmark results.
            Default: 60.
        strict_benchmarks: True fails the stack when a benchmark cannot run or does not use EFA.
            Default: False: such a problem is reported in the results (``ok: false`` with the
            reason) and the verified cluster stays; EFA faults (a node that never verifies, a
            hostfile that cannot be completed) fail the stack either way.
        dcgm_diag_level: NVIDIA GPUs only: every node runs DCGM's diagnostic (``dcgmi diag -r``) at
            this level at boot, and a failed test fails the node as a missing EFA does. 1 takes
            seconds, 2 about two minutes, 3 about 15 minutes, 4 longer (DCGM's ``dcgmi diag``
            reference; AWS PCS's QUICK, MEDIUM and LONG on-start checks are levels 1 to 3): levels 3
            and 4 need a longer ``signal_timeout_minutes`` (:func:`signal_minutes_for`). The image must
            have DCGM (``datacenter-gpu-manager``). Default: None, no diagnostic (the GPU count and
            the driver's Xid events are checked on every GPU node either way).
    """

    def __init__(
        self,
        *,
        installer: EfaInstaller | None = None,
        benchmarks: Sequence[Benchmark] | None = None,
        wait_seconds: int = 1800,
        signal_timeout_minutes: int = 45,
        benchmark_timeout_minutes: int = 60,
        strict_benchmarks: bool = False,
        dcgm_diag_level: int | None = None,
    ) -> None:
        for name, value, lo, hi in (
            ("wait_seconds", wait_seconds, 60, 43200),
            ("signal_timeout_minutes", signal_timeout_minutes, 5, 720),
            ("benchmark_timeout_minutes", benchmark_timeout_minutes, 5, 720),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise EfaConfigError(
                    name,
                    code="efa-cdk:software-range",
                    value=value,
                    why=f"out of range {lo}..{hi}",
                    fix=f"pass {lo}..{hi}",
                )
        level = dcgm_diag_level
        if level is not None and (isinstance(level, bool) or not isinstance(level, int) or not 0 < level < 5):
            raise EfaConfigError(
                "dcgm_diag_level",
                code="efa-cdk:dcgm-level",
                value=dcgm_diag_level,
                why="DCGM's diagnostic levels are 1 (quick) to 4 (extended)",
                fix="pass 1, 2, 3 or 4 (AWS PCS's QUICK, MEDIUM, LONG are 1-3), or leave it out",
            )
        if level is not None and signal_timeout_minutes < signal_minutes_for(level):
            raise EfaConfigError(
                "signal_timeout_minutes",
                code="efa-cdk:dcgm-level-outlasts-signal",
                value=signal_timeout_minutes,
                why=f"dcgm_diag_level={level} runs {DCGM_DURATION[level]} at boot, and CloudFormation "
                "would fail the node while it runs",
                fix=f"pass signal_timeout_minutes={signal_minutes_for(level)} or more, or a lower level",
            )
        self.dcgm_diag_level = dcgm_diag_level
        self.installer = installer or EfaInstaller()
        self.benchmarks = None if benchmarks is None else _benchmarks(benchmarks)
        self.wait_seconds = wait_seconds
        self.signal_timeout_minutes = signal_timeout_minutes
        self.benchmark_timeout_minutes = benchmark_timeout_minutes
        self.strict_benchmarks = strict_benchmarks
        self._user_steps: dict[str, str] = {}
        self._staged = False

    def add_step(self, name: str, script: str | Path) -> EfaUserData:
        """Add a step of your own: a bash script (its text, or a path to a file).

        It runs as root after the EFA environment and SSH keys are in place and before EFA is
        verified, so a failure stops the node and fails the deploy with the step's name. It can
        source ``/opt/efa-cdk/bin/lib.sh`` for ``log``, ``die``, ``imds`` and the settings.
        """
        if self._staged:
            raise EfaConfigError(
                "add_step",
                code="efa-cdk:step-after-staging",
                value=name,
                why="this node software was already staged for a cluster; the step would never reach its "
                "nodes",
                fix="add every step before passing the EfaUserData to a cluster",
            )
        every = self.step_names((), monitoring=True, container=True, lustre=True)
        library = {*every, "benchmarks", "health-check"}
        if not _STEP_NAME.match(name) or name in library or name in self._user_steps:
            raise EfaConfigError(
                "name",
                code="efa-cdk:step-name-form",
                value=name,
                why="a step name is lowercase letters, digits and '-', unique, and not a library step",
                fix="choose another name, e.g. 'install-my-tools'",
            )
        text = script.read_text() if isinstance(script, Path) else script
        if not text.strip():
            raise EfaConfigError(
                "script",
                code="efa-cdk:step-empty",
                value=str(script),
                why="the step is empty",
                fix="pass a bash script",
            )
        if not text.startswith("#!"):
            text = "#!/usr/bin/env bash\nset -euo pipefail\n" + text
        self._user_steps[name] = text
        return self

    def add_commands(self, name: str, *commands: str) -> EfaUserData:
        """Add a step made of shell commands (run with ``set -euo pipefail``)."""
        return self.add_step(name, "\n".join(commands) + "\n")

    def benchmarks_for(self, it: InstanceType) -> tuple[Benchmark, ...]:
        """The benchmarks that run for this type (validated)."""
        chosen = default_benchmarks(it) if self.benchmarks is None else self.benchmarks
        check_benchmarks(it, chosen)
        return chosen

    def step_names(
        self,
        benchmarks: Sequence[Benchmark],
        monitoring: bool = False,
        container: bool = False,
        lustre: bool = False,
    ) -> list[str]:
        """Every step, in the order the node runs them (``monitoring`` after the EFA environment
        when the cluster is monitored; ``lustre-client`` after the EFA check and before the signal when
        the nodes mount FSx for Lustre, so a node whose Lustre does not ride EFA fails; ``container``
        after the hostfile when it runs an image)."""
        tail = ["benchmarks"] if benchmarks else []
        setup = [*SETUP_STEPS[:3], "monitoring", *SETUP_STEPS[3:]] if monitoring else list(SETUP_STEPS)
        verify = [VERIFY_STEPS[0], "lustre-client", *VERIFY_STEPS[1:]] if lustre else list(VERIFY_STEPS)
        after = [*AFTER_SIGNAL_STEPS, "container"] if container else list(AFTER_SIGNAL_STEPS)
        return [*setup, *self._user_steps, *verify, *after, *tail]

    def stage(self, directory: Path | None = None) -> Path:
        """Copy the node files and the user's steps into one flat directory (the S3 asset).

        Staging binds the builder: a step added afterwards would never reach the nodes, so
        :meth:`add_step` raises from then on. Default directory: a temporary one, removed when
        the process exits (CDK copies the asset into the cloud assembly while the construct is
        built).
        """
        self._staged = True
        out = directory
        if out is None:
            out = Path(tempfile.mkdtemp(prefix="efa-cdk-scripts-"))
            atexit.register(shutil.rmtree, out, ignore_errors=True)
        for entry in node_files():
            (out / entry.name).write_bytes(entry.read_bytes())
        for name, text in self._user_steps.items():
            (out / f"{name}.sh").write_text(text)
        for path in out.iterdir():
            path.chmod(0o755)
        return out

    def render(self, settings: NodeEnv, *, scripts_s3_url: str, benchmarks: Sequence[Benchmark]) -> str:
        """The user data script: ``node/boot/bootstrap.sh`` with the settings, scripts and steps."""
        steps = " ".join(
            self.step_names(
                benchmarks,
                monitoring="EFA_CDK_METRICS_NAMESPACE" in settings,
                container="EFA_CDK_CONTAINER_IMAGE" in settings,
                lustre="EFA_CDK_LUSTRE_DNS" in settings,
            )
        )
        return bootstrap_script({**settings, "EFA_CDK_SCRIPTS_URL": scripts_s3_url, "EFA_CDK_STEPS": steps})

    def settings(self, it: InstanceType, layout: NicLayout, login_user: str) -> NodeEnv:
        """Settings from the type, the layout and this builder (no deploy-time values).

        Raises:
            EfaConfigError: a DCGM diagnostic level on a type without NVIDIA GPUs.
        """
        dcgm: NodeEnv = {}
        if self.dcgm_diag_level is not None:
            if it.accelerator.kind is not AcceleratorKind.NVIDIA_GPU:
                raise EfaConfigError(
                    "dcgm_diag_level",
                    code="efa-cdk:dcgm-not-nvidia",
                    value=self.dcgm_diag_level,
                    why=f"DCGM diagnoses NVIDIA GPUs; {it.name} has {it.accelerator.kind.value} accelerators",
                    fix="leave dcgm_diag_level out for this type (its devices and driver are checked anyway)",
                )
            dcgm["EFA_CDK_DCGM_LEVEL"] = str(self.dcgm_diag_level)
        return {
            **dcgm,
            **node_settings(it, layout, self.benchmarks_for(it)),
            **self.installer.settings(),
            "EFA_CDK_USER": login_user,
            "EFA_CDK_WAIT_SECONDS": str(self.wait_seconds),
            "EFA_CDK_BENCHMARK_STRICT": "1" if self.strict_benchmarks else "0",
        }


def node_files() -> list[Traversable]:
    """Every file the nodes run (steps, hooks, job templates, parser), from the package data."""
    root = resources.files("efa_constructs") / "node"
    out = []
    for folder in NODE_FOLDERS:
        out += [
            e
            for e in (root / folder).iterdir()
            if e.is_file() and e.name.endswith((".sh", ".py", ".sbatch")) and not e.name.startswith("_")
        ]
    return sorted(out, key=lambda e: e.name)


def bootstrap_script(settings: NodeEnv) -> str:
    """``node/boot/bootstrap.sh`` with `settings` written in as ``EFA_CDK_*='value'`` lines."""
    for key, value in settings.items():
        if not _SETTING.match(key) or not isinstance(value, str) or "\n" in value or "'" in value:
            raise EfaConfigError(
                "settings",
                code="efa-cdk:setting-form",
                value=key,
                why="a setting is EFA_CDK_* = one line without quotes",
                fix="fix the value",
            )
    template = (resources.files("efa_constructs") / "node" / "boot" / "bootstrap.sh").read_text()
    lines = template.split("\n")
    assert lines.count(SETTINGS_MARK) == 1, "bootstrap.sh must have exactly one settings line"
    at = lines.index(SETTINGS_MARK)
    lines[at : at + 1] = [f"{k}='{v}'" for k, v in sorted(settings.items())]
    return "\n".join(lines)


def eks_node_script(settings: NodeEnv) -> str:
    """``node/eks/join-gate.sh`` with :func:`bootstrap_script` (`settings`) in it: an EKS node's part, which
    keeps the node out of the cluster when the bootstrap fails."""
    template = (resources.files("efa_constructs") / "node" / "eks" / "join-gate.sh").read_text()
    assert template.count(BOOTSTRAP_MARK) == 1, "join-gate.sh must have exactly one bootstrap line"
    return template.replace(BOOTSTRAP_MARK, bootstrap_script(settings))
