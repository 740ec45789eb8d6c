#!/usr/bin/env bash
# Slurm's Prolog on an EFA node (EfaPcsCluster sets it in the cluster's Slurm settings): a node that has
# not verified EFA runs no job. slurmd runs the Prolog as root before a job's first step on the node; one
# that exits non-zero drains the node and requeues the job (slurm.conf(5), Prolog). verify-efa writes
# the marker; a failed check leaves its reason in $STATE/failure and the node log.
R="${EFA_CDK_ROOT:-}"
# A PCS node (prep.sh is there) also needs its instance-metadata restriction in place: without it any
# local user reaches the node role, and with it the cluster's Slurm key (node/pcs/prep.sh imds).
if [ -e "$R/opt/efa-cdk/pcs/prep.sh" ] && [ ! -f "$R/var/lib/efa-cdk/imds-restricted" ]; then
  echo "efa-cdk: node ${SLURMD_NODENAME:-?} takes no job (${SLURM_JOB_ID:-?}): instance metadata is not restricted to root; see /var/log/cloud-init-output.log" >&2
  exit 1
fi
if [ -f "$R/var/lib/efa-cdk/verified" ]; then
  # Verified at boot; the guard checks again what a job would communicate over now (a changed efa.env, a
  # device gone): its one line goes to slurmd's log, and the node is drained.
  bash "$(dirname "$0")/fabric-guard.sh" >&2 && exit 0
  echo "efa-cdk: node ${SLURMD_NODENAME:-?} takes no job (${SLURM_JOB_ID:-?}): it would not communicate over EFA" >&2
  exit 1
fi
reason=$(cat "$R/var/lib/efa-cdk/failure" 2>/dev/null || echo "the EFA check never completed")
echo "efa-cdk: node ${SLURMD_NODENAME:-?} takes no job (${SLURM_JOB_ID:-?}): EFA not verified: $reason; see /var/log/efa-cdk.log" >&2
exit 1
