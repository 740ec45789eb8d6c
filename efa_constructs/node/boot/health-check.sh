#!/usr/bin/env bash
# The light EFA checks, re-run by a systemd timer for the life of the node: libfabric lists the
# provider, and the node still has every EFA device the launch template attached; and the devices' own
# state (device-health.sh: the accelerators' flags and counters, EFA's counters), which mends itself by its
# ladder (mend.sh: reset, reboot, replace). The verdict goes
# to CloudWatch (EfaHealthy per instance, EfaUnhealthyNodes for the cluster: the dashboard and the
# alarm) and to /var/log/efa-cdk-health.log (shipped by the agent). In an Auto Scaling group a node
# that was once verified (or whose own EFA check failed) and then fails EFA_CDK_UNHEALTHY_AFTER checks
# in a row marks itself Unhealthy, so the group replaces it (in the same subnet, placement and reservation:
# the launch template's) and the new node verifies itself like the others, within the group's limit
# (replace-node.sh: at most one node per EFA_CDK_REPLACE_MINUTES, a node held back says so).
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
# the devices' own state (device-health.sh mends it through its ladder: these failures are counted here, not
# replaced by the group's limit below)
devices=()
found=$(bash "$(dirname "$0")/device-health.sh" 2>/dev/null) || mapfile -t devices <<<"$found"
# The leader's newest fabric sweep (its results, kept in EFA_CDK_RESULTS_PARAMETER) named this node slow:
# a node the fabric sweep marks bad counts as a failed check, as a missing EFA does.
if [ -n "${EFA_CDK_RESULTS_PARAMETER:-}" ]; then
  swept=$(aws_ ssm get-parameter --name "$EFA_CDK_RESULTS_PARAMETER" --query Parameter.Value 2>/dev/null || true)
  slow=$(printf '%s' "$swept" | python3 "$(dirname "$0")/sweep.py" named "$(imds meta-data/local-ipv4 || true)") || true
  [ -z "$slow" ] || problems+=("$slow")
fi
id=$(imds meta-data/instance-id) || die "no instance id from IMDS"
healthy=1
[ "${#problems[@]}" -eq 0 ] && [ "${#devices[@]}" -eq 0 ] || healthy=0
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
if [ "${#problems[@]}" -eq 0 ]; then # the devices' alone: their ladder mends them (device-health.sh said how)
  log "UNHEALTHY: $(IFS=';'; echo "${devices[*]}")"
  exit 1
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
bash "$(dirname "$0")/replace-node.sh" "$reason" || true
exit 1
