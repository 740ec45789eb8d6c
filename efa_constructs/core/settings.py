"""Every ``EFA_CDK_*`` setting shared by the Python side and the node software, in one table.

The constructs write settings into ``/etc/efa-cdk/node.env`` (through the bootstrap's settings
heredoc, or as ParallelCluster bootstrap arguments); the node scripts read them. A test
(``tests/test_settings.py``) reads every file on both sides and checks each name against this table:
a setting written and read by no one, read but never written, or written under a misspelt name
fails it.
"""

from __future__ import annotations

#: Written by the constructs, read by the node software.
NODE = "node"
#: Read by the node software with a default when unset: an operator's or a test's knob, never written.
KNOB = "knob"
#: Written for someone else than the node scripts (the container image, a person reading node.env).
OTHER = "other"

SETTINGS: dict[str, tuple[str, str]] = {
    # what the node is
    "EFA_CDK_INSTANCE_TYPE": (OTHER, "the instance type, for a person reading node.env"),
    "EFA_CDK_EFA_COUNT": (NODE, "EFA devices the launch template attached (verify, health)"),
    "EFA_CDK_RDMA_READ": (NODE, "1 where the type has RDMA read (FI_EFA_USE_DEVICE_RDMA)"),
    "EFA_CDK_SLOTS": (NODE, "MPI slots per node (hostfile, Slurm jobs)"),
    "EFA_CDK_LINE_RATE_GBPS": (NODE, "the node's EFA line rate, benchmarks are rated against it"),
    "EFA_CDK_CARD_GBPS": (NODE, "one EFA's line rate (fi_pingpong)"),
    "EFA_CDK_USER": (NODE, "the image's login user (SSH key, hostfile)"),
    # where it is
    "EFA_CDK_STACK": (NODE, "the stack whose CreationPolicy the node signals"),
    "EFA_CDK_REGION": (NODE, "the region of every AWS call"),
    "EFA_CDK_CLUSTER": (NODE, "the efa-cdk:cluster tag value the nodes find each other by"),
    "EFA_CDK_VPC_CIDR": (NODE, "the VPC's range (SSH between nodes)"),
    "EFA_CDK_NODE_COUNT_PARAMETER": (NODE, "SSM parameter holding the node count"),
    "EFA_CDK_FORMED_PARAMETER": (NODE, "SSM parameter the leader sets to its generation once it formed"),
    "EFA_CDK_RESULTS_PARAMETER": (
        NODE,
        "SSM parameter the leader keeps its generation's benchmark results in",
    ),
    "EFA_CDK_KEY_PAIR_ID": (NODE, "the cluster key pair, whose private key is in SSM"),
    "EFA_CDK_QUEUES": (NODE, "ParallelCluster queues (hosts fix)"),
    "EFA_CDK_SHARED_DIR": (NODE, "ParallelCluster's shared directory (job templates)"),
    "EFA_CDK_SLURM_NODES": (NODE, "ParallelCluster's Slurm node names (first topology.conf)"),
    # what runs
    "EFA_CDK_SCRIPTS_URL": (NODE, "the S3 zip of the node scripts"),
    "EFA_CDK_STEPS": (NODE, "the steps, in order"),
    "EFA_CDK_WAIT_SECONDS": (NODE, "how long a node waits for the others"),
    "EFA_CDK_BENCHMARKS": (NODE, "the benchmarks the leader runs"),
    "EFA_CDK_COLLECTIVES": (NODE, "nccl, nccom or none: the collective library the guard checks"),
    "EFA_CDK_BENCHMARK_STRICT": (NODE, "1: a benchmark problem fails the stack"),
    "EFA_CDK_BENCHMARK_URL": (NODE, "the benchmark wait condition's handle"),
    "EFA_CDK_ON_DEMAND": (NODE, "set by the SSM document that re-runs the benchmarks"),
    "EFA_CDK_BLOCK_END": (NODE, "set by the Capacity Block warning's SSM document: when the block ends"),
    "EFA_CDK_INSTALLER_VERSION": (NODE, "the EFA installer to install"),
    "EFA_CDK_INSTALLER_SHA256": (NODE, "its SHA-256, when pinned"),
    "EFA_CDK_INSTALLER_FINGERPRINT": (NODE, "its signing key's fingerprint"),
    "EFA_CDK_INSTALLER_FLAGS": (NODE, "the installer's flags"),
    "EFA_CDK_NEURON_PACKAGES": (NODE, "Neuron SDK packages (ParallelCluster, Trainium)"),
    "EFA_CDK_NEURON_KEY_ID": (NODE, "the Neuron apt key's published id"),
    "EFA_CDK_CONTAINER_IMAGE": (NODE, "the image the container step runs"),
    "EFA_CDK_CONTAINER_SSH_PORT": (NODE, "the SSH port inside the containers"),
    "EFA_CDK_CONTAINER_ARGS": (NODE, "docker run arguments"),
    "EFA_CDK_SSH_PORT": (OTHER, "the containers' SSH port, in the image's environment"),
    # monitoring
    "EFA_CDK_METRICS_NAMESPACE": (NODE, "the cluster's CloudWatch namespace"),
    "EFA_CDK_AGENT_CONFIG": (NODE, "the CloudWatch agent's configuration"),
    "EFA_CDK_HEALTH_MINUTES": (NODE, "the health timer's interval"),
    "EFA_CDK_CW_AGENT_FINGERPRINT": (NODE, "the CloudWatch agent's signing key"),
    "EFA_CDK_CW_AGENT_MIN_VERSION": (NODE, "the first agent with EFA metrics"),
    "EFA_CDK_NODE_GROUP": (NODE, "explicit or asg (health replacement)"),
    "EFA_CDK_UNHEALTHY_AFTER": (NODE, "failed checks in a row before a replacement"),
    "EFA_CDK_REPLACE_MINUTES": (NODE, "at most one replacement per group in this time"),
    "EFA_CDK_REPLACEMENT_PARAMETER": (NODE, "SSM parameter with the group's last replacement"),
    # knobs with defaults
    "EFA_CDK_ROOT": (KNOB, "a scratch root for tests (empty on a node)"),
    "EFA_CDK_IMDS_URL": (KNOB, "IMDS's address (tests)"),
    "EFA_CDK_POLL_SECONDS": (KNOB, "how often a node looks for the others"),
    "EFA_CDK_PINGPONG_ITERATIONS": (KNOB, "fi_pingpong's iterations per message size (default 1000)"),
    "EFA_CDK_PULL_PAUSE": (KNOB, "pause between image pull attempts"),
    "EFA_CDK_INSTALLER_URL": (KNOB, "where the EFA installer is downloaded from"),
    "EFA_CDK_CW_AGENT_URL": (KNOB, "where the CloudWatch agent is downloaded from"),
    "EFA_CDK_NCCL_TESTS": (KNOB, "where nccl-tests' binaries are"),
    "EFA_CDK_HCCL_DEMO": (KNOB, "where hccl_demo is"),
    "EFA_CDK_TEST_ONLY_PROVIDER": (KNOB, "a libfabric provider for the one-machine cluster (tests)"),
    "EFA_CDK_CONTAINER_EFA": (KNOB, "0 lets a Slurm job without EFA through the Enroot hook"),
}
