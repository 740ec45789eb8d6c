"""The accelerator checks (issue 43): node/accel.py reads the tools' output (recorded output from public
sources: tests/fixtures/accelerators/README.md), node/boot/accelerator-check.sh runs the tools and counts
the devices, at boot (verify-efa.sh: a problem fails the node) and in the health timer (a failed check).
No NVIDIA driver, DCGM, Neuron or Gaudi tools run here: their commands are stand-ins printing the recorded
output, and the device files are empty files (tests/helpers.py Node)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from efa_constructs import EfaUserData, instance_type
from efa_constructs.core.errors import EfaConfigError
from efa_constructs.core.layout import Layout
from efa_constructs.core.software import node_settings
from efa_constructs.node import accel
from tests.helpers import BASH, ROOT, Node, executable
from tests.test_monitoring import _monitored, _stack  # at collection, as in a full run

#: Nothing here reaches aws-cdk-lib (tests/conftest.py checks): the floor run leaves these out.
pytestmark = pytest.mark.cdk_free

FIXTURES = ROOT / "tests/fixtures/accelerators"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- the readers, on recorded output --------------------------------------------------------------


def test_a_gpu_that_needs_a_reset_is_named_from_the_drivers_xid_154() -> None:
    """NVIDIA/open-gpu-kernel-modules#446: GSP timeouts, then Xid 154 naming the recovery the GPU needs."""
    assert accel.xid_problems(fixture("xid-154-reset-required.log")) == [
        "GPU 0000:0b:00: Xid 154 (GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required))"
    ]


def test_a_gpu_off_the_bus_and_a_pending_row_remap_are_named() -> None:
    assert accel.xid_problems(fixture("xid-79-off-the-bus.log")) == [
        "GPU 0000:2b:00: Xid 79 (the GPU has fallen off the bus)"
    ]
    assert accel.xid_problems(fixture("xid-63-row-remap.log")) == [
        "GPU 0000:10:1c: Xid 63 (a memory row or page is pending retirement: the GPU must be reset)"
    ]


def test_an_applications_page_fault_is_not_the_nodes_fault() -> None:
    """Xid 31 (an older driver's line, without "PCI:"): the job's fault; the node stays in. So does a
    154 back to None (written here: the driver's own form of the line, the action cleared)."""
    assert accel.xid_problems(fixture("xid-31-page-fault.log")) == []
    cleared = (
        "NVRM: Xid (PCI:0000:0b:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0"
    )
    cleared += " (None)"
    assert accel.xid_problems(cleared) == []
    twice = fixture("xid-79-off-the-bus.log") * 2
    assert len(accel.xid_problems(twice)) == 1  # one line per GPU and event


def _diag(status: dict[int, str], *, top: str = "DCGM Diagnostic", warning: str = "") -> str:
    """A ``dcgmi diag -j`` document in the shape of NVIDIA's schema for it (NVIDIA/DCGM
    testing/python3/dcgm_diag_schema.json; DCGM 3 named the section "DCGM GPU Diagnostic"): written
    here, not recorded, as no DCGM runs on this machine."""

    def result(gpu: int, s: str) -> dict[str, object]:
        said = [{"error_category": 10, "error_id": 90, "error_severity": 2, "warning": warning}]
        return {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu, "status": s} | (
            {"warnings": said} if s == "Fail" else {}
        )

    results = [result(gpu, s) for gpu, s in status.items()]
    summary = {"status": "Fail" if "Fail" in status.values() else "Pass"}
    tests = [
        {
            "category": "Deployment",
            "tests": [{"name": "software", "results": results[:1], "test_summary": summary}],
        },
        {"category": "Hardware", "tests": [{"name": "memory", "results": results, "test_summary": summary}]},
    ]
    doc = {top: {"test_categories": tests}, "metadata": {"version": "4.2.3"}}
    return "Successfully ran diagnostic for group.\n" + json.dumps(doc)


def test_dcgm_names_the_failed_test_and_gpu_with_its_first_message() -> None:
    assert accel.dcgm_problems(_diag({0: "Pass", 1: "Pass"})) == []
    assert accel.dcgm_problems(_diag({0: "Pass", 1: "Skip", 2: "Warn"})) == []  # only Fail fails
    found = accel.dcgm_problems(_diag({0: "Pass", 1: "Fail"}, warning="Row remapping failure on GPU 1"))
    assert found == ["memory on GPU 1: Row remapping failure on GPU 1"]
    assert accel.dcgm_problems(_diag({3: "Fail"}, top="DCGM GPU Diagnostic")) == [
        "software on GPU 3",
        "memory on GPU 3",
    ]
    assert accel.dcgm_problems('{"DCGM Diagnostic": {"runtime_error": "Couldn\'t connect"}}') == [
        "runtime error: Couldn't connect"
    ]
    assert accel.dcgm_problems("Error: unable to establish a connection to the host engine") == [
        "dcgmi diag printed no JSON"
    ]


def test_nvidia_smi_lists_each_gpu_once() -> None:
    """`nvidia-smi -L` as NVIDIA/open-gpu-kernel-modules#1045 recorded it; "No devices were found" is what
    nvidia-smi prints without GPUs."""
    assert accel.nvidia_gpus(fixture("nvidia-smi-L.txt")) == 1
    assert accel.nvidia_gpus("No devices were found\n") == 0


def test_neuron_ls_lists_each_device_once() -> None:
    """The Neuron docs' neuron-ls example (inf1.6xlarge, 4 devices)."""
    table = fixture("neuron-ls-inf1.6xlarge.txt")
    assert accel.neuron_devices(table) == 4
    assert accel.neuron_problems(table, 4) == []
    assert accel.neuron_problems(table, 16) == ["neuron-ls lists 4 of 16 Neuron devices"]


# --- the settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("itype", "kind", "count"),
    [
        ("trn1.32xlarge", "neuron", "16"),
        ("p5.48xlarge", "nvidia-gpu", "8"),
        ("dl1.24xlarge", "gaudi", "8"),
        ("hpc7g.16xlarge", "none", "0"),
    ],
)
def test_every_node_knows_its_accelerators_from_the_catalogue(itype: str, kind: str, count: str) -> None:
    it = instance_type(itype)
    settings = node_settings(it, Layout.recommended().resolve(it), ())
    assert (settings["EFA_CDK_ACCELERATOR"], settings["EFA_CDK_ACCELERATOR_COUNT"]) == (kind, count)


def test_the_dcgm_level_reaches_nvidia_nodes_and_nothing_else() -> None:
    it = instance_type("p5.48xlarge")
    layout = Layout.recommended().resolve(it)
    assert EfaUserData(dcgm_diag_level=2).settings(it, layout, "ubuntu")["EFA_CDK_DCGM_LEVEL"] == "2"
    assert "EFA_CDK_DCGM_LEVEL" not in EfaUserData().settings(it, layout, "ubuntu")
    trn1 = instance_type("trn1.32xlarge")
    with pytest.raises(EfaConfigError) as refused:
        EfaUserData(dcgm_diag_level=1).settings(trn1, Layout.recommended().resolve(trn1), "ubuntu")
    assert refused.value.code == "efa-cdk:dcgm-not-nvidia"
    assert "trn1.32xlarge has neuron accelerators" in str(refused.value)


# --- the check on a node ------------------------------------------------------------------------


def check(node: Node, *args: str) -> tuple[int, str]:
    import subprocess

    r = subprocess.run(
        [BASH, str(node.bin / "accelerator-check.sh"), *args],
        env=node.env, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    return r.returncode, r.stdout + r.stderr


def stub(node: Node, name: str, out: str, rc: int = 0) -> None:
    (node.stub_dir / f"{name}.out").write_text(out)
    executable(
        node.stub_dir / "bin" / name,
        f'#!{BASH}\necho "{name} $*" >>"$STUB_DIR/args.log"\ncat "$STUB_DIR/{name}.out"\nexit {rc}\n',
    )


def test_a_trn1_node_with_a_neuron_device_missing_fails_its_verification(tmp_path: Path) -> None:
    """At boot the accelerators count as the EFAs do: one of 16 gone and verify-efa fails the node
    with the reason; the health check counts it too."""
    node = Node(tmp_path)
    assert check(node) == (0, "16 Neuron devices, no fault reported\n")
    node.set_accelerators(15)
    rc, out = check(node)
    assert rc == 1 and out.startswith("15 of 16 Neuron devices (the driver is missing"), out
    node.run("efa-env")
    r = node.run("verify-efa")
    assert r.returncode != 0
    assert "accelerators: 15 of 16 Neuron devices" in r.log, r.log


def test_neuron_ls_fewer_devices_than_the_type_fails(tmp_path: Path) -> None:
    node = Node(tmp_path)
    stub(node, "neuron-ls", fixture("neuron-ls-inf1.6xlarge.txt"))
    assert check(node) == (1, "neuron-ls lists 4 of 16 Neuron devices\n")


def test_hl_smi_lists_every_gaudi_and_its_uncorrectable_errors() -> None:
    """Two recorded summary tables, of either header: eight healthy HL-225 (hl-smi 1.20), two (1.17)."""
    assert accel.gaudi_problems(fixture("hl-smi-8-hl225.txt"), 8) == []
    assert accel.gaudi_problems(fixture("hl-smi-2-hl225.txt"), 2) == []
    assert accel.gaudi_problems(fixture("hl-smi-2-hl225.txt"), 8) == ["hl-smi lists 2 of 8 Gaudi devices"]
    # the recorded eight with device 5's uncorrectable count at 3 (its row as printed, one cell changed)
    row = "|   5  HL-225              N/A  | 0000:4e:00.0     N/A |                   0  |"
    faulty = fixture("hl-smi-8-hl225.txt").replace(row, row.replace("  0  |", "  3  |"))
    assert faulty != fixture("hl-smi-8-hl225.txt")
    assert accel.gaudi_problems(faulty, 8) == [
        "Gaudi 5 (HL-225, 0000:4e:00.0): 3 uncorrectable errors since the driver loaded"
    ]


def test_a_dl1_node_fails_when_hl_smi_lists_fewer_gaudis(tmp_path: Path) -> None:
    """dl1.24xlarge has 8 Gaudi (the catalogue): its device files all there, hl-smi listing two."""
    node = Node(tmp_path, "dl1.24xlarge")
    assert check(node) == (0, "8 Gaudi devices, no fault reported\n")
    stub(node, "hl-smi", fixture("hl-smi-2-hl225.txt"))
    assert check(node) == (1, "hl-smi lists 2 of 8 Gaudi devices\n")


def test_a_gpu_node_fails_on_a_fatal_xid_and_not_on_an_applications(tmp_path: Path) -> None:
    node = Node(tmp_path, "p5.48xlarge")
    stub(node, "journalctl", fixture("xid-31-page-fault.log"))
    assert check(node) == (0, "8 NVIDIA GPU devices, no fault reported\n")
    stub(node, "journalctl", fixture("xid-79-off-the-bus.log"))
    assert check(node) == (1, "GPU 0000:2b:00: Xid 79 (the GPU has fallen off the bus)\n")


def test_a_gpu_node_counts_the_gpus_the_driver_lists(tmp_path: Path) -> None:
    """With nvidia-smi, its list counts (the device files appear only once something asked the driver):
    7 listed on a p5 is a GPU lost, whatever /dev holds. nvidia-smi is the stand-in built from a recorded H200
    (tests/nvidia_smi.py), which answers each command as the driver does."""
    node = Node(tmp_path, "p5.48xlarge")
    stub(node, "journalctl", "")
    node.nvidia_smi(7)
    assert check(node) == (
        1,
        "7 of 8 NVIDIA GPU devices (the driver is missing from the image, or a device was lost)\n",
    )
    node.set_accelerators(0)
    node.nvidia_smi(8)
    assert check(node) == (0, "8 NVIDIA GPU devices, no fault reported\n")
    assert "-L" in (node.stub_dir / "nvidia-smi/calls.log").read_text().splitlines()


def test_the_dcgm_diagnostic_runs_at_boot_at_the_chosen_level(tmp_path: Path) -> None:
    node = Node(tmp_path, "p5.48xlarge", EFA_CDK_DCGM_LEVEL="2")
    stub(node, "journalctl", "")
    assert check(node, "--boot") == (
        1,
        "dcgmi not found: DCGM diagnostic level 2 needs DCGM (datacenter-gpu-manager) in the image, "
        "or no dcgm_diag_level\n",
    )
    assert check(node)[0] == 0  # the health timer's check runs no diagnostic
    stub(node, "dcgmi", _diag({0: "Pass", 5: "Fail"}, warning="GPU 5 failed the memory test"), rc=226)
    assert check(node, "--boot") == (
        1,
        "DCGM diagnostic level 2: memory on GPU 5: GPU 5 failed the memory test\n",
    )
    assert "dcgmi diag -r 2 -j" in (node.stub_dir / "args.log").read_text()
    stub(node, "dcgmi", _diag({i: "Pass" for i in range(8)}))
    rc, out = check(node, "--boot")
    assert (
        rc == 0
        and "DCGM diagnostic level 2 passed" in out
        and out.startswith("8 NVIDIA GPU devices, no fault reported\n")
    )
    stub(node, "dcgmi", "Error: host engine is not running", rc=255)
    assert check(node, "--boot") == (
        1,
        "DCGM diagnostic level 2: dcgmi diag printed no JSON\n",
    )


def test_the_health_check_counts_an_accelerator_fault(tmp_path: Path) -> None:
    node = Node(tmp_path)
    _monitored(node)
    node.run("efa-env")
    assert node.run("health-check").returncode == 0
    node.set_accelerators(14)
    assert node.run("health-check").returncode == 1
    # a device fault, mended by its ladder (device-health.sh: a reboot first), not by the EFA count's path
    assert "UNHEALTHY: 14 of 16 Neuron devices" in node.read("var/log/efa-cdk-health.log")


@pytest.mark.cdk_free(False)  # reaches aws-cdk-lib: runs on the floor too
def test_the_ready_stacks_level_reaches_the_nodes_user_data() -> None:
    """-c dcgm_diag_level=2 on the P5 stack: every node's settings carry it (and only then)."""
    from tests.helpers import by_type

    user_data = json.dumps(by_type(_stack("p5.48xlarge", dcgm_diag_level="2"), "AWS::EC2::LaunchTemplate"))
    assert "EFA_CDK_DCGM_LEVEL='2'" in user_data and "EFA_CDK_ACCELERATOR='nvidia-gpu'" in user_data
    assert "EFA_CDK_DCGM_LEVEL" not in json.dumps(by_type(_stack("p5.48xlarge"), "AWS::EC2::LaunchTemplate"))
    # level 3 runs about 15 minutes (DCGM's dcgmi diag reference): the stack waits 60 for each node's signal
    long = _stack("p5.48xlarge", dcgm_diag_level="3")
    nodes = by_type(long, "AWS::EC2::Instance")
    timeouts = {r["CreationPolicy"]["ResourceSignal"]["Timeout"] for r in nodes}
    assert timeouts == {"PT60M"}, timeouts
    assert EfaUserData(dcgm_diag_level=3, signal_timeout_minutes=60).dcgm_diag_level == 3
