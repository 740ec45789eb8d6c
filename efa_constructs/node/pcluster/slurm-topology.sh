#!/usr/bin/env bash
# On the head node: write Slurm's topology.conf (topology/tree, switched on in the cluster's
# CustomSlurmSettings) from EC2 instance topology, so Slurm places a job's nodes under as few
# switches as it can. Every node of every queue sits under a switch, as topology.conf(5) requires
# ("All nodes in the network must be connected to at least one switch"): running compute nodes under
# the network nodes EC2 reports for their instances, the rest (ParallelCluster's dynamic nodes are
# powered down most of the time, and have no instance) under efa-cdk-unplaced. Compute nodes come and
# go, so a systemd timer re-runs this every 10 minutes; each run lists the nodes (scontrol), finds the
# running ones' instances by address, asks DescribeInstanceTopology (at most 100 ids per call) and
# reconfigures Slurm when the tree changed. Without an answer for running nodes it keeps the last tree
# and says why. slurm-topology-init.sh writes the first tree before slurmctld starts.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)

[ -e "$R/etc/systemd/system/efa-cdk-slurm-topology.timer" ] \
  || install_timer slurm-topology slurm-topology.sh 5 10 0 "Slurm topology from EC2 instance topology"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# "<name> <address>" of every node; a node with an instance has an address that is not its name
# (ParallelCluster sets NodeAddr at launch and resets it to the name at power-down)
"$SLURM_BIN/scontrol" show nodes -o >"$work/show" || die "scontrol could not list the Slurm nodes"
tr ' ' '\n' <"$work/show" | awk -F= '$1 == "NodeName" {name = $2} $1 == "NodeAddr" {print name, $2}' >"$work/nodes"
[ -s "$work/nodes" ] || die "Slurm lists no nodes"
awk '$2 != $1 && $2 != ""' "$work/nodes" >"$work/running"
mapfile -t ips < <(awk '{print $2}' "$work/running")
: >"$work/ids"
for ((i = 0; i < ${#ips[@]}; i += 100)); do
  ids_of=$(IFS=,; echo "${ips[*]:i:100}")
  aws_ ec2 describe-instances --filters "Name=private-ip-address,Values=$ids_of" \
    --query 'Reservations[].Instances[].[PrivateIpAddress,InstanceId]' >>"$work/ids" \
    || die "could not find the compute nodes' instances"
done
# "<name> <ip> <instance id>" for running nodes, "<name>" for the others
awk -v ids="$work/ids" 'BEGIN {while ((getline l <ids) > 0) {split(l, f); id[f[1]] = f[2]}}
  ($2 in id) {print $1, $2, id[$2]; next} {print $1}' "$work/nodes" >"$work/lines"
mapfile -t iids < <(awk 'NF == 3 {print $3}' "$work/lines")
mkdir -p "$work/topology"
if [ "${#iids[@]}" -gt 0 ] && ! topology_answers "$work/topology" "${iids[@]}"; then
  log "no instance topology ($(tail -n1 "$work/topology/error")): the Slurm topology stays as it is"
  exit 0
fi
conf="$R/opt/slurm/etc/topology.conf"
mkdir -p "$(dirname "$conf")"
shopt -s nullglob
answers=("$work"/topology/*.json)
shopt -u nullglob
python3 "$here/topology.py" slurm "${answers[@]}" <"$work/lines" >"$work/topology.conf"
nodes=$(wc -l <"$work/lines")
if cmp -s "$work/topology.conf" "$conf"; then
  log "Slurm topology unchanged ($nodes nodes, ${#iids[@]} running)"
  exit 0
fi
cp "$work/topology.conf" "$conf"
"$SLURM_BIN/scontrol" reconfigure || die "scontrol reconfigure refused the new topology.conf"
log "Slurm topology written for $nodes nodes (${#iids[@]} running): $conf"
