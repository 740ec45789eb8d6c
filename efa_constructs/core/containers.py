"""Containers over EFA: how a node runs an image so that the job inside reaches the fabric.

Pure Python: :class:`ContainerRun` decides the ``docker run`` arguments from the instance type
(the node step ``container.sh`` runs them on every node). Sources for each choice:

* The EFA devices, host networking and IPC, and SSH inside the container on port 3022 so that mpirun
  reaches it: the AWS DL1 / Intel Gaudi multi-node guide this project replaces (as quoted in issue 15);
  unlimited locked memory: the EFA user guide's requirement for registering memory (``ulimit -l
  unlimited``). The devices are the node's EFA verbs devices one by one, found at run time
  (``container.sh``), not the whole ``/dev/infiniband``: on p6-b200 that also holds the NVLink
  controllers' devices, and ``fi_info -p efa`` then fails inside the container (aws-samples/aws-do-eks
  PR #63). ``--restart=unless-stopped``: the container (and its SSH server) comes back when Docker
  starts again after a node stop/start (Docker's restart policies).
* NVIDIA: ``--gpus all`` (NVIDIA Container Toolkit, on the GPU DLAMIs). Neuron: one
  ``--device=/dev/neuron<i>`` per device: "Neuron devices are exposed to the containers using the
  --device option ... runc does not yet support the ALL option" (Neuron documentation, Containers
  FAQ). Gaudi: ``--runtime=habana -e HABANA_VISIBLE_DEVICES=all`` (docs.habana.ai, "Docker
  Installation" and "Multiple Dockers Each with a Single Workload"), ``--cap-add=sys_nice``.
* The EFA libraries come from the image: EC2 user guide, "Install the EFA software in a container"
  (``efa_installer.sh -y --skip-kmod --skip-limit-conf --no-verify``, or ``--enable-ngc`` for NGC
  images from installer 1.49.0); the host's EFA environment (``/etc/efa-cdk/efa.env``: FI_PROVIDER,
  RDMA read, fork safety) is passed with ``--env-file``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .catalogue import AcceleratorKind, InstanceType
from .errors import EfaConfigError
from .settings import NodeEnv

#: The port of the SSH server inside the containers (the Gaudi guide's 3022: the host's sshd keeps 22).
DEFAULT_SSH_PORT = 3022
_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/:@-]*[a-z0-9]$", re.IGNORECASE)


@dataclass(frozen=True)
class ContainerRun:
    """How every node runs the cluster's image.

    Args:
        image: the image (an NGC PyTorch image, a Neuron DLC, a Gaudi image...).
        ssh_port: the port of the SSH server inside the containers. Default: 3022.
    """

    image: str
    ssh_port: int = DEFAULT_SSH_PORT

    def __post_init__(self) -> None:
        if not _IMAGE.match(self.image) or ".." in self.image:
            raise EfaConfigError(
                "container_image",
                code="efa-cdk:container-image-reference",
                value=self.image,
                why="not an image reference",
                fix="pass <registry>/<name>:<tag>, e.g. an NGC PyTorch image from nvcr.io/nvidia/pytorch",
            )
        if not 1024 <= self.ssh_port <= 65535 or self.ssh_port == 22:
            raise EfaConfigError(
                "container_ssh_port",
                code="efa-cdk:container-ssh-port",
                value=self.ssh_port,
                why="the host's sshd has 22, and ports below 1024 are privileged",
                fix="use 3022 (the default) or another free port 1024-65535",
            )

    def accelerator_args(self, it: InstanceType) -> list[str]:
        """What gives the container the node's accelerators."""
        kind = it.accelerator.kind
        if kind is AcceleratorKind.NVIDIA_GPU:
            return ["--gpus", "all"]
        if kind is AcceleratorKind.NEURON:
            return [f"--device=/dev/neuron{i}" for i in range(it.accelerator.count)]
        if kind is AcceleratorKind.GAUDI:
            return ["--runtime=habana", "-e", "HABANA_VISIBLE_DEVICES=all", "--cap-add=sys_nice"]
        return []

    def run_args(
        self, it: InstanceType, *, name: str = "efa-cdk", env_file: str = "/etc/efa-cdk/efa.env"
    ) -> list[str]:
        """``docker run`` arguments (without the image's command and the EFA devices, which the node
        finds): host network and IPC, unlimited locked memory, a restart policy, the EFA environment,
        the accelerators, the SSH port."""
        return [
            "--detach",
            "--name",
            name,
            "--restart=unless-stopped",
            "--net=host",
            "--ipc=host",
            "--ulimit",
            "memlock=-1:-1",
            "--ulimit",
            "stack=67108864",
            "--env-file",
            env_file,
            "-e",
            f"EFA_CDK_SSH_PORT={self.ssh_port}",
            *self.accelerator_args(it),
        ]

    def settings(self, it: InstanceType) -> NodeEnv:
        """The node settings of the ``container`` step."""
        return {
            "EFA_CDK_CONTAINER_IMAGE": self.image,
            "EFA_CDK_CONTAINER_SSH_PORT": str(self.ssh_port),
            "EFA_CDK_CONTAINER_ARGS": " ".join(self.run_args(it)),
        }
