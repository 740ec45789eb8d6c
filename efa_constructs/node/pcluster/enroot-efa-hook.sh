#!/usr/bin/env bash
# Enroot pre-start hook for EFA, installed by efa-cdk's pyxis step as /etc/enroot/hooks.d/90-efa-cdk.sh.
# Enroot runs every hooks.d/*.sh before a container starts, with ENROOT_ROOTFS set to the image's
# root filesystem (NVIDIA/enroot doc/configuration.md, "Pre-start hook scripts").
#
# On a node with EFA devices, a container whose image has no libfabric cannot use EFA: its job would
# fall back to TCP sockets, or fail later with a less clear error. This hook stops such a container at
# start with the reason and the fix. A job that wants a container without EFA sets
# EFA_CDK_CONTAINER_EFA=0 (hooks see the job's environment). The devices need no mount: the
# ParallelCluster sample enroot.conf keeps ENROOT_RESTRICT_DEV off, so /dev/infiniband is visible.
set -euo pipefail
R=${EFA_CDK_ROOT:-}  # tests run the hook against a fake root

[ "${EFA_CDK_CONTAINER_EFA:-1}" != 0 ] || exit 0
compgen -G "$R/dev/infiniband/uverbs*" >/dev/null || exit 0  # no EFA here (e.g. the head node)
rootfs=${ENROOT_ROOTFS:?Enroot sets ENROOT_ROOTFS for its hooks}
# Where the EFA installer (inside images: --skip-kmod) and distributions put libfabric.
for dir in opt/amazon/efa/lib opt/amazon/efa/lib64 usr/lib usr/lib64 usr/local/lib \
  usr/lib/x86_64-linux-gnu usr/lib/aarch64-linux-gnu; do
  if compgen -G "$rootfs/$dir/libfabric.so*" >/dev/null; then exit 0; fi
done
echo "efa-cdk: this image has no libfabric, so it cannot use EFA on this node. Install the EFA software in" \
  "the image (EC2 user guide, 'Install the EFA software in a container': efa_installer.sh -y --skip-kmod" \
  "--skip-limit-conf --no-verify, or --enable-ngc for NGC images), or set EFA_CDK_CONTAINER_EFA=0 for a job" \
  "that does not need EFA." >&2
exit 1
