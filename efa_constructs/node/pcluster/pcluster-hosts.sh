#!/usr/bin/env bash
# ParallelCluster writes "<ip> <queue>-st-<resource>-<n>.<cluster>.pcluster ..." names into
# /etc/hosts; Neuron's collectives then fail with "Invalid NCCL_COMM_ID". Drop those names for the
# cluster's queues (the workaround from the trn1 ParallelCluster guide); the ip-a-b-c-d names stay.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

hosts="$R/etc/hosts"
for queue in ${EFA_CDK_QUEUES:-}; do
  sed -i "s/ ${queue}-[^ ]*\.pcluster//g" "$hosts"
done
log "removed .pcluster names of queues: ${EFA_CDK_QUEUES:-none}"
