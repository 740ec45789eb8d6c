#!/usr/bin/env bash
# Run by EventBridge through Run Command when EC2 warns that this node's Capacity Block ends: 40 minutes
# before the end, and EC2 begins terminating the block's instances 10 minutes after the warning (EC2 user
# guide, "Monitor Capacity Blocks using EventBridge"). Keep the end time where a training job can watch
# it, tell every logged-in user, and log it. EFA_CDK_BLOCK_END: the event's detail.end-date (ISO 8601,
# checked by the document's allowedPattern before it gets here).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

end=${EFA_CDK_BLOCK_END:?}
[[ "$end" =~ ^[0-9T:.Z+-]+$ ]] || die "not an end time: $end"
mkdir -p "$STATE"
printf '%s\n' "$end" >"$STATE/capacity-block-ending.tmp"
mv "$STATE/capacity-block-ending.tmp" "$STATE/capacity-block-ending" # whole, for a job that polls it
message="efa-cdk: this node's Capacity Block ends at $end; EC2 terminates its instances from 30 minutes before that. Checkpoint now."
wall "$message" 2>/dev/null || log "wall could not reach the terminals"
log "$message"
