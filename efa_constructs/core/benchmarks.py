"""The benchmarks a node runs once the cluster is formed: which ones a type gets, which it may be asked for,
the collective test of its accelerator, and how long the boot signal waits when DCGM's diagnostic runs.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from .catalogue import AcceleratorKind, InstanceType
from .errors import EfaConfigError, parse_choice


class Benchmark(enum.Enum):
    """A cross-node benchmark the leader can run once every node has verified EFA."""

    NCCL_TESTS = "nccl-tests"  # all_reduce_perf over aws-ofi-nccl: NVIDIA GPUs
    NCCOM_TEST = "nccom-test"  # Neuron collectives: Trainium
    FI_PINGPONG = "fi_pingpong"  # libfabric ping-pong over one EFA: any type
    HCCL_DEMO = "hccl_demo"  # Intel Gaudi collectives (HabanaAI/hccl_demo, in the image): Gaudi, opt-in

    @staticmethod
    def parse_list(raw: str) -> tuple[Benchmark, ...] | None:
        """``auto`` -> None (by accelerator), ``none`` -> (), else a comma-separated list."""
        if raw.strip() == "auto":
            return None
        if raw.strip() == "none":
            return ()
        return tuple(
            parse_choice(
                Benchmark,
                item.strip(),
                what="benchmarks",
                why="not a benchmark this library runs (or auto / none)",
            )
            for item in raw.split(",")
            if item.strip()
        )


def default_benchmarks(it: InstanceType) -> tuple[Benchmark, ...]:
    """The accelerator's collective benchmark (if any), then fi_pingpong."""
    if it.accelerator.kind is AcceleratorKind.NVIDIA_GPU:
        return (Benchmark.NCCL_TESTS, Benchmark.FI_PINGPONG)
    if it.accelerator.kind is AcceleratorKind.NEURON and it.family.startswith("trn"):
        return (Benchmark.NCCOM_TEST, Benchmark.FI_PINGPONG)
    return (Benchmark.FI_PINGPONG,)


def check_benchmarks(it: InstanceType, benchmarks: Sequence[Benchmark]) -> None:
    """Refuse a benchmark the type cannot run (no GPUs for nccl-tests, no Trainium for nccom-test)."""
    for bench, kind, what in (
        (Benchmark.NCCL_TESTS, AcceleratorKind.NVIDIA_GPU, "NVIDIA GPUs"),
        (Benchmark.NCCOM_TEST, AcceleratorKind.NEURON, "Trainium devices"),
        (Benchmark.HCCL_DEMO, AcceleratorKind.GAUDI, "Gaudi accelerators"),
    ):
        if bench in benchmarks and it.accelerator.kind is not kind:
            raise EfaConfigError(
                "benchmarks",
                code="efa-cdk:benchmark-wrong-accelerator",
                value=bench.value,
                why=f"{it.name} has no {what}",
                fix=f"use {', '.join(b.value for b in default_benchmarks(it))} (the default for {it.name})",
            )


#: The collective library each accelerator's jobs use over EFA: NCCL through aws-ofi-nccl on NVIDIA GPUs,
#: Neuron's collectives (nccom) on Trainium and Inferentia; the guard (node/boot/fabric-guard.sh) checks
#: NCCL's plugin, and libfabric's efa provider for every kind.
COLLECTIVES = {AcceleratorKind.NVIDIA_GPU: "nccl", AcceleratorKind.NEURON: "nccom"}


#: How long DCGM's diagnostic levels run (DCGM's ``dcgmi diag`` reference: "normally lasting seconds",
#: "approximately two minutes", "approximately 15 minutes", level 4 "longer-running", no figure).
DCGM_DURATION = {
    1: "seconds",
    2: "about two minutes",
    3: "about 15 minutes",
    4: "longer than level 3 (no figure)",
}


def signal_minutes_for(dcgm_diag_level: int | None) -> int:
    """The least ``signal_timeout_minutes`` for nodes that run DCGM's diagnostic at this level at boot: the
    default 45 (image boot, EFA install and verification) holds levels 1 and 2; level 3 adds its 15 minutes;
    level 4, whose length DCGM does not give, asks for two hours (efa-cdk's own floor)."""
    return {3: 60, 4: 120}.get(dcgm_diag_level or 0, 45)


#: The accelerators whose devices and faults the node checks (accelerator-check.sh).
CHECKED = frozenset({AcceleratorKind.NVIDIA_GPU, AcceleratorKind.NEURON, AcceleratorKind.GAUDI})
#: The GPU models whose multi-GPU instances join their GPUs by NVLink (AWS's instance pages: P3dn's V100 by
#: NVLink, P4d's A100 and P5's H100/H200 by NVSwitch, P6's B200/B300/GB200 by fifth-generation NVLink),
#: where the node's check reads the links (``nvidia-smi nvlink --status``); one GPU alone has no peer.
NVLINK_GPUS = frozenset({"V100", "A100", "H100", "H200", "B200", "B300", "GB200"})


def has_nvlink(it: InstanceType) -> bool:
    """Whether the type's GPUs are joined by NVLink (:data:`NVLINK_GPUS`, more than one GPU)."""
    return (
        it.accelerator.kind is AcceleratorKind.NVIDIA_GPU
        and it.accelerator.name in NVLINK_GPUS
        and (it.accelerator.count > 1)
    )


def collectives(it: InstanceType) -> str:
    """``EFA_CDK_COLLECTIVES`` for a type: nccl, nccom or none (:data:`COLLECTIVES`)."""
    return COLLECTIVES.get(it.accelerator.kind, "none")


def _benchmarks(given: Sequence[Benchmark]) -> tuple[Benchmark, ...]:
    """The benchmarks as Benchmark members (a string is refused with the member to use)."""
    fix = "pass Benchmark members, e.g. [Benchmark.NCCL_TESTS] (Benchmark.parse_list reads a string)"
    if isinstance(given, str):
        raise EfaConfigError(
            "benchmarks",
            code="efa-cdk:benchmarks-a-string",
            value=given,
            why="a sequence of Benchmark is wanted, not a str",
            fix=fix,
        )
    for i, item in enumerate(given):
        if not isinstance(item, Benchmark):
            raise EfaConfigError(
                "benchmarks",
                code="efa-cdk:benchmarks-item-type",
                value=list(given),
                why=f"item {i} is the {type(item).__name__} {item!r}",
                fix=fix,
            )
    return tuple(given)
