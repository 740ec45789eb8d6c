#!/usr/bin/env bash
# On the head node, at ParallelCluster's OnNodeStart (before its config phase starts slurmctld): the
# first topology.conf. Slurm's topology/tree plugin stops slurmctld when topology.conf cannot be read
# (fatal "something wrong with opening/reading ...topology.conf", after a minute of retries), and no
# compute node runs yet to place. So every node of every queue (EFA_CDK_SLURM_NODES: the Slurm node
# names of the cluster's configuration, as hostlist expressions) goes under one switch, efa-cdk-unplaced;
# slurm-topology.sh places running nodes later. An existing file is left alone.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

conf="$R/opt/slurm/etc/topology.conf"
if [ -s "$conf" ]; then
  log "$conf exists: left as it is"
  exit 0
fi
mkdir -p "$(dirname "$conf")"
tr ' ' '\n' <<<"${EFA_CDK_SLURM_NODES:?the Slurm node names of the cluster}" \
  | python3 "$(dirname "$0")/topology.py" slurm >"$conf.tmp"
mv "$conf.tmp" "$conf"
log "first Slurm topology: every node under efa-cdk-unplaced ($EFA_CDK_SLURM_NODES)"
