#!/usr/bin/env bash
# Signal this node's CreationPolicy: `signal.sh` for SUCCESS, `signal.sh FAILURE REASON`.
# SignalResource carries no reason field, so the start of the reason goes into the unique id,
# which CloudFormation prints in the stack event; the whole reason is in /var/log/efa-cdk.log
# and the console output (aws ec2 get-console-output).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

status=${1:-SUCCESS}
reason=${2:-}
instance=$(imds meta-data/instance-id) || die "no instance id from IMDS"
logical=$(tag efa-cdk:logical-id) || die "the instance has no efa-cdk:logical-id tag"
uid=$instance
if [ -n "$reason" ]; then
  # Unique ids are at most 64 characters: keep [A-Za-z0-9.-] of the reason.
  uid="$instance-$(tr -c 'A-Za-z0-9.\n-' '-' <<<"$reason" | tr -s '-' | head -c $((63 - ${#instance})))"
  echo "efa-cdk: $status: $reason" >"$R/dev/console" 2>/dev/null || true
fi
if retry 5 5 aws_ cloudformation signal-resource --stack-name "${EFA_CDK_STACK:?}" \
  --logical-resource-id "$logical" --unique-id "$uid" --status "$status"; then
  log "signalled $status for $logical as $uid"
elif [ "$status" = SUCCESS ]; then
  # A node an Auto Scaling group added after creation: nothing waits for its signal.
  log "no CloudFormation operation waits for $logical's signal (a node added by a resize?); continuing"
else
  die "could not signal $status for $logical to stack $EFA_CDK_STACK"
fi
