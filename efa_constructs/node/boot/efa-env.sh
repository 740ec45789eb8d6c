#!/usr/bin/env bash
# Write the EFA environment: $ETC/efa.env (KEY=VALUE) for the cluster's jobs (`set -a; . efa.env`,
# `mpirun -x`), and /etc/profile.d/efa-cdk.sh for login shells: the paths and the FI_EFA_* settings,
# but not FI_PROVIDER=efa, which would force every libfabric program a user starts onto EFA.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

case "$(os_id)" in
  ubuntu | debian) libdir=lib ;;
  *) libdir=lib64 ;;
esac
kernel=$(uname -r)
# Fork support needs kernel >= 5.15 (rdma-core's copy-on-fork); older kernels and Amazon Linux 2
# need libfabric told to be fork safe.
major=${kernel%%.*}
rest=${kernel#*.}
minor=${rest%%.*}
fork_safe=0
if [ "$major" -lt 5 ] || { [ "$major" -eq 5 ] && [ "$minor" -lt 15 ]; }; then fork_safe=1; fi

# NCCL's EFA plugin where this image has it (its place moved between EFA installer releases), so jobs'
# NCCL finds it instead of falling back to TCP sockets; the installer's usual place where there is none.
ofi_nccl=$(nccl_plugin_dir)
ofi_nccl=${ofi_nccl:-/opt/amazon/ofi-nccl/$libdir}

{
  echo "FI_PROVIDER=efa"
  if [ "${EFA_CDK_RDMA_READ:-0}" = 1 ]; then echo "FI_EFA_USE_DEVICE_RDMA=1"; fi
  if [ "$fork_safe" = 1 ]; then echo "FI_EFA_FORK_SAFE=1"; fi
  echo "EFA_LIBDIR=/opt/amazon/efa/$libdir"
} >"$ETC/efa.env"
{
  echo "# Written by efa-cdk: the environment EFA jobs need on this node."
  grep -v '^FI_PROVIDER=' "$ETC/efa.env" | sed 's/^/export /'
  echo "# FI_PROVIDER=efa is for the cluster's jobs: set -a; . /etc/efa-cdk/efa.env; set +a (or mpirun -x FI_PROVIDER=efa)"
  # shellcheck disable=SC2016  # expanded at login, not now
  echo 'export PATH="/opt/amazon/openmpi/bin:/opt/amazon/efa/bin:$PATH"'
  # shellcheck disable=SC2016
  echo "export LD_LIBRARY_PATH=\"/opt/amazon/efa/$libdir:/opt/amazon/openmpi/$libdir:$ofi_nccl"'${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"'
} >"$R/etc/profile.d/efa-cdk.sh"
log "environment: $(tr '\n' ' ' <"$ETC/efa.env")(kernel $kernel)"
