#!/usr/bin/env python3
"""What the devices say of themselves, read on every check (at boot and by the health timer): each problem
one line naming the device, the reading and the mend, cheapest first (:data:`MENDS`).

Runs on the nodes (Python 3 standard library only; the check scripts run the tools and hand their output
here) and in the tests, on real recorded output (tests/fixtures/nvidia-h200, from
../shared/recordings/nvidia-h200) and on variants of it that change only the fields NVIDIA's documents name.

    devices.py fields                      the --query-gpu fields the GPU reader asks nvidia-smi for
    devices.py gpu [--fields F] < STATE    nvidia-smi --query-gpu=$(devices.py fields) --format=csv (F: the
                                           fields asked, for a CSV without header), or its -q -x
    devices.py nvlink < NVLINK_STATUS      nvidia-smi nvlink --status (types whose GPUs have NVLink)
    devices.py efa SYSFS STATE             EFA's own counters (SYSFS/class/infiniband), kept in STATE
    devices.py neuron SYSFS                Neuron's devices (SYSFS/devices/virtual/neuron_device)
    devices.py worst < LINES               the most severe mend the problem lines ask for (or none)
    devices.py mends < LINES               each line after its mend and a tab

A line reads ``GPU 0 (00000000:00:06.0): row remapping pending (remapped_rows.pending Yes): mend: reset``.
Each reader prints nothing for a healthy node and exits 1 when it printed a problem; a line whose mend is
``watch`` is reported and counted and asks nothing of the node (exit 0 when that is all there is).
"""

from __future__ import annotations

import csv
import io
import re
import sys
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

if __package__:
    from . import problems, sysfs_counters
else:  # run on a node as a script (no package): its neighbours are in its folder
    import problems  # type: ignore[import-not-found, no-redef]
    import sysfs_counters  # type: ignore[import-not-found, no-redef]

MENDS, mend_of, problem_line, worst = problems.MENDS, problems.mend_of, problems.problem_line, problems.worst
EFA_COUNTERS, EFA_DEVICE_COUNTERS = sysfs_counters.EFA_COUNTERS, sysfs_counters.EFA_DEVICE_COUNTERS
NEURON_CORE, NEURON_HARDWARE = sysfs_counters.NEURON_CORE, sysfs_counters.NEURON_HARDWARE
efa_check, efa_devices = sysfs_counters.efa_check, sysfs_counters.efa_devices
neuron_problems = sysfs_counters.neuron_problems

__all__ = [
    "EFA_COUNTERS",
    "EFA_DEVICE_COUNTERS",
    "FIELDS",
    "MENDS",
    "NEURON_CORE",
    "NEURON_HARDWARE",
    "NEWER_FIELDS",
    "efa_check",
    "efa_devices",
    "gpu_problems",
    "mend_of",
    "neuron_problems",
    "nvlink_problems",
    "worst",
]

# ---- NVIDIA GPUs ------------------------------------------------------------------------------------

#: What the GPU reader asks nvidia-smi (each field's meaning: ``nvidia-smi --help-query-gpu``, recorded in
#: tests/fixtures/nvidia-h200/nvidia-smi-help-query-gpu.txt). The first group every driver since row
#: remapping (R450) answers; the second, newer drivers (R535 and later name gpu_recovery_action): asked
#: apart, so that an older driver still answers the first.
FIELDS = (
    "index",
    "pci.bus_id",
    "ecc.errors.uncorrected.volatile.total",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "retired_pages.pending",
    "clocks_event_reasons.hw_slowdown",
    "clocks_event_reasons.hw_thermal_slowdown",
    "clocks_event_reasons.hw_power_brake_slowdown",
    "clocks_event_reasons.sw_thermal_slowdown",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "utilization.gpu",
)
NEWER_FIELDS = ("gpu_recovery_action",)

#: NVIDIA, "GPU Memory Error Management", "Error Recovery and Response Flags" (docs.nvidia.com/deploy/
#: a100-gpu-mem-error-mgmt); NVML ``nvmlDeviceGetGpuRecoveryAction`` (nvmlDeviceGpuRecoveryAction_t in nvml.h,
#: as NVIDIA's nvidia-ml-py and cuda-python bindings copy it: 0 None, 1 GPU reset, 2 node reboot, 3 drain
#: P2P, 4 drain and reset). The bindings disagree on 5 (nvidia-ml-py: reset the GPU's bus; cuda-python:
#: recover the IMEX domain): either is more than a GPU reset, so 5, and any code or name this table does not
#: know, asks for a reboot. nvidia-smi prints the action's name (``None`` recorded on driver 580).
RECOVERY = {
    "reset": ("reset", "the GPU must be reset (all its processes ended first)"),
    "reboot": ("reboot", "the fault may have left the OS inconsistent: reboot"),
    "drain p2p": ("reset", "drain peer-to-peer work, then the GPU can be reset"),
    "drain and reset": ("reset", "running at reduced capacity: drain, then reset the GPU"),
}
RECOVERY_CODES = {1: "reset", 2: "reboot", 3: "drain p2p", 4: "drain and reset"}
#: A clock reason that means the hardware is slowing the GPU down (nvidia-smi --help-query-gpu: HW Slowdown
#: "reducing the core clocks by a factor of 2 or more", thermal, power brake; SW thermal "temperature higher
#: than Max Operating Temp"): a node that trains slowly, not a job's fault.
SLOWDOWNS = {
    "clocks_event_reasons.hw_slowdown": "hardware slowdown engaged",
    "clocks_event_reasons.hw_thermal_slowdown": "hardware thermal slowdown engaged (temperature too high)",
    "clocks_event_reasons.hw_power_brake_slowdown": "hardware power brake engaged (external power brake)",
    "clocks_event_reasons.sw_thermal_slowdown": "software thermal slowdown (above its maximum temperature)",
}
#: The same four in ``clocks_event_reasons.active``, the bitmask a narrower query may carry instead (NVML's
#: nvmlClocksEventReason* constants, nvml.h as nvidia-ml-py copies them: 0x8, 0x20, 0x40, 0x80).
SLOWDOWN_BITS = {
    0x8: "clocks_event_reasons.hw_slowdown",
    0x20: "clocks_event_reasons.sw_thermal_slowdown",
    0x40: "clocks_event_reasons.hw_thermal_slowdown",
    0x80: "clocks_event_reasons.hw_power_brake_slowdown",
}
#: The PCIe link "may be reduced when the GPU is not in use" (nvidia-smi --help-query-gpu): judged only
#: while the GPU is busy at least this much.
BUSY_PERCENT = 50


def _rows(document: str, asked: list[str] | None = None) -> list[dict[str, str]]:
    """nvidia-smi's CSV (``--format=csv``) as one dict a GPU, by field name (its ``[unit]`` dropped); without
    a header (``noheader``), by the fields `asked`, when every row has as many cells."""
    reader = csv.reader(io.StringIO(document.strip()), skipinitialspace=True)
    lines = [row for row in reader if row]
    header = [re.sub(r"\s*\[.*\]$", "", h).strip() for h in lines[0]] if lines else []
    if "index" not in header:
        if asked and lines and all(len(row) == len(asked) for row in lines):
            return [dict(zip(asked, (v.strip() for v in row), strict=True)) for row in lines]
        return []
    return [dict(zip(header, (v.strip() for v in row), strict=False)) for row in lines[1:]]


#: ``nvidia-smi -q -x``'s elements for the same readings (its XML, recorded in
#: tests/fixtures/nvidia-h200/nvidia-smi-q.xml): the reader's fallback where a query field is refused. Each
#: is found by its tag anywhere under the GPU; older drivers' ``clocks_throttle_reason_*`` names too.
XML_FIELDS = {
    "remapped_rows.pending": ("remapped_row_pending",),
    "remapped_rows.failure": ("remapped_row_failure",),
    "retired_pages.pending": ("pending_retirement",),
    "gpu_recovery_action": ("gpu_recovery_action",),
    "pcie.link.gen.current": ("current_link_gen",),
    "pcie.link.gen.max": ("max_link_gen",),
    "pcie.link.width.current": ("current_link_width",),
    "pcie.link.width.max": ("max_link_width",),
    "utilization.gpu": ("gpu_util",),
    **{
        f"clocks_event_reasons.{r}": (f"clocks_event_reason_{r}", f"clocks_throttle_reason_{r}")
        for r in ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
    },
}


def _xml_rows(document: str) -> list[dict[str, str]]:
    """``nvidia-smi -q -x`` as the same dicts as the CSV (index: the GPUs' order, as nvidia-smi numbers
    them); uncorrectable ECC since the driver loaded: every ``*uncorrectable*`` (or older ``double_bit``
    total) count under ``ecc_errors/volatile``, summed."""
    try:
        root = ElementTree.fromstring(document.strip())
    except ElementTree.ParseError:
        return []
    rows = []
    for index, gpu in enumerate(root.iter("gpu")):
        row = {"index": str(index), "pci.bus_id": gpu.get("id", "?")}
        for field, tags in XML_FIELDS.items():
            found = next((e.text for t in tags for e in gpu.iter(t) if e.text), None)
            if found is not None:
                row[field] = found.strip()
        volatile = gpu.find("ecc_errors/volatile")
        if volatile is not None:
            counts = [_number(e.text) for e in volatile.iter() if "uncorr" in e.tag or e.tag == "total"]
            row["ecc.errors.uncorrected.volatile.total"] = f"{sum(c for c in counts if c):g}"
        rows.append(row)
    return rows


def _number(value: str | None) -> float | None:
    """A reading as a number (``16``, ``0 %``, ``5``), or None (``[N/A]``, ``N/A``, empty)."""
    found = re.match(r"^\s*(-?[0-9.]+)", value or "")
    return float(found.group(1)) if found else None


def _yes(value: str | None) -> bool:
    return (value or "").strip().lower() in ("yes", "active", "1", "true")


def _recovery(value: str) -> tuple[str, str] | None:
    """The mend a recovery action asks for, or None (None, N/A, unsupported)."""
    text = value.strip().lower()
    code = int(text, 0) if re.fullmatch(r"0x[0-9a-f]+|[0-9]+", text) else None
    if code is not None:
        text = "none" if code == 0 else RECOVERY_CODES.get(code, f"code {code}")
    if text in ("", "none", "n/a", "[n/a]") or text.startswith("[") or "not supported" in text:
        return None
    found = next((v for k, v in sorted(RECOVERY.items(), key=lambda kv: -len(kv[0])) if k in text), None)
    return found or ("reboot", "an action this reader does not know: the safe one")


def _pcie(gpu: dict[str, str]) -> str | None:
    """The PCIe link below its maximum while the GPU is busy: the reading, or None."""
    busy = _number(gpu.get("utilization.gpu"))
    gen, gen_max = _number(gpu.get("pcie.link.gen.current")), _number(gpu.get("pcie.link.gen.max"))
    width, width_max = _number(gpu.get("pcie.link.width.current")), _number(gpu.get("pcie.link.width.max"))
    if busy is None or busy < BUSY_PERCENT or None in (gen, gen_max, width, width_max):
        return None
    if gen >= gen_max and width >= width_max:  # type: ignore[operator]
        return None
    return f"Gen{gen:g} x{width:g}, its maximum Gen{gen_max:g} x{width_max:g}, at {busy:g}% busy"


def _slowdowns(gpu: dict[str, str]) -> list[tuple[str, str]]:
    """The hardware slowdowns engaged: (field, reading), from each field, or the active bitmask."""
    if any(field in gpu for field in SLOWDOWNS):
        return [(f, f"{f} {gpu[f]}") for f in SLOWDOWNS if _yes(gpu.get(f))]
    active = gpu.get("clocks_event_reasons.active", "")
    mask = int(active, 16) if re.fullmatch(r"0x[0-9a-fA-F]+", active.strip()) else 0
    return [(f, f"clocks_event_reasons.active {active}") for bit, f in SLOWDOWN_BITS.items() if mask & bit]


def gpu_problems(document: str, asked: list[str] | None = None) -> list[str]:
    """Each GPU's own state, one line per problem with the mend (row remapping, pages pending retirement,
    the recovery action, uncorrectable ECC since boot, hardware slowdowns, the PCIe link under load)."""
    rows = _xml_rows(document) if document.lstrip().startswith("<") else _rows(document, asked)
    if not rows:
        said = next((line.strip() for line in document.splitlines() if line.strip()), "nothing")
        return [problem_line("GPU", "nvidia-smi's state could not be read", said[:200], "reboot")]
    out: list[str] = []
    for gpu in rows:
        name = f"GPU {gpu.get('index', '?')} ({gpu.get('pci.bus_id', '?')})"
        if _yes(gpu.get("remapped_rows.failure")):
            out.append(
                problem_line(
                    name,
                    "row remapping failed: past NVIDIA's RMA threshold",
                    "remapped_rows.failure Yes",
                    "replace",
                )
            )
        if _yes(gpu.get("remapped_rows.pending")):
            out.append(
                problem_line(
                    name,
                    "row remapping pending: completes at the next GPU reset",
                    "remapped_rows.pending Yes",
                    "reset",
                )
            )
        if _yes(gpu.get("retired_pages.pending")):
            out.append(
                problem_line(
                    name,
                    "pages pending retirement: retired at the next reboot",
                    "retired_pages.pending Yes",
                    "reboot",
                )
            )
        recovery = _recovery(gpu.get("gpu_recovery_action", ""))
        if recovery is not None:
            out.append(
                problem_line(
                    name, recovery[1], f"gpu_recovery_action {gpu['gpu_recovery_action']}", recovery[0]
                )
            )
        errors = _number(gpu.get("ecc.errors.uncorrected.volatile.total"))
        if errors:
            reading = f"ecc.errors.uncorrected.volatile.total {errors:g}"
            out.append(
                problem_line(name, "uncorrectable ECC errors since the driver loaded", reading, "reset")
            )
        for field, reading in _slowdowns(gpu):
            out.append(problem_line(name, SLOWDOWNS[field], reading, "replace"))
        pcie = _pcie(gpu)
        if pcie is not None:
            out.append(problem_line(name, "PCIe link below its maximum under load", pcie, "reboot"))
    return out


#: ``nvidia-smi nvlink --status``: a ``GPU N: NAME (UUID: ...)`` header, then one ``Link N: <speed> GB/s`` or
#: ``Link N: <inactive>`` line a link (the form public tools parse; the recorded H200 has no NVLink peer).
_NVLINK_GPU = re.compile(r"^GPU (\d+):")
_NVLINK_LINK = re.compile(r"^\s*Link (\d+):\s*(.*?)\s*$")


def nvlink_problems(status: str) -> list[str]:
    """NVLink links down (``<inactive>``, or 0 GB/s): a link every GPU of the type has (NVSwitch or a cube
    mesh, all links used). NVIDIA's Xid 74 (NVLink error) resolution: reset the GPU."""
    out: list[str] = []
    gpu = "?"
    down: dict[str, list[str]] = {}
    for line in status.splitlines():
        header = _NVLINK_GPU.match(line)
        if header:
            gpu = header.group(1)
            continue
        link = _NVLINK_LINK.match(line)
        if link and ("inactive" in link.group(2).lower() or _number(link.group(2)) == 0):
            down.setdefault(gpu, []).append(link.group(1))
    for gpu, links in down.items():
        reading = f"Link {', '.join(links)}: inactive"
        out.append(
            problem_line(
                f"GPU {gpu}",
                f"{len(links)} NVLink link{'s' if len(links) > 1 else ''} down",
                reading,
                "reset",
            )
        )
    return out


def _print(problems: list[str]) -> int:
    for problem in problems:
        print(problem)
    return 1 if any(mend_of(p) != "watch" for p in problems) else 0


def _mends(lines: list[str]) -> list[str]:
    return [f"{mend_of(line)}\t{line}" for line in lines if line.strip()]


#: The commands that read their input from stdin: name -> what prints the lines, and whether the exit says
#: a problem (1) or is 0 (lines that are not verdicts).
_STDIN: dict[str, tuple[Callable[[str], list[str]], bool]] = {
    "gpu": (gpu_problems, True),
    "nvlink": (nvlink_problems, True),
    "worst": (lambda text: [worst(text.splitlines())], False),
    "mends": (lambda text: _mends(text.splitlines()), False),  # each line after its mend and a tab (mend.sh)
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    command, rest = (args[0], args[1:]) if args else ("", [])
    if command == "fields" and rest in ([], ["--newer"]):
        print(",".join((*FIELDS, *NEWER_FIELDS) if rest else FIELDS))
        return 0
    if command == "gpu" and len(rest) == 2 and rest[0] == "--fields":  # the fields asked (a headerless CSV)
        return _print(gpu_problems(sys.stdin.read(), rest[1].split(",")))
    if command in _STDIN and not rest:
        read, verdict = _STDIN[command]
        status = _print(read(sys.stdin.read()))
        return status if verdict else 0
    sysfs = {
        ("efa", 2): lambda: efa_check(Path(rest[0]), Path(rest[1])),
        ("neuron", 1): lambda: neuron_problems(Path(rest[0])),
    }
    if (command, len(rest)) in sysfs:  # the counters under a sysfs tree
        return _print(sysfs[command, len(rest)]())
    print(
        "usage: devices.py fields [--newer] | gpu | nvlink | efa SYSFS STATE | neuron SYSFS | worst | mends"
        "  (tools' output, or problem lines, on stdin)",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
