#!/usr/bin/env python3
"""The accelerator checks' readers: what in a tool's output makes a node unfit to train (issue 43).

Runs on the nodes (Python 3 standard library only; ``accelerator-check.sh`` runs the tools and hands
their output here) and in the tests, on recorded output (tests/fixtures/accelerators/README.md).

    accel.py xid < KERNEL_LOG              the NVIDIA driver's Xid events that call for a GPU reset, a
                                           reboot or a replacement: one line each
    accel.py dcgm < DCGMI_DIAG_JSON        the tests ``dcgmi diag -j`` failed, with their first message
    accel.py neuron COUNT < NEURON_LS      a line when neuron-ls lists fewer Neuron devices than COUNT
    accel.py gaudi COUNT < HL_SMI          hl-smi's Gaudi devices: fewer than COUNT, or one with an
                                           uncorrectable error since the driver loaded
    accel.py gpus < NVIDIA_SMI_L           how many GPUs ``nvidia-smi -L`` lists (a number, not a problem)

Each prints nothing for a healthy node, and exits 1 when it printed a problem.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

#: Xid events after which the node cannot train until its GPU is reset, the node rebooted or the GPU
#: replaced. 48, 63, 64: NVIDIA's page on dynamic page retirement (docs.nvidia.com/deploy/
#: dynamic-page-retirement: a double-bit error; a page retired or a row remapped, active only after a reset,
#: as the line itself says, "reset gpu to activate"; a retirement that failed). 74 (NVLink), 79 (off the
#: bus), 95 (uncontained ECC), 119 and 120 (the GSP), 140 (unrecovered ECC): NVIDIA's Xid documentation
#: (docs.nvidia.com/deploy/xid-errors). Its Xid catalog gives every code a "Resolution Bucket" (RESTART_APP,
#: RESET_GPU, RESTART_BM, ...); its whole table was not within reach when this list was written: check a
#: code against it before adding one. Events an application causes and survives (13, 31, 43, 45, 94 a
#: contained ECC error) fail the job, not the node, and are not here.
FATAL_XIDS = {
    48: "double-bit ECC error",
    63: "a memory row or page is pending retirement: the GPU must be reset",
    64: "a memory row or page could not be retired",
    74: "NVLink error",
    79: "the GPU has fallen off the bus",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
}
#: Xid 154 (newer drivers) names the recovery the GPU needs itself: "GPU recovery action changed from
#: 0x0 (None) to 0x1 (GPU Reset Required)"; any action but None is one.
RECOVERY_XID = 154

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<gpu>[0-9A-Fa-f:.]+)\): (?P<code>\d+),\s*(?P<text>.*)")


def xid_problems(log: str) -> list[str]:
    """The kernel log's fatal Xid events, one line per GPU and event, in the order first seen."""
    out: list[str] = []
    for line in log.splitlines():
        m = _XID.search(line)
        if not m:
            continue
        code, text = int(m["code"]), m["text"].strip()
        if code == RECOVERY_XID and not text.rstrip(".").endswith("(None)"):
            why = text
        elif code in FATAL_XIDS:
            why = FATAL_XIDS[code]
        else:
            continue
        problem = f"GPU {m['gpu']}: Xid {code} ({why})"
        if problem not in out:
            out.append(problem)
    return out


def dcgm_problems(document: str) -> list[str]:
    """What ``dcgmi diag -j`` failed: each failed result as "TEST on GPU N: first message", and its
    runtime error. DCGM 4 writes ``"DCGM Diagnostic"``, DCGM 3 ``"DCGM GPU Diagnostic"`` (NVIDIA/DCGM
    testing/python3/dcgm_diag_schema.json; nvvs JsonOutput); a result's status is Pass, Fail, Warn or
    Skip, and only Fail fails the node (DCGM user guide, "DCGM Diagnostics")."""
    start = document.find("{")
    if start < 0:
        return ["dcgmi diag printed no JSON"]
    try:
        doc: dict[str, Any] = json.loads(document[start:])
    except ValueError as exc:
        return [f"dcgmi diag printed JSON that does not parse ({exc})"]
    diag = doc.get("DCGM Diagnostic") or doc.get("DCGM GPU Diagnostic")
    if not isinstance(diag, dict):
        return ["dcgmi diag's JSON has no diagnostic section"]
    out = [f"runtime error: {diag['runtime_error']}"] if diag.get("runtime_error") else []
    for category in diag.get("test_categories", []):
        for test in category.get("tests", []):
            for r in test.get("results", []):
                if str(r.get("status", "")).lower() != "fail":
                    continue
                gpu = r.get("entity_id", r.get("gpu_id", r.get("gpu_ids", "?")))
                said = [w.get("warning", "") if isinstance(w, dict) else w for w in r.get("warnings", [])]
                message = f": {said[0]}" if said and said[0] else ""
                out.append(f"{test.get('name', '?')} on GPU {gpu}{message}")
    return out


def nvidia_gpus(listing: str) -> int:
    """How many GPUs ``nvidia-smi -L`` lists: one "GPU N: NAME (UUID: ...)" line each."""
    return sum(1 for line in listing.splitlines() if re.match(r"^GPU \d+: ", line))


def neuron_devices(table: str) -> int:
    """How many Neuron devices ``neuron-ls`` lists: the rows of its table whose first cell is a device
    number (a device's further processes continue on rows whose first cell is empty)."""
    return sum(1 for line in table.splitlines() if re.match(r"^\|\s*\d+\s*\|", line))


def neuron_problems(table: str, expected: int) -> list[str]:
    """A line when ``neuron-ls`` lists fewer devices than the instance type has."""
    have = neuron_devices(table)
    return [] if have >= expected else [f"neuron-ls lists {have} of {expected} Neuron devices"]


#: A device's first row of hl-smi's summary table: ``|   0  HL-225   N/A  | 0000:9a:00.0   N/A |   0  |``: its
#: index, name, persistence, bus id, display, and the column headed ``Volatile Uncorr. ECC`` (``Volatile
#: Uncor-Events`` since hl-smi 1.19, the recorded outputs show): the uncorrectable errors since the driver
#: loaded, as nvidia-smi's column of that name counts them. Running hl-smi without options "displays a summary
#: table of the detected Gaudi devices" (Intel Gaudi documentation, "System Management Interface Tool
#: (hl-smi)").
_AIP = re.compile(r"^\|\s*(\d+)\s+(HL-[\w-]+)\s+\S+\s*\|\s*([0-9a-fA-F:.]+)\s+\S+\s*\|\s*(\S+)\s*\|\s*$")


def gaudi_problems(table: str, expected: int) -> list[str]:
    """What hl-smi's summary table says against a Gaudi node: fewer devices than its type has; a device
    with uncorrectable errors (a number above 0; N/A is no count)."""
    devices = [m.groups() for m in map(_AIP.match, table.splitlines()) if m]
    out = [] if len(devices) >= expected else [f"hl-smi lists {len(devices)} of {expected} Gaudi devices"]
    for index, name, bus, uncorrectable in devices:
        if uncorrectable.isdigit() and int(uncorrectable) > 0:
            out.append(
                f"Gaudi {index} ({name}, {bus}): {uncorrectable} uncorrectable errors since the driver loaded"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = sys.stdin.read()
    if args[:1] == ["xid"]:
        problems = xid_problems(text)
    elif args[:1] == ["dcgm"]:
        problems = dcgm_problems(text)
    elif args[:1] == ["gpus"]:
        print(nvidia_gpus(text))
        return 0
    elif args[:1] == ["neuron"] and len(args) == 2 and args[1].isdigit():
        problems = neuron_problems(text, int(args[1]))
    elif args[:1] == ["gaudi"] and len(args) == 2 and args[1].isdigit():
        problems = gaudi_problems(text, int(args[1]))
    else:
        print(
            "usage: accel.py xid | dcgm | gpus | neuron COUNT | gaudi COUNT  (output on stdin)",
            file=sys.stderr,
        )
        return 2
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
