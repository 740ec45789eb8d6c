#!/usr/bin/env bash
# The FSx for Lustre client (issue 44): the Lustre client, LNet over EFA as AWS's client setup configures it,
# the mount at every boot, and the proof that Lustre traffic rides EFA. A node where it does not is a failed node.
#   lustre-client.sh          the boot step (before the node's signal)
#   lustre-client.sh --lnet   the unit efa-cdk-lustre-lnet runs at every boot, before the mount
# Settings: EFA_CDK_LUSTRE_DNS and EFA_CDK_LUSTRE_MOUNT_NAME (the file system), EFA_CDK_LUSTRE_DIR (where it
# mounts), EFA_CDK_LUSTRE_EFA_INTERFACES (the EFA interfaces LNet uses; 0 or unset: TCP only).
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

# configure_lnet: LNet's tcp and efa networks from scratch. Module options apply only when a module loads,
# so Lustre is unloaded first (lustre_rmmod) whenever it is loaded: otherwise only some EFAs attach, silently.
configure_lnet() {
  local eth devs dev
  eth=$(primary_interface)
  [ -n "$eth" ] || die "Lustre over EFA: no default route, so no primary interface for LNet's tcp network"
  mapfile -t devs <"$ETC/lustre-efa-devices"
  if lsmod | grep -q '^lnet '; then lustre_rmmod || die "Lustre over EFA: lustre_rmmod could not unload Lustre (is it still mounted?)"; fi
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
  driver=$(modinfo -F version efa 2>/dev/null | sed 's/[^0-9.].*//')
  version_at_least "$driver" "$MIN_EFA_DRIVER" \
    || die "Lustre over EFA needs the EFA driver $MIN_EFA_DRIVER or later, this node has ${driver:-none}: install a newer EFA installer"
  kernel=$(uname -r | cut -d- -f1)
  [ "$(os_id)" != ubuntu ] || version_at_least "$kernel" 6.8 \
    || die "Lustre over EFA on Ubuntu needs kernel 6.8 or later, this node runs $kernel"
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
  # An orchestrator may have mounted it over TCP already (ParallelCluster does before our step).
  if mountpoint -q "$dir"; then umount "$dir" || die "could not unmount $dir to move Lustre to EFA"; fi
  systemctl start "$unit.service" || die "$(cat "$STATE/failure" 2>/dev/null || echo "$unit failed: journalctl -u $unit")"
  needs=",x-systemd.requires=$unit.service"
fi

mkdir -p "$dir"
line="$dns@tcp:/$mount_name ${dir#"$R"} lustre defaults,relatime,flock,_netdev${needs:-} 0 0"
grep -qF "$dns@tcp:/$mount_name " "$R/etc/fstab" 2>/dev/null || printf '%s\n' "$line" >>"$R/etc/fstab"
mountpoint -q "$dir" || retry 5 10 mount "${dir#"$R"}" || die "could not mount $dns@tcp:/$mount_name at ${dir#"$R"}"
log "FSx for Lustre mounted at ${dir#"$R"}"
[ "$want" -gt 0 ] || exit 0

# The proof: LNet's efa network carries messages both ways across a direct write and read from this node.
read -r _ sent0 recv0 < <(efa_counts)
probe="$dir/.efa-cdk-lnet-probe.$(hostname)"
dd if=/dev/zero of="$probe" bs=1M count=64 oflag=direct status=none || die "could not write to ${dir#"$R"}"
dd if="$probe" of=/dev/null bs=1M iflag=direct status=none || die "could not read from ${dir#"$R"}"
rm -f "$probe"
read -r _ sent1 recv1 < <(efa_counts)
if [ "$sent1" -le "$sent0" ] || [ "$recv1" -le "$recv0" ]; then
  die "Lustre traffic does not ride EFA: across 64 MiB written and read, LNet's efa network sent $((sent1 - sent0)) and received $((recv1 - recv0)) messages (the file system's EFA, its security group, or this node's LNet)"
fi
log "Lustre rides EFA: LNet's efa network sent $((sent1 - sent0)) and received $((recv1 - recv0)) messages across 64 MiB"
