"""Issue 59: a sick node known by what its devices say (node/devices.py), and mended the cheapest way that
works (node/boot/mend.sh), on the node's own scripts.

The GPU readings are the real outputs of one H200 (tests/fixtures/nvidia-h200, from
../shared/recordings/nvidia-h200: nvidia-smi 580.159.04): healthy as recorded, and faulty variants that
change only the fields NVIDIA's documents name, each saying which. nvidia-smi itself is a stand-in built from
them (tests/nvidia_smi.py). EFA's counters are a sysfs tree laid out as the EFA kernel driver names it;
Neuron's, as the Neuron sysfs guide does. The ladder runs in the node's scripts against stubs (the AWS CLI,
systemctl, IMDS: tests/helpers.py); on real Slurm in tests/e2e/test_parallelcluster.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from efa_constructs import instance_type
from efa_constructs.core.layout import Layout
from efa_constructs.core.software import node_settings
from efa_constructs.node import devices
from tests import nvidia_smi
from tests.helpers import BASH, ROOT, Node
from tests.test_monitoring import _monitored, _stack  # at collection, as in a full run

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free

FIXTURES = ROOT / "tests/fixtures/nvidia-h200"
RECORDED = (FIXTURES / "nvidia-smi-query-gpu-all.csv").read_text()


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- the readers on the recordings ----------------------------------------------------------------------


def test_the_recorded_h200_is_healthy_in_every_form_it_was_read() -> None:
    """Every field at once, the narrower query, and the XML report of the same machine: nothing to mend."""
    for name in ("nvidia-smi-query-gpu-all.csv", "nvidia-smi-query-gpu.csv", "nvidia-smi-q.xml"):
        assert devices.gpu_problems(fixture(name)) == [], name
    assert devices.nvlink_problems(fixture("nvidia-smi-nvlink-status.txt")) == []  # one GPU, no peer


def test_the_reader_asks_only_fields_the_driver_answers() -> None:
    """Every field the reader asks for is one of the 198 the recorded driver answered (its header)."""
    header, _ = nvidia_smi.read(RECORDED)
    answered = {nvidia_smi._name(h) for h in header}
    assert set(devices.FIELDS + devices.NEWER_FIELDS) <= answered
    helped = fixture("nvidia-smi-help-query-gpu.txt")
    assert all(f'"{f}"' in helped for f in devices.FIELDS + devices.NEWER_FIELDS)  # each one NVIDIA defines


#: Faults as NVIDIA's documents name them, on GPU 3 of eight recorded H200s: (fields changed, the words the
#: line must say, the mend). Sources: NVIDIA "GPU Memory Error Management", "Error Recovery and Response
#: Flags" (row remapping pending: completes at the next GPU reset; failure: past the RMA threshold; the
#: recovery action; pages pending retirement: retired at the next reboot); nvidia-smi --help-query-gpu
#: (HW Slowdown; the PCIe link "may be reduced when the GPU is not in use").
FAULTS = [
    ({"remapped_rows.pending": "Yes"}, "row remapping pending", "reset"),
    ({"remapped_rows.failure": "Yes"}, "row remapping failed", "replace"),
    ({"retired_pages.pending": "Yes"}, "pages pending retirement", "reboot"),
    ({"gpu_recovery_action": "Reset"}, "must be reset", "reset"),
    ({"gpu_recovery_action": "Node Reboot"}, "reboot", "reboot"),
    ({"gpu_recovery_action": "Drain P2P"}, "peer-to-peer", "reset"),
    ({"gpu_recovery_action": "Drain and Reset"}, "reduced capacity", "reset"),
    ({"ecc.errors.uncorrected.volatile.total": "2"}, "uncorrectable ECC", "reset"),
    ({"clocks_event_reasons.hw_slowdown": "Active"}, "hardware slowdown", "replace"),
    ({"clocks_event_reasons.hw_power_brake_slowdown": "Active"}, "power brake", "replace"),
    ({"pcie.link.gen.current": "3", "utilization.gpu": "97 %"}, "PCIe link below its maximum", "reboot"),
]


@pytest.mark.parametrize(
    ("fields", "said", "mend"),
    FAULTS,
    ids=[next(iter(f[0])) + "=" + next(iter(f[0].values())) for f in FAULTS],
)
def test_each_documented_fault_names_the_gpu_the_reading_and_the_mend(
    fields: dict[str, str], said: str, mend: str
) -> None:
    faulty = nvidia_smi.with_fault(nvidia_smi.serve(8), 3, **fields)
    (line,) = devices.gpu_problems(faulty)
    assert line.startswith("GPU 3 (00000000:00:09.0): "), line
    assert said in line and line.endswith(f": mend: {mend}"), line
    field = next(iter(fields))
    assert f"{field} {fields[field]}" in line or fields[field].split()[0] in line, line  # the reading


def test_a_narrower_answer_is_read_too_a_bitmask_of_reasons_and_a_csv_without_its_header() -> None:
    """The recorded 13-field query carries the reasons as one bitmask (clocks_event_reasons.active: NVML's
    nvmlClocksEventReason* bits, 0x40 a hardware thermal slowdown); the recorded headerless answer
    (csv,noheader,nounits) is read by the fields asked."""
    narrow = fixture("nvidia-smi-query-gpu.csv")
    assert "0x0000000000000001" in narrow  # recorded: GPU idle only
    (line,) = devices.gpu_problems(narrow.replace("0x0000000000000001", "0x0000000000000041"))
    assert "thermal slowdown" in line and "clocks_event_reasons.active 0x0000000000000041" in line
    header, _ = nvidia_smi.read(RECORDED)
    asked = [nvidia_smi._name(h) for h in header]
    bare = fixture("nvidia-smi-query-gpu-all-noheader-nounits.csv")
    assert devices.gpu_problems(bare, asked) == []
    cells = bare.strip().split(", ")
    cells[asked.index("remapped_rows.pending")] = "Yes"
    (line,) = devices.gpu_problems(", ".join(cells), asked)
    assert line.startswith("GPU 0 (00000000:00:06.0): row remapping pending") and line.endswith("mend: reset")


def test_a_pcie_link_below_its_maximum_on_an_idle_gpu_is_not_a_fault() -> None:
    """nvidia-smi --help-query-gpu: the link "may be reduced when the GPU is not in use"."""
    idle = nvidia_smi.with_fault(nvidia_smi.serve(2), 1, **{"pcie.link.gen.current": "1"})
    assert devices.gpu_problems(idle) == []


def test_the_xml_report_reads_as_the_query_does() -> None:
    """The fallback where a query field is refused: `nvidia-smi -q -x` of the same H200, its pending flag
    set, says what the CSV says."""
    xml = fixture("nvidia-smi-q.xml").replace(
        "<remapped_row_pending>No</remapped_row_pending>", "<remapped_row_pending>Yes</remapped_row_pending>"
    )
    csv = nvidia_smi.with_fault(nvidia_smi.serve(1), 0, **{"remapped_rows.pending": "Yes"})
    assert devices.gpu_problems(xml) == devices.gpu_problems(csv) != []


def test_a_recovery_action_code_and_an_unknown_action_ask_for_the_safe_mend() -> None:
    """NVML's codes (nvml.h: 0 none, 1 reset, 2 reboot, 3 drain P2P, 4 drain and reset); 5, on which NVIDIA's
    bindings disagree, and a name no table knows: a reboot."""
    for value, mend in (
        ("0", None),
        ("1", "reset"),
        ("2", "reboot"),
        ("4", "reset"),
        ("5", "reboot"),
        ("Something New", "reboot"),
        ("[N/A]", None),
        ("None", None),
    ):
        doc = nvidia_smi.with_fault(nvidia_smi.serve(1), 0, gpu_recovery_action=value)
        assert [devices.mend_of(p) for p in devices.gpu_problems(doc)] == ([mend] if mend else []), value


def test_an_answer_that_is_not_nvidia_smis_table_is_a_problem_not_a_pass() -> None:
    (line,) = devices.gpu_problems("Unable to determine the device handle for GPU0000:00:06.0: Unknown Error")
    assert "could not be read" in line and "Unknown Error" in line and line.endswith("mend: reboot")
    # what the node printed is quoted, not trusted: a flood of it is cut to its first 200 characters
    (line,) = devices.gpu_problems("E" * 199 + "Xtail" + "F" * 5000)
    assert "E" * 199 + "X): mend: reboot" in line and "tail" not in line


def test_nvlink_links_down_are_named_per_gpu() -> None:
    """`nvidia-smi nvlink --status` in the form NVIDIA's nvidia-smi documentation gives (the recorded H200
    has no NVLink peer): a link <inactive> or at 0 GB/s is down."""
    status = (
        "GPU 0: NVIDIA H200 (UUID: GPU-0)\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n"
        "GPU 1: NVIDIA H200 (UUID: GPU-1)\n\t Link 0: <inactive>\n\t Link 1: 0 GB/s\n\t Link 2: 26.562 GB/s\n"
    )
    assert devices.nvlink_problems(status) == [
        "GPU 1: 2 NVLink links down (Link 0, 1: inactive): mend: reset"
    ]


# --- EFA's counters -------------------------------------------------------------------------------------


def efa_sysfs(root: Path, counters: dict[str, dict[str, int]], *, state: int = 4) -> Path:
    """/sys/class/infiniband/<dev>/ports/1/hw_counters/<name> (port counters) and hw_counters/<name> (device
    counters), names as the EFA driver defines them (Linux drivers/infiniband/hw/efa/efa_verbs.c), each
    device bound to the efa driver; the port's state as the kernel prints it ("4: ACTIVE")."""
    sysfs = root / "sys"
    for i, (name, values) in enumerate(counters.items()):
        pci = sysfs / f"bus/pci/devices/0000:{i:02x}:00.0"
        pci.mkdir(parents=True, exist_ok=True)
        driver = sysfs / "bus/pci/drivers/efa"
        driver.mkdir(parents=True, exist_ok=True)
        if not (pci / "driver").exists():
            (pci / "driver").symlink_to(driver)
        dev = sysfs / "class/infiniband" / name
        (dev / "ports/1/hw_counters").mkdir(parents=True, exist_ok=True)
        (dev / "hw_counters").mkdir(exist_ok=True)
        if not (dev / "device").exists():
            (dev / "device").symlink_to(pci)
        (dev / "ports/1/state").write_text(f"{state}: {'ACTIVE' if state == 4 else 'DOWN'}\n")
        for counter, value in values.items():
            folder = dev / (
                "hw_counters" if counter in devices.EFA_DEVICE_COUNTERS else "ports/1/hw_counters"
            )
            (folder / counter).write_text(f"{value}\n")
    return sysfs


def test_an_efa_counter_rising_past_its_threshold_between_checks_is_named(tmp_path: Path) -> None:
    base = {"rdma_read_wr_err": 5, "retrans_timeout_events": 100, "rx_drops": 10, "cmds_err": 0, "tx_pkts": 0}
    sysfs = efa_sysfs(tmp_path, {"rdmap16s27": base, "rdmap17s27": base})
    state = tmp_path / "efa.json"
    assert devices.efa_check(sysfs, state) == []  # the first check only keeps the readings
    assert devices.efa_check(sysfs, state) == []  # nothing rose
    efa_sysfs(tmp_path, {"rdmap17s27": {**base, "rdma_read_wr_err": 6, "retrans_timeout_events": 140}})
    assert devices.efa_check(sysfs, state) == [
        "EFA rdmap17s27: RDMA read work requests failed (rdma_read_wr_err +1 since the last check): "
        "mend: reboot",
        "EFA rdmap17s27: SRD traffic timed out and changed network path (retrans_timeout_events +40 since "
        "the "
        "last check): mend: watch",
    ]
    assert devices.efa_check(sysfs, state) == []  # the interval after: nothing more rose


def test_a_reset_counter_starts_over_and_a_port_down_is_named(tmp_path: Path) -> None:
    sysfs = efa_sysfs(tmp_path, {"rdmap16s27": {"rx_drops": 50_000, "cmds_err": 3}})
    state = tmp_path / "efa.json"
    devices.efa_check(sysfs, state)
    efa_sysfs(tmp_path, {"rdmap16s27": {"rx_drops": 10, "cmds_err": 0}})  # the driver reloaded: counters at 0
    assert devices.efa_check(sysfs, state) == []
    efa_sysfs(tmp_path, {"rdmap16s27": {"rx_drops": 10, "cmds_err": 1}}, state=1)
    assert devices.efa_check(sysfs, state) == [
        "EFA rdmap16s27: port not active (ports/1/state 1): mend: reboot",
        "EFA rdmap16s27: admin commands to the device failed (cmds_err +1 since the last check): "
        "mend: reboot",
    ]


def test_a_device_of_another_driver_is_not_read_as_efa(tmp_path: Path) -> None:
    """A p6-b200 lists its NVLink controllers under class/infiniband too (mlx5): only efa's are read."""
    sysfs = efa_sysfs(tmp_path, {"rdmap16s27": {"rx_drops": 0}})
    other = sysfs / "class/infiniband/mlx5_0"
    (other / "ports/1").mkdir(parents=True)
    (sysfs / "bus/pci/drivers/mlx5_core").mkdir(parents=True)
    (sysfs / "bus/pci/devices/0000:99:00.0").mkdir(parents=True)
    (sysfs / "bus/pci/devices/0000:99:00.0/driver").symlink_to(sysfs / "bus/pci/drivers/mlx5_core")
    (other / "device").symlink_to(sysfs / "bus/pci/devices/0000:99:00.0")
    (other / "ports/1/state").write_text("1: DOWN\n")
    assert [d.name for d in devices.efa_devices(sysfs)] == ["rdmap16s27"]


# --- Neuron's counters ----------------------------------------------------------------------------------


def neuron_sysfs(root: Path, hardware: dict[str, int], core: dict[str, int] | None = None) -> Path:
    """/sys/devices/virtual/neuron_device/neuron0..1 as the Neuron sysfs guide lays it out: the device's
    stats/hardware counters (directories with total and present), a core's stats/status counters and its
    stats/other_info numbers."""
    sysfs = root / "sys"
    for n in range(2):
        device = sysfs / f"devices/virtual/neuron_device/neuron{n}"
        for name in devices.NEURON_HARDWARE:
            (device / "stats/hardware" / name).mkdir(parents=True, exist_ok=True)
            (device / "stats/hardware" / name / "total").write_text(
                f"{hardware.get(name, 0) if n == 1 else 0}\n"
            )
            (device / "stats/hardware" / name / "present").write_text("0\n")
        for c in range(2):
            stats = device / f"neuron_core{c}/stats"
            (stats / "status/hw_error").mkdir(parents=True, exist_ok=True)
            (stats / "other_info").mkdir(parents=True, exist_ok=True)
            said = (core or {}) if (n, c) == (1, 1) else {}
            (stats / "status/hw_error/total").write_text(f"{said.get('hw_error', 0)}\n")
            (stats / "other_info/reset_fail_count").write_text(f"{said.get('reset_fail_count', 0)}\n")
    return sysfs


def test_neuron_devices_are_healthy_until_their_counters_say_otherwise(tmp_path: Path) -> None:
    assert devices.neuron_problems(neuron_sysfs(tmp_path, {})) == []
    sick = neuron_sysfs(tmp_path, {"mem_ecc_uncorrected": 1, "sram_ecc_uncorrected": 2}, {"hw_error": 4})
    assert devices.neuron_problems(sick) == [
        "Neuron 1: unrepairable uncorrected ECC errors in the device's DRAM "
        "(stats/hardware/mem_ecc_uncorrected 1): mend: replace",
        "Neuron 1: uncorrected ECC errors in the device's SRAM (stats/hardware/sram_ecc_uncorrected 2): "
        "mend: reboot",
        "Neuron 1 core 1: hardware errors returned to the Neuron runtime (stats/status/hw_error 4): "
        "mend: reboot",
    ]


def test_the_worst_mend_of_a_set_of_problems() -> None:
    lines = ["EFA a: x (y): mend: watch", "GPU 0 (b): x (y): mend: reset", "GPU 1 (c): x (y): mend: replace"]
    assert devices.worst(lines) == "replace"
    assert devices.worst(lines[:2]) == "reset"
    assert devices.worst([]) == "none"
    assert devices.worst(["14 of 16 Neuron devices (the driver is missing)"]) == "reboot"  # no mend: a reboot


# --- the settings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("itype", "nvlink"),
    [
        ("p5.48xlarge", "1"),
        ("p4d.24xlarge", "1"),
        ("p5.4xlarge", "0"),
        ("g6.48xlarge", "0"),
        ("trn1.32xlarge", "0"),
    ],
)
def test_nvlink_is_read_where_the_types_gpus_have_it(itype: str, nvlink: str) -> None:
    """AWS's instance pages: P4d and P5 join their GPUs by NVSwitch; one GPU (p5.4xlarge) has no peer; the
    L4s of g6 have no NVLink."""
    it = instance_type(itype)
    assert node_settings(it, Layout.recommended().resolve(it), ())["EFA_CDK_NVLINK"] == nvlink


# --- the node's check, with nvidia-smi's stand-in ---------------------------------------------------------


def check(node: Node) -> tuple[int, str]:
    import subprocess

    r = subprocess.run(
        [BASH, str(node.bin / "accelerator-check.sh")],
        env=node.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return r.returncode, r.stdout


def gpu_node(tmp_path: Path, itype: str = "p5.48xlarge", **settings: str) -> tuple[Node, Path]:
    node = Node(tmp_path, itype, **settings)
    (node.stub_dir / "bin/journalctl").write_text(f"#!{BASH}\nexit 0\n")
    (node.stub_dir / "bin/journalctl").chmod(0o755)
    return node, node.nvidia_smi(instance_type(itype).accelerator.count)


def test_the_check_names_a_remap_pending_gpu_as_a_node_runs_it(tmp_path: Path) -> None:
    node, smi = gpu_node(tmp_path)
    assert check(node) == (0, "8 NVIDIA GPU devices, no fault reported\n")
    (smi / "gpus.csv").write_text(
        nvidia_smi.with_fault((smi / "gpus.csv").read_text(), 5, **{"remapped_rows.pending": "Yes"})
    )
    rc, out = check(node)
    assert rc == 1 and out == (
        "GPU 5 (00000000:00:0B.0): row remapping pending: completes at the next GPU reset "
        "(remapped_rows.pending Yes): mend: reset\n"
    ), out
    calls = (smi / "calls.log").read_text()
    assert f"--query-gpu={','.join(devices.FIELDS + devices.NEWER_FIELDS)} --format=csv" in calls
    assert "nvlink --status" in calls  # a p5's GPUs are joined by NVSwitch: their links are read


def test_a_warning_on_stderr_is_not_read_as_the_table(tmp_path: Path) -> None:
    """nvidia-smi warns on stderr (its infoROM warning, for one) and answers on stdout: the table is read."""
    node, smi = gpu_node(tmp_path, "p5.4xlarge")
    wrapper = node.stub_dir / "bin/nvidia-smi"
    wrapper.write_text(
        wrapper.read_text().replace(
            "\n", '\necho "WARNING: infoROM is corrupted at gpu 0000:00:06.0" >&2\n', 1
        )
    )
    (smi / "gpus.csv").write_text(
        nvidia_smi.with_fault(nvidia_smi.serve(1), 0, **{"remapped_rows.pending": "Yes"})
    )
    rc, out = check(node)
    assert rc == 1 and out.startswith("GPU 0 (00000000:00:06.0): row remapping pending"), out


def test_an_older_driver_without_the_newer_field_is_still_read(tmp_path: Path) -> None:
    """A driver that refuses gpu_recovery_action (before R535): the reader asks again without it; one that
    refuses the query altogether: the XML report."""
    node, smi = gpu_node(tmp_path, "p5.4xlarge")
    (smi / "gpus.csv").write_text(
        nvidia_smi.with_fault(nvidia_smi.serve(1), 0, **{"remapped_rows.failure": "Yes"})
    )
    (smi / "refuse").write_text("gpu_recovery_action\n")
    rc, out = check(node)
    assert rc == 1 and "row remapping failed" in out and out.endswith("mend: replace\n"), out
    (smi / "refuse").write_text("index\n")  # every query refused
    (smi / "q.xml").write_text(
        fixture("nvidia-smi-q.xml").replace(
            "<remapped_row_failure>No</remapped_row_failure>",
            "<remapped_row_failure>Yes</remapped_row_failure>",
        )
    )
    rc, out = check(node)
    assert rc == 1 and "GPU 0 (00000000:00:06.0): row remapping failed" in out, out
    assert "-q -x" in (smi / "calls.log").read_text()


def test_a_driver_that_does_not_answer_is_said_not_silent(tmp_path: Path) -> None:
    """Issue 60 #3: nvidia-smi failing (no driver loaded) was a silent exit: now 0 of N and its words."""
    node, smi = gpu_node(tmp_path)
    (smi / "fail").write_text(nvidia_smi.NO_DRIVER)
    rc, out = check(node)
    assert rc == 1 and out.startswith("0 of 8 NVIDIA GPU devices (the driver is missing"), out
    assert "nvidia-smi -L: NVIDIA-SMI has failed because it couldn't communicate" in out, out


# --- the ladder of mends, without a scheduler (an EfaCluster node) ---------------------------------------


def devices_run(node: Node, **env: str) -> tuple[int, str]:
    import subprocess

    r = subprocess.run(
        [BASH, str(node.bin / "device-health.sh")],
        env={**node.env, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return r.returncode, r.stdout


def calls(node: Node) -> str:
    path = node.stub_dir / "calls.log"
    return path.read_text() if path.exists() else ""


def monitored_gpu_node(tmp_path: Path, **settings: str) -> tuple[Node, Path]:
    return gpu_node(
        tmp_path, EFA_CDK_METRICS_NAMESPACE="EfaCdk/P5/Cluster", EFA_CDK_NODE_GROUP="explicit", **settings
    )


def test_a_remap_pending_is_reset_and_the_node_is_whole_again(tmp_path: Path) -> None:
    node, smi = monitored_gpu_node(tmp_path)
    healthy = (smi / "gpus.csv").read_text()
    (smi / "gpus.csv").write_text(nvidia_smi.with_fault(healthy, 2, **{"remapped_rows.pending": "Yes"}))
    (smi / "after-reset.csv").write_text(healthy)  # NVIDIA: the remapping completes at the reset
    rc, out = devices_run(node)
    assert rc == 1 and "GPU 2 (00000000:00:08.0): row remapping pending" in out
    log = node.read("var/log/efa-cdk-devices.log")
    assert (
        "RESET the GPUs for: GPU 2" in log
        and "MENDED: GPU 2 (00000000:00:08.0): row remapping pending" in log
    )
    assert "-r" in (smi / "calls.log").read_text().splitlines()
    tags = (node.stub_dir / "ec2-tags.log").read_text().splitlines()
    assert "create-tags" in tags[0] and '"Value": "reset done, checking: GPU 2' in tags[0]
    assert "delete-tags" in tags[-1] and "Key=efa-cdk:device-fault" in tags[-1]
    metrics = (node.stub_dir / "metrics.log").read_text()
    assert "MetricName=EfaDeviceFaults,Dimensions=[{Name=Mend,Value=reset}],Value=1" in metrics
    assert "MetricName=EfaDeviceFaults,Dimensions=[{Name=Mend,Value=reset}],Value=0" in metrics  # after
    assert devices_run(node) == (0, "")  # the next check: healthy, nothing to do
    assert not (node.root / "var/lib/efa-cdk/mend/fault").exists()


def test_a_reset_that_does_not_hold_climbs_to_a_bounded_reboot(tmp_path: Path) -> None:
    node, smi = monitored_gpu_node(tmp_path)
    (smi / "gpus.csv").write_text(
        nvidia_smi.with_fault((smi / "gpus.csv").read_text(), 0, **{"remapped_rows.pending": "Yes"})
    )
    devices_run(node)  # reset (the stand-in's GPUs read the same after it), checked again: still there
    log = node.read("var/log/efa-cdk-devices.log")
    assert (
        "still: GPU 0" in log
        and "(after a reset): climbing to reboot" in log
        and "REBOOTING for: GPU 0" in log
    )
    assert "systemctl reboot" in calls(node)
    devices_run(node)  # the node came back with it still pending (the stub did not reboot): after a reboot,
    log = node.read("var/log/efa-cdk-devices.log")  # the next rung: replace, said with the node's index
    assert "REPLACE: this node needs replacing: cdk deploy -c node_replacements=0:<a new label>" in log
    assert calls(node).count("systemctl reboot") == 1


def test_a_reboot_is_held_back_within_the_window(tmp_path: Path) -> None:
    """One reboot per node per EFA_CDK_REPLACE_MINUTES (default 60): a second fault within the hour waits."""
    node, smi = monitored_gpu_node(tmp_path)
    (node.root / "var/lib/efa-cdk").mkdir(parents=True, exist_ok=True)
    import time

    (node.root / "var/lib/efa-cdk/mend-rebooted-at").write_text(f"{int(time.time()) - 600}\n")
    (smi / "gpus.csv").write_text(
        nvidia_smi.with_fault((smi / "gpus.csv").read_text(), 1, **{"retired_pages.pending": "Yes"})
    )
    devices_run(node)
    log = node.read("var/log/efa-cdk-devices.log")
    assert "NOT REBOOTED: this node rebooted for a device 10 min ago (at most once per 60 min)" in log, log
    assert "systemctl reboot" not in calls(node)


def test_a_busy_gpu_waits_for_its_work_and_a_watched_counter_asks_nothing(tmp_path: Path) -> None:
    """A process holding a GPU (not the driver's own daemons) keeps the reset pending; an EFA counter whose
    mend is `watch` is said and counted, and the node stays healthy (exit 0)."""
    node, smi = monitored_gpu_node(tmp_path)
    proc = node.root / "proc/4242"
    (proc / "fd").mkdir(parents=True)
    (proc / "comm").write_text("python3\n")
    (proc / "fd/7").symlink_to("/dev/nvidia3")
    daemon = node.root / "proc/77"
    (daemon / "fd").mkdir(parents=True)
    (daemon / "comm").write_text("nvidia-persiste\n")
    (daemon / "fd/3").symlink_to("/dev/nvidia0")
    (smi / "gpus.csv").write_text(
        nvidia_smi.with_fault(
            (smi / "gpus.csv").read_text(), 3, **{"ecc.errors.uncorrected.volatile.total": "1"}
        )
    )
    devices_run(node)
    log = node.read("var/log/efa-cdk-devices.log")
    assert "PENDING reset: GPU 3" in log and "-r" not in (smi / "calls.log").read_text().splitlines()
    (proc / "fd/7").unlink()  # the job ended
    (smi / "after-reset.csv").write_text(nvidia_smi.serve(8))
    devices_run(node)
    assert "MENDED: GPU 3" in node.read("var/log/efa-cdk-devices.log")


def test_a_watched_efa_counter_is_said_and_the_node_stays_healthy(tmp_path: Path) -> None:
    node, _ = monitored_gpu_node(tmp_path)
    sysfs = node.root / "sys"
    base = {"retrans_timeout_events": 0}
    for dev in sorted((sysfs / "class/infiniband").iterdir()):
        (dev / "ports/1/hw_counters").mkdir(parents=True)
        (dev / "ports/1/hw_counters/retrans_timeout_events").write_text("0\n")
    assert devices_run(node) == (0, "")
    first = sorted((sysfs / "class/infiniband").iterdir())[0]
    (first / "ports/1/hw_counters/retrans_timeout_events").write_text("25\n")
    rc, out = devices_run(node)
    assert rc == 0 and out.endswith("(retrans_timeout_events +25 since the last check): mend: watch\n"), out
    assert "watched: EFA" in node.read("var/log/efa-cdk-devices.log")
    assert base


def test_a_slurm_node_is_drained_for_its_mend_and_resumed_only_from_its_own_drain(tmp_path: Path) -> None:
    """On ParallelCluster (and PCS) the node finds its Slurm name (NodeHostName is this host) and drains
    with efa-cdk's reason; resumed once the fault is mended. An operator's own drain stays. Against a
    stand-in for scontrol here; against real Slurm in tests/e2e/test_parallelcluster.py."""
    import socket

    node, smi = gpu_node(tmp_path, EFA_CDK_NODE_GROUP="parallelcluster")
    host = socket.gethostname().split(".")[0]
    (node.stub_dir / "scontrol-nodes").write_text(
        f"NodeName=gpu-st-p5-1 NodeAddr=10.9.9.9 NodeHostName=other State=IDLE\n"
        f"NodeName=gpu-st-p5-2 NodeAddr=10.9.9.8 NodeHostName={host} State=IDLE\n"
    )
    healthy = (smi / "gpus.csv").read_text()
    (smi / "gpus.csv").write_text(nvidia_smi.with_fault(healthy, 6, **{"remapped_rows.failure": "Yes"}))
    devices_run(node)
    assert "update nodename=gpu-st-p5-2 state=drain reason=efa-cdk: replace: GPU 6" in calls(node)
    log = node.read("var/log/efa-cdk-devices.log")
    assert "REPLACE: drained; ParallelCluster's clustermgtd replaces a drained node once its jobs end" in log
    (smi / "gpus.csv").write_text(healthy)  # (a new node would be healthy; here the same one is)
    devices_run(node)
    assert "update nodename=gpu-st-p5-2 state=resume" in calls(node)
    (node.stub_dir / "slurm-state").write_text("IDLE+DRAIN\n")  # an operator drains it for their own reason
    (node.stub_dir / "slurm-reason").write_text("disk check [admin@2026-11-28T11:00:00]\n")
    (smi / "gpus.csv").write_text(nvidia_smi.with_fault(healthy, 6, **{"remapped_rows.pending": "Yes"}))
    (smi / "after-reset.csv").write_text(healthy)
    before = calls(node).count("state=resume")
    devices_run(node)
    assert "MENDED: GPU 6" in node.read("var/log/efa-cdk-devices.log")
    assert calls(node).count("state=resume") == before  # not efa-cdk's drain: not resumed


def test_the_efa_cluster_health_check_counts_a_device_fault_without_the_groups_replacement(
    tmp_path: Path,
) -> None:
    """A monitored Auto Scaling node: a device fault is mended by its ladder (here a reset that holds), not
    by the EFA count's path to a replacement."""
    node = Node(tmp_path, "p5.48xlarge")
    _monitored(node)
    (node.stub_dir / "bin/journalctl").write_text(f"#!{BASH}\nexit 0\n")
    (node.stub_dir / "bin/journalctl").chmod(0o755)
    smi = node.nvidia_smi(8)
    healthy = (smi / "gpus.csv").read_text()
    node.run("efa-env")
    assert node.run("health-check").returncode == 0
    (smi / "gpus.csv").write_text(nvidia_smi.with_fault(healthy, 4, **{"remapped_rows.pending": "Yes"}))
    (smi / "after-reset.csv").write_text(healthy)
    assert node.run("health-check").returncode == 1
    assert "UNHEALTHY: GPU 4 (00000000:00:0A.0): row remapping pending" in node.read(
        "var/log/efa-cdk-health.log"
    )
    assert not (node.stub_dir / "health.log").exists()  # no SetInstanceHealth
    assert node.run("health-check").returncode == 0  # mended


@pytest.mark.debian
def test_the_devices_step_installs_its_timer(tmp_path: Path) -> None:
    node = Node(tmp_path, "p5.48xlarge")
    r = node.run("devices")
    assert r.returncode == 0, r.log
    service = node.read("etc/systemd/system/efa-cdk-devices.service")
    assert "ExecStart=/opt/efa-cdk/bin/device-health.sh" in service
    assert "OnUnitActiveSec=5min" in node.read("etc/systemd/system/efa-cdk-devices.timer")
    assert node.systemd_verify("efa-cdk-devices.service", "efa-cdk-devices.timer") == ""


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_a_node_may_set_and_clear_its_device_fault_tag_and_nothing_else(tmp_path: Path) -> None:
    """The policy the stack writes, evaluated as AWS decides (tests/iam_eval.py): the one tag key, on this
    cluster's instances; not another key, not another cluster's node, not DeleteTags without keys (which
    would remove every tag). Also that the template's tag value is the launch template's own."""
    from tests.helpers import by_type
    from tests.iam_eval import Request, allowed, resolve

    template = _stack("p5.48xlarge")
    (policy,) = [p for p in by_type(template, "AWS::IAM::Policy") if "ec2:CreateTags" in json.dumps(p)]
    (raw,) = policy["Properties"]["PolicyDocument"]["Statement"]
    tagged = json.dumps(raw["Condition"]["StringEquals"]["aws:ResourceTag/efa-cdk:cluster"])
    assert f'"Key": "efa-cdk:cluster", "Value": {tagged}' in json.dumps(
        by_type(template, "AWS::EC2::LaunchTemplate")
    )
    statements = [resolve(raw)]
    cluster = statements[0]["Condition"]["StringEquals"]["aws:ResourceTag/efa-cdk:cluster"]
    arn = "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0"

    def may(action: str, keys: list[str] | None, tag: str = cluster) -> bool:
        context: dict[str, object] = {"aws:ResourceTag/efa-cdk:cluster": tag}
        if keys is not None:
            context["aws:TagKeys"] = keys
        return allowed(Request("NodeRole", action, arn, context), statements, [])

    assert may("ec2:CreateTags", ["efa-cdk:device-fault"]) and may("ec2:DeleteTags", ["efa-cdk:device-fault"])
    assert not may("ec2:CreateTags", ["efa-cdk:device-fault", "efa-cdk:cluster"])
    assert not may("ec2:CreateTags", ["Name"])
    assert not may("ec2:DeleteTags", None)  # no keys: every tag
    assert not may("ec2:CreateTags", ["efa-cdk:device-fault"], tag="OtherStack/Cluster")
    assert not may("ec2:TerminateInstances", None)


def test_status_names_each_nodes_device_fault() -> None:
    from efa_constructs.tools import status

    row = {
        "id": "i-1",
        "type": "p5.48xlarge",
        "state": "running",
        "zone": "us-east-1a",
        "ip": "10.0.0.1",
        "efa_verified": "yes",
        "last_health_check": None,
        "device_fault": "reset pending: GPU 2 (00000000:00:08.0): row remapping pending\x1b[31m",
    }
    text = status.render(
        {
            "stack": "S",
            "status": "UPDATE_COMPLETE",
            "nodes": [row],
            "benchmarks": [],
            "alarms": [],
            "changes": [],
        }
    )
    assert "    device fault: reset pending: GPU 2 (00000000:00:08.0): row remapping pending?[31m" in text
    assert json.dumps(row)


# Issue 60: edges a whole-file mutation run of node/devices.py and sysfs_counters.py found unpinned (each
# test failed on its mutant).

SLOWDOWNS = ["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"]


@pytest.mark.parametrize("reason", SLOWDOWNS)
def test_each_slowdown_reason_reads_alike_in_the_xml_report_and_the_query(reason: str) -> None:
    """Each reason the query asks is also read from `nvidia-smi -q -x` (the same element names, recorded)."""
    tag = f"clocks_event_reason_{reason}"
    xml = fixture("nvidia-smi-q.xml").replace(f"<{tag}>Not Active</{tag}>", f"<{tag}>Active</{tag}>")
    csv = nvidia_smi.with_fault(nvidia_smi.serve(1), 0, **{f"clocks_event_reasons.{reason}": "Active"})
    assert xml != fixture("nvidia-smi-q.xml")
    assert devices.gpu_problems(xml) == devices.gpu_problems(csv) != []


def test_a_narrower_pcie_link_under_load_is_read_from_the_xml_report_too() -> None:
    xml = (
        fixture("nvidia-smi-q.xml")
        .replace(
            "<current_link_width>16x</current_link_width>", "<current_link_width>8x</current_link_width>"
        )
        .replace("<gpu_util>0 %</gpu_util>", "<gpu_util>97 %</gpu_util>")
    )
    (line,) = devices.gpu_problems(xml)
    assert "PCIe link below its maximum" in line and line.endswith("mend: reboot"), line


def test_a_query_cut_short_reads_the_rows_it_has_and_never_tracebacks() -> None:
    """An answer cut mid-row (the driver killed mid-print): the whole rows are read (GPU 0's fault named),
    the cut one by the fields it has, never a traceback."""
    faulty = nvidia_smi.with_fault(nvidia_smi.serve(2), 0, **{"remapped_rows.pending": "Yes"})
    cut = faulty.rstrip("\n").rsplit(",", 20)[0]
    (line,) = devices.gpu_problems(cut)
    assert line.startswith("GPU 0 ") and "row remapping pending" in line


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_the_command_exits_1_when_a_problem_asks_for_a_mend_and_0_when_healthy(tmp_path: Path) -> None:
    """devices.py's documented exit: 1 when a line asks for a mend (the checks that call it may key on it),
    0 when healthy or only watched; the lines that are not verdicts (worst, mends) always 0."""
    import subprocess
    import sys

    def run(*args: str, stdin: str) -> int:
        script = ROOT / "efa_constructs/node/devices.py"
        return subprocess.run(
            [sys.executable, str(script), *args], input=stdin, capture_output=True, text=True
        ).returncode

    faulty = nvidia_smi.with_fault(nvidia_smi.serve(2), 1, **{"remapped_rows.pending": "Yes"})
    assert run("gpu", stdin=faulty) == 1
    assert run("gpu", stdin=nvidia_smi.serve(2)) == 0
    assert run("worst", stdin="GPU 1 (x): row remapping pending (y): mend: reset\n") == 0


def test_an_efa_counter_at_its_threshold_is_a_problem_and_one_below_is_not(tmp_path: Path) -> None:
    """The table's figure is the first rise that counts (rx_drops: 1000 in one interval)."""
    sysfs = efa_sysfs(tmp_path, {"rdmap16s27": {"rx_drops": 10}})
    state = tmp_path / "efa.json"
    devices.efa_check(sysfs, state)
    efa_sysfs(tmp_path, {"rdmap16s27": {"rx_drops": 10 + 999}})
    assert devices.efa_check(sysfs, state) == []
    efa_sysfs(tmp_path, {"rdmap16s27": {"rx_drops": 10 + 999 + 1000}})
    (line,) = devices.efa_check(sysfs, state)
    assert "rx_drops +1000 since the last check" in line
