#!/usr/bin/env bash
# Run by EventBridge through Run Command when EC2 warns that this node's Capacity Block ends: 40 minutes
# before the end, and EC2 begins terminating the block's instances 10 minutes after the warning (EC2 user
# guide, "Monitor Capacity Blocks using EventBridge"). Keep the end time where a training job can watch
# it, tell every logged-in user, and log it; on a Slurm cluster, drain the block's nodes.
# EFA_CDK_BLOCK_END: the event's detail.end-date (the document's allowedPattern admits a date's characters
# only; AWS shows no format): read with date -d and written as UTC ISO 8601.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

given=${EFA_CDK_BLOCK_END:?}
[[ "$given" =~ ^[0-9A-Za-z\ :.,+/-]{1,64}$ ]] || die "not an end time: $given"
end=$(date -u -d "$given" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null) || die "not an end time date can read: $given"
mkdir -p "$STATE"
printf '%s\n' "$end" >"$STATE/capacity-block-ending.tmp"
mv "$STATE/capacity-block-ending.tmp" "$STATE/capacity-block-ending" # whole, for a job that polls it
message="efa-cdk: this node's Capacity Block ends at $end; EC2 terminates its instances from 30 minutes before that. Checkpoint now."
wall "$message" 2>/dev/null || log "wall could not reach the terminals"
log "$message"

# Where Slurm runs (ParallelCluster: the rule runs this on the head node; EFA_CDK_QUEUES is its queue), the
# Slurm notice: the queue's nodes drained, so no new job starts on nodes about to go while running jobs go
# on, and `sinfo -R` says why; the end time also in the shared directory, where every node's jobs see it.
if [ -n "${EFA_CDK_QUEUES:-}" ] && [ -x "$SLURM_BIN/scontrol" ]; then
  nodes=$("$SLURM_BIN/sinfo" -h -N -p "$EFA_CDK_QUEUES" -o %N | sort -u | paste -sd, -) || nodes=
  if [ -n "$nodes" ] \
    && "$SLURM_BIN/scontrol" update NodeName="$nodes" State=DRAIN Reason="efa-cdk: Capacity Block ends at $end"; then
    log "drained the $EFA_CDK_QUEUES queue's nodes ($nodes): no new job starts on them"
  else
    log "could not drain the $EFA_CDK_QUEUES queue's nodes in Slurm"
  fi
fi
# The shared directory is every user's (mode 1777 on PCS): a user may have made .efa-cdk there, or put a link
# in it to a file of root's. Root writes only into a .efa-cdk that is a directory root owns and no one else may
# write (it makes one so where none is), through a new file of its own renamed over the old (a rename replaces a
# link, never follows it).
if [ -n "${EFA_CDK_SHARED_DIR:-}" ] && [ -d "$R$EFA_CDK_SHARED_DIR" ]; then
  shared="$R$EFA_CDK_SHARED_DIR/.efa-cdk"
  if ! root_only_dir "$shared"; then
    log "not writing the end time to ${shared#"$R"}: it is not a directory only root may write to"
  else
    note=$(mktemp "$shared/.capacity-block-ending.XXXXXXXX")
    cat "$STATE/capacity-block-ending" >"$note"
    chmod 0644 "$note"
    mv -f "$note" "$shared/capacity-block-ending"
  fi
fi
