#!/usr/bin/env bash
# Write the MPI hostfile of the whole cluster: "<private ip> slots=<ranks>" per node, in node-index
# order (Auto Scaling group nodes have no index: address order); the first line is the leader. Nodes are found at run time by their cluster tag, so adding a node never
# changes the launch template; the expected count comes from the cluster's SSM parameter.
# Waits until every node is running, or fails naming the missing ones after the timeout.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

want=$(retry 5 5 aws_ ssm get-parameter --name "${EFA_CDK_NODE_COUNT_PARAMETER:?}" --query Parameter.Value) \
  || die "could not read the node count from SSM parameter $EFA_CDK_NODE_COUNT_PARAMETER"
deadline=$(($(date +%s) + ${EFA_CDK_WAIT_SECONDS:-1800}))
while :; do
  # One line per node: "<node index or None> <private ip>".
  # shellcheck disable=SC2016  # backticks are JMESPath literals, not command substitution
  nodes=$(aws_ ec2 describe-instances \
    --filters "Name=tag:efa-cdk:cluster,Values=${EFA_CDK_CLUSTER:?}" "Name=instance-state-name,Values=pending,running" \
    --query 'Reservations[].Instances[].[Tags[?Key==`efa-cdk:node-index`]|[0].Value, PrivateIpAddress]' |
    awk '$2 != "None" && $2 != ""' | sort -k1,1n -k2,2V) || nodes=""
  have=$(grep -c . <<<"$nodes" || true)
  [ "$have" -ge "$want" ] && break
  if [ "$(date +%s)" -ge "$deadline" ]; then
    die "only $have of $want nodes came up within ${EFA_CDK_WAIT_SECONDS:-1800}s (found: $(awk '{printf "%s%s", sep, $2; sep=","}' <<<"$nodes"))"
  fi
  log "$have of $want nodes running; waiting"
  sleep "${EFA_CDK_POLL_SECONDS:-15}"
done
awk -v slots="${EFA_CDK_SLOTS:?}" '{print $2 " slots=" slots}' <<<"$nodes" >"$ETC/hostfile"
cp "$ETC/hostfile" "$(user_home)/hostfile"
chown "$EFA_CDK_USER:$EFA_CDK_USER" "$(user_home)/hostfile"
log "hostfile: $have nodes, $EFA_CDK_SLOTS slots each ($ETC/hostfile, ~$EFA_CDK_USER/hostfile)"
