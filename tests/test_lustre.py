"""FSx for Lustre over EFA (issue 44): the rules FSx documents, the file system's template, template-diff's
replacement, and the client step run on a scratch node against stand-ins of Lustre's tools (this machine has
no Lustre kernel modules: what the stand-ins record is what a node would run, in its order)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Stack, assertions
from aws_cdk import aws_ec2 as ec2

from efa_constructs import EfaLustreFileSystem, instance_type
from efa_constructs.cdk.storage import EfaSharedStorage
from efa_constructs.core.errors import EfaConfigError
from efa_constructs.core.lustre import LustreSpec, efa_client_interfaces
from efa_constructs.node import lnet
from efa_constructs.tools.template_diff import diff_templates
from tests.helpers import BASH, Node, executable, isolated_vpc, new_app, pcs_image, ready_cluster_template

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


def test_the_step_refusal_offers_a_higher_tier_only_below_the_highest() -> None:
    """Issue 53 item 18: at 1000 MB/s/TiB (the highest tier) the fix offered "a higher tier"."""
    for throughput, offered in ((250, True), (1000, False)):
        with pytest.raises(EfaConfigError) as err:
            LustreSpec(2400, throughput, efa=True).check()
        assert ("higher tier" in err.value.fix) is offered, err.value.fix


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
    [("p6-b300.48xlarge", 16), ("p5.48xlarge", 8), ("p5e.48xlarge", 8), ("p5en.48xlarge", 8),
     ("p6-b200.48xlarge", 8), ("p6e-gb200.36xlarge", 8), ("trn1.32xlarge", 2), ("p4d.24xlarge", 2),
     ("c5n.18xlarge", 1), ("hpc7g.16xlarge", 1)],
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


@pytest.mark.parametrize(
    ("itype", "served"),
    # the EC2 user guide's EFA tables: Nitro v3 (refused) p4d, p4de, dl1, p3dn, c5n, g5; Nitro v4 (the
    # oldest served) trn1, p5, c6in, hpc7a; v5 p5en, hpc7g; v6 p6-b200; c9g is newer than the tables (no
    # version: not refused)
    [("p4d.24xlarge", False), ("p4de.24xlarge", False), ("dl1.24xlarge", False), ("p3dn.24xlarge", False),
     ("c5n.18xlarge", False), ("g5.48xlarge", False), ("trn1.32xlarge", True), ("p5.48xlarge", True),
     ("c6in.32xlarge", True), ("hpc7a.96xlarge", True), ("p5en.48xlarge", True), ("hpc7g.16xlarge", True),
     ("p6-b200.48xlarge", True), ("c9g.48xlarge", True)],
)  # fmt: skip
def test_efa_clients_are_nitro_v4_or_later(itype: str, served: bool) -> None:
    """Issue 53 item 6: "configure-efa-clients": FSx serves EFA clients on Nitro v4 or later; the catalogue
    carries each type's version from the EC2 user guide's EFA tables. Over TCP every type mounts."""
    spec = LustreSpec(19200, efa=True)
    if served:
        spec.check_clients(instance_type(itype), 2)
    else:
        with pytest.raises(EfaConfigError) as e:
            spec.check_clients(instance_type(itype), 2)
        assert e.value.code == "efa-cdk:fsx-efa-client-type" and "Nitro v3" in str(e.value), str(e.value)
        assert "efa=False" in str(e.value)
    LustreSpec(2400).check_clients(instance_type(itype), 2)


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
    n=$(( reads * ${STUB_LNET_STEP:-10} )); r=$(( reads * ${STUB_LNET_RECV_STEP:-${STUB_LNET_STEP:-10}} ))
    echo "net:"
    echo "    - net type: efa"
    echo "      local NI(s):"
    i=0
    while read -r dev; do
      i=$((i + 1))
      printf '        - nid: 10.0.1.10@efa%s\n          status: up\n' "$i"
      printf '          interfaces:\n              0: %s\n' "$dev"
      printf '          statistics:\n              send_count: %s\n              recv_count: %s\n' "$n" "$r"
    done <"$state/efa" ;;
esac
"""


def _lustre_node(
    tmp_path: Path,
    itype: str = "trn1.32xlarge",
    interfaces: str = "2",
    settings: dict[str, str] | None = None,
    **env: str,
) -> Node:
    node = Node(
        tmp_path,
        itype,
        EFA_CDK_LUSTRE_DNS="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        EFA_CDK_LUSTRE_MOUNT_NAME="abcdefgh",
        EFA_CDK_LUSTRE_DIR="/fsx",
        EFA_CDK_LUSTRE_EFA_INTERFACES=interfaces,
        **(settings or {}),
    )
    stub = node.stub_dir / "bin"
    record = '#!{bash}\necho "{name} $*" >>"$STUB_DIR/calls.log"\n{body}\n'
    bodies = {
        "lnetctl": LNETCTL,
        "mount.lustre": "exit 0",
        # the efa driver's version, or nvidia-fs's (STUB_NVFS, empty: no such module)
        "modinfo": 'case "$*" in *nvidia_fs*) [ -n "${STUB_NVFS:-}" ] && echo "$STUB_NVFS" ;; '
        '*) echo "${STUB_EFA_DRIVER:-2.13.0g}" ;; esac',
        "lsmod": 'cat "$STUB_DIR/lsmod" 2>/dev/null || true',
        "lustre_rmmod": 'rm -f "$STUB_DIR/lsmod"',
        "modprobe": "exit 0",
        "ip": 'echo "default via 10.0.1.1 dev ens5 proto dhcp src 10.0.1.10 metric 100"',
        "mountpoint": '[ -e "$STUB_DIR/mounted" ]',
        "mount": 'touch "$STUB_DIR/mounted"',
        "umount": 'rm -f "$STUB_DIR/mounted"',
        "dd": "exit 0",
        # systemctl start runs the unit's command as systemd would (the node's root stands in for /)
        # (is-active: whether a start succeeded before, as the unit's state)
        "systemctl": 'case "$1" in start) "$EFA_CDK_ROOT/opt/efa-cdk/bin/lustre-client.sh" --lnet && '
        'touch "$STUB_DIR/active" ;; is-active) [ -e "$STUB_DIR/active" ] ;; esac',
    }
    for name, body in bodies.items():
        executable(stub / name, record.format(bash=BASH, name=name, body=body.strip()))
    node.env.update(env)
    return node


def _calls(node: Node) -> list[str]:
    return [c.strip() for c in (node.stub_dir / "calls.log").read_text().splitlines()]


@pytest.mark.debian
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


def test_efa_traffic_one_way_only_is_no_proof(tmp_path: Path) -> None:
    """Issue 60 (a hidden mutant lived here): the proof needs LNet's efa network to have sent AND received
    around the write and read; messages sent with none received back (or the reverse) are not Lustre riding
    EFA."""
    for sent, received in (("10", "0"), ("0", "10")):
        node = _lustre_node(
            tmp_path / f"{sent}-{received}", STUB_LNET_STEP=sent, STUB_LNET_RECV_STEP=received
        )
        assert node.run("lustre-client").returncode == 1, (sent, received)
        assert "Lustre traffic does not ride EFA" in (node.root / "var/lib/efa-cdk/failure").read_text()


def test_a_file_system_of_no_size_is_refused_with_efa_too() -> None:
    """Issue 60 (a hidden mutant lived here): 0 GiB, and less, is no size at any EFA step."""
    for size in (0, -19200):
        with pytest.raises(EfaConfigError) as err:
            LustreSpec(size, efa=True).check()
        assert err.value.code == "efa-cdk:fsx-efa-capacity-step"


def test_a_tcp_file_system_in_another_zone_is_not_held_to_efas_same_zone_rule() -> None:
    """Issue 60 (a hidden mutant lived here): FSx serves EFA clients in the file system's zone only; a TCP
    file system serves any zone of the VPC (the rule is EFA's alone)."""
    from efa_constructs.core.lustre import check_mount

    check_mount(LustreSpec(1200), node_software=True, client_zone="us-east-1d", file_system_zone="us-east-1c")
    with pytest.raises(EfaConfigError) as err:
        check_mount(LustreSpec(19200, efa=True), node_software=True, client_zone="us-east-1d",
                    file_system_zone="us-east-1c")  # fmt: skip
    assert err.value.code == "efa-cdk:fsx-efa-zone"


def test_no_lnet_counts_at_all_are_not_taken_for_efa_traffic(tmp_path: Path) -> None:
    """Issue 60 (a hidden mutant lived here): a benchmark whose lnetctl answered nothing (no before, no
    after) has no share of messages on EFA: with an EFA file system that is a failure, not a pass."""
    from efa_constructs.node import lnet

    (tmp_path / "10.0.1.10.write").write_text("1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.0 s, 1.1 GB/s\n")
    (tmp_path / "10.0.1.10.read").write_text("1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.5 s, 2.1 GB/s\n")
    (tmp_path / "phases").write_text("write 1.0\nread 0.5\n")
    found = lnet.result(tmp_path, efa=True)
    assert found["ok"] is False and "efa_share" not in found
    assert found["reason"].startswith("0% of LNet's messages rode EFA")
    assert lnet.result(tmp_path, efa=False)["ok"] is True  # over TCP nothing is asked of EFA


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


def test_parallelcluster_s_mount_rides_efa_from_the_start(tmp_path: Path) -> None:
    """Issue 53 item 11: at OnNodeStart (the lustre-lnet step) the client and LNet over EFA, no mount; then
    ParallelCluster mounts (over EFA: LNet is up), and at OnNodeConfigured the lustre-client step keeps that
    mount (no unmount, LNet not configured again) and proves Lustre rides EFA."""
    node = _lustre_node(tmp_path)
    start = node.run("lustre-lnet")
    assert start.returncode == 0, start.log
    calls = _calls(node)
    assert "lnetctl lnet configure" in calls and not any(c.startswith(("mount ", "umount ")) for c in calls)
    assert not (node.root / "etc/fstab").exists() or "lustre" not in (node.root / "etc/fstab").read_text()
    assert "LNet over EFA up; the orchestrator mounts /fsx" in start.log
    (node.stub_dir / "mounted").touch()  # ParallelCluster's mount, after OnNodeStart
    (node.stub_dir / "calls.log").write_text("")
    configured = node.run("lustre-client")
    assert configured.returncode == 0, configured.log
    calls = _calls(node)
    assert not any(
        c.startswith(("umount ", "mount ", "lnetctl lnet configure", "lnetctl net add")) for c in calls
    ), calls
    assert "configured before the mount (the lustre-lnet step)" in configured.log
    assert "Lustre rides EFA" in configured.log


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
    return _ready(fsx_lustre_capacity_gib="19200", fsx_lustre_efa="true")


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
        efa_lustre_stack, _ready(fsx_lustre_capacity_gib="19200", fsx_lustre_efa="true", node_count="3")
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
    """-c fsx_lustre_capacity_gib/-c fsx_lustre_efa on the PCS stack: stock cfn-lint accepts it, and the
    compute nodes' bootstrap runs lustre-client after the EFA check with the client settings, the login
    nodes' over TCP."""
    from stacks.params import PcsParams
    from stacks.pcs_stack import EfaPcsClusterStack
    from tests.helpers import lint

    params = PcsParams.from_context(
        {"ami_id": "ami-0123456789abcdef0", "fsx_lustre_capacity_gib": "19200", "fsx_lustre_efa": "true"},
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
    assert "EFA_CDK_STEPS='efa-env,verify-efa,lustre-client,devices'" in compute
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
    assert not list((node.root / "fsx").glob(".efa-cdk-bench.*"))  # each node removed its directory
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


# ---- EKS: the FSx CSI driver's static provisioning, and LNet over EFA on the nodes ----


def _eks_lustre(
    *, itype: str = "trn1.32xlarge", zones: tuple[str, str] | None = None, groups: int = 1, **kwargs: Any
) -> tuple[Stack, Any, list[Any]]:
    """An aws_eks_v2 cluster with its kubectl provider, an EFA file system and `groups` node groups on it."""
    from efa_constructs.cdk import EfaNodegroup
    from tests.helpers import eks_cluster_with_kubectl

    stack = Stack(new_app(), "EksLustre")
    vpc = isolated_vpc(stack)
    cluster = eks_cluster_with_kubectl(stack, vpc)
    subnet = fs_subnet = vpc.isolated_subnets[0]
    if zones:  # the nodes' and the file system's subnets in these zones
        subnet, fs_subnet = (
            ec2.Subnet.from_subnet_attributes(stack, f"In{z}", subnet_id=f"subnet-0123456789abcdef{i}",
                                              availability_zone=z)
            for i, z in enumerate(zones)
        )  # fmt: skip
    lustre = EfaLustreFileSystem(stack, "Data", vpc=vpc, subnet=fs_subnet, capacity_gib=19200, efa=True)
    made = [
        EfaNodegroup(stack, f"Trainers{i}", cluster=cluster, instance_type=ec2.InstanceType(itype),
                     subnet=subnet, lustre=lustre, **kwargs)
        for i in range(groups)
    ]  # fmt: skip
    return stack, lustre, made


@pytest.fixture(scope="module")
def eks_lustre() -> dict:
    stack, _, _ = _eks_lustre()
    return assertions.Template.from_stack(stack).to_json()


def test_eks_pods_mount_it_by_a_claim_through_the_csi_driver(eks_lustre: dict) -> None:
    """Static provisioning as the FSx CSI driver's example and the EKS guide write it: a PersistentVolume of
    driver fsx.csi.aws.com naming the file system's id, DNS name and mount name, bound to the claim 'fsx';
    kept (Retain) when the claim goes; the driver's chart (kubernetes-sigs/aws-fsx-csi-driver 1.17.0)."""
    from tests.helpers import by_type

    charts = {
        c["Properties"]["Chart"]: c["Properties"] for c in by_type(eks_lustre, "Custom::AWSCDK-EKS-HelmChart")
    }
    csi = charts["aws-fsx-csi-driver"]
    assert (csi["Repository"], csi["Version"], csi["Namespace"]) == (
        "https://kubernetes-sigs.github.io/aws-fsx-csi-driver",
        "1.17.0",
        "kube-system",
    )
    (manifest,) = by_type(eks_lustre, "Custom::AWSCDK-EKS-KubernetesResource")
    (fs_id,) = _of_type(eks_lustre, "AWS::FSx::FileSystem")
    from tests.helpers import render

    dns = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
    refs = {fs_id: "fs-0123456789abcdef0", f"{fs_id}.DNSName": dns, f"{fs_id}.LustreMountName": "abcdefgh"}
    volume, claim = json.loads(render(manifest["Properties"]["Manifest"], refs))
    assert volume["kind"] == "PersistentVolume" and claim["kind"] == "PersistentVolumeClaim"
    assert volume["spec"]["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": "fs-0123456789abcdef0",
        "volumeAttributes": {
            "dnsname": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
            "mountname": "abcdefgh",
        },
    }
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert volume["spec"]["accessModes"] == claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert volume["spec"]["capacity"] == claim["spec"]["resources"]["requests"] == {"storage": "19200Gi"}
    assert (claim["metadata"]["name"], claim["metadata"]["namespace"]) == ("fsx", "default")
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"]
    assert volume["spec"]["claimRef"] == {"namespace": "default", "name": "fsx"}
    assert volume["spec"]["storageClassName"] == claim["spec"]["storageClassName"] == ""


def test_eks_nodes_are_its_efa_clients_and_wait_for_it(eks_lustre: dict) -> None:
    """The node group's EFA group and the file system's pass all traffic both ways (FSx's rule for EFA); the
    node group is created after the file system (its nodes mount it at boot); the nodes' user data part runs
    the lustre-client step with the guide's 2 interfaces of trn1, and stays under EC2's 16 KB."""
    from tests.helpers import by_type, mime_parts

    (fs_id,) = _of_type(eks_lustre, "AWS::FSx::FileSystem")
    (group_id,) = [
        k for k in _of_type(eks_lustre, "AWS::EC2::SecurityGroup") if k.startswith("Trainers0SecurityGroup")
    ]
    rules = [
        r["Properties"] for r in by_type(eks_lustre, "AWS::EC2::SecurityGroupIngress")
        if r["Properties"].get("SourceSecurityGroupId") == {"Fn::GetAtt": [group_id, "GroupId"]}
        and "DataLustreSecurityGroup" in json.dumps(r["Properties"]["GroupId"])
    ]  # fmt: skip
    assert [r["IpProtocol"] for r in rules] == ["-1"]
    (nodegroup,) = by_type(eks_lustre, "AWS::EKS::Nodegroup")
    assert fs_id in nodegroup["DependsOn"]
    (lt,) = by_type(eks_lustre, "AWS::EC2::LaunchTemplate")
    script = mime_parts(lt)["text/x-shellscript"]
    assert "EFA_CDK_STEPS='lustre-client'" in script and "EFA_CDK_LUSTRE_EFA_INTERFACES='2'" in script
    from tests.helpers import user_data

    assert len(user_data(lt).encode()) < 16 * 1024


def test_an_eks_node_role_reads_its_scripts_and_nothing_else(eks_lustre: dict) -> None:
    """The node role's policies, evaluated (iam_eval): s3:GetObject on the scripts' object, not on another
    object of the bucket, and no s3:ListBucket."""
    from tests.iam_eval import Request, allowed, role_statements

    (role,) = [k for k, v in eks_lustre["Resources"].items()
               if v["Type"] == "AWS::IAM::Role" and k.startswith("Trainers0NodeRole")]  # fmt: skip
    identity = role_statements(eks_lustre, role)
    (lt,) = [v for v in eks_lustre["Resources"].values() if v["Type"] == "AWS::EC2::LaunchTemplate"]
    from tests.helpers import mime_parts

    url = re.search(r"EFA_CDK_SCRIPTS_URL='s3://([^/]+)/([^']+)'", mime_parts(lt)["text/x-shellscript"])
    assert url is not None
    bucket, key = url.groups()
    assert allowed(Request(role, "s3:GetObject", f"arn:aws:s3:::{bucket}/{key}"), identity, [])
    assert not allowed(Request(role, "s3:GetObject", f"arn:aws:s3:::{bucket}/other.zip"), identity, [])
    assert not allowed(Request(role, "s3:ListBucket", f"arn:aws:s3:::{bucket}"), identity, [])


def test_the_eks_lustre_stack_is_stock_cfn_lint_clean_in_its_own_resources(eks_lustre: dict) -> None:
    from tests.helpers import lint

    ours = ("Trainers", "Data", "FsxCsiDriver", "LustreVolume")
    assert [f for f in lint(eks_lustre, stock=True) if any(o in f for o in ours)] == []


def test_two_eks_node_groups_share_one_driver_and_one_claim() -> None:
    stack, _, _ = _eks_lustre(groups=2)
    t = assertions.Template.from_stack(stack).to_json()
    from tests.helpers import by_type

    assert [c["Properties"]["Chart"] for c in by_type(t, "Custom::AWSCDK-EKS-HelmChart")].count(
        "aws-fsx-csi-driver"
    ) == 1
    assert len(by_type(t, "Custom::AWSCDK-EKS-KubernetesResource")) == 1


@pytest.mark.parametrize(
    ("kwargs", "code", "says"),
    [
        ({"itype": "trn2.48xlarge"}, "efa-cdk:fsx-efa-client-type", "serves no trn2 client over EFA"),
        ({"zones": ("us-east-1c", "us-east-1d")}, "efa-cdk:fsx-efa-zone", "Availability Zone only"),
        ({"lustre_claim": "Training_Data"}, "efa-cdk:eks-lustre-claim-name", "lustre_claim='Training_Data'"),
        ({"lustre_namespace": "-ml"}, "efa-cdk:eks-lustre-claim-name", "DNS-1123 labels"),
    ],
)
def test_an_eks_node_group_refuses_a_mount_that_cannot_work(kwargs: dict, code: str, says: str) -> None:
    with pytest.raises(EfaConfigError) as err:
        _eks_lustre(**kwargs)
    assert err.value.code == code and says in str(err.value), str(err.value)


def test_an_eks_claim_names_one_file_system_and_needs_the_kubectl_provider() -> None:
    from aws_cdk import aws_eks_v2 as eks

    from efa_constructs.cdk import EfaNodegroup

    stack, lustre, _ = _eks_lustre()
    vpc = lustre.node.scope.node.find_child("Vpc")
    other = EfaLustreFileSystem(stack, "Other", vpc=vpc, subnet=vpc.isolated_subnets[0], capacity_gib=19200,
                                efa=True)  # fmt: skip
    cluster = stack.node.find_child("Cluster")
    with pytest.raises(EfaConfigError) as err:
        EfaNodegroup(stack, "More", cluster=cluster, instance_type=ec2.InstanceType("trn1.32xlarge"),
                     subnet=vpc.isolated_subnets[0], lustre=other)  # fmt: skip
    assert err.value.code == "efa-cdk:eks-lustre-claim-taken" and "EksLustre/Data" in str(err.value)
    isolated = [ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)]
    nodegroup = eks.DefaultCapacityType.NODEGROUP
    bare = eks.Cluster(stack, "Bare", version=eks.KubernetesVersion.V1_35, vpc=vpc, default_capacity=0,
                       default_capacity_type=nodegroup, vpc_subnets=isolated)  # fmt: skip
    with pytest.raises(EfaConfigError) as err:
        EfaNodegroup(stack, "NoKubectl", cluster=bare, instance_type=ec2.InstanceType("trn1.32xlarge"),
                     subnet=vpc.isolated_subnets[0], lustre=lustre, device_plugin=False)  # fmt: skip
    assert err.value.code == "efa-cdk:eks-no-kubectl-provider" and "FSx for Lustre CSI driver" in str(
        err.value
    )


def _eks_node(tmp_path: Path, template: dict, **env: str) -> tuple[Node, subprocess.CompletedProcess[str]]:
    """The EKS node group's own user data part, as EC2 hands it over, run on a scratch node: efa-cdk's
    bootstrap fetches the node scripts (an `aws` stand-in copying their zip) and runs lustre-client against
    the stand-ins of Lustre's tools; systemctl is a stand-in that records what it is asked."""
    import shutil

    from tests.helpers import mime_parts

    node = _lustre_node(tmp_path, **env)
    archive = node.stub_dir / "downloads" / "scripts.zip"
    shutil.make_archive(str(archive.with_suffix("")), "zip", node.bin)
    shutil.rmtree(node.bin)
    executable(
        node.stub_dir / "bin" / "aws", f'#!{BASH}\ncp "$STUB_DIR/downloads/scripts.zip" "${{@: -1}}"\n'
    )
    (fs_id,) = _of_type(template, "AWS::FSx::FileSystem")
    refs = {f"{fs_id}.DNSName": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
            f"{fs_id}.LustreMountName": "abcdefgh"}  # fmt: skip
    (lt,) = [v for v in template["Resources"].values() if v["Type"] == "AWS::EC2::LaunchTemplate"]
    part = tmp_path / "eks-part.sh"
    part.write_text(mime_parts(lt, refs)["text/x-shellscript"])
    run = subprocess.run([BASH, str(part)], env=node.env, capture_output=True, text=True, timeout=60)
    return node, run


def test_an_eks_node_mounts_it_over_efa_and_joins(tmp_path: Path, eks_lustre: dict) -> None:
    node, run = _eks_node(tmp_path, eks_lustre)
    assert run.returncode == 0, run.stdout + run.stderr
    calls = _calls(node)
    assert "lnetctl udsp add --src efa --priority 0" in calls and "mount /fsx" in calls
    assert not [c for c in calls if "nodeadm-run" in c]
    assert "Lustre rides EFA" in (node.root / "var/log/efa-cdk.log").read_text()
    assert "EFA_CDK_STACK" not in (node.root / "etc/efa-cdk/node.env").read_text()  # nothing to signal on EKS


def test_an_eks_node_where_lustre_fails_never_joins(tmp_path: Path, eks_lustre: dict) -> None:
    """A failed lustre-client (an EFA driver older than 2.12.1) keeps nodeadm-run.service, which starts
    kubelet after cloud-init's scripts, from starting: disabled for later boots, its queued start stopped."""
    node, run = _eks_node(tmp_path, eks_lustre, STUB_EFA_DRIVER="2.10.0")
    assert run.returncode == 1
    assert "EFA driver 2.12.1 or later" in run.stdout + run.stderr
    assert "nodeadm-run.service is held, so this node does not join the cluster" in run.stderr
    held = [c for c in _calls(node) if c.startswith("systemctl") and "nodeadm-run" in c]
    assert held == ["systemctl disable nodeadm-run.service", "systemctl stop --no-block nodeadm-run.service"]


# ---- GPUDirect Storage (FSx for Lustre user guide, "configure-efa-clients"; NVIDIA's gdscheck) ----

GDS_FIXTURES = Path(__file__).parent / "fixtures" / "gds"


def _gdscheck(name: str) -> str:
    return (GDS_FIXTURES / name).read_text()


def test_gdscheck_as_nvidias_guide_prints_it_is_ready_for_fsx() -> None:
    """NVIDIA's own sample (GDS 1.16.0.49, nvidia_fs 2.27, FSx Lustre Supported, one L4 that supports GDS)."""
    from efa_constructs.node import gds

    check = gds.parse(_gdscheck("gdscheck-p-nvidia-guide.txt"))
    assert (check.release, check.nvidia_fs, check.fsx_lustre, check.gpus, check.verified) == (
        "1.16.0.49",
        (2, 27),
        "Supported",
        1,
        True,
    )
    assert check.problems(gpus=1) == []
    assert check.problems(gpus=8) == ["1 of 8 GPUs support GDS"]  # a p5 missing seven of its GPUs


def test_gdscheck_of_an_old_gds_names_its_problem() -> None:
    """A recorded GDS 1.0 (nvidia_fs 2.7): older than FSx's 2.24.2. It prints no FSx Lustre line (no release
    before 1.16 does): that alone is no problem."""
    from efa_constructs.node import gds

    check = gds.parse(_gdscheck("gdscheck-p-quadro-p1000.txt"))
    assert check.fsx_lustre == "" and check.problems(gpus=1) == ["nvidia_fs 2.7 is older than 2.24.2"]


def test_gdscheck_of_gds_1_14_at_fsxs_driver_floor_is_ready() -> None:
    """Issue 53 items 3-4: a recorded GDS 1.14 (luigifcruz/stelline, four RTX 6000 Ada) prints nvidia_fs 2.24,
    major.minor as every release does, and no FSx Lustre line. 2.24 is FSx's floor (2.24.2) at the precision
    gdscheck prints; one minor below is not."""
    from efa_constructs.node import gds

    text = _gdscheck("gdscheck-p-1.14-rtx6000ada.txt")
    check = gds.parse(text)
    assert (check.release, check.nvidia_fs, check.fsx_lustre, check.gpus_with_gds) == (
        "1.14.0.30",
        (2, 24),
        "",
        4,
    )
    assert check.problems(gpus=4) == []
    older = gds.parse(text.replace("nvidia_fs version:  2.24", "nvidia_fs version:  2.23"))
    assert older.problems(gpus=4) == ["nvidia_fs 2.23 is older than 2.24.2"]
    assert gds.parse(text.replace("2.24 libcufile", "2.24.1 libcufile")).problems(gpus=4) == [
        "nvidia_fs 2.24.1 is older than 2.24.2"  # where a release prints three parts, all three count
    ]


@pytest.mark.parametrize(
    ("line", "ready"),
    [
        ("FSx Lustre : Supported", True),
        ("FSx Lustre : nvfs, compat", True),  # GDS 1.16's modes: nvfs is the direct path
        ("FSx Lustre : compat", False),  # the CPU path alone
        ("FSx Lustre : Unsupported", False),
    ],
)
def test_gdscheck_reads_the_fsx_line_in_either_form(line: str, ready: bool) -> None:
    from efa_constructs.node import gds

    text = _gdscheck("gdscheck-p-nvidia-guide.txt").replace("FSx Lustre : Supported", line)
    assert (gds.parse(text).problems(gpus=1) == []) is ready


def test_gdscheck_refuses_a_gpu_without_gds_and_a_failed_platform() -> None:
    from efa_constructs.node import gds

    text = _gdscheck("gdscheck-p-nvidia-guide.txt").replace(" supports GDS,", ",")
    text = text.replace("Platform verification succeeded", "Platform verification error")
    assert gds.parse(text).problems(gpus=1) == [
        "0 of 1 GPUs support GDS",
        "the platform verification did not succeed",
    ]


def _gds_node(tmp_path: Path, fixture: str, gpus: str = "1", **env: str) -> Node:
    """A p5 node whose file system asks for GDS; gdscheck prints `fixture`."""
    node = _lustre_node(
        tmp_path, "p5.48xlarge", "8", {"EFA_CDK_LUSTRE_GDS": "1", "EFA_CDK_ACCELERATOR_COUNT": gpus}, **env
    )
    executable(
        node.root / "usr/local/cuda/gds/tools/gdscheck",
        f'#!{BASH}\necho "gdscheck $*" >>"$STUB_DIR/calls.log"\ncat {GDS_FIXTURES / fixture}\n',
    )
    return node


def test_a_gds_client_loads_nvidia_fs_before_lustre_and_passes_gdscheck(tmp_path: Path) -> None:
    node = _gds_node(tmp_path, "gdscheck-p-nvidia-guide.txt", STUB_NVFS="2.28.4")
    run = node.run("lustre-client")
    assert run.returncode == 0, run.log
    calls = _calls(node)
    assert calls.index("modprobe nvidia_fs") < calls.index("modprobe lnet") < calls.index("gdscheck -p")
    assert not any(c.startswith(("git ", "make")) for c in calls)  # the image's driver is recent enough
    assert "GPUDirect Storage: nvidia_fs 2.27, FSx Lustre supported, 1 of 1 GPUs support GDS" in run.log


def test_a_gds_client_that_gdscheck_does_not_pass_fails_with_the_reason(tmp_path: Path) -> None:
    eight = _gds_node(tmp_path / "eight", "gdscheck-p-nvidia-guide.txt", gpus="8", STUB_NVFS="2.28.4")
    assert eight.run("lustre-client").returncode == 1
    failure = (eight.root / "var/lib/efa-cdk/failure").read_text()
    assert failure == "GPUDirect Storage is not ready: 1 of 8 GPUs support GDS\n"
    old = _gds_node(tmp_path / "old", "gdscheck-p-quadro-p1000.txt", STUB_NVFS="2.28.4")
    assert old.run("lustre-client").returncode == 1
    assert "nvidia_fs 2.7 is older than 2.24.2" in (old.root / "var/lib/efa-cdk/failure").read_text()


#: git's stand-in: `clone` makes the tree (src/), `rev-parse HEAD` says STUB_COMMIT (default: the pin).
GIT = r"""
case "$*" in
  clone*) mkdir -p "${@: -1}/src" ;;
  *rev-parse*) echo "${STUB_COMMIT:-d0eda4943d01ef244e35035bad39d6ba20906b5b}" ;;
esac
"""


def test_a_gds_client_without_nvidia_fs_builds_the_pinned_source_as_fsx_documents(tmp_path: Path) -> None:
    """No nvidia-fs on the image: the pinned tag is cloned, checked against its commit and built with the
    FSx guide's NVFS_MAX_PEER_DEVS=128 NVFS_MAX_PCI_DEPTH=16, installed, and loaded at every boot."""
    node = _gds_node(tmp_path, "gdscheck-p-nvidia-guide.txt")
    executable(node.stub_dir / "bin" / "git", f'#!{BASH}\necho "git $*" >>"$STUB_DIR/calls.log"\n{GIT}')
    executable(
        node.stub_dir / "bin" / "make",
        f"#!{BASH}\n"
        'echo "make $* peers=$NVFS_MAX_PEER_DEVS depth=$NVFS_MAX_PCI_DEPTH" >>"$STUB_DIR/calls.log"\n',
    )
    executable(node.stub_dir / "bin" / "apt-get", f'#!{BASH}\necho "apt-get $*" >>"$STUB_DIR/calls.log"\n')
    run = node.run("lustre-client")
    assert run.returncode == 0, run.log
    calls = _calls(node)
    clone = next(c for c in calls if c.startswith("git clone"))
    assert "--branch v2.28.4 https://github.com/NVIDIA/gds-nvidia-fs.git" in clone
    assert "make  peers=128 depth=16" in calls and "make install peers=128 depth=16" in calls
    assert (node.root / "etc/modules-load.d/efa-cdk-nvidia-fs.conf").read_text() == "nvidia_fs\n"
    # another commit under the tag: not built
    moved = _gds_node(tmp_path / "moved", "gdscheck-p-nvidia-guide.txt", STUB_COMMIT="0" * 40)
    for name, body in (("git", GIT), ("make", ""), ("apt-get", "")):
        executable(moved.stub_dir / "bin" / name, f"#!{BASH}\n{body}")
    assert moved.run("lustre-client").returncode == 1
    assert (
        "not the pinned d0eda4943d01ef244e35035bad39d6ba20906b5b"
        in (moved.root / "var/lib/efa-cdk/failure").read_text()
    )


def test_gds_is_asked_of_efa_clients_of_the_types_fsx_names() -> None:
    """GDS needs EFA and a P5, P5e, P5en, P6-B200 or P6e-GB200 client (issue 53 item 7: P6e-GB200 was
    refused); the settings carry it only when asked (a file system without GDS keeps its nodes' settings)."""
    with pytest.raises(EfaConfigError) as err:
        LustreSpec(19200, efa=False, gds=True).check()
    assert err.value.code == "efa-cdk:fsx-gds-needs-efa"
    for itype in ("p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p6e-gb200.36xlarge"):
        LustreSpec(19200, efa=True, gds=True).check_clients(instance_type(itype), 4)
    with pytest.raises(EfaConfigError) as err:
        LustreSpec(19200, efa=True, gds=True).check_clients(instance_type("trn1.32xlarge"), 4)
    assert err.value.code == "efa-cdk:fsx-gds-client-type" and "P6-B200 and P6e-GB200" in str(err.value)
    stack = Stack(new_app(), "Gds")
    vpc = isolated_vpc(stack)
    subnet = vpc.isolated_subnets[0]
    with_gds = EfaLustreFileSystem(stack, "A", vpc=vpc, subnet=subnet, capacity_gib=19200, efa=True, gds=True)
    without = EfaLustreFileSystem(stack, "B", vpc=vpc, subnet=subnet, capacity_gib=19200, efa=True)
    p5 = instance_type("p5.48xlarge")
    assert with_gds.client_settings(p5)["EFA_CDK_LUSTRE_GDS"] == "1"
    assert "EFA_CDK_LUSTRE_GDS" not in without.client_settings(p5)


def test_an_eks_node_group_refuses_a_gds_file_system() -> None:
    """The EKS-optimized AMIs have no GDS driver (awslabs/amazon-eks-ami#2181 is open)."""
    from efa_constructs.cdk import EfaNodegroup

    stack, _, _ = _eks_lustre(itype="p5.48xlarge")
    vpc, cluster = stack.node.find_child("Vpc"), stack.node.find_child("Cluster")
    gds_fs = EfaLustreFileSystem(stack, "Gds", vpc=vpc, subnet=vpc.isolated_subnets[0], capacity_gib=19200,
                                 efa=True, gds=True)  # fmt: skip
    with pytest.raises(EfaConfigError) as err:
        EfaNodegroup(stack, "GdsNodes", cluster=cluster, subnet=vpc.isolated_subnets[0], lustre=gds_fs,
                     instance_type=ec2.InstanceType("p5.48xlarge"), lustre_claim="gds")  # fmt: skip
    assert err.value.code == "efa-cdk:eks-lustre-gds"


# ---- a file system that exists: EfaLustreFileSystem.from_file_system_attributes ----

EXISTING = {
    "file_system_id": "fs-0123456789abcdef0",
    "dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
    "mount_name": "abcdefgh",
    "capacity_gib": 19200,
    "efa": True,
}


def _existing(stack: Stack, zone: str = "us-east-1c", **kwargs: Any) -> EfaLustreFileSystem:
    group = ec2.SecurityGroup.from_security_group_id(stack, "FsGroup", "sg-0123456789abcdef0")
    return EfaLustreFileSystem.from_file_system_attributes(
        stack, "Existing", security_group=group, availability_zone=zone, **{**EXISTING, **kwargs}
    )


def test_an_existing_file_system_is_mounted_and_left_alone() -> None:
    """EfaCluster with a file system made outside the app: nothing of it in the template but the rules between
    its group and the nodes' (all traffic both ways: EFA), and the nodes' settings name it; stock cfn-lint
    accepts the template."""
    from aws_cdk import Environment

    from efa_constructs import EfaCluster, EfaNetwork
    from tests.helpers import by_type, lint, user_data

    stack = Stack(new_app(), "Existing", env=Environment(region="us-east-1"))
    net = EfaNetwork(stack, "Net", availability_zone="us-east-1c")
    EfaCluster(stack, "C", instance_type=ec2.InstanceType("trn1.32xlarge"), vpc=net.vpc,
               subnet=net.private_subnet, lustre=_existing(stack))  # fmt: skip
    t = assertions.Template.from_stack(stack).to_json()
    assert not by_type(t, "AWS::FSx::FileSystem")
    into_fs = [r["Properties"] for r in by_type(t, "AWS::EC2::SecurityGroupIngress")
               if r["Properties"]["GroupId"] == "sg-0123456789abcdef0"]  # fmt: skip
    assert [r["IpProtocol"] for r in into_fs] == ["-1"]
    from_fs = [r["Properties"] for r in by_type(t, "AWS::EC2::SecurityGroupIngress")
               if r["Properties"].get("SourceSecurityGroupId") == "sg-0123456789abcdef0"]  # fmt: skip
    assert [r["IpProtocol"] for r in from_fs] == ["-1"]
    (lt,) = by_type(t, "AWS::EC2::LaunchTemplate")
    script = user_data(lt)
    assert f"EFA_CDK_LUSTRE_DNS='{EXISTING['dns_name']}'" in script
    assert "EFA_CDK_LUSTRE_MOUNT_NAME='abcdefgh'" in script
    assert lint(t, stock=True) == []


def test_an_immutable_file_system_group_is_left_unchanged_and_the_rules_it_needs_are_said() -> None:
    """Issue 60: a file system's group imported with mutable=False ("not to be changed") was accepted
    silently. Now nothing is written on it (no rule names it as its group), the clients' own rules are, and a
    warning says the two rules its owner must add, and where."""
    from aws_cdk import Environment

    from efa_constructs import EfaCluster, EfaNetwork
    from tests.helpers import by_type

    stack = Stack(new_app(), "Immutable", env=Environment(region="us-east-1"))
    group = ec2.SecurityGroup.from_security_group_id(stack, "FsGroup", "sg-0123456789abcdef0", mutable=False)
    fs = EfaLustreFileSystem.from_file_system_attributes(
        stack, "Existing", security_group=group, availability_zone="us-east-1c", **EXISTING
    )
    net = EfaNetwork(stack, "Net", availability_zone="us-east-1c")
    EfaCluster(stack, "C", instance_type=ec2.InstanceType("trn1.32xlarge"), vpc=net.vpc,
               subnet=net.private_subnet, lustre=fs)  # fmt: skip
    t = assertions.Template.from_stack(stack).to_json()
    rules = [*by_type(t, "AWS::EC2::SecurityGroupIngress"), *by_type(t, "AWS::EC2::SecurityGroupEgress")]
    assert not [r for r in rules if r["Properties"]["GroupId"] == "sg-0123456789abcdef0"]
    assert [r for r in rules if r["Properties"].get("SourceSecurityGroupId") == "sg-0123456789abcdef0"]
    (warning,) = assertions.Annotations.from_stack(stack).find_warning(
        "*", assertions.Match.string_like_regexp("efa-cdk:lustre-group-immutable")
    )
    said = str(warning.entry.data)
    assert "imported with mutable=False" in said and "all traffic (EFA)" in said and "Immutable/C" in said
    # the same group, mutable: its rules are written (the probe leaves no rule of its own behind)
    t = assertions.Template.from_stack(_mutable_cluster()).to_json()
    rules = [*by_type(t, "AWS::EC2::SecurityGroupIngress"), *by_type(t, "AWS::EC2::SecurityGroupEgress")]
    on_fs = [r["Properties"] for r in rules if r["Properties"]["GroupId"] == "sg-0123456789abcdef0"]
    assert len(on_fs) == 2 and not [r for r in on_fs if r.get("CidrIp") == "192.0.2.1/32"]


def _mutable_cluster() -> Stack:
    from aws_cdk import Environment

    from efa_constructs import EfaCluster, EfaNetwork

    stack = Stack(new_app(), "Mutable", env=Environment(region="us-east-1"))
    net = EfaNetwork(stack, "Net", availability_zone="us-east-1c")
    EfaCluster(stack, "C", instance_type=ec2.InstanceType("trn1.32xlarge"), vpc=net.vpc,
               subnet=net.private_subnet, lustre=_existing(stack))  # fmt: skip
    return stack


def test_an_existing_file_system_mounts_where_it_is_told() -> None:
    """Issue 60 (a hidden mutant lived here): from_file_system_attributes' mount_dir reaches the nodes."""
    from aws_cdk import Environment

    from efa_constructs import EfaCluster, EfaNetwork
    from tests.helpers import by_type, user_data

    stack = Stack(new_app(), "Where", env=Environment(region="us-east-1"))
    net = EfaNetwork(stack, "Net", availability_zone="us-east-1c")
    EfaCluster(stack, "C", instance_type=ec2.InstanceType("trn1.32xlarge"), vpc=net.vpc,
               subnet=net.private_subnet, lustre=_existing(stack, mount_dir="/datasets"))  # fmt: skip
    (lt,) = by_type(assertions.Template.from_stack(stack).to_json(), "AWS::EC2::LaunchTemplate")
    assert "EFA_CDK_LUSTRE_DIR='/datasets'" in user_data(lt)


def test_an_existing_file_system_keeps_fsxs_rules() -> None:
    """Its attributes are checked as a made one's: EFA clients in its zone; a size FSx does not make."""
    from efa_constructs import EfaCluster, EfaNetwork

    stack = Stack(new_app(), "Rules")
    net = EfaNetwork(stack, "Net", availability_zone="us-east-1c")
    with pytest.raises(EfaConfigError) as err:
        EfaCluster(stack, "C", instance_type=ec2.InstanceType("trn1.32xlarge"), vpc=net.vpc,
                   subnet=net.private_subnet, lustre=_existing(stack, "us-east-1d"))  # fmt: skip
    assert err.value.code == "efa-cdk:fsx-efa-zone"
    with pytest.raises(EfaConfigError) as err:
        _existing(Stack(new_app(), "Size"), capacity_gib=2400)
    assert err.value.code == "efa-cdk:fsx-efa-capacity-step"


def test_parallelcluster_mounts_an_existing_file_system_by_its_id() -> None:
    """ParallelCluster's SharedStorage names the file system's id at its mount directory; the compute nodes'
    lustre-client step gets it (EFA); with fsx_lustre_capacity_gib as well it is refused."""
    from efa_constructs.cdk import EfaParallelCluster

    stack = Stack(new_app(), "Pc")
    vpc = isolated_vpc(stack)
    subnet = ec2.Subnet.from_subnet_attributes(
        stack, "Nodes", subnet_id="subnet-0123456789abcdef0", availability_zone="us-east-1c"
    )
    trn1 = ec2.InstanceType("trn1.32xlarge")
    cluster = EfaParallelCluster(stack, "P", vpc=vpc, compute_subnet=subnet, head_node_subnet=subnet,
                                 instance_type=trn1, lustre=_existing(stack))  # fmt: skip
    config = cluster.config.to_dict()
    lustre = [s for s in config["SharedStorage"] if s["StorageType"] == "FsxLustre"]
    assert lustre == [{"MountDir": "/fsx", "Name": "lustre", "StorageType": "FsxLustre",
                       "FsxLustreSettings": {"FileSystemId": "fs-0123456789abcdef0"}}]  # fmt: skip
    (queue,) = config["Scheduling"]["SlurmQueues"]
    args = queue["CustomActions"]["OnNodeConfigured"]["Args"]
    assert f"EFA_CDK_LUSTRE_DNS={EXISTING['dns_name']}" in args and "EFA_CDK_LUSTRE_EFA_INTERFACES=2" in args
    from tests.helpers import by_type

    ingress = by_type(assertions.Template.from_stack(stack).to_json(), "AWS::EC2::SecurityGroupIngress")
    assert [
        r["Properties"]["IpProtocol"] for r in ingress if r["Properties"]["GroupId"] == "sg-0123456789abcdef0"
    ] == ["-1"]  # the cluster's group admitted, all traffic (EFA)
    with pytest.raises(EfaConfigError) as err:
        EfaParallelCluster(Stack(new_app(), "Two"), "P", availability_zone="us-east-1c",
                           instance_type=ec2.InstanceType("trn1.32xlarge"), fsx_lustre_capacity_gib=1200,
                           lustre=_existing(Stack(new_app(), "Other")))  # fmt: skip
    assert err.value.code == "efa-cdk:lustre-given-and-made"


def test_pcs_nodes_mount_an_existing_file_system() -> None:
    """EfaPcsCluster(lustre=): the compute nodes' bootstrap runs lustre-client with the given file system over
    EFA, the login nodes' over TCP, the cluster's group admitted; refused beside fsx_lustre_capacity_gib."""
    from efa_constructs import EfaPcsCluster
    from tests.helpers import by_type

    stack = Stack(new_app(), "Pcs")
    vpc = isolated_vpc(stack)
    subnet = ec2.Subnet.from_subnet_attributes(
        stack, "Nodes", subnet_id="subnet-0123456789abcdef0", availability_zone="us-east-1c"
    )
    EfaPcsCluster(stack, "C", machine_image=pcs_image(), vpc=vpc, subnet=subnet,
                  instance_type=ec2.InstanceType("trn1.32xlarge"), lustre=_existing(stack))  # fmt: skip
    t = assertions.Template.from_stack(stack).to_json()
    assert not by_type(t, "AWS::FSx::FileSystem")
    compute, login = (
        json.dumps(r["Properties"]["LaunchTemplateData"]["UserData"])
        for k, r in sorted(_of_type(t, "AWS::EC2::LaunchTemplate").items())
        if k.startswith(("CComputeTemplate", "CLoginTemplate"))
    )
    assert f"EFA_CDK_LUSTRE_DNS='{EXISTING['dns_name']}'" in compute
    assert "EFA_CDK_STEPS='efa-env,verify-efa,lustre-client,devices'" in compute
    assert "EFA_CDK_LUSTRE_EFA_INTERFACES='2'" in compute and "EFA_CDK_LUSTRE_EFA_INTERFACES='0'" in login
    assert any(
        r["Properties"]["GroupId"] == "sg-0123456789abcdef0"
        for r in by_type(t, "AWS::EC2::SecurityGroupIngress")
    )
    with pytest.raises(EfaConfigError) as err:
        EfaPcsCluster(Stack(new_app(), "Two"), "C", machine_image=pcs_image(),
                      availability_zone="us-east-1c", instance_type=ec2.InstanceType("trn1.32xlarge"),
                      fsx_lustre_capacity_gib=1200, lustre=_existing(Stack(new_app(), "Other")))  # fmt: skip
    assert err.value.code == "efa-cdk:lustre-given-and-made"


def test_the_lustre_proof_writes_only_in_a_new_directory_of_roots(tmp_path: Path) -> None:
    """Issue 53 item 13: the client's proof writes as root into the file system, where users write too. It
    writes into a directory it makes new (mktemp -d: root's, 0700, a name no one foresees), never through a
    name a user could plant a link at (the old `.efa-cdk-lnet-probe.<host>`), and removes it."""
    import re

    node = _lustre_node(tmp_path)
    (node.root / "fsx").mkdir(parents=True)
    run = node.run("lustre-client")
    assert run.returncode == 0, run.log
    (write,) = [c for c in _calls(node) if c.startswith("dd if=/dev/zero")]
    target = re.search(r"of=(\S+)", write).group(1)  # type: ignore[union-attr]
    # through the directory's open descriptor (issue 60 item 7: its name could be swapped for a link)
    assert re.fullmatch(r"/proc/self/fd/\d+/probe", target), target
    assert not list((node.root / "fsx").glob(".efa-cdk-lnet-probe*"))  # removed


def test_the_storage_benchmark_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    """Issue 53 item 13: links a user put where the benchmark once wrote (/fsx/efa-cdk-bench/<host>) are not
    followed: each node writes in a directory it made new, and removes it."""
    import socket
    import subprocess

    node = _bench_leader(tmp_path)
    secret = node.root / "etc-shadow"
    secret.write_text("root:hash\n")
    planted = node.root / "fsx/efa-cdk-bench"
    planted.mkdir(parents=True)
    for host in (socket.gethostname(), "10.0.1.10", "10.0.1.11"):  # the leader's name, and the stand-ins'
        (planted / host).symlink_to(secret)
    run = subprocess.run(
        [BASH, str(node.bin / "lustre-bench.sh")], env=node.env, capture_output=True, text=True
    )
    assert run.returncode == 0 and json.loads(run.stdout)["ok"], run.stdout + run.stderr
    assert secret.read_text() == "root:hash\n"
    assert not list((node.root / "fsx").glob(".efa-cdk-bench.*"))


@pytest.mark.parametrize("when", ["after it is made", "between the write and the read"])
def test_the_benchmarks_directory_swapped_for_a_link_is_never_written_or_read_through(
    tmp_path: Path, when: str
) -> None:
    """Issue 60 item 7: on a world-writable /fsx without the sticky bit a user may rename root's fresh
    directory and put a link to a root folder in its place (170 of 200 races won against the old script,
    which then zeroed that folder's `data`). The race is won here every time: the link is put in place right
    after mktemp makes the directory, or between the write phase and the read; the node refuses, says so,
    and the root folder's file keeps its bytes."""
    import os
    import subprocess

    node = _bench_leader(tmp_path)
    fsx = node.root / "fsx"
    os.chmod(fsx, 0o777)  # world-writable, no sticky bit
    victim = node.root / "root-only"
    victim.mkdir(mode=0o700)
    os.chmod(victim, 0o700)
    (victim / "data").write_bytes(b"root's own\n")

    def swap(run: Path) -> None:
        run.rename(run.with_name(run.name + ".moved"))
        run.symlink_to(victim)

    stub = node.stub_dir / "bin"
    if when == "after it is made":  # mktemp makes the directory, the user wins the race at once
        executable(stub / "mktemp", f'#!{BASH}\nd=$(/usr/bin/mktemp "$@") || exit 1\n'
                   'mv "$d" "$d.moved" && ln -s ' f'{victim} "$d"\necho "$d"\n')  # fmt: skip
        phases = ["write"]
    else:
        phases = ["write", "read"]
    env = {**node.env, "STUB_HOSTNAME": "10.0.1.10"}
    runs = []
    for phase in phases:
        if phase == "read":
            (made,) = [p for p in fsx.glob(".efa-cdk-bench.*") if not p.name.endswith(".moved")]
            swap(made)
        argv = [BASH, str(node.bin / "lustre-bench.sh"), "--node", phase]
        runs.append(subprocess.run(argv, env=env, capture_output=True, text=True))
    last = runs[-1]
    said = (
        "is not the directory this run made" if when == "after it is made" else "is no longer the directory"
    )
    assert last.returncode == 1 and said in last.stderr, last.stdout + last.stderr
    assert (victim / "data").read_bytes() == b"root's own\n"
    assert sorted(p.name for p in victim.iterdir()) == ["data"]


def test_a_storage_refusal_in_a_ready_stack_names_its_context_key() -> None:
    """Issue 53 item 18: through a ready stack, the refusals of FSx's rules name the -c key to change (they
    named only the construct's efa=False / gds=False); in a user's own app they do not."""
    cases = [
        (lambda: LustreSpec(19200, efa=True).check_clients(instance_type("trn2.48xlarge"), 2),
         "(-c fsx_lustre_efa=false)"),
        (lambda: LustreSpec(19200, efa=True, gds=True).check_clients(instance_type("trn1.32xlarge"), 2),
         "(-c fsx_lustre_gds=false)"),
        (lambda: LustreSpec(2400, efa=True).check(),
         "(-c fsx_lustre_capacity_gib=19200, or -c fsx_lustre_efa=false)"),
        (lambda: LustreSpec(19200, gds=True).check(), "(-c fsx_lustre_efa=true, or drop -c fsx_lustre_gds)"),
    ]  # fmt: skip
    for refuse, says in cases:
        with pytest.raises(EfaConfigError) as err:
            refuse()
        assert says in str(err.value.in_stack("P5EfaCluster")) and " -c " not in str(err.value), str(
            err.value
        )


def test_each_nodes_storage_figures_are_dds_bytes_over_its_seconds(tmp_path: Path) -> None:
    """GNU dd's own summary lines (coreutils 9, as `dd ... 2>&1 | tail -1` prints them): GB/s is bytes over
    seconds over 1e9, per direction, with the bytes kept."""
    (tmp_path / "n1.write").write_text("67108864 bytes (67 MB, 64 MiB) copied, 0.5 s, 134 MB/s\n")
    (tmp_path / "n1.read").write_text("134217728 bytes (134 MB, 128 MiB) copied, 0.25 s, 537 MB/s\n")
    figures = lnet._node_figures(tmp_path, ["n1"])
    assert figures == {
        "n1": {"write": 67108864 / 0.5 / 1e9, "read": 134217728 / 0.25 / 1e9, "write_bytes": 67108864,
               "read_bytes": 134217728}
    }  # fmt: skip


def _lustre_rules(template: dict) -> set[tuple[str, str, int, int]]:
    """The rules on the file system's own group that efa-cdk writes: (description, protocol, from, to)."""
    kinds = ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")
    return {
        (p["Description"], p["IpProtocol"], p.get("FromPort", -1), p.get("ToPort", -1))
        for r in template["Resources"].values()
        if r["Type"] in kinds and (p := r["Properties"])["Description"].startswith("Lustre")
    }


def test_the_file_systems_group_opens_lustres_ports_and_no_more() -> None:
    """FSx for Lustre user guide, "limit-access-security-groups": TCP 988 and 1018-1023, between the file
    system's servers and to and from its clients; with EFA all traffic to and from the clients
    ("efa-file-systems"), the servers' group open to itself (all traffic: no TCP-port rules beside it)."""
    tcp = {(d, "tcp", lo, hi) for d in ("Lustre", "Lustre to the cluster", "Lustre servers")
           for lo, hi in ((988, 988), (1018, 1023))}  # fmt: skip
    assert _lustre_rules(_storage(False, gib=2400)) == tcp
    efa = {"Lustre servers over EFA", "Lustre over EFA and TCP", "Lustre over EFA and TCP to the cluster"}
    assert _lustre_rules(_storage(True)) == {(d, "-1", -1, -1) for d in efa}


def test_a_given_file_system_is_held_to_the_client_rules_and_one_asked_for_is_tcp_by_default() -> None:
    """lustre= goes through the node rules as a made one does: Nitro v3 nodes (p4d) are refused over EFA (FSx
    for Lustre user guide, configure-efa-clients); a file system asked for by its size alone serves TCP
    (StorageOptions: fsx_lustre_efa defaults to False, "efa-file-systems": EFA is chosen at creation)."""
    from efa_constructs import EfaCluster, EfaPcsCluster

    stack = Stack(new_app(), "Given")
    vpc = isolated_vpc(stack)
    subnet = vpc.isolated_subnets[0]
    fs = EfaLustreFileSystem(stack, "Fsx", vpc=vpc, subnet=subnet, capacity_gib=19200, efa=True)
    with pytest.raises(EfaConfigError) as e:
        EfaCluster(
            stack, "P4d", vpc=vpc, subnet=subnet, instance_type=ec2.InstanceType("p4d.24xlarge"), lustre=fs
        )
    assert e.value.code == "efa-cdk:fsx-efa-client-type"
    with pytest.raises(EfaConfigError) as e:  # PCS and ParallelCluster admit it beside the storage they make
        EfaPcsCluster(stack, "Pcs", vpc=vpc, subnet=subnet, instance_type=ec2.InstanceType("p4d.24xlarge"),
                      machine_image=pcs_image(), lustre=fs)  # fmt: skip
    assert e.value.code == "efa-cdk:fsx-efa-client-type"
    (made,) = _of_type(_storage_sized(2400), "AWS::FSx::FileSystem").values()
    assert not made["Properties"]["LustreConfiguration"].get("EfaEnabled", False)


def _storage_sized(gib: int) -> dict:
    stack = Stack(new_app(), "Sized")
    vpc = isolated_vpc(stack)
    clients = ec2.SecurityGroup(stack, "Clients", vpc=vpc)
    EfaSharedStorage(stack, "Storage", vpc=vpc, subnet=vpc.isolated_subnets[0], clients=clients,
                     fsx_lustre_capacity_gib=gib)  # fmt: skip
    return assertions.Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def test_a_client_type_refusal_shows_the_options_own_value_and_names_the_type_in_why() -> None:
    """Issue 60 item 11: the FSx-over-EFA refusals printed the instance type as the option's value
    (fsx_lustre_efa='p4d.24xlarge', efa='trn2.48xlarge'); the value was true. Now the option and its value,
    then the type in why."""
    cases = [
        (lambda: LustreSpec(19200, efa=True).check_clients(instance_type("trn2.48xlarge"), 2), "efa=True: "),
        (lambda: LustreSpec(19200, efa=True, gds=True).check_clients(instance_type("trn1.32xlarge"), 2),
         "gds=True: "),
        (lambda: LustreSpec(19200, efa=True).check_clients(instance_type("p5.48xlarge"), 200), "efa=True: "),
    ]  # fmt: skip
    for refuse, starts in cases:
        with pytest.raises(EfaConfigError) as err:
            refuse()
        said = str(err.value)
        assert said.startswith(starts) and "xlarge'" not in said.split(":", 1)[0], said
        assert "xlarge" in said.split(":", 1)[1], said  # the type, named where it belongs


# Issue 60: edges a whole-file mutation run of node/lnet.py found unpinned (each test failed on its mutant).


def _dd_line(size: int, seconds: float) -> str:
    """GNU dd's summary line (coreutils dd.c, print_xfer_stats): bytes, both human sizes, seconds, rate."""
    human = f"{size / 1e9:.1f} GB, {size / 2**30:.1f} GiB"
    return f"{size} bytes ({human}) copied, {seconds} s, {size / seconds / 1e9:.1f} GB/s\n"


def test_the_storage_figures_are_each_nodes_bytes_over_its_own_and_the_phases_time(tmp_path: Path) -> None:
    """Figures large enough that their second decimal shows: the aggregate is all bytes over the phase's
    wall time, the slowest node its own bytes over its own seconds, each to 0.01 GB/s; a log holding an
    earlier dd's summary (a retried run appends) is read by its last."""
    size = 4 << 30
    (tmp_path / "phases").write_text("write 3.0\nread 1.7\n")
    (tmp_path / "a.write").write_text(_dd_line(size, 9.0) + "dd: retried\n" + _dd_line(size, 2.0))
    (tmp_path / "a.read").write_text(_dd_line(size, 1.6))
    (tmp_path / "b.write").write_text(_dd_line(size, 2.5))
    (tmp_path / "b.read").write_text(_dd_line(size, 1.1))
    out = lnet.result(tmp_path, efa=False)
    assert out == {
        "benchmark": "lustre", "ok": True, "nodes": 2,
        "write_gbytes_s": 2.86,  # 2 x 4 GiB over 3.0 s
        "read_gbytes_s": 5.05,  # over 1.7 s
        "slowest_write": {"node": "b", "gbytes_s": 1.72},  # 4 GiB in 2.5 s (a's last run: 2.0 s)
        "slowest_read": {"node": "a", "gbytes_s": 2.68},  # in 1.6 s
    }  # fmt: skip
    assert lnet.main(["bench", str(tmp_path)]) == 0  # the command as the leader runs it, no --efa


def test_lnet_counts_take_receive_counts_alone_and_need_both_ways_to_move() -> None:
    """A dropped message is neither sent nor received (drop_count, liblnetconfig.c): it adds to neither;
    a network that sent more but received nothing more has not carried Lustre's traffic both ways."""
    efa_ni = "recv_count: 800\n              drop_count: 0"
    dropped = SHOW.replace(efa_ni, efa_ni.replace("drop_count: 0", "drop_count: 5"))
    assert dropped != SHOW and lnet.net_counts(dropped) == lnet.NetCounts(nids=1, sent=907, received=803)
    counts = lnet.net_counts(SHOW)
    assert not counts.moved_since(lnet.NetCounts(1, 900, 803))  # sent only
    assert not counts.moved_since(lnet.NetCounts(1, 907, 800))  # received only
