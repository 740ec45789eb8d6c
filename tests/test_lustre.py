"""FSx for Lustre over EFA (issue 44): the rules FSx documents, the file system's template, template-diff's
replacement, and the client step run on a scratch node against stand-ins of Lustre's tools (this machine has
no Lustre kernel modules: what the stand-ins record is what a node would run, in its order)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import Stack, assertions
from aws_cdk import aws_ec2 as ec2

from efa_constructs import EfaLustreFileSystem, instance_type
from efa_constructs.cdk.storage import EfaSharedStorage
from efa_constructs.core.errors import EfaConfigError
from efa_constructs.core.lustre import LustreSpec, efa_client_interfaces
from efa_constructs.node import lnet
from efa_constructs.tools.template_diff import diff_templates
from tests.helpers import BASH, Node, executable, isolated_vpc, new_app, ready_cluster_template

# ---- the rules (FSx for Lustre user guide; the expected numbers are the guide's, not the code's) ----


@pytest.mark.parametrize(
    ("throughput", "step"), [(125, 38400), (250, 19200), (500, 9600), (1000, 4800)]
)  # "increase-storage-capacity": EFA file systems grow 4,800 MB/s at a time
def test_an_efa_file_system_grows_in_its_tiers_steps(throughput: int, step: int) -> None:
    LustreSpec(step, throughput, efa=True).check()
    LustreSpec(3 * step, throughput, efa=True).check()
    for size in (step // 2, step + 2400, 1200):
        with pytest.raises(EfaConfigError) as e:
            LustreSpec(size, throughput, efa=True).check()
        assert e.value.code == "efa-cdk:fsx-efa-capacity-step"
        assert f"{step:,} GiB" in str(e.value)


def test_without_efa_the_sizes_stay_1200_or_2400s_and_the_tiers_are_fsxs() -> None:
    for size in (1200, 2400, 4800):
        LustreSpec(size).check()
    with pytest.raises(EfaConfigError, match="1200 GiB or a multiple of 2400"):
        LustreSpec(3600).check()
    with pytest.raises(EfaConfigError) as e:
        LustreSpec(2400, 200).check()
    assert e.value.code == "efa-cdk:fsx-throughput-tier"


@pytest.mark.parametrize(
    ("itype", "interfaces"),
    # "configure-efa-clients" step 4: 16 on p6-b300, 8 on p5/p5e/p5en/p6-b200/p6e-gb200.36xlarge, 2 on
    # other types with several network cards, 1 on types with one
    [("p6-b300.48xlarge", 16), ("p5.48xlarge", 8), ("p5en.48xlarge", 8), ("trn1.32xlarge", 2),
     ("p4d.24xlarge", 2), ("c5n.18xlarge", 1), ("hpc7g.16xlarge", 1)],
)  # fmt: skip
def test_the_efa_interfaces_a_client_uses_are_the_guides(itype: str, interfaces: int) -> None:
    assert efa_client_interfaces(instance_type(itype)) == interfaces


def test_the_1024_efa_connections_of_a_file_system_bound_its_clients() -> None:
    spec = LustreSpec(19200, efa=True)
    spec.check_clients(instance_type("p5.48xlarge"), 128)  # 8 x 128 = 1,024
    with pytest.raises(EfaConfigError) as e:
        spec.check_clients(instance_type("p5.48xlarge"), 129)
    assert e.value.code == "efa-cdk:fsx-efa-connections" and "1032 EFA connections" in str(e.value)
    spec.check_clients(instance_type("trn1.32xlarge"), 512)
    with pytest.raises(EfaConfigError, match="at most 512 nodes"):
        spec.check_clients(instance_type("trn1.32xlarge"), 513)
    LustreSpec(2400).check_clients(instance_type("p5.48xlarge"), 1000)  # TCP: no EFA connections


@pytest.mark.parametrize("itype", ["trn2.48xlarge", "trn2u.48xlarge"])
def test_trn2_is_no_efa_client(itype: str) -> None:
    """ "configure-efa-clients": EFA clients are Nitro v4 or later, excluding the trn2 family."""
    with pytest.raises(EfaConfigError) as e:
        LustreSpec(19200, efa=True).check_clients(instance_type(itype), 2)
    assert e.value.code == "efa-cdk:fsx-efa-client-type" and "efa=False" in str(e.value)


# ---- the file system's template ----


def _storage(efa: bool, gib: int = 19200, throughput: int = 250) -> dict:
    stack = Stack(new_app(), "Storage")
    vpc = isolated_vpc(stack)
    clients = ec2.SecurityGroup(stack, "Clients", vpc=vpc)
    EfaSharedStorage(
        stack,
        "Storage",
        vpc=vpc,
        subnet=vpc.isolated_subnets[0],
        clients=clients,
        fsx_lustre_capacity_gib=gib,
        fsx_lustre_throughput=throughput,
        fsx_lustre_efa=efa,
    )
    return assertions.Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def _of_type(template: dict, kind: str) -> dict:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def test_an_efa_file_system_is_what_fsx_requires() -> None:
    """EfaEnabled, Lustre 2.15, PERSISTENT_2 with a metadata configuration ("efa-file-systems"), and a group
    open to itself and to and from the clients for all traffic ("cannot-create-fs")."""
    template = _storage(efa=True)
    (fs,) = _of_type(template, "AWS::FSx::FileSystem").values()
    props = fs["Properties"]
    lustre = props["LustreConfiguration"]
    assert lustre["EfaEnabled"] is True and lustre["DeploymentType"] == "PERSISTENT_2"
    assert lustre["MetadataConfiguration"] == {"Mode": "AUTOMATIC"}
    assert props["FileSystemTypeVersion"] == "2.15" and props["StorageCapacity"] == 19200
    assert fs["DeletionPolicy"] == "Retain"
    ((group_id, _),) = [
        (k, r) for k, r in _of_type(template, "AWS::EC2::SecurityGroup").items() if "Lustre" in k
    ]
    rules = [
        (r["Type"].rsplit("::", 1)[1], r["Properties"])
        for r in template["Resources"].values()
        if r["Type"] in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")
    ]
    everything = [(kind, p) for kind, p in rules if p["IpProtocol"] == "-1"]
    ref = {"Fn::GetAtt": [group_id, "GroupId"]}
    to_self = [
        p
        for kind, p in everything
        if p.get("GroupId") == ref
        and ref in (p.get("SourceSecurityGroupId"), p.get("DestinationSecurityGroupId"))
    ]
    from_clients = [
        p
        for kind, p in everything
        if kind == "SecurityGroupIngress" and p.get("GroupId") == ref and p["SourceSecurityGroupId"] != ref
    ]
    to_clients = [
        p
        for kind, p in everything
        if kind == "SecurityGroupEgress"
        and p.get("GroupId") == ref
        and p["DestinationSecurityGroupId"] != ref
    ]
    assert len(to_self) == 2 and len(from_clients) == 1 and len(to_clients) == 1


def test_a_tcp_file_system_is_unchanged_by_efa_support() -> None:
    """Without EFA nothing new is set (a file system made before keeps its version: a change would
    replace it), and the group opens Lustre's ports only."""
    template = _storage(efa=False, gib=2400)
    (fs,) = _of_type(template, "AWS::FSx::FileSystem").values()
    assert "FileSystemTypeVersion" not in fs["Properties"]
    assert not {"EfaEnabled", "MetadataConfiguration"} & set(fs["Properties"]["LustreConfiguration"])
    protocols = {
        r["Properties"]["IpProtocol"]
        for r in template["Resources"].values()
        if r["Type"].startswith("AWS::EC2::SecurityGroup") and "IpProtocol" in r["Properties"]
    }
    assert protocols == {"tcp"}


def test_template_diff_says_switching_efa_replaces_the_file_system() -> None:
    """EfaEnabled is not in FSx's UpdateFileSystemLustreConfiguration: CloudFormation can only make a new
    file system. The provider schema cfn-lint ships lists no such nested property, so the diff adds it."""
    before, after = _storage(efa=False, gib=19200), _storage(efa=True, gib=19200)
    diff = diff_templates(before, after)
    (fs_id,) = _of_type(after, "AWS::FSx::FileSystem")
    assert "LustreConfiguration.EfaEnabled" in diff.replaced[fs_id]
    assert fs_id in diff.stateful_losses


# ---- LNet's counts ----

#: ``lnetctl net show -v`` as liblnetconfig.c writes it (lustre/lustre-release, lnet/utils/lnetconfig):
#: a tcp and an efa network, two EFA NIs, one of them down.
SHOW = """\
net:
    - net type: lo
      local NI(s):
        - nid: 0@lo
          status: up
    - net type: tcp
      local NI(s):
        - nid: 10.0.1.10@tcp
          status: up
          interfaces:
              0: ens5
          statistics:
              send_count: 500
              recv_count: 400
              drop_count: 0
    - net type: efa
      local NI(s):
        - nid: 10.0.1.10@efa
          status: up
          interfaces:
              0: rdmap16s27
          statistics:
              send_count: 900
              recv_count: 800
              drop_count: 0
        - nid: 10.0.1.10@efa1
          status: down
          interfaces:
              0: rdmap23s34
          statistics:
              send_count: 7
              recv_count: 3
              drop_count: 0
"""


def test_lnet_counts_read_the_efa_network_alone() -> None:
    counts = lnet.net_counts(SHOW)
    assert counts == lnet.NetCounts(nids=1, sent=907, received=803)
    assert lnet.net_counts(SHOW, "tcp") == lnet.NetCounts(1, 500, 400)
    assert lnet.net_counts("net:\n") == lnet.NetCounts()
    assert counts.moved_since(lnet.NetCounts(1, 900, 800)) and not counts.moved_since(counts)


# ---- the client step on a scratch node ----

#: lnetctl's stand-in: `net add` records the NIs; `net show` prints them, each send/recv count growing
#: by STUB_LNET_STEP (0: traffic does not move on efa) every time it is read.
LNETCTL = r"""
state="$STUB_DIR/lnet"; mkdir -p "$state"
case "$1 $2" in
  "net add")
    net=$4; dev=$6; echo "$dev" >>"$state/$net" ;;
  "net show")
    reads=$(( $(cat "$state/reads" 2>/dev/null || echo 0) + 1 )); echo "$reads" >"$state/reads"
    n=$(( reads * ${STUB_LNET_STEP:-10} ))
    echo "net:"
    echo "    - net type: efa"
    echo "      local NI(s):"
    i=0
    while read -r dev; do
      i=$((i + 1))
      printf '        - nid: 10.0.1.10@efa%s\n          status: up\n' "$i"
      printf '          interfaces:\n              0: %s\n' "$dev"
      printf '          statistics:\n              send_count: %s\n              recv_count: %s\n' "$n" "$n"
    done <"$state/efa" ;;
esac
"""


def _lustre_node(tmp_path: Path, itype: str = "trn1.32xlarge", interfaces: str = "2", **env: str) -> Node:
    node = Node(
        tmp_path,
        itype,
        EFA_CDK_LUSTRE_DNS="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        EFA_CDK_LUSTRE_MOUNT_NAME="abcdefgh",
        EFA_CDK_LUSTRE_DIR="/fsx",
        EFA_CDK_LUSTRE_EFA_INTERFACES=interfaces,
    )
    stub = node.stub_dir / "bin"
    record = '#!{bash}\necho "{name} $*" >>"$STUB_DIR/calls.log"\n{body}\n'
    bodies = {
        "lnetctl": LNETCTL,
        "mount.lustre": "exit 0",
        "modinfo": 'echo "${STUB_EFA_DRIVER:-2.13.0g}"',
        "lsmod": 'cat "$STUB_DIR/lsmod" 2>/dev/null || true',
        "lustre_rmmod": 'rm -f "$STUB_DIR/lsmod"',
        "modprobe": "exit 0",
        "ip": 'echo "default via 10.0.1.1 dev ens5 proto dhcp src 10.0.1.10 metric 100"',
        "mountpoint": '[ -e "$STUB_DIR/mounted" ]',
        "mount": 'touch "$STUB_DIR/mounted"',
        "umount": 'rm -f "$STUB_DIR/mounted"',
        "dd": "exit 0",
        # systemctl start runs the unit's command as systemd would (the node's root stands in for /)
        "systemctl": '[ "$1" != start ] || exec "$EFA_CDK_ROOT/opt/efa-cdk/bin/lustre-client.sh" --lnet',
    }
    for name, body in bodies.items():
        executable(stub / name, record.format(bash=BASH, name=name, body=body.strip()))
    node.env.update(env)
    return node


def _calls(node: Node) -> list[str]:
    return [c.strip() for c in (node.stub_dir / "calls.log").read_text().splitlines()]


def test_the_client_configures_lnet_over_efa_as_aws_documents_and_proves_it(tmp_path: Path) -> None:
    node = _lustre_node(tmp_path)
    (node.stub_dir / "lsmod").write_text("lnet 1 0\n")  # loaded before: unloaded first, so options apply
    run = node.run("lustre-client")
    assert run.returncode == 0, run.log
    calls = [
        c
        for c in _calls(node)
        if c.split()[0] in ("lustre_rmmod", "modprobe", "lnetctl", "mount")
        and c != "lnetctl net show --net efa -v"
    ]
    devices = sorted(p.name for p in (node.root / "sys/class/infiniband").iterdir())
    assert calls == [
        "lustre_rmmod",
        "modprobe lnet",
        "modprobe kefalnd ipif_name=ens5",
        "modprobe ksocklnd",
        "lnetctl lnet configure",
        "lnetctl net del --net tcp",
        "lnetctl net add --net tcp --if ens5",
        # 2 of trn1's 8 EFAs ("other instances with multiple network cards": 2), the first and the last
        f"lnetctl net add --net efa --if {devices[0]} --peer-credits 32",
        f"lnetctl net add --net efa --if {devices[-1]} --peer-credits 32",
        "lnetctl set discovery 1",
        "lnetctl udsp add --src efa --priority 0",
        "modprobe lustre",
        "mount /fsx",
    ]
    fstab = (node.root / "etc/fstab").read_text()
    assert fstab == (
        "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh /fsx lustre "
        "defaults,relatime,flock,_netdev,x-systemd.requires=efa-cdk-lustre-lnet.service 0 0\n"
    )
    assert "Lustre rides EFA" in run.log
    assert node.systemd_verify("efa-cdk-lustre-lnet.service") == ""


def test_a_node_whose_lustre_does_not_ride_efa_fails_with_the_reason(tmp_path: Path) -> None:
    node = _lustre_node(tmp_path, STUB_LNET_STEP="0")
    run = node.run("lustre-client")
    assert run.returncode == 1
    assert "Lustre traffic does not ride EFA" in (node.root / "var/lib/efa-cdk/failure").read_text()


def test_an_old_efa_driver_or_a_tcp_mount_is_handled_before_lnet(tmp_path: Path) -> None:
    old = _lustre_node(tmp_path / "old", STUB_EFA_DRIVER="2.10.0")
    assert old.run("lustre-client").returncode == 1
    assert "EFA driver 2.12.1 or later" in (old.root / "var/lib/efa-cdk/failure").read_text()
    # ParallelCluster mounted it over TCP before this step: unmounted, LNet moved to EFA, mounted again
    tcp = _lustre_node(tmp_path / "tcp")
    (tcp.stub_dir / "mounted").touch()
    assert tcp.run("lustre-client").returncode == 0
    calls = _calls(tcp)
    umount = next(i for i, c in enumerate(calls) if c.startswith("umount ") and c.endswith("/fsx"))
    assert umount < calls.index("lnetctl lnet configure") < calls.index("mount /fsx")


def test_a_tcp_only_client_mounts_without_lnet(tmp_path: Path) -> None:
    node = _lustre_node(tmp_path, interfaces="0")
    assert node.run("lustre-client").returncode == 0
    assert not any(c.startswith(("lnetctl", "modprobe")) for c in _calls(node))
    assert (node.root / "etc/fstab").read_text().endswith(" lustre defaults,relatime,flock,_netdev 0 0\n")


def test_p5_uses_eight_of_its_efas_spread_over_them(tmp_path: Path) -> None:
    node = _lustre_node(tmp_path, "p5.48xlarge", interfaces="8")
    assert node.run("lustre-client").returncode == 0
    devices = sorted(p.name for p in (node.root / "sys/class/infiniband").iterdir())
    used = (node.stub_dir / "lnet/efa").read_text().split()
    assert used == devices[::4] and len(used) == 8


def test_the_steps_mount_lustre_before_the_signal_only_when_there_is_one() -> None:
    from efa_constructs import EfaUserData

    names = EfaUserData().step_names((), lustre=True)
    assert names.index("verify-efa") < names.index("lustre-client") < names.index("signal")
    assert "lustre-client" not in EfaUserData().step_names(())
    assert json.dumps(names)


# ---- a cluster that mounts it ----


def _ready(**context: str) -> dict:
    return ready_cluster_template("Lustre", context)


@pytest.fixture(scope="module")
def efa_lustre_stack() -> dict:
    return _ready(fsx_lustre_gib="19200", fsx_lustre_efa="true")


def test_a_ready_cluster_mounts_its_file_system_over_efa(efa_lustre_stack: dict) -> None:
    """Stock cfn-lint accepts it; every node waits for the file system and mounts it before its signal,
    with the settings the client step reads; the outputs say where and over what."""
    from tests.helpers import lint

    assert lint(efa_lustre_stack, stock=True) == []
    (fs_id,) = _of_type(efa_lustre_stack, "AWS::FSx::FileSystem")
    nodes = _of_type(efa_lustre_stack, "AWS::EC2::Instance")
    assert len(nodes) == 2 and all(fs_id in n["DependsOn"] for n in nodes.values())
    text = json.dumps(efa_lustre_stack)
    assert "EFA_CDK_LUSTRE_EFA_INTERFACES='2'" in text and "EFA_CDK_LUSTRE_DIR='/fsx'" in text
    steps = text.split("EFA_CDK_STEPS='", 1)[1].split("'", 1)[0].split()
    assert steps.index("verify-efa") < steps.index("lustre-client") < steps.index("signal")
    assert "over EFA" in json.dumps(efa_lustre_stack["Outputs"]["LustreMount"])


def test_a_new_node_count_leaves_the_file_system_alone(efa_lustre_stack: dict) -> None:
    """Nothing is lost: a third node changes nothing of the file system or its group."""
    diff = diff_templates(
        efa_lustre_stack, _ready(fsx_lustre_gib="19200", fsx_lustre_efa="true", node_count="3")
    )
    kept = {r for r, v in efa_lustre_stack["Resources"].items() if r.startswith("Lustre")}
    assert kept and not kept & (set(diff.modified) | set(diff.replaced) | set(diff.removed))


def test_its_connections_compose_with_cdks() -> None:
    """IConnectable through CDK itself: another group allowed to it gets a rule on its group."""
    stack = Stack(new_app(), "Compose")
    vpc = isolated_vpc(stack)
    lustre = EfaLustreFileSystem(stack, "Fsx", vpc=vpc, subnet=vpc.isolated_subnets[0], capacity_gib=1200)
    other = ec2.SecurityGroup(stack, "Other", vpc=vpc)
    other.connections.allow_to(lustre, ec2.Port.tcp(988), "a login node")
    template = assertions.Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "IpProtocol": "tcp",
            "FromPort": 988,
            "GroupId": {
                "Fn::GetAtt": [assertions.Match.string_like_regexp("FsxLustreSecurityGroup"), "GroupId"]
            },
        },
    )


def test_pcs_compute_nodes_mount_it_over_efa() -> None:
    """-c fsx_lustre_gib/-c fsx_lustre_efa on the PCS stack: stock cfn-lint accepts it, and the compute nodes'
    bootstrap runs lustre-client after the EFA check with the client settings, the login nodes' over TCP."""
    from stacks.params import PcsParams
    from stacks.pcs_stack import EfaPcsClusterStack
    from tests.helpers import lint

    params = PcsParams.from_context(
        {"ami_id": "ami-0123456789abcdef0", "fsx_lustre_gib": "19200", "fsx_lustre_efa": "true"},
        default_instance_type="trn1.32xlarge",
    )
    app = new_app()
    stack = EfaPcsClusterStack(app, "Pcs", params=params)
    template = app.synth().get_stack_by_name(stack.stack_name).template
    assert lint(template, stock=True) == []
    (fs,) = _of_type(template, "AWS::FSx::FileSystem").values()
    assert fs["Properties"]["LustreConfiguration"]["EfaEnabled"] is True
    compute, login = (
        json.dumps(r["Properties"]["LaunchTemplateData"]["UserData"])
        for k, r in sorted(_of_type(template, "AWS::EC2::LaunchTemplate").items())
        if k.startswith(("PcsComputeTemplate", "PcsLoginTemplate"))
    )
    assert "EFA_CDK_STEPS='efa-env,verify-efa,lustre-client'" in compute
    assert "EFA_CDK_LUSTRE_EFA_INTERFACES='2'" in compute
    # the login nodes mount it too, over TCP (no EFA on a login node), so users stage data in /fsx
    assert "EFA_CDK_STEPS='lustre-client'" in login and "EFA_CDK_LUSTRE_EFA_INTERFACES='0'" in login


# ---- the storage benchmark ----


def _dd(tmp_path: Path, flag: str) -> str:
    """GNU dd's own summary of a real 4 MiB direct transfer on this machine."""
    import subprocess

    target = tmp_path / "dd.bin"
    args = ["of=" + str(target), "if=/dev/zero"] if flag == "oflag" else ["if=" + str(target), "of=/dev/null"]
    run = subprocess.run(["dd", *args, "bs=1M", "count=4", f"{flag}=direct"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stderr


def test_the_storage_figures_come_from_dds_own_summary(tmp_path: Path) -> None:
    """Real dd output: the aggregate is every node's bytes over the phase's wall time; a node whose dd
    failed, or an EFA file system whose traffic rode TCP, is a failed benchmark with the reason."""
    write, read = _dd(tmp_path, "oflag"), _dd(tmp_path, "iflag")
    assert lnet.dd_transfer(write)[0] == 4 << 20 and lnet.dd_transfer("dd: error writing") is None
    work = tmp_path / "bench"
    work.mkdir()
    (work / "phases").write_text("write 2.0\nread 1.0\n")
    quiet = SHOW.replace("send_count: 900", "send_count: 100")
    for host in ("10.0.1.10", "10.0.1.11"):
        (work / f"{host}.write").write_text(write)
        (work / f"{host}.read").write_text(read)
        (work / f"{host}.before").write_text(quiet)
        (work / f"{host}.after").write_text(SHOW)  # efa sent 800 more, tcp none
    out = lnet.result(work, efa=True)
    assert out["ok"] and out["nodes"] == 2 and out["efa_share"] == 1.0
    assert out["write_gbytes_s"] == round(2 * (4 << 20) / 2.0 / 1e9, 2)
    assert out["read_gbytes_s"] == round(2 * (4 << 20) / 1.0 / 1e9, 2)
    (work / "10.0.1.11.after").write_text(SHOW.replace("send_count: 500", "send_count: 5000"))  # tcp moved
    slow = lnet.result(work, efa=True)
    assert not slow["ok"] and "falls back to TCP" in slow["reason"] and slow["efa_share"] < 0.5
    assert lnet.result(work, efa=False)["ok"]  # a TCP file system: no share asked
    (work / "10.0.1.11.read").write_text("dd: error reading: Input/output error\n")
    assert lnet.result(work, efa=False)["reason"] == "10.0.1.11: the direct read failed"


def _bench_leader(tmp_path: Path) -> Node:
    """A scratch leader of two nodes with a mounted /fsx: the other node reached over SSH (a stand-in that
    runs the command as that node), the real dd, and LNet's counts growing at every read."""
    node = _lustre_node(tmp_path, EFA_CDK_LUSTRE_BENCH_MIB="2")
    (node.root / "etc/efa-cdk/hostfile").write_text("10.0.1.10 slots=32\n10.0.1.11 slots=32\n")
    (node.root / "fsx").mkdir()
    stub = node.stub_dir / "bin"
    (stub / "dd").unlink()  # the real dd, direct I/O into the scratch mount
    executable(stub / "hostname", f'#!{BASH}\necho "${{STUB_HOSTNAME:-10.0.1.10}}"\n')
    # ssh -o BatchMode=yes HOST sudo -n /opt/efa-cdk/bin/lustre-bench.sh --node PHASE, run as HOST
    executable(stub / "ssh", f'#!{BASH}\necho "ssh $*" >>"$STUB_DIR/calls.log"\nhost=$3; shift 5\n'
               'STUB_HOSTNAME=$host exec bash "$EFA_CDK_ROOT$1" "${@:2}"\n')  # fmt: skip
    # both nets' counts grow at every read, efa's five times as fast
    lnetctl = """
n=$(( $(cat "$STUB_DIR/n" 2>/dev/null || echo 0) + 10 )); echo $n >"$STUB_DIR/n"
for net in tcp efa; do
  [ $net = efa ] && m=$((n * 5)) || m=$n
  printf '    - net type: %s\\n      local NI(s):\\n' $net
  printf '        - nid: 10.0.1.10@%s\\n          status: up\\n' $net
  printf '          statistics:\\n              send_count: %s\\n              recv_count: %s\\n' $m $m
done
"""
    executable(stub / "lnetctl", f"#!{BASH}\n{lnetctl}")
    return node


def test_the_leader_runs_it_on_every_node_at_once(tmp_path: Path) -> None:
    """lustre-bench.sh on a scratch leader: the other node reached over SSH (a stand-in that runs the
    command as that node), real dd with direct I/O into the mount's directory, and LNet's counts around it."""
    import subprocess

    node = _bench_leader(tmp_path)
    run = subprocess.run(
        [BASH, str(node.bin / "lustre-bench.sh")], env=node.env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(run.stdout)
    assert out["ok"] and out["nodes"] == 2 and out["efa_share"] > 0.5, out
    assert out["write_gbytes_s"] > 0 and out["read_gbytes_s"] > 0
    assert {out["slowest_write"]["node"], out["slowest_read"]["node"]} <= {"10.0.1.10", "10.0.1.11"}
    assert not list((node.root / "fsx/efa-cdk-bench").iterdir())  # each node removed its file
    assert (
        sum(c.startswith("ssh ") and "10.0.1.11" in c for c in _calls(node)) == 4
    )  # counts, write, read, counts


def test_the_benchmarks_step_reports_the_storage_figures_with_the_fabrics(tmp_path: Path) -> None:
    """At formation the leader's benchmarks step runs it after the fabric's and reports it with them (the
    wait condition's data: the BenchmarkResults output), and efa-cdk status renders it."""
    from efa_constructs.tools.status import render_benchmark

    node = _bench_leader(tmp_path)
    run = node.run("benchmarks", EFA_CDK_BENCHMARKS="fi_pingpong")
    assert run.returncode == 0, run.log
    body = json.loads((node.root / "var/lib/efa-cdk/benchmarks.json").read_text())
    (storage,) = [r for r in json.loads(body["Data"]) if r["benchmark"] == "lustre"]
    assert storage["ok"] and storage["nodes"] == 2
    line = render_benchmark(storage)
    assert line.startswith("lustre: write ") and "from 2 nodes" in line and "over EFA" in line


def test_synth_says_that_switching_efa_replaces_the_file_system() -> None:
    """The issue's 'said at synth': every synth of a Lustre file system says EFA is fixed at creation."""
    stack = Stack(new_app(), "Said")
    vpc = isolated_vpc(stack)
    subnet = vpc.isolated_subnets[0]
    EfaLustreFileSystem(stack, "Fsx", vpc=vpc, subnet=subnet, capacity_gib=4800, throughput=1000, efa=True)
    infos = assertions.Annotations.from_stack(stack).find_info("*", assertions.Match.any_value())
    assert any("switching it later replaces the file system" in str(i.entry.data) for i in infos), infos


def test_a_benchmark_that_stops_is_a_failed_result_naming_why(tmp_path: Path) -> None:
    """The benchmarks step's failed results (one helper for every benchmark): a benchmark that exits
    non-zero and a storage benchmark that prints nothing each report why, with their log's last line."""
    node = _bench_leader(tmp_path)
    run = node.run("benchmarks", EFA_CDK_BENCHMARKS="fi_pingpong", EFA_CDK_LUSTRE_BENCH_MIB="lots")
    assert run.returncode == 0, run.log  # not strict: problems are data
    body = json.loads((node.root / "var/lib/efa-cdk/benchmarks.json").read_text())
    results = {r["benchmark"]: r for r in json.loads(body["Data"])}
    assert results["lustre"] == {
        "benchmark": "lustre",
        "ok": False,
        "reason": "did not finish: EFA_CDK_LUSTRE_BENCH_MIB is not a size in MiB: lots",
    }
    assert not results["fi_pingpong"]["ok"]
    assert results["fi_pingpong"]["reason"].startswith("exited non-zero: ")
