#!/usr/bin/env bash
# The FSx for Lustre client (issue 44): the Lustre client, LNet over EFA as AWS's client setup configures it,
# the mount at every boot, and the proof that Lustre traffic rides EFA. A node where it does not is a failed node.
#   lustre-client.sh            the boot step (before the node's signal)
#   lustre-client.sh --prepare  the client and LNet over EFA, no mount (the lustre-lnet step: ParallelCluster's
#                               OnNodeStart, before its own mount, as AWS's tutorial orders it)
#   lustre-client.sh --lnet     the unit efa-cdk-lustre-lnet runs at every boot, before the mount
# Settings: EFA_CDK_LUSTRE_DNS and EFA_CDK_LUSTRE_MOUNT_NAME (the file system), EFA_CDK_LUSTRE_DIR (where it
# mounts), EFA_CDK_LUSTRE_EFA_INTERFACES (the EFA interfaces LNet uses; 0 or unset: TCP only),
# EFA_CDK_LUSTRE_GDS (1: GPUDirect Storage: the nvidia-fs driver, loaded before Lustre, and gdscheck).
# Sources (FSx for Lustre user guide): "install-lustre-client" (the AL2023 package), "mounting-ec2-instance"
# (mount options), "configure-efa-clients" (operating systems; the interfaces per type; the lnetctl
# commands), "efa-file-systems"; EKS user guide "fsx-csi-tuning-efa" (EFA driver >= 2.12.1; the module order:
# lnet, kefalnd with the primary interface, ksocklnd, then lnetctl; discovery on; EFA first by UDSP).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
dns=${EFA_CDK_LUSTRE_DNS:-}
dir="$R${EFA_CDK_LUSTRE_DIR:-/fsx}"
want=${EFA_CDK_LUSTRE_EFA_INTERFACES:-0}
unit=efa-cdk-lustre-lnet
MIN_EFA_DRIVER=2.12.1
PEER_CREDITS=32 # the user guide's lnetctl net add --net efa ... --peer-credits 32
gds=${EFA_CDK_LUSTRE_GDS:-0}
# GPUDirect Storage ("configure-efa-clients", Install the GDS driver): nvidia-fs 2.24.2 or later, built from
# NVIDIA's source with NVFS_MAX_PEER_DEVS=128 NVFS_MAX_PCI_DEPTH=16 where the image has none (AWS's Deep
# Learning AMIs have it). The source is pinned by its commit: tag v2.28.4 of NVIDIA/gds-nvidia-fs, the newest
# release (2026-04-24), is commit d0eda49; a clone that is another commit is refused.
MIN_NVIDIA_FS=2.24.2
NVFS_REPO=https://github.com/NVIDIA/gds-nvidia-fs.git
NVFS_TAG=v2.28.4
NVFS_COMMIT=d0eda4943d01ef244e35035bad39d6ba20906b5b

# primary_interface: the interface of the default route (LNet's tcp network and kefalnd's ipif_name).
primary_interface() { ip -o -4 route show to default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit }}'; }

# chosen_efa K: K of the node's EFA devices (efa driver, name order), spread evenly over them: the first
# and the last of 2, every (n/K)th of more; all of them when K >= n.
chosen_efa() {
  local k=$1 dev all=() i
  for dev in "$R"/sys/class/infiniband/*; do
    [ -e "$dev" ] && [ "$(rdma_driver "${dev##*/}")" = efa ] && all+=("${dev##*/}")
  done
  local n=${#all[@]}
  if [ "$n" -le "$k" ]; then printf '%s\n' "${all[@]}"; return; fi
  if [ "$k" = 2 ]; then printf '%s\n' "${all[0]}" "${all[n - 1]}"; return; fi
  for ((i = 0; i < k; i++)); do echo "${all[i * n / k]}"; done
}

# efa_counts: NIDS SENT RECEIVED of LNet's efa network.
efa_counts() { lnetctl net show --net efa -v 2>/dev/null | python3 "$here/lnet.py" efa; }

# build_nvidia_fs: NVIDIA's GDS driver from its pinned source, with the peer-device settings FSx documents,
# installed for this kernel and loaded at every boot.
build_nvidia_fs() {
  local src="$STATE/gds-nvidia-fs"
  log "GPUDirect Storage: nvidia-fs ${1:-absent} is older than $MIN_NVIDIA_FS, building $NVFS_TAG"
  case "$(os_id)" in
    amzn) dnf install -y git make gcc "kernel-devel-$(uname -r)" >&2 ;;
    ubuntu) apt-get install -y git make gcc "linux-headers-$(uname -r)" >&2 ;;
  esac || die "GPUDirect Storage: could not install what building nvidia-fs needs (git, make, gcc, kernel headers)"
  clone() { rm -rf "$src" && git clone --quiet --depth 1 --branch "$NVFS_TAG" "$NVFS_REPO" "$src"; }
  retry 3 10 clone || die "GPUDirect Storage: could not fetch $NVFS_REPO $NVFS_TAG"
  local commit
  commit=$(git -C "$src" rev-parse HEAD)
  [ "$commit" = "$NVFS_COMMIT" ] \
    || die "GPUDirect Storage: $NVFS_REPO $NVFS_TAG is commit $commit, not the pinned $NVFS_COMMIT: not building it"
  (cd "$src/src" && export NVFS_MAX_PEER_DEVS=128 NVFS_MAX_PCI_DEPTH=16 && make >&2 && make install >&2) \
    || die "GPUDirect Storage: building nvidia-fs $NVFS_TAG failed (it needs the NVIDIA driver's sources under /usr/src/nvidia-*): see /var/log/efa-cdk.log"
  mkdir -p "$R/etc/modules-load.d"
  echo nvidia_fs >"$R/etc/modules-load.d/efa-cdk-nvidia-fs.conf"
}

# gds_check: gdscheck -p, read by gds.py: FSx Lustre supported, nvidia-fs recent enough, every GPU.
gds_check() {
  local tool gpus out verdict
  for tool in "$R"/usr/local/cuda/gds/tools/gdscheck "$R"/usr/local/cuda-*/gds/tools/gdscheck ""; do
    [ -x "$tool" ] && break
  done
  [ -n "$tool" ] || die "GPUDirect Storage: no gdscheck (NVIDIA's gds-tools, under /usr/local/cuda/gds/tools): use an AWS Deep Learning AMI, which has it"
  gpus=${EFA_CDK_ACCELERATOR_COUNT:-$(find "$R/dev" -maxdepth 1 -name 'nvidia[0-9]*' | wc -l)}
  out=$("$tool" -p 2>&1) || die "GPUDirect Storage: gdscheck -p failed: $(tail -n 1 <<<"$out")"
  verdict=$(python3 "$here/gds.py" --gpus "$gpus" <<<"$out") || die "GPUDirect Storage is not ready: $verdict"
  log "GPUDirect Storage: $verdict"
}

# configure_lnet: LNet's tcp and efa networks from scratch. Module options apply only when a module loads,
# so Lustre is unloaded first (lustre_rmmod) whenever it is loaded: otherwise only some EFAs attach, silently.
configure_lnet() {
  local eth devs dev
  eth=$(primary_interface)
  [ -n "$eth" ] || die "Lustre over EFA: no default route, so no primary interface for LNet's tcp network"
  mapfile -t devs <"$ETC/lustre-efa-devices"
  if lsmod | grep -q '^lnet '; then lustre_rmmod || die "Lustre over EFA: lustre_rmmod could not unload Lustre (is it still mounted?)"; fi
  [ "$gds" != 1 ] || modprobe nvidia_fs || die "GPUDirect Storage: could not load nvidia-fs before Lustre"
  modprobe lnet
  modprobe kefalnd "ipif_name=$eth"
  modprobe ksocklnd
  lnetctl lnet configure
  lnetctl net del --net tcp 2>/dev/null || true
  lnetctl net add --net tcp --if "$eth"
  for dev in "${devs[@]}"; do lnetctl net add --net efa --if "$dev" --peer-credits "$PEER_CREDITS"; done
  lnetctl set discovery 1
  lnetctl udsp add --src efa --priority 0
  modprobe lustre
  read -r nids _ _ < <(efa_counts)
  [ "$nids" = "${#devs[@]}" ] \
    || die "Lustre over EFA: LNet has $nids of ${#devs[@]} EFA interfaces up (${devs[*]}): see dmesg"
  log "LNet: tcp on $eth, efa on ${devs[*]}"
}

if [ "${1:-}" = --lnet ]; then
  configure_lnet
  exit 0
fi
[ -n "$dns" ] || { log "no FSx for Lustre file system" && exit 0; }
mount_name=${EFA_CDK_LUSTRE_MOUNT_NAME:?}

# The client: AL2023 has it in its own repository; AWS's Ubuntu packages come from AWS's apt repository,
# which the AWS Deep Learning AMIs already carry the client from.
if ! command -v mount.lustre >/dev/null; then
  case "$(os_id)" in
    amzn) dnf install -y lustre-client >&2 || die "could not install lustre-client (dnf)" ;;
    *) die "no Lustre client (mount.lustre) on this $(os_id) image: use an AWS Deep Learning AMI, which has it, or AL2023" ;;
  esac
fi

if [ "$want" -gt 0 ]; then
  # What AWS supports for Lustre over EFA: the EFA driver 2.12.1 or later; Ubuntu with kernel 6.8 or later.
  driver=$(modinfo -F version efa 2>/dev/null | sed 's/[^0-9.].*//') || driver="" # no module: none
  version_at_least "$driver" "$MIN_EFA_DRIVER" \
    || die "Lustre over EFA needs the EFA driver $MIN_EFA_DRIVER or later, this node has ${driver:-none}: install a newer EFA installer"
  kernel=$(uname -r | cut -d- -f1)
  [ "$(os_id)" != ubuntu ] || version_at_least "$kernel" 6.8 \
    || die "Lustre over EFA on Ubuntu needs kernel 6.8 or later, this node runs $kernel"
  if [ "$gds" = 1 ]; then
    have=$(modinfo -F version nvidia_fs 2>/dev/null | sed 's/[^0-9.].*//') || have=""
    version_at_least "$have" "$MIN_NVIDIA_FS" || build_nvidia_fs "$have"
  fi
  mkdir -p "$ETC"
  chosen_efa "$want" >"$ETC/lustre-efa-devices"
  [ -s "$ETC/lustre-efa-devices" ] || die "Lustre over EFA: no EFA device on this node"
  # A unit reapplies the configuration at every boot, before remote file systems mount.
  mkdir -p "$R/etc/systemd/system"
  cat >"$R/etc/systemd/system/$unit.service" <<EOF
[Unit]
Description=efa-cdk: LNet over EFA for FSx for Lustre
Wants=network-online.target
After=network-online.target
Before=remote-fs-pre.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/opt/efa-cdk/bin/lustre-client.sh --lnet
[Install]
WantedBy=remote-fs.target
EOF
  systemctl daemon-reload
  systemctl enable "$unit.service" >/dev/null || die "could not enable $unit"
  if systemctl is-active --quiet "$unit.service"; then
    log "LNet over EFA: configured before the mount (the lustre-lnet step)"
  else
    # An orchestrator may have mounted it over TCP already: moved to EFA (unmounted, LNet, mounted again)
    if mountpoint -q "$dir"; then umount "$dir" || die "could not unmount $dir to move Lustre to EFA"; fi
    systemctl start "$unit.service" || die "$(cat "$STATE/failure" 2>/dev/null || echo "$unit failed: journalctl -u $unit")"
  fi
  needs=",x-systemd.requires=$unit.service"
fi
if [ "${1:-}" = --prepare ]; then
  log "FSx for Lustre: the client ready${needs:+, LNet over EFA up}; the orchestrator mounts ${dir#"$R"}"
  exit 0
fi

mkdir -p "$dir"
line="$dns@tcp:/$mount_name ${dir#"$R"} lustre defaults,relatime,flock,_netdev${needs:-} 0 0"
grep -qF "$dns@tcp:/$mount_name " "$R/etc/fstab" 2>/dev/null || printf '%s\n' "$line" >>"$R/etc/fstab"
mountpoint -q "$dir" || retry 5 10 mount "${dir#"$R"}" || die "could not mount $dns@tcp:/$mount_name at ${dir#"$R"}"
log "FSx for Lustre mounted at ${dir#"$R"}"
[ "$want" -gt 0 ] || exit 0

# The proof: LNet's efa network carries messages both ways across a direct write and read from this node.
read -r _ sent0 recv0 < <(efa_counts)
# in a directory of root's own, made new (mktemp -d: 0700, a name no one can foresee) and used only through
# its open descriptor (lib.sh own_dir), so no link or file a user put in the file system is written through
probe_dir=$(mktemp -d "$dir/.efa-cdk-lnet-probe.XXXXXXXX") || die "could not write to ${dir#"$R"}"
if ! { exec {probe}<"$probe_dir"; } 2>/dev/null || ! own_dir "$probe" "$dir" >/dev/null; then
  die "${probe_dir#"$R"} is not the directory this step made (swapped by someone else?): not written"
fi
dd if=/dev/zero of="/proc/self/fd/$probe/probe" bs=1M count=64 oflag=direct,nofollow conv=excl status=none \
  || die "could not write to ${dir#"$R"}"
dd if="/proc/self/fd/$probe/probe" of=/dev/null bs=1M iflag=direct,nofollow status=none \
  || die "could not read from ${dir#"$R"}"
rm -f "/proc/self/fd/$probe/probe"
rmdir "$probe_dir" 2>/dev/null || true # only ever an empty directory
exec {probe}<&-
read -r _ sent1 recv1 < <(efa_counts)
if [ "$sent1" -le "$sent0" ] || [ "$recv1" -le "$recv0" ]; then
  die "Lustre traffic does not ride EFA: across 64 MiB written and read, LNet's efa network sent $((sent1 - sent0)) and received $((recv1 - recv0)) messages (the file system's EFA, its security group, or this node's LNet)"
fi
log "Lustre rides EFA: LNet's efa network sent $((sent1 - sent0)) and received $((recv1 - recv0)) messages across 64 MiB"
[ "$gds" != 1 ] || gds_check
