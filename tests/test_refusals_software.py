"""Bad input refused by the node software (core/software.py), containers (core/containers.py) and images
(cdk/machine_image.py): each fails at synth naming the value, why, the fix and its id."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_ec2 as ec2

from efa_constructs import (
    EfaInstaller,
    EfaMachineImage,
    EfaUserData,
    ImageReadOnce,
)
from tests.refusals import (
    Row,
    assert_refused,
    call,
    cluster,
    ctx,
    parametrize,
)

ROWS: list[Row] = [
    (
        "benchmarks as strings",
        call(EfaUserData, benchmarks=["nccl-tests"]),
        "benchmarks",
        "item 0 is the str",
        "efa-cdk:benchmarks-item-type",
    ),
    (
        "benchmarks as one string",
        call(EfaUserData, benchmarks="nccl-tests"),
        "benchmarks",
        "not a str",
        "efa-cdk:benchmarks-a-string",
    ),
    (
        "p3dn (V100) without an image",
        cluster(instance_type=ec2.InstanceType("p3dn.24xlarge")),
        "machine_image",
        "older than Turing",
        "efa-cdk:no-default-image",
    ),
    (
        "AMI id of the wrong form in code",
        call(EfaMachineImage.from_ami_id, "image-1"),
        "ami_id",
        "8 or 17 hex",
        "efa-cdk:ami-id-form",
    ),
    (
        "unknown AMI OS",
        ctx(ami_id="ami-0123456789abcdef0", ami_os="centos"),
        "ami_os",
        "not an OS family",
        "efa-cdk:ami-os-unknown",
    ),
    (
        "image refresh label with a slash",
        call(ImageReadOnce, "/x", "2026/12"),
        "ami_refresh",
        "logical id",
        "efa-cdk:ami-refresh-label",
    ),
    (
        "container image with a space",
        ctx(container_image="my image"),
        "container_image",
        "not an image reference",
        "efa-cdk:container-image-reference",
    ),
    (
        "container SSH port of the host's sshd",
        ctx(container_image="registry.example/train:1", container_ssh_port="22"),
        "container_ssh_port",
        "the host's sshd has 22",
        "efa-cdk:container-ssh-port",
    ),
    (
        "nccl-tests on Trainium",
        ctx(benchmarks="nccl-tests"),
        "benchmarks",
        "has no NVIDIA GPUs",
        "efa-cdk:benchmark-wrong-accelerator",
    ),
    (
        "nccom-test on NVIDIA",
        ctx(instance_type="p5.48xlarge", benchmarks="fi_pingpong,nccom-test"),
        "benchmarks",
        "has no Trainium devices",
        "efa-cdk:benchmark-wrong-accelerator",
    ),
    (
        "installer checksum that is not a SHA-256",
        call(EfaInstaller, version="1.49.0", sha256="d41d8cd98f00b204e9800998ecf8427e"),
        "sha256",
        "not a SHA-256",
        "efa-cdk:installer-sha256-form",
    ),
    (
        "installer version 'latest'",
        call(EfaInstaller, version="latest"),
        "version",
        "not a pinned",
        "efa-cdk:installer-version-form",
    ),
    (
        "user step named like a library step",
        call(lambda: EfaUserData().add_step("signal", "true")),
        "name",
        "not a library step",
        "efa-cdk:step-name-form",
    ),
    (
        "empty user step",
        call(lambda: EfaUserData().add_commands("x", " ")),
        "script",
        "the step is empty",
        "efa-cdk:step-empty",
    ),
    (
        "wait shorter than a minute",
        call(EfaUserData, wait_seconds=5),
        "wait_seconds",
        "out of range",
        "efa-cdk:software-range",
    ),
    (
        "a DCGM level DCGM does not have",
        call(EfaUserData, dcgm_diag_level=5),
        "dcgm_diag_level",
        "levels are 1 (quick) to 4",
        "efa-cdk:dcgm-level",
    ),
    (
        "a 15-minute DCGM diagnostic in the default 45-minute signal wait",
        call(EfaUserData, dcgm_diag_level=3),
        "signal_timeout_minutes",
        "dcgm_diag_level=3 runs about 15 minutes at boot",
        "efa-cdk:dcgm-level-outlasts-signal",
    ),
    (
        "a DCGM diagnostic on Trainium (ready stack)",
        ctx(dcgm_diag_level="2"),
        "dcgm_diag_level",
        "trn1.32xlarge has neuron accelerators",
        "efa-cdk:dcgm-not-nvidia",
    ),
    (
        "a str for the os family",
        call(lambda: EfaMachineImage.from_ami_id("ami-0123456789abcdef0", os_family="al2023")),
        "os_family",
        "takes an OsFamily",
        "efa-cdk:os-family-type",
    ),
]


@parametrize(ROWS)
def test_the_software_containers_and_images_refuse_bad_input_at_synth(
    make_stack: Any, build: Any, key: str, why: str, code: str
) -> None:
    assert_refused(make_stack, build, key, why, code)
