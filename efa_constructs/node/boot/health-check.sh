#!/usr/bin/env bash
# The light EFA checks, re-run by a systemd timer for the life of the node: libfabric lists the
# provider, and the node still has every EFA device the launch template attached. The verdict goes
# to CloudWatch (EfaHealthy per instance, EfaUnhealthyNodes for the cluster: the dashboard and the
# alarm) and to /var/log/efa-cdk-health.log (shipped by the agent). In an Auto Scaling group a
# failing node marks itself Unhealthy, so the group replaces it (in the same subnet, placement and
# reservation: the launch template's), and the new node verifies itself like the others.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
mkdir -p "$R/var/log"
exec >>"$R/var/log/efa-cdk-health.log" 2>&1
PATH=$(efa_path)

problems=()
fi_info -p "$FABRIC" -t FI_EP_RDM >/dev/null 2>&1 || problems+=("fi_info -p $FABRIC lists no RDM endpoint")
have=$(efa_devices)
[ "$have" -eq "${EFA_CDK_EFA_COUNT:?}" ] || problems+=("$have of $EFA_CDK_EFA_COUNT EFA devices")
id=$(imds meta-data/instance-id) || die "no instance id from IMDS"
healthy=1
[ "${#problems[@]}" -eq 0 ] || healthy=0
retry 3 5 aws_ cloudwatch put-metric-data --namespace "${EFA_CDK_METRICS_NAMESPACE:?}" --metric-data \
  "MetricName=EfaHealthy,Dimensions=[{Name=InstanceId,Value=$id}],Value=$healthy" \
  "MetricName=EfaUnhealthyNodes,Value=$((1 - healthy))" || log "could not publish the health metrics"
if [ "$healthy" = 1 ]; then
  log "healthy: $have EFA devices, provider $FABRIC"
  exit 0
fi
reason=$(IFS=';'; echo "${problems[*]}")
log "UNHEALTHY: $reason"
if [ "${EFA_CDK_NODE_GROUP:-explicit}" = asg ]; then
  retry 3 5 aws_ autoscaling set-instance-health --instance-id "$id" --health-status Unhealthy \
    --no-should-respect-grace-period && log "marked Unhealthy: the Auto Scaling group replaces this node"
fi
exit 1
