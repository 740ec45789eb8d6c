#!/usr/bin/env bash
# Inside a ParallelCluster node's root (pcluster-node.sh): its setup, in ParallelCluster's order
# (cfn-init config sets on a node: OnNodeStart, the config phase, OnNodeConfigured, the finalize phase).
#   head node:    OnNodeStart, slurmctld started (config), OnNodeConfigured
#   compute node: OnNodeConfigured, slurmd started with its Slurm name (finalize: finalize_compute.rb)
# Custom actions run as ParallelCluster's custom_action_executor.py runs them: the script fetched from S3
# (here by the harness, into /.harness/actions), executed with its Args as root, not through a login
# shell, in an environment with the minimal PATH. A failure stops the node's setup, as it stops
# ParallelCluster's (/.harness/failed names the phase).
set -uo pipefail
h=/.harness
exec >>"$h/boot.log" 2>&1
sleep infinity &
echo $! >"$h/anchor.pid" # the process the harness enters the node through
role=$(cat "$h/role")
name=$(cat "$h/name")
fail() {
  echo "$(date +%T) FAILED: $1"
  echo "$1" >"$h/failed"
  exit 1
}
action() {
  local event=$1 args=()
  [ -x "$h/actions/$event" ] || return 0
  mapfile -t args <"$h/actions/$event.args"
  echo "$(date +%T) $event ${args[*]}"
  # harness: no EFA device here; libfabric's tcp provider stands in for efa (as in tests/e2e/cluster.py)
  env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin EFA_CDK_TEST_ONLY_PROVIDER=tcp \
    "$h/actions/$event" "${args[@]}" >"$h/$event.log" 2>&1
  echo $? >"$h/$event.rc"
  [ "$(cat "$h/$event.rc")" = 0 ]
}
install -d -o munge -g munge -m 0755 /run/munge /var/log/munge /var/lib/munge
runuser -u munge -- /usr/sbin/munged || fail munged
if [ "$role" = HeadNode ]; then
  action OnNodeStart || fail OnNodeStart
  install -d -o slurm -g slurm /var/spool/slurm.state
  echo "$(date +%T) config: slurmctld"
  /usr/sbin/slurmctld || fail "config: slurmctld did not start"
  for _ in $(seq 60); do
    /opt/slurm/bin/scontrol ping >/dev/null 2>&1 && break
    sleep 0.5
  done
  /opt/slurm/bin/scontrol ping >/dev/null 2>&1 || fail "config: slurmctld does not answer (see /var/log/slurmctld.log)"
  action OnNodeConfigured || fail OnNodeConfigured
else
  action OnNodeConfigured || fail OnNodeConfigured
  echo "$(date +%T) finalize: slurmd -N $name"
  /usr/sbin/slurmd -N "$name" || fail "finalize: slurmd did not start"
fi
echo "$(date +%T) ready"
touch "$h/ready"
wait
