"""The devices' own counters in sysfs, read on every check: EFA's per device (kept between checks: a counter
that rises past its threshold is a problem) and Neuron's per device and core. Each problem one line
(node/problems.py). Python 3 standard library only: it runs on the nodes (node/devices.py ``efa`` and
``neuron``)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

if __package__:
    from .problems import problem_line
else:  # run on a node as a script's neighbour (no package): the scripts' folder
    from problems import problem_line  # type: ignore[import-not-found, no-redef]

# ---- EFA --------------------------------------------------------------------------------------------

#: EFA's counters the check watches, per port (/sys/class/infiniband/<device>/ports/1/hw_counters/<name>:
#: the names the EFA kernel driver defines, Linux drivers/infiniband/hw/efa/efa_verbs.c,
#: EFA_DEFINE_PORT_STATS; their meanings, CloudWatch user guide "CloudWatch-Agent-EFA"), with how much a
#: counter may rise between two checks before it is a problem, and the mend. These thresholds are this
#: project's judgement, not AWS's: an error counter (a work request that failed, a command the device did
#: not complete) should not rise at all on a healthy device; retransmission timeouts and drops happen under
#: congestion, so only many in one interval count; the events about a remote peer say the path or the peer
#: is impaired, possibly not this node: they are reported and counted (``watch``), and the fabric sweep
#: names the node at fault.
EFA_COUNTERS: dict[str, tuple[int, str, str]] = {
    "rdma_read_wr_err": (1, "RDMA read work requests failed", "reboot"),
    "rdma_write_wr_err": (1, "RDMA write work requests failed", "reboot"),
    "rx_drops": (1000, "received packets dropped", "reboot"),
    "retrans_timeout_events": (10, "SRD traffic timed out and changed network path", "watch"),
    "impaired_remote_conn_events": (
        1,
        "SRD connections entered an impaired state (a reduced rate limit)",
        "watch",
    ),
    "unresponsive_remote_events": (1, "a remote SRD peer stopped answering", "watch"),
}
#: Device counters (/sys/class/infiniband/<device>/hw_counters/: EFA_DEFINE_DEVICE_STATS): the device's
#: admin commands that failed or never completed.
EFA_DEVICE_COUNTERS: dict[str, tuple[int, str, str]] = {
    "cmds_err": (1, "admin commands to the device failed", "reboot"),
    "no_completion_cmds": (1, "admin commands to the device never completed", "reboot"),
}
#: Retransmitted packets as a share of the packets sent in one interval, once enough were sent to judge.
RETRANS_SHARE, RETRANS_MIN_SENT = 0.01, 100_000


def _read_int(path: Path) -> int | None:
    """The number a sysfs file starts with (a counter's ``17``, a port state's ``4: ACTIVE``), or None."""
    try:
        found = re.match(r"\s*(\d+)", path.read_text())
    except OSError:
        return None
    return int(found.group(1)) if found else None


def efa_devices(sysfs: Path) -> list[Path]:
    """The devices under SYSFS/class/infiniband bound to the ``efa`` driver (their ``device/driver`` link,
    as the node's EFA count reads them: lib.sh efa_devices; a p6-b200's NVLink controllers, also listed
    there, are not EFA)."""
    return [
        device
        for device in sorted((sysfs / "class/infiniband").glob("*"))
        if (device / "device/driver").resolve().name == "efa"
    ]


def efa_readings(sysfs: Path) -> dict[str, dict[str, int]]:
    """Every watched counter of every EFA device (port counters as ``name``, device counters as
    ``device:name``), and each port's state as ``state`` (4: ACTIVE)."""
    readings: dict[str, dict[str, int]] = {}
    for device in efa_devices(sysfs):
        values: dict[str, int] = {}
        for name in [*EFA_COUNTERS, "retrans_pkts", "tx_pkts"]:
            value = _read_int(device / "ports/1/hw_counters" / name)
            if value is not None:
                values[name] = value
        for name in EFA_DEVICE_COUNTERS:
            value = _read_int(device / "hw_counters" / name)
            if value is not None:
                values[f"device:{name}"] = value
        state = _read_int(device / "ports/1/state")
        if state is not None:
            values["state"] = state
        readings[device.name] = values
    return readings


def efa_problems(now: dict[str, dict[str, int]], before: dict[str, dict[str, int]]) -> list[str]:
    """What rose past its threshold between two readings (a counter that went down was reset: it starts
    over, no problem), and a port not ACTIVE."""
    out: list[str] = []
    for device, values in now.items():
        name = f"EFA {device}"
        if "state" in values and values["state"] != 4:
            out.append(problem_line(name, "port not active", f"ports/1/state {values['state']}", "reboot"))
        old = before.get(device, {})
        table = {**EFA_COUNTERS, **{f"device:{k}": v for k, v in EFA_DEVICE_COUNTERS.items()}}
        for counter, (threshold, what, mend) in table.items():
            rose = values.get(counter, 0) - old.get(counter, values.get(counter, 0))
            if rose >= threshold:
                out.append(
                    problem_line(
                        name, what, f"{counter.removeprefix('device:')} +{rose} since the last check", mend
                    )
                )
        sent = values.get("tx_pkts", 0) - old.get("tx_pkts", values.get("tx_pkts", 0))
        again = values.get("retrans_pkts", 0) - old.get("retrans_pkts", values.get("retrans_pkts", 0))
        if sent >= RETRANS_MIN_SENT and again > RETRANS_SHARE * sent:
            reading = f"retrans_pkts +{again} of tx_pkts +{sent} since the last check"
            out.append(problem_line(name, "more than 1% of packets retransmitted", reading, "watch"))
    return out


def efa_check(sysfs: Path, state: Path) -> list[str]:
    """Read EFA's counters, compare them with the last check's (kept in `state`), keep these."""
    now = efa_readings(sysfs)
    try:
        before = json.loads(state.read_text()).get("devices", {})
    except (OSError, ValueError):
        before = {}
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({"at": int(time.time()), "devices": now}))
    return efa_problems(now, before)


# ---- Neuron -----------------------------------------------------------------------------------------

#: Neuron's device counters (AWS Neuron, "Neuron Sysfs User Guide": /sys/devices/virtual/neuron_device/
#: neuronN/stats/hardware/, each a counter since the driver loaded, a directory with ``total`` and
#: ``present``), with the mend: an unrepairable DRAM error, the device's memory is failing; a repairable one
#: and an SRAM error, a reboot (the driver reloaded, the device reset).
NEURON_HARDWARE = {
    "mem_ecc_uncorrected": ("unrepairable uncorrected ECC errors in the device's DRAM", "replace"),
    "mem_ecc_repairable_uncorrected": ("repairable uncorrected ECC errors in the device's DRAM", "reboot"),
    "sram_ecc_uncorrected": ("uncorrected ECC errors in the device's SRAM", "reboot"),
}
#: Per NeuronCore (neuron_coreM/stats/): the runtime's hardware errors (status/hw_error, a counter) and
#: the device resets that failed (other_info/reset_fail_count, a plain number).
NEURON_CORE = {
    "hw_error": ("hardware errors returned to the Neuron runtime", "reboot"),
    "reset_fail_count": ("device resets that failed", "replace"),
}
#: The guide for Neuron 2.33 says Neuron Driver 2.31 moved several nodes to new paths without naming them in
#: what was read here: each counter is found by its name anywhere under its device or core (the first
#: found, device counters outside the cores), so a moved node is still read while its name stands.


def _counter(path: Path) -> int | None:
    """A Neuron sysfs counter: its ``total`` when it is a directory, else the file's number."""
    return _read_int(path / "total") if path.is_dir() else _read_int(path)


def _find(top: Path, name: str, *, skip_cores: bool) -> Path | None:
    for found in sorted(top.rglob(name)):
        if not (skip_cores and any(part.startswith("neuron_core") for part in found.relative_to(top).parts)):
            return found
    return None


def neuron_problems(sysfs: Path) -> list[str]:
    """Each Neuron device's hardware counters and its cores' errors, one line per problem."""
    out: list[str] = []
    for device in sorted((sysfs / "devices/virtual/neuron_device").glob("neuron[0-9]*"), key=_index):
        name = f"Neuron {device.name.removeprefix('neuron')}"
        for counter, (what, mend) in NEURON_HARDWARE.items():
            path = _find(device, counter, skip_cores=True)
            value = _counter(path) if path else None
            if value and path:
                out.append(problem_line(name, what, f"{path.relative_to(device)} {value}", mend))
        for core in sorted(device.glob("neuron_core[0-9]*"), key=_index):
            for counter, (what, mend) in NEURON_CORE.items():
                path = _find(core, counter, skip_cores=False)
                value = _counter(path) if path else None
                if value and path:
                    out.append(
                        problem_line(
                            f"{name} core {_index(core)}", what, f"{path.relative_to(core)} {value}", mend
                        )
                    )
    return out


def _index(path: Path) -> int:
    found = re.search(r"(\d+)$", path.name)
    return int(found.group(1)) if found else 0
