#!/usr/bin/env bash
# Boot one ParallelCluster node of the one-machine harness (tests/e2e/pcluster.py), as root, in its
# network namespace and a new mount and UTS namespace:
#   nsenter --net=/var/run/netns/NS unshare --mount --uts --propagation private pcluster-node.sh ROOT WORK PROJECT PYTHON
# ROOT (laid out by the harness: its own /etc, /opt, /var, /run, /tmp, /.harness) becomes the node's root
# file system. From this machine: /usr read-only (Debian's Slurm, munge, Open MPI, libfabric), /dev, /sys,
# a new /proc. Shared as ParallelCluster shares them: /opt/slurm and /home (the head node exports both
# over NFS), /shared (EFS). /usr/bin is an overlay without Debian's Slurm commands (ParallelCluster has
# them in /opt/slurm/bin only) and with a stand-in systemctl (no systemd here: it records what it is asked). PROJECT and
# PYTHON (the AWS CLI's venv and its interpreter) are mounted at their own paths for /usr/local/bin/aws.
set -euo pipefail
root=$1 work=$2 project=$3 python=$4
h="$root/.harness"
mount --bind /usr "$root/usr"
mount -o remount,bind,ro "$root/usr"
mount -t overlay overlay -o "lowerdir=$h/usr-bin:/usr/bin" "$root/usr/bin" # whiteouts, systemctl stand-in
mount --bind "$h/usr-local-bin" "$root/usr/local/bin"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
mount -t proc proc "$root/proc"
mount --bind "$work/slurm" "$root/opt/slurm"
mount --bind "$work/home" "$root/home"
mount --bind "$work/shared" "$root/shared"
for d in route53 fleet; do
  mkdir -p "$h/$d"
  mount --bind "$work/$d" "$h/$d"
done
for p in "$project" "$python"; do
  mkdir -p "$root$p"
  mount --bind "$p" "$root$p"
done
hostname "$(cat "$h/name")"
exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  chroot "$root" /bin/bash "$project/tests/e2e/pcluster-boot.sh"
