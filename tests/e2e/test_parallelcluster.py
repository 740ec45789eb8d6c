"""The ready Trn1ParallelCluster stack's cluster configuration, run the way ParallelCluster runs it on one
machine (tests/e2e/pcluster.py says what stands in for what): real munged, slurmctld and slurmd, the head
node's and compute nodes' custom actions in ParallelCluster's order and environment, dynamic nodes resumed
and suspended by Slurm's power saving, the project's job templates submitted with real sbatch and run
with real srun and Open MPI across the compute namespaces.

Runs in `scripts/test` (and so CI) and alone with `scripts/e2e`; skips, naming what is missing, on a
machine without network namespaces or Debian's Slurm.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from efa_constructs.node.bench_parse import parse_nccl_tests, parse_nccom_test
from stacks.parallel_cluster_stack import EfaParallelClusterStack
from stacks.params import PclusterParams
from tests.e2e import progress
from tests.e2e.cluster import Cluster, missing_capabilities
from tests.e2e.pcluster import ParallelClusterHarness, PcNode, config_from_output, missing_programs, run_timer
from tests.helpers import cdk_json_context, executable

MISSING = missing_capabilities() + missing_programs()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"this machine lacks: {', '.join(MISSING)}")

QUEUE_NODES = [f"compute-dy-trn1-32xlarge-{i}" for i in (1, 2, 3)]  # MaxCount 3, MinCount 0


def synthesize(outdir: Path) -> None:
    import aws_cdk as cdk

    app = cdk.App(outdir=str(outdir), context=cdk_json_context())
    params = PclusterParams.from_context(
        {"max_count": "3", "availability_zone": "us-east-1a"}, default_instance_type="trn1.32xlarge"
    )
    EfaParallelClusterStack(app, "Trn1ParallelCluster", params=params)
    app.synth()


@pytest.fixture(scope="module")
def pc(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    out = tmp_path_factory.mktemp("assembly")
    synthesize(out)
    stack = cluster.deploy("Trn1ParallelCluster", out, "key-0e2e00000000000pc")
    config = config_from_output(stack["outputs"]["ParallelClusterConfig"])
    harness = ParallelClusterHarness(cluster, config, stack["ami"])
    try:
        harness.start_dns()
        head = harness.start()
        yield {"cluster": cluster, "harness": harness, "head": head, "config": config}
    finally:
        harness.close()  # before the cluster fixture stops the AWS side


def slurm(node: PcNode, *args: str) -> str:
    r = node.run(f"/opt/slurm/bin/{args[0]}", *args[1:])
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def alive(head: PcNode) -> bool:
    """slurmctld is running and answers."""
    return head.run("/opt/slurm/bin/scontrol", "ping").returncode == 0


def node_states(head: PcNode) -> dict[str, str]:
    out = slurm(head, "sinfo", "-N", "-h", "-o", "%N %t")
    return dict(line.split() for line in out.splitlines())


def topology_nodes(head: PcNode) -> dict[str, str]:
    """Node -> the switch topology.conf puts it under (hostlist expressions expanded by Slurm)."""
    placed: dict[str, str] = {}
    for line in head.file("opt/slurm/etc/topology.conf").read_text().splitlines():
        m = re.match(r"SwitchName=(\S+) Nodes=(\S+)", line)
        if m:
            for name in slurm(head, "scontrol", "show", "hostnames", m.group(2)).split():
                placed[name] = m.group(1)
    return placed


def submit(head: PcNode, command: str) -> str:
    """sbatch as the login user from a login shell (where /opt/slurm/bin is on PATH), in its home."""
    # harness: the jobs' guard (node/boot/fabric-guard.sh) expects libfabric's tcp stand-in, not efa
    r = head.run("bash", "-lc", f"cd ~ && EFA_CDK_TEST_ONLY_PROVIDER=tcp {command}", user="ubuntu")
    assert r.returncode == 0, (command, r.stdout, r.stderr)
    return re.search(r"Submitted batch job (\d+)", r.stdout).group(1)  # type: ignore[union-attr]


def finish(harness: ParallelClusterHarness, head: PcNode, job: str) -> str:
    """The job's final state, waiting for as long as the cluster makes progress (tests/e2e/progress.py)."""
    state = ""

    def done() -> bool:
        nonlocal state
        harness.check_fleet()
        state = re.search(r"JobState=(\S+)", slurm(head, "scontrol", "show", "job", job)).group(1)  # type: ignore[union-attr]
        return state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")

    def moved() -> object:  # the compute nodes' processes (slurmctld on the head ticks even when stuck)
        nodes = harness.compute()
        logs = ("var/log/efa-cdk.log", "var/log/slurmctld.log", "var/log/slurmd.log")
        return progress.activity([n.ns for n in nodes], [n.file(f) for n in [head, *nodes] for f in logs])

    def where() -> str:
        logs = "\n".join(n.log() for n in harness.compute())
        return f"job {job} still {state}\n{slurm(head, 'scontrol', 'show', 'job', job)}\n{logs}\n{head.log()}"

    progress.until(done, moved, where, what=f"job {job}")
    return state


def test_slurmctld_runs_after_start_and_after_the_head_nodes_custom_actions(pc: dict[str, Any]) -> None:
    head: PcNode = pc["head"]
    for event in ("OnNodeStart", "OnNodeConfigured"):
        assert head.file(f".harness/{event}.rc").read_text().strip() == "0", head.file(
            f".harness/{event}.log"
        )
    assert alive(head), head.log()
    assert "enable --now efa-cdk-slurm-topology.timer" in head.file(".harness/systemctl.log").read_text()
    assert head.file("opt/slurm/etc/plugstack.conf.d/pyxis.conf").exists()  # pyxis step's reconfigure passed
    assert sorted(head.file("shared/jobs").iterdir()) != []


def test_the_first_topology_names_every_node_while_all_are_powered_down(pc: dict[str, Any]) -> None:
    head: PcNode = pc["head"]
    states = node_states(head)
    assert sorted(states) == QUEUE_NODES and set(states.values()) == {"idle~"}, states
    assert topology_nodes(head) == dict.fromkeys(QUEUE_NODES, "efa-cdk-unplaced")
    assert "efa-cdk-unplaced" in slurm(head, "scontrol", "show", "topology")  # slurmctld took it


def test_slurm_commands_are_only_in_opt_slurm_bin_as_on_parallelcluster(pc: dict[str, Any]) -> None:
    """The harness hides Debian's copies: a step calling `scontrol` by PATH fails here as on a node."""
    head: PcNode = pc["head"]
    r = head.run("scontrol", "ping")  # the minimal PATH of custom actions and systemd units
    assert r.returncode == 127 and "No such file or directory" in r.stderr, r
    assert (
        head.run("bash", "-lc", "command -v scontrol", user="ubuntu").stdout.strip()
        == "/opt/slurm/bin/scontrol"
    )


# --- issue 59: a GPU's own fault mended through real Slurm -----------------------------------------------


def _serve_gpu(node: PcNode, document: str) -> None:
    """This compute node as a one-GPU node: nvidia-smi the stand-in built from the recorded H200
    (tests/nvidia_smi.py) serving `document`, and the node's settings saying so (harness: the Trn1 cluster's
    nodes have Neuron devices, not GPUs; the settings are the p5's that the constructs write)."""
    from tests import nvidia_smi

    state = node.file(".harness/nvidia-smi")
    state.mkdir(exist_ok=True)
    (state / "gpus.csv").write_text(document)
    (state / "after-reset.csv").write_text(nvidia_smi.serve(1))  # NVIDIA: the remapping completes at reset
    executable(
        node.file(".harness/usr-local-bin/nvidia-smi"),
        f'#!/bin/bash\nNVIDIA_SMI_DIR=/.harness/nvidia-smi exec python3 {nvidia_smi.__file__} "$@"\n',
    )
    settings = node.file("etc/efa-cdk/node.env")
    said = settings.read_text()
    if "EFA_CDK_ACCELERATOR='nvidia-gpu'" not in said:
        settings.write_text(said + "EFA_CDK_ACCELERATOR='nvidia-gpu'\nEFA_CDK_ACCELERATOR_COUNT='1'\n")


def _slurm_node(head: PcNode, name: str) -> tuple[str, str]:
    """The node's State and Reason, as slurmctld has them."""
    show = slurm(head, "scontrol", "show", "node", name, "-o")
    state = re.search(r" State=(\S+)", show).group(1)  # type: ignore[union-attr]
    reason = re.search(r" Reason=(.*?)( \[|$)", show)
    return state, reason.group(1) if reason else ""


def _hold(harness: ParallelClusterHarness, head: PcNode, name: str) -> tuple[str, PcNode]:
    """A job that keeps node `name` busy, once it runs there (the node resumed and booted)."""
    job = submit(head, f"sbatch --nodes=1 -w {name} --output=hold-%j.out --wrap 'sleep 600'")
    running = re.compile(r"JobState=RUNNING")
    progress.until(
        lambda: (
            bool(running.search(slurm(head, "scontrol", "show", "job", job)))
            and name in harness.nodes
            and harness.nodes[name].ready()
        ),
        lambda: progress.activity([n.ns for n in harness.compute()], [head.file("var/log/slurmctld.log")]),
        lambda: head.log(),
        what=f"{name} running job {job}",
    )
    return job, harness.nodes[name]


def test_a_pending_row_remapping_drains_resets_and_resumes_the_node_and_a_failure_leaves_it_drained(
    pc: dict[str, Any],
) -> None:
    """The devices timer of a running compute node, as systemd would run it: with a job on the node the
    fault drains it in Slurm (no new job starts) and waits; once the job ends the GPU is reset, checked
    again and the node resumed. A remapping failure (past NVIDIA's RMA threshold) drains it for
    ParallelCluster's clustermgtd to replace (not run here: it terminates a drained node once idle)."""
    from tests import nvidia_smi

    harness: ParallelClusterHarness = pc["harness"]
    head: PcNode = pc["head"]
    name = QUEUE_NODES[2]
    job, node = _hold(harness, head, name)
    try:
        assert "enable --now efa-cdk-devices.timer" in node.file(".harness/systemctl.log").read_text()
        _serve_gpu(node, nvidia_smi.with_fault(nvidia_smi.serve(1), 0, **{"remapped_rows.pending": "Yes"}))
        first = run_timer(node, "efa-cdk-devices")
        assert "row remapping pending" in first.stdout, (first.stdout, first.stderr)
        state, reason = _slurm_node(head, name)
        assert "DRAIN" in state, state
        assert reason.startswith("efa-cdk: reset: GPU 0 (00000000:00:06.0): row remapping"), reason
        log = node.file("var/log/efa-cdk-devices.log")
        assert "PENDING reset" in log.read_text()
        slurm(head, "scancel", job)
        progress.until(  # drained and idle (power saving would suspend it SuspendTime later)
            lambda: "DRAIN" in _slurm_node(head, name)[0] and "IDLE" in _slurm_node(head, name)[0],
            lambda: progress.activity([node.ns], [head.file("var/log/slurmctld.log")]),
            lambda: str(_slurm_node(head, name)),
            what=f"{name} drained",
        )
        run_timer(node, "efa-cdk-devices")
        said = log.read_text()
        assert "RESET the GPUs for: GPU 0" in said and "MENDED: GPU 0" in said, said
        assert f"resumed Slurm node {name}" in said, said
        state, reason = _slurm_node(head, name)
        assert state.startswith("IDLE") and "DRAIN" not in state and not reason, (state, reason)
        # past the RMA threshold, under a job: drained for replacement, and it stays drained
        job, node = _hold(harness, head, name)
        _serve_gpu(node, nvidia_smi.with_fault(nvidia_smi.serve(1), 0, **{"remapped_rows.failure": "Yes"}))
        run_timer(node, "efa-cdk-devices")
        run_timer(node, "efa-cdk-devices")  # the next check asks again; still drained
        state, reason = _slurm_node(head, name)
        assert "DRAIN" in state, state
        assert reason.startswith("efa-cdk: replace: GPU 0 (00000000:00:06.0): row remapping failed"), reason
        assert "ParallelCluster's clustermgtd replaces a drained node once its jobs end" in log.read_text()
    finally:
        # the harness has no clustermgtd: end the job, resume the node, let it power down, and leave the
        # fleet as the later tests expect it (no node up, none launched yet)
        head.run("/opt/slurm/bin/scancel", job)
        head.run("/opt/slurm/bin/scontrol", "update", f"NodeName={name}", "State=RESUME")
        progress.until(
            lambda: node_states(head)[name] == "idle~" and not harness.compute(),
            lambda: progress.activity(
                [n.ns for n in harness.compute()], [head.file("var/log/slurmctld.log")]
            ),
            lambda: str(node_states(head)),
            what=f"{name} powered down",
        )
        harness.launched.clear()
        harness.terminated.clear()


def test_before_the_capacity_block_ends_the_head_node_drains_the_queue_and_tells_the_jobs(
    pc: dict[str, Any],
) -> None:
    """Issue 43: what the Capacity Block warning's Run Command runs on the head node (the document's line:
    run-steps.sh capacity-block-ending with the event's end time), against real slurmctld: every node of
    the queue drained with the end time as the reason (sinfo -R), so no new job starts on them, and the end
    time in /shared for the compute nodes' jobs. Resumed after, for the tests that follow."""
    head: PcNode = pc["head"]
    given, end = "2026-11-26T12:00:00.000Z", "2026-11-26T12:00:00Z"  # as EC2 sends it; as date -d writes it
    step = ("env", f"EFA_CDK_BLOCK_END={given}", "/opt/efa-cdk/bin/run-steps.sh", "capacity-block-ending")
    r = head.run(*step)
    try:
        assert r.returncode == 0, (r.stdout, r.stderr)
        reasons = slurm(head, "sinfo", "-R", "-h", "-N", "-o", "%N|%E").splitlines()
        assert sorted(reasons) == [f"{n}|efa-cdk: Capacity Block ends at {end}" for n in QUEUE_NODES], reasons
        assert set(node_states(head).values()) == {"drain~"}, node_states(head)
        assert head.file("shared/.efa-cdk/capacity-block-ending").read_text() == end + "\n"
        assert head.file("var/lib/efa-cdk/capacity-block-ending").read_text() == end + "\n"
    finally:
        slurm(head, "scontrol", "update", f"NodeName={','.join(QUEUE_NODES)}", "State=RESUME")
    assert set(node_states(head).values()) == {"idle~"}, node_states(head)


@pytest.fixture(scope="module")
def jobs(pc: dict[str, Any]) -> dict[str, Any]:
    """Two nodes resumed by a job, more jobs while they run, then left to power down."""
    harness: ParallelClusterHarness = pc["harness"]
    head: PcNode = pc["head"]
    # all_reduce_perf stand-in: every rank says where it runs; rank 0 prints nccl-tests' recorded output
    executable(
        Path(harness.work, "shared/stubs/all_reduce_perf"),
        '#!/bin/bash\necho "rank=$SLURM_PROCID node=$(hostname) FI_PROVIDER=$FI_PROVIDER '
        'pmix=${PMIX_RANK:-none}"\n[ "$SLURM_PROCID" != 0 ] || cat /shared/stubs/nccl-tests-2x-p4d.txt\n',
    )
    fixtures = Path(__file__).resolve().parents[1] / "fixtures/benchmarks"
    shutil.copy(fixtures / "nccl-tests-2x-p4d.txt", Path(harness.work, "shared/stubs"))
    result: dict[str, Any] = {}
    nccom = submit(head, "sbatch --nodes=2 /shared/jobs/nccom-test.sbatch")
    result["nccom"] = (nccom, finish(harness, head, nccom))
    result["running"] = {n.name: n for n in harness.compute()}
    one, two = (result["running"][n] for n in QUEUE_NODES[:2])
    result["resolved"] = one.run("getent", "hosts", two.name).stdout.split()  # by Slurm name, from node 1
    result["states_while_up"] = node_states(head)
    result["timer"] = run_timer(head, "efa-cdk-slurm-topology")
    result["topology_while_up"] = topology_nodes(head)
    result["alive_after_timer"] = alive(head)
    result["reconfigure"] = head.run("/opt/slurm/bin/scontrol", "reconfigure")
    result["alive_after_reconfigure"] = alive(head)
    mpi = submit(
        head,
        "sbatch --nodes=2 --output=mpi-%j.out --wrap 'mpirun --mca btl tcp,self "
        "--mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 -N 1 "
        'sh -c "echo \\$OMPI_COMM_WORLD_RANK \\$(hostname)"\'',
    )
    result["mpi"] = (mpi, finish(harness, head, mpi))
    nccl = submit(head, "NCCL_TESTS_DIR=/shared/stubs sbatch --nodes=2 /shared/jobs/nccl-tests.sbatch")
    result["nccl"] = (nccl, finish(harness, head, nccl))
    train = submit(
        head, "PATH=/opt/aws/neuron/bin:$PATH sbatch --nodes=2 /shared/jobs/train-trn1.sbatch train.py --lr 1"
    )
    result["train"] = (train, finish(harness, head, train))
    deadline = time.time() + 180  # SuspendTime 60 s + SuspendTimeout 5 s after the last job, and slack
    while set(node_states(head).values()) != {"idle~"} or harness.compute():
        assert time.time() < deadline, (node_states(head), [n.name for n in harness.compute()])
        time.sleep(2)
    result["states_after"] = node_states(head)
    result["timer_after"] = run_timer(head, "efa-cdk-slurm-topology")
    result["topology_after"] = topology_nodes(head)
    result["alive_after"] = alive(head)
    return result


def completed(pc: dict[str, Any], jobs: dict[str, Any], key: str, name: str) -> str:
    """The output of the job `key` (its file ``<name>-<job id>.out``), which must have COMPLETED."""
    job, state = jobs[key]
    text = Path(pc["harness"].work, "home/ubuntu", f"{name}-{job}.out").read_text()
    assert state == "COMPLETED", text
    return text


def test_a_job_resumes_two_powered_down_nodes_and_runs_on_both(
    pc: dict[str, Any], jobs: dict[str, Any]
) -> None:
    harness: ParallelClusterHarness = pc["harness"]
    text = completed(pc, jobs, "nccom", "nccom-test")
    assert sorted(jobs["running"]) == QUEUE_NODES[:2] == harness.launched[:2]
    assert [jobs["states_while_up"][n] for n in QUEUE_NODES] == ["idle", "idle", "idle~"]
    # nccom-test got every allocated host and a root rank whose Slurm name resolves to node 1
    node1 = jobs["running"][QUEUE_NODES[0]]
    assert f"--hosts {QUEUE_NODES[0]} {QUEUE_NODES[1]}" in text and "-r 64 -N 2" in text
    assert f"root comm {QUEUE_NODES[0]}:45654 -> {node1.ip}" in text
    assert parse_nccom_test(text)["ok"] is True


def test_every_compute_custom_action_succeeds_with_the_minimal_path(jobs: dict[str, Any]) -> None:
    for node in jobs["running"].values():
        rc = node.file(".harness/OnNodeConfigured.rc").read_text().strip()
        assert rc == "0", node.file(".harness/OnNodeConfigured.log").read_text()
        steps = node.file("var/log/efa-cdk.log").read_text()
        # efa-env, pcluster-hosts, neuron-sdk (skipped: image has it), pyxis, devices
        assert "all 5 steps done" in steps


def test_the_hosts_fix_leaves_the_short_names_and_nodes_reach_each_other_by_slurm_name(
    jobs: dict[str, Any],
) -> None:
    one, two = (jobs["running"][n] for n in QUEUE_NODES[:2])
    hosts = one.file("etc/hosts").read_text()
    assert ".pcluster" not in hosts and f"{one.ip} {one.name}" in hosts
    # Route 53's record (<name>.<cluster>.pcluster, written at resume) through the search domain
    assert jobs["resolved"] == [two.ip, f"{two.name}.trn1-pc.pcluster"]


def test_the_topology_timer_places_running_nodes_and_keeps_slurmctld_up(jobs: dict[str, Any]) -> None:
    assert jobs["timer"].returncode == 0, jobs["timer"].stderr
    placed = jobs["topology_while_up"]
    assert sorted(placed) == QUEUE_NODES
    assert placed[QUEUE_NODES[2]] == "efa-cdk-unplaced"  # powered down: no instance
    assert all(placed[n].startswith("nn-leaf-") for n in QUEUE_NODES[:2]), placed  # EC2's answer
    assert jobs["alive_after_timer"]
    assert jobs["reconfigure"].returncode == 0 and jobs["alive_after_reconfigure"]


def test_open_mpi_runs_across_the_compute_namespaces_inside_a_slurm_job(
    pc: dict[str, Any], jobs: dict[str, Any]
) -> None:
    text = completed(pc, jobs, "mpi", "mpi")
    assert sorted(text.split()) == sorted(["0", "1", *QUEUE_NODES[:2]]), text


def test_the_nccl_tests_template_runs_its_ranks_on_both_nodes_with_efa_selected(
    pc: dict[str, Any], jobs: dict[str, Any]
) -> None:
    text = completed(pc, jobs, "nccl", "nccl-tests")
    ranks = re.findall(r"rank=(\d+) node=(\S+) FI_PROVIDER=(\S+) pmix=(\S+)", text)
    assert len(ranks) == 64  # 32 ranks per trn1.32xlarge node (EFA_CDK_SLOTS), 2 nodes
    assert {node for _, node, _, _ in ranks} == set(QUEUE_NODES[:2])
    assert {p for _, _, p, _ in ranks} == {"efa"} and all(x != "none" for *_, x in ranks)  # srun --mpi=pmix
    assert parse_nccl_tests(text)["ok"] is True


def test_the_training_template_runs_torchrun_on_each_node_with_its_rank(
    pc: dict[str, Any], jobs: dict[str, Any]
) -> None:
    text = completed(pc, jobs, "train", "train-trn1")
    launches = [
        line for line in text.splitlines() if line.startswith("torchrun ") and "--max_steps" not in line
    ]
    assert sorted(re.search(r"--node_rank=(\d)", x).group(1) for x in launches) == ["0", "1"]  # type: ignore[union-attr]
    assert all(f"--master_addr={QUEUE_NODES[0]}" in x and "train.py --lr 1" in x for x in launches)
    assert text.count("neuron_parallel_compile torchrun") == 2  # the compile pass first, on both nodes


def test_idle_nodes_power_down_and_every_node_stays_under_a_switch(
    pc: dict[str, Any], jobs: dict[str, Any]
) -> None:
    harness: ParallelClusterHarness = pc["harness"]
    assert set(jobs["states_after"].values()) == {"idle~"}
    assert sorted(harness.terminated) == QUEUE_NODES[:2]
    assert jobs["timer_after"].returncode == 0
    assert jobs["topology_after"] == dict.fromkeys(QUEUE_NODES, "efa-cdk-unplaced")
    assert jobs["alive_after"]
