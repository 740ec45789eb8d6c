"""Every ``EFA_CDK_*`` setting shared by the Python side and the node software, in one table.

The constructs write settings into ``/etc/efa-cdk/node.env`` (through the bootstrap's settings
heredoc, or as ParallelCluster bootstrap arguments); the node scripts read them. A test
(``tests/test_settings.py``) reads every file on both sides and checks each name against this table:
a setting written and read by no one, read but never written, or written under a misspelt name
fails it.
"""

from typing import Annotated, TypedDict, get_type_hints

#: Written by the constructs, read by the node software.
NODE = "node"
#: Read by the node software with a default when unset: an operator's or a test's knob, never written.
KNOB = "knob"
#: Written for someone else than the node scripts (the container image, a person reading node.env).
OTHER = "other"
#: Read by the command line from the user's environment, never on a node.
TOOL = "tool"


class NodeEnv(TypedDict, total=False):
    """The settings a node's ``/etc/efa-cdk/node.env`` can hold: each name once, with its kind and what it
    means. Every writer builds one of these, so mypy --strict checks each name where it is written."""

    # what the node is
    EFA_CDK_INSTANCE_TYPE: Annotated[str, OTHER, "the instance type, for a person reading node.env"]
    EFA_CDK_EFA_COUNT: Annotated[str, NODE, "EFA devices the launch template attached (verify, health)"]
    EFA_CDK_RDMA_READ: Annotated[str, NODE, "1 where the type has RDMA read (FI_EFA_USE_DEVICE_RDMA)"]
    EFA_CDK_SLOTS: Annotated[str, NODE, "MPI slots per node (hostfile, Slurm jobs)"]
    EFA_CDK_LINE_RATE_GBPS: Annotated[str, NODE, "the node's EFA line rate, benchmarks are rated against it"]
    EFA_CDK_CARD_GBPS: Annotated[str, NODE, "one EFA's line rate (fi_pingpong)"]
    EFA_CDK_USER: Annotated[str, NODE, "the image's login user (SSH key, hostfile)"]
    EFA_CDK_ACCELERATOR: Annotated[str, NODE, "nvidia-gpu, neuron, gaudi or none: the accelerator checks"]
    EFA_CDK_ACCELERATOR_COUNT: Annotated[str, NODE, "the accelerator devices the type has"]
    EFA_CDK_DCGM_LEVEL: Annotated[str, NODE, "DCGM's diagnostic level (1-4) run at boot on NVIDIA GPUs"]
    EFA_CDK_NVLINK: Annotated[str, NODE, "1 where the type's GPUs are joined by NVLink (its links checked)"]
    # where it is
    EFA_CDK_STACK: Annotated[str, NODE, "the stack whose CreationPolicy the node signals"]
    EFA_CDK_REGION: Annotated[str, NODE, "the region of every AWS call"]
    EFA_CDK_CLUSTER: Annotated[str, NODE, "the efa-cdk:cluster tag value the nodes find each other by"]
    EFA_CDK_VPC_CIDR: Annotated[str, NODE, "the VPC's range (SSH between nodes)"]
    EFA_CDK_NODE_COUNT_PARAMETER: Annotated[str, NODE, "SSM parameter holding the node count"]
    EFA_CDK_FORMED_PARAMETER: Annotated[
        str, NODE, "SSM parameter the leader sets to its generation once it formed"
    ]
    EFA_CDK_RESULTS_PARAMETER: Annotated[
        str, NODE, "SSM parameter the leader keeps its generation's benchmark results in"
    ]
    EFA_CDK_KEY_PAIR_ID: Annotated[str, NODE, "the cluster key pair, whose private key is in SSM"]
    EFA_CDK_QUEUES: Annotated[str, NODE, "the Slurm queue (hosts fix; a Capacity Block's drain)"]
    EFA_CDK_SHARED_DIR: Annotated[str, NODE, "the shared directory (job templates; a Capacity Block's end)"]
    EFA_CDK_SLURM_NODES: Annotated[str, NODE, "ParallelCluster's Slurm node names (first topology.conf)"]
    EFA_CDK_SLURM_BIN: Annotated[str, NODE, "Slurm's commands, where not in /opt/slurm/bin (AWS PCS)"]
    # what runs
    EFA_CDK_SCRIPTS_URL: Annotated[str, NODE, "the S3 zip of the node scripts"]
    EFA_CDK_STEPS: Annotated[str, NODE, "the steps, in order"]
    EFA_CDK_WAIT_SECONDS: Annotated[str, NODE, "how long a node waits for the others"]
    EFA_CDK_BENCHMARKS: Annotated[str, NODE, "the benchmarks the leader runs"]
    EFA_CDK_COLLECTIVES: Annotated[str, NODE, "nccl, nccom or none: the collective library the guard checks"]
    EFA_CDK_BENCHMARK_STRICT: Annotated[str, NODE, "1: a benchmark problem fails the stack"]
    EFA_CDK_BENCHMARK_URL: Annotated[str, NODE, "the benchmark wait condition's handle"]
    EFA_CDK_ON_DEMAND: Annotated[str, NODE, "set by the SSM document that re-runs the benchmarks"]
    EFA_CDK_BLOCK_END: Annotated[
        str, NODE, "set by the Capacity Block warning's SSM document: when the block ends"
    ]
    EFA_CDK_INSTALLER_VERSION: Annotated[str, NODE, "the EFA installer to install"]
    EFA_CDK_INSTALLER_SHA256: Annotated[str, NODE, "its SHA-256, when pinned"]
    EFA_CDK_INSTALLER_FINGERPRINT: Annotated[str, NODE, "its signing key's fingerprint"]
    EFA_CDK_INSTALLER_FLAGS: Annotated[str, NODE, "the installer's flags"]
    EFA_CDK_NEURON_PACKAGES: Annotated[str, NODE, "Neuron SDK packages (ParallelCluster, Trainium)"]
    EFA_CDK_NEURON_KEY_ID: Annotated[str, NODE, "the Neuron apt key's published id"]
    EFA_CDK_CONTAINER_IMAGE: Annotated[str, NODE, "the image the container step runs"]
    EFA_CDK_CONTAINER_SSH_PORT: Annotated[str, NODE, "the SSH port inside the containers"]
    EFA_CDK_CONTAINER_ARGS: Annotated[str, NODE, "docker run arguments"]
    EFA_CDK_SSH_PORT: Annotated[str, OTHER, "the containers' SSH port, in the image's environment"]
    # storage
    EFA_CDK_LUSTRE_DNS: Annotated[str, NODE, "the FSx for Lustre file system's DNS name (the mount)"]
    EFA_CDK_LUSTRE_MOUNT_NAME: Annotated[str, NODE, "its Lustre mount name"]
    EFA_CDK_LUSTRE_DIR: Annotated[str, NODE, "where it mounts"]
    EFA_CDK_LUSTRE_EFA_INTERFACES: Annotated[str, NODE, "EFA interfaces LNet uses for it (0: TCP only)"]
    EFA_CDK_LUSTRE_GDS: Annotated[str, NODE, "1: its EFA clients use GPUDirect Storage (nvidia-fs, gdscheck)"]
    # monitoring
    EFA_CDK_METRICS_NAMESPACE: Annotated[str, NODE, "the cluster's CloudWatch namespace"]
    EFA_CDK_AGENT_CONFIG: Annotated[str, NODE, "the CloudWatch agent's configuration"]
    EFA_CDK_HEALTH_MINUTES: Annotated[str, NODE, "the health timer's interval"]
    EFA_CDK_CW_AGENT_FINGERPRINT: Annotated[str, NODE, "the CloudWatch agent's signing key"]
    EFA_CDK_CW_AGENT_MIN_VERSION: Annotated[str, NODE, "the first agent with EFA metrics"]
    EFA_CDK_NODE_GROUP: Annotated[
        str, NODE, "explicit, asg, parallelcluster or pcs: how a node is replaced (health, device mends)"
    ]
    EFA_CDK_UNHEALTHY_AFTER: Annotated[str, NODE, "failed checks in a row before a replacement"]
    EFA_CDK_REPLACE_MINUTES: Annotated[str, NODE, "at most one replacement per group in this time"]
    EFA_CDK_SWEEP_MINUTES: Annotated[str, NODE, "the leader's health timer runs the fabric sweep this often"]
    EFA_CDK_REPLACEMENT_PARAMETER: Annotated[str, NODE, "SSM parameter with the group's last replacement"]
    # knobs with defaults
    EFA_CDK_ROOT: Annotated[str, KNOB, "a scratch root for tests (empty on a node)"]
    EFA_CDK_IMDS_URL: Annotated[str, KNOB, "IMDS's address (tests)"]
    EFA_CDK_POLL_SECONDS: Annotated[str, KNOB, "how often a node looks for the others"]
    EFA_CDK_PINGPONG_ITERATIONS: Annotated[
        str, KNOB, "fi_pingpong's iterations per message size (default 1000)"
    ]
    EFA_CDK_PULL_PAUSE: Annotated[str, KNOB, "pause between image pull attempts"]
    EFA_CDK_INSTALLER_URL: Annotated[str, KNOB, "where the EFA installer is downloaded from"]
    EFA_CDK_CW_AGENT_URL: Annotated[str, KNOB, "where the CloudWatch agent is downloaded from"]
    EFA_CDK_NCCL_TESTS: Annotated[str, KNOB, "where nccl-tests' binaries are"]
    EFA_CDK_HCCL_DEMO: Annotated[str, KNOB, "where hccl_demo is"]
    EFA_CDK_TEST_ONLY_PROVIDER: Annotated[
        str, KNOB, "a libfabric provider for the one-machine cluster (tests)"
    ]
    EFA_CDK_SWEEP_BYTES: Annotated[str, KNOB, "the fabric sweep's message size (default 4 MiB)"]
    EFA_CDK_SWEEP_ITERATIONS: Annotated[str, KNOB, "the fabric sweep's round trips per pair (default 50)"]
    EFA_CDK_SWEEP_THRESHOLD: Annotated[
        str, KNOB, "the fabric sweep names a node below this share of the median (default 0.5)"
    ]
    EFA_CDK_SWEEP_ONLY: Annotated[
        str, KNOB, "1: the benchmarks step runs the fabric sweep alone (health timer)"
    ]
    EFA_CDK_LUSTRE_BENCH_MIB: Annotated[str, KNOB, "MiB each node writes and reads in the storage benchmark"]
    EFA_CDK_CONTAINER_EFA: Annotated[str, KNOB, "0 lets a Slurm job without EFA through the Enroot hook"]
    EFA_CDK_DEVICE_MINUTES: Annotated[str, KNOB, "how often the devices step's timer checks (default 5)"]
    # the command line's, from the user's environment
    EFA_CDK_CACHE: Annotated[str, TOOL, "where template-diff keeps each revision's environment"]
    EFA_CDK_TRACEBACK: Annotated[str, TOOL, "1: an uncaught refusal in an app shows its traceback"]


#: Each setting's (kind, meaning), from :class:`NodeEnv`.
SETTINGS: dict[str, tuple[str, str]] = {
    name: (hint.__metadata__[0], hint.__metadata__[1])
    for name, hint in get_type_hints(NodeEnv, include_extras=True).items()
}
