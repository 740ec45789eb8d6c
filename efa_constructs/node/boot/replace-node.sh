#!/usr/bin/env bash
# Ask this node's Auto Scaling group to replace it, within the group's limit: at most one node per
# EFA_CDK_REPLACE_MINUTES (the group's last replacement is in EFA_CDK_REPLACEMENT_PARAMETER), so a fault that
# follows every new node cannot replace expensive nodes without end. A node held back publishes
# EfaReplacementsHeldBack (an alarm) and says why; the next failed check asks again.
#   replace-node.sh REASON     exit 0: marked Unhealthy (the group replaces it); 1: held back or refused
# The same claim bounds the device ladder's reboots (mend.sh, with --claim-only: the claim is taken, nothing
# is marked).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
only_claim=0 held="NOT REPLACED"
[ "${1:-}" != --claim-only ] || { only_claim=1 held="HELD BACK" && shift; }
reason=${1:-unhealthy}
id=$(imds meta-data/instance-id) || die "no instance id from IMDS"

held_back() {
  log "$held: $1; the next failed check asks again"
  retry 3 5 aws_ cloudwatch put-metric-data --namespace "${EFA_CDK_METRICS_NAMESPACE:?}" --metric-data \
    "MetricName=EfaReplacementsHeldBack,Value=1" || log "could not publish EfaReplacementsHeldBack"
  exit 1
}
param=${EFA_CDK_REPLACEMENT_PARAMETER:?}
window=$((${EFA_CDK_REPLACE_MINUTES:?} * 60))
now=$(date +%s)
read=$(aws_ ssm get-parameter --name "$param" --query '[Parameter.Version,Parameter.Value]') \
  || held_back "could not read $param"
version=${read%%$'\t'*} last=${read#*$'\t'}
last_time=${last%% *}
if [[ $last_time =~ ^[0-9]+$ ]] && [ $((now - last_time)) -lt "$window" ]; then
  held_back "the group's last replacement was claimed by ${last#* } $(((now - last_time) / 60)) min ago (at most one per $EFA_CDK_REPLACE_MINUTES min)"
fi
# The claim is a compare-and-swap: Parameter Store numbers the writes of a parameter one by one (PutParameter
# returns the new Version: SSM API reference), so of the nodes that read version N, exactly one writes N+1;
# that node goes, the others wait. (Writing then reading back is not enough: A:put A:get B:put B:get lets both go.)
wrote=$(aws_ ssm put-parameter --name "$param" --value "$now $id" --overwrite --query Version) \
  || held_back "could not write $param"
if [ "$wrote" != $((version + 1)) ]; then
  # Lost: this node's write (a later version) now hides the winner's claim, and status would name this
  # node. Put the winner's value (version N+1; GetParameter takes "name:version") back on top.
  if ! winner=$(aws_ ssm get-parameter --name "$param:$((version + 1))" --query Parameter.Value) \
    || ! aws_ ssm put-parameter --name "$param" --value "$winner" --overwrite >/dev/null; then
    log "could not put the winning claim back on top of this node's write to $param"
  fi
  held_back "another node of the group claimed the replacement first (version $((version + 1)) of $param)"
fi
[ "$only_claim" = 0 ] || exit 0
if retry 3 5 aws_ autoscaling set-instance-health --instance-id "$id" --health-status Unhealthy \
  --no-should-respect-grace-period; then
  log "marked Unhealthy ($reason): the Auto Scaling group replaces this node"
  exit 0
fi
# Not replaced, so the claim must not hold the group back for the whole window: give back the old value.
log "could not mark this node Unhealthy (SetInstanceHealth failed); giving the replacement claim back"
aws_ ssm put-parameter --name "$param" --value "$last" --overwrite >/dev/null \
  || log "could not give the claim back: $param holds replacements back until $(date -u -d "@$((now + window))" +%H:%M) UTC"
exit 1
