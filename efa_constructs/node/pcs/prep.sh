#!/usr/bin/env bash
# efa-cdk's preparation of an AWS PCS node (login and compute), run as root from the launch template's
# cloud-config (this file is written in by write_files):
#   prep.sh imds USER...    every boot (bootcmd) and again at first boot's end (runcmd, once the image's
#                           users exist): instance metadata answers only USER (root first). PCS hands a
#                           node's role the cluster's Slurm key (RegisterComputeNodeGroupInstance), so any
#                           local user who reached the role could forge Slurm credentials. The rule is
#                           ParallelCluster's `Imds: Secured` on its head node: iptables, owner match,
#                           and ip6tables for the IPv6 endpoint. Fails closed: until both rules hold, the
#                           Prolog's marker is absent and the node runs no job.
#   prep.sh shared FS DIR   first boot (runcmd): mount EFS file system FS at DIR over TLS with the EFS mount
#                           helper (amazon-efs-utils), kept in /etc/fstab, and make DIR writable by every
#                           user with the sticky bit (mode 1777), as AWS's PCS recipes do. The mount is
#                           IAM-authorized (`iam`: the helper signs with the node role's credentials, read
#                           as root from instance metadata): the file system's policy refuses anonymous
#                           clients (aws-cdk-lib's @aws-cdk/aws-efs:denyAnonymousAccess), and the role
#                           holds ClientMount, ClientWrite and ClientRootAccess on it (Amazon EFS user
#                           guide, "Using IAM to control file system data access"; mount option `iam`).
set -euo pipefail
R="${EFA_CDK_ROOT:-}"
log() { printf 'efa-cdk[pcs-prep] %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

# install_missing COMMAND PACKAGE...: install the first PACKAGE the OS's package manager has, unless
# COMMAND is already there.
install_missing() {
  local command=$1 pkg
  shift
  command -v "$command" >/dev/null && return 0
  for pkg in "$@"; do
    if command -v dnf >/dev/null; then dnf -y -q install "$pkg" >/dev/null 2>&1 && return 0
    elif command -v yum >/dev/null; then yum -y -q install "$pkg" >/dev/null 2>&1 && return 0
    elif command -v apt-get >/dev/null; then apt-get -y -qq install "$pkg" >/dev/null 2>&1 && return 0
    fi
  done
  return 1
}

# restrict TOOL ADDRESS USER...: with iptables or ip6tables, traffic to ADDRESS only from USER's processes.
restrict() {
  local tool=$1 address=$2 chain=efa-cdk-imds user
  shift 2
  "$tool" -w -N "$chain" 2>/dev/null || "$tool" -w -F "$chain" || return 1
  for user in "$@"; do
    if id -u "$user" >/dev/null 2>&1; then
      "$tool" -w -A "$chain" -m owner --uid-owner "$(id -u "$user")" -j ACCEPT || return 1
    else
      log "user $user does not exist (yet): not let through to instance metadata"
    fi
  done
  "$tool" -w -A "$chain" -j REJECT || return 1
  "$tool" -w -C OUTPUT -d "$address" -j "$chain" 2>/dev/null \
    || "$tool" -w -I OUTPUT 1 -d "$address" -j "$chain"
}

# Fail closed: the marker the Slurm Prolog requires (node/boot/slurm-prolog.sh) is removed first and
# written only once both rules hold, so a node whose restriction failed runs no job; and, since users log in
# to a login node without a job, /etc/nologin (pam_nologin: only root may log in) holds until both rules
# hold, so no user reaches the role there either. Only a nologin of efa-cdk's own is ever removed.
NOLOGIN_REASON="efa-cdk: instance metadata is not yet restricted to the users it may serve; only root may log in (journalctl -b | grep pcs-prep)"
imds() {
  [ "$#" -gt 0 ] || die "usage: prep.sh imds USER..."
  local marker="$R/var/lib/efa-cdk/imds-restricted" nologin="$R/etc/nologin"
  rm -f "$marker"
  [ -e "$nologin" ] || { mkdir -p "${nologin%/*}" && printf '%s\n' "$NOLOGIN_REASON" >"$nologin"; }
  install_missing iptables iptables-nft iptables \
    || die "no iptables on this image and none could be installed: instance metadata stays open to every user; this node runs no job"
  command -v ip6tables >/dev/null \
    || die "no ip6tables on this image: instance metadata over IPv6 stays open to every user; this node runs no job"
  # Instance metadata at 169.254.169.254 and, over IPv6, fd00:ec2::254 (EC2 user guide, "Instance
  # metadata service endpoints").
  restrict iptables 169.254.169.254/32 "$@" || die "iptables refused the instance-metadata rule; this node runs no job"
  restrict ip6tables fd00:ec2::254/128 "$@" || die "ip6tables refused the instance-metadata rule; this node runs no job"
  mkdir -p "${marker%/*}"
  printf '%s\n' "$*" >"$marker"
  [ "$(cat "$nologin" 2>/dev/null)" != "$NOLOGIN_REASON" ] || rm -f "$nologin"
  log "instance metadata: only $* (iptables and ip6tables chain efa-cdk-imds)"
}

shared() {
  [ "$#" -eq 2 ] || die "usage: prep.sh shared FILE_SYSTEM_ID DIR"
  local fs=$1 dir=$2 fstab="$R/etc/fstab" try
  install_missing mount.efs amazon-efs-utils \
    || die "no EFS mount helper (amazon-efs-utils) on this image and none could be installed: $dir is not mounted; build it into the image (github.com/aws/efs-utils)"
  mkdir -p "$R$dir"
  grep -qE "^[^#]*[[:space:]]${dir}[[:space:]]+efs[[:space:]]" "$fstab" 2>/dev/null \
    || printf '%s:/ %s efs _netdev,tls,iam 0 0\n' "$fs" "$dir" >>"$fstab"
  for try in 1 2 3 4 5 6; do  # a new mount target can take a minute to answer
    mountpoint -q "$R$dir" && break
    mount "$R$dir" && break
    [ "$try" -lt 6 ] && sleep 10
  done
  mountpoint -q "$R$dir" || die "could not mount $fs at $dir over TLS as the node role (iam)"
  chmod 1777 "$R$dir"
  log "$fs mounted at $dir over TLS as the node role, mode 1777"
}

case "${1:-}" in
  imds | shared) "$@" ;;
  *) die "usage: prep.sh imds USER... | prep.sh shared FILE_SYSTEM_ID DIR" ;;
esac
