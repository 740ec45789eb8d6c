#!/usr/bin/env bash
# Write the EFA environment every login shell and MPI job gets: /etc/profile.d/efa-cdk.sh for
# shells, and $ETC/efa.env (KEY=VALUE) for `mpirun -x` and services.
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

{
  echo "FI_PROVIDER=efa"
  if [ "${EFA_CDK_RDMA_READ:-0}" = 1 ]; then echo "FI_EFA_USE_DEVICE_RDMA=1"; fi
  if [ "$fork_safe" = 1 ]; then echo "FI_EFA_FORK_SAFE=1"; fi
  echo "EFA_LIBDIR=/opt/amazon/efa/$libdir"
} >"$ETC/efa.env"
{
  echo "# Written by efa-cdk: the environment EFA jobs need on this node."
  sed 's/^/export /' "$ETC/efa.env"
  # shellcheck disable=SC2016  # expanded at login, not now
  echo 'export PATH="/opt/amazon/openmpi/bin:/opt/amazon/efa/bin:$PATH"'
  # shellcheck disable=SC2016
  echo "export LD_LIBRARY_PATH=\"/opt/amazon/efa/$libdir:/opt/amazon/openmpi/$libdir:/opt/amazon/ofi-nccl/$libdir"'${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"'
} >"$R/etc/profile.d/efa-cdk.sh"
log "environment: $(tr '\n' ' ' <"$ETC/efa.env")(kernel $kernel)"
