#!/usr/bin/env bash
# The light EFA checks, re-run by a systemd timer for the life of the node: libfabric lists the
# provider, and the node still has every EFA device the launch template attached. The verdict goes
# to CloudWatch (EfaHealthy per instance, EfaUnhealthyNodes for the cluster: the dashboard and the
# alarm) and to /var/log/efa-cdk-health.log (shipped by the agent). In an Auto Scaling group a node
# that was once verified (or whose own EFA check failed) and then fails EFA_CDK_UNHEALTHY_AFTER checks
# in a row marks itself Unhealthy,
# so the group replaces it (in the same subnet, placement and reservation: the launch template's) and
# the new node verifies itself like the others; at most one node per EFA_CDK_REPLACE_MINUTES (the group's
# last replacement is in EFA_CDK_REPLACEMENT_PARAMETER), so a fault that follows every new node cannot
# replace expensive nodes without end: a node held back publishes EfaReplacementsHeldBack (an alarm).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
mkdir -p "$R/var/log"
exec >>"$R/var/log/efa-cdk-health.log" 2>&1
PATH=$(efa_path)

problems=()
have=$(efa_devices)
[ "$have" -eq "${EFA_CDK_EFA_COUNT:?}" ] || problems+=("$have of $EFA_CDK_EFA_COUNT EFA devices")
# libfabric's endpoints, in the jobs' environment, on every device (the guard; it also says when fi_info
# lists none)
guard=$(bash "$(dirname "$0")/fabric-guard.sh" 2>&1) || problems+=("${guard#*REFUSED: }")
# the accelerators: every device there, no fatal fault from their driver (DCGM's diagnostic runs at boot only)
accel=$(bash "$(dirname "$0")/accelerator-check.sh" 2>&1) || problems+=("${accel//$'\n'/; }")
# The leader's newest fabric sweep (its results, kept in EFA_CDK_RESULTS_PARAMETER) named this node slow:
# a node the fabric sweep marks bad counts as a failed check, as a missing EFA does.
if [ -n "${EFA_CDK_RESULTS_PARAMETER:-}" ]; then
  swept=$(aws_ ssm get-parameter --name "$EFA_CDK_RESULTS_PARAMETER" --query Parameter.Value 2>/dev/null || true)
  slow=$(printf '%s' "$swept" | python3 "$(dirname "$0")/sweep.py" named "$(imds meta-data/local-ipv4 || true)") || true
  [ -z "$slow" ] || problems+=("$slow")
fi
id=$(imds meta-data/instance-id) || die "no instance id from IMDS"
healthy=1
[ "${#problems[@]}" -eq 0 ] || healthy=0
retry 3 5 aws_ cloudwatch put-metric-data --namespace "${EFA_CDK_METRICS_NAMESPACE:?}" --metric-data \
  "MetricName=EfaHealthy,Dimensions=[{Name=InstanceId,Value=$id}],Value=$healthy" \
  "MetricName=EfaUnhealthyNodes,Value=$((1 - healthy))" || log "could not publish the health metrics"
# The fabric sweep every EFA_CDK_SWEEP_MINUTES, run here on the leader (the hostfile's first node) as the
# benchmarks on demand run it, publishing and keeping its verdict: what every node's next check reads.
sweep_due() {
  [ -n "${EFA_CDK_SWEEP_MINUTES:-}" ] && [ -r "$ETC/hostfile" ] || return 1
  [ "$(awk 'NF {print $1; exit}' "$ETC/hostfile")" = "$(imds meta-data/local-ipv4 || true)" ] || return 1
  local last
  last=$(cat "$STATE/sweep-at" 2>/dev/null || echo 0)
  [ $(($(date +%s) - last)) -ge $((EFA_CDK_SWEEP_MINUTES * 60)) ]
}
if sweep_due; then
  mkdir -p "$STATE"
  date +%s >"$STATE/sweep-at"
  log "fabric sweep due (every $EFA_CDK_SWEEP_MINUTES minutes)"
  EFA_CDK_ON_DEMAND=1 EFA_CDK_SWEEP_ONLY=1 bash "$(dirname "$0")/run-steps.sh" benchmarks \
    || log "the fabric sweep named a node or link, or did not finish: see /var/lib/efa-cdk/sweep"
fi
failures="$STATE/health-failures"
if [ "$healthy" = 1 ]; then
  rm -f "$failures"
  log "healthy: $have EFA devices, provider $FABRIC"
  exit 0
fi
mkdir -p "$STATE"
count=$(($(cat "$failures" 2>/dev/null || echo 0) + 1))
echo "$count" >"$failures"
reason=$(IFS=';'; echo "${problems[*]}")
log "UNHEALTHY ($count in a row): $reason"
[ "${EFA_CDK_NODE_GROUP:-explicit}" = asg ] || exit 1

# An Auto Scaling node: ask the group to replace it, within limits.
if [ ! -f "$STATE/verified" ]; then
  # Still booting (no step has failed yet): its own steps decide. Its check failed: in a CloudFormation
  # operation the signal fails the deploy, but a node the group launched on its own (a replacement) has
  # no one listening, so it is replaced like a node that failed later, within the same limit.
  if [ ! -s "$STATE/failure" ]; then
    log "not asking for a replacement: this node has not finished verifying EFA"
    exit 1
  fi
  log "this node never verified EFA ($(head -c 200 "$STATE/failure")): asking for a replacement, within the limit"
fi
after=${EFA_CDK_UNHEALTHY_AFTER:?}
if [ "$count" -lt "$after" ]; then
  log "not asking for a replacement yet: $count of $after failed checks in a row"
  exit 1
fi
held_back() {
  log "NOT REPLACED: $1; the next failed check asks again"
  retry 3 5 aws_ cloudwatch put-metric-data --namespace "$EFA_CDK_METRICS_NAMESPACE" --metric-data \
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
if retry 3 5 aws_ autoscaling set-instance-health --instance-id "$id" --health-status Unhealthy \
  --no-should-respect-grace-period; then
  log "marked Unhealthy: the Auto Scaling group replaces this node"
else
  # Not replaced, so the claim must not hold the group back for the whole window: give back the old value.
  log "could not mark this node Unhealthy (SetInstanceHealth failed); giving the replacement claim back"
  aws_ ssm put-parameter --name "$param" --value "$last" --overwrite >/dev/null \
    || log "could not give the claim back: $param holds replacements back until $(date -u -d "@$((now + window))" +%H:%M) UTC"
fi
exit 1
