#!/usr/bin/env bash
# On the head node: write Slurm's topology.conf (topology/tree, switched on in the cluster's
# CustomSlurmSettings) from EC2 instance topology, so Slurm places a job's nodes under as few
# switches as it can. Compute nodes come and go (dynamic nodes), so a systemd timer re-runs this
# every 10 minutes; each run lists the running compute nodes (scontrol), finds their instances by
# address, asks DescribeInstanceTopology (at most 100 ids per call) and reconfigures Slurm when the
# tree changed. Without running nodes or an answer it keeps the last tree and says why.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)

[ -e "$R/etc/systemd/system/efa-cdk-slurm-topology.timer" ] \
  || install_timer slurm-topology slurm-topology.sh 5 10 0 "Slurm topology from EC2 instance topology"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# "<name> <address>" of every compute node that has an instance (an address that is not its name)
scontrol show nodes -o | tr ' ' '\n' | awk -F= '
  $1 == "NodeName" {name = $2} $1 == "NodeAddr" && $2 != name && $2 != "" {print name, $2}' >"$work/nodes"
if [ ! -s "$work/nodes" ]; then
  log "no compute node running: the Slurm topology stays as it is"
  exit 0
fi
mapfile -t ips < <(awk '{print $2}' "$work/nodes")
: >"$work/ids"
for ((i = 0; i < ${#ips[@]}; i += 100)); do
  ids_of=$(IFS=,; echo "${ips[*]:i:100}")
  aws_ ec2 describe-instances --filters "Name=private-ip-address,Values=$ids_of" \
    --query 'Reservations[].Instances[].[PrivateIpAddress,InstanceId]' >>"$work/ids" \
    || die "could not find the compute nodes' instances"
done
awk 'NR == FNR {id[$1] = $2; next} ($2 in id) {print $1, $2, id[$2]}' "$work/ids" "$work/nodes" >"$work/lines"
mapfile -t iids < <(awk '{print $3}' "$work/lines")
topology_answers "$work/topology" "${iids[@]}" || {
  log "no instance topology ($(tail -n1 "$work/topology/error")): the Slurm topology stays as it is"
  exit 0
}
conf="$R/opt/slurm/etc/topology.conf"
mkdir -p "$(dirname "$conf")"
python3 "$here/topology.py" slurm "$work"/topology/*.json <"$work/lines" >"$work/topology.conf"
if cmp -s "$work/topology.conf" "$conf"; then
  log "Slurm topology unchanged (${#iids[@]} nodes)"
  exit 0
fi
cp "$work/topology.conf" "$conf"
scontrol reconfigure || die "scontrol reconfigure refused the new topology.conf"
log "Slurm topology written for ${#iids[@]} nodes: $conf"
