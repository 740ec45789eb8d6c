#!/usr/bin/env bash
# Write the MPI hostfile of the whole cluster: "<private ip> slots=<ranks>" per node, in node-index
# order (Auto Scaling group nodes have no index: launch order, then address); the first line is the
# leader: node 0, or the group's oldest node, so a replacement never takes the lead from running jobs.
# Nodes are found at run time by their cluster tag, so adding a node never changes the launch
# template; the expected count comes from the cluster's SSM parameter. Waits until exactly that many
# nodes of the current generation run, or fails naming the ones found after the timeout.
#
# At the cluster's creation the leader hands every node the hostfile, then marks the cluster formed
# (EFA_CDK_FORMED_PARAMETER) by its generation: explicit nodes' efa-cdk:generation tag (the hash of their
# launch template: a new image, node software, type or layout is a new generation), an Auto Scaling
# group's name (a replacing update makes a new group). A node that boots into a formed cluster of its own
# generation (a replacement, a scale-out) joins: it lists the members the same way (the old node of a
# replaced index is no member: the newest instance of each index is), writes the hostfile and hands it
# to every member, so all hostfiles follow the cluster; it runs no benchmarks (benchmarks.sh: they run at
# formation). A node of a new generation forms a new cluster with its generation only: its leader checks
# every node over SSH with EFA verified, benchmarks the new fabric and marks the new generation formed.
#
# EC2's API rate: explicit nodes other than node 0 do not poll at all (the leader copies the hostfile
# to them); Auto Scaling nodes, which learn who leads only from the list, poll with jittered
# exponential backoff (EFA_CDK_POLL_SECONDS doubling up to 16x). The leader then waits, 32 nodes at
# a time, until each node answers over the cluster SSH key with EFA verified, and gives it the hostfile.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

index=$(tag efa-cdk:node-index || echo None)
me=$(imds meta-data/instance-id) || die "could not read this instance's id from instance metadata"
if [ "$index" != None ]; then
  generation=$(tag efa-cdk:generation || echo untagged)
else # shellcheck disable=SC2016  # backticks are JMESPath literals
  group=$(retry 3 5 aws_ ec2 describe-instances --instance-ids "$me" \
    --query 'Reservations[0].Instances[0].Tags[?Key==`aws:autoscaling:groupName`]|[0].Value') \
    || die "could not read this node's Auto Scaling group from EC2"
  generation="group:$group"
fi
mkdir -p "$STATE"
printf '%s\n' "$generation" >"$STATE/generation"
joining=0
formed=$(retry 3 5 aws_ ssm get-parameter --name "${EFA_CDK_FORMED_PARAMETER:?}" --query Parameter.Value) \
  || die "could not read whether the cluster formed from SSM parameter $EFA_CDK_FORMED_PARAMETER"
if [ "$formed" = "$generation" ]; then
  joining=1
  log "generation $generation formed before this node booted (a replacement or a scale-out): joining its hostfiles"
else
  [ "$formed" = no ] || printf '%s\n' "$formed" >"$STATE/reformed" # the generation before this one
  if [ "$index" != None ] && [ "$index" != 0 ]; then
    log "node $index of generation $generation: the leader (node 0) lists the nodes and copies the hostfile here"
    exit 0
  fi
fi
want=$(retry 5 5 aws_ ssm get-parameter --name "${EFA_CDK_NODE_COUNT_PARAMETER:?}" --query Parameter.Value) \
  || die "could not read the node count from SSM parameter $EFA_CDK_NODE_COUNT_PARAMETER"
order=("-k1,1n" "-k2,2V") # node index, then address
[ "$index" != None ] || order=("-k1,1" "-k2,2V") # a group: launch time (ISO 8601 sorts as text), then address
deadline=$(($(date +%s) + ${EFA_CDK_WAIT_SECONDS:-1800}))
poll=${EFA_CDK_POLL_SECONDS:-15}
delay=$poll
while :; do
  # One line per instance: "<node index|None> <private ip> <launch time> <Auto Scaling group|None> <id>
  # <generation tag|None>". The current generation only: while CloudFormation replaces nodes, the old
  # ones still run. Explicit nodes: this node's generation, the newest instance of each index below the
  # node count (higher ones are being removed).
  # An Auto Scaling group: this node's own group (a replacement is a new group). Output: "<index> <ip> <id>",
  # a group's nodes "<launch time> <ip> <id>" (the oldest leads).
  # shellcheck disable=SC2016  # backticks are JMESPath literals, not command substitution
  nodes=$(aws_ ec2 describe-instances \
    --filters "Name=tag:efa-cdk:cluster,Values=${EFA_CDK_CLUSTER:?}" "Name=instance-state-name,Values=pending,running" \
    --query 'Reservations[].Instances[].[Tags[?Key==`efa-cdk:node-index`]|[0].Value, PrivateIpAddress, LaunchTime, Tags[?Key==`aws:autoscaling:groupName`]|[0].Value, InstanceId, Tags[?Key==`efa-cdk:generation`]|[0].Value]' |
    awk -v me="$me" -v want="$want" -v gen="$generation" '
      $2 == "None" || $2 == "" { next }
      { row[NR] = $0; group[$5] = $4 }
      END {
        for (n in row) {
          split(row[n], f, " ")
          if (!(me in group) || f[4] != group[me]) continue
          if (f[1] == "None") { print f[3], f[2], f[5]; continue }
          if ((f[6] == "None" ? "untagged" : f[6]) != gen) continue
          if (f[1] + 0 < want && (!(f[1] in newest) || f[3] > newest[f[1]])) { newest[f[1]] = f[3]; ip[f[1]] = f[2] " " f[5] }
        }
        for (i in ip) print i, ip[i]
      }' | sort "${order[@]}") || nodes=""
  have=$(grep -c . <<<"$nodes" || true)
  [ "$have" -eq "$want" ] && break
  if [ "$(date +%s)" -ge "$deadline" ]; then
    die "$have of $want nodes of this generation came up within ${EFA_CDK_WAIT_SECONDS:-1800}s (found: $(awk '{printf "%s%s", sep, $2; sep=","}' <<<"$nodes"))"
  fi
  pause=$((delay / 2 + RANDOM % (delay / 2 + 1))) # full jitter: nodes booted together spread out
  log "$have of $want nodes running; looking again in ${pause}s"
  sleep "$pause"
  delay=$((delay * 2 > 16 * poll ? 16 * poll : delay * 2))
done
# The leader (node 0, or in a group the oldest node), or a joining node, orders the nodes by EC2
# instance topology (topology.py), keeping the leader first; without an answer (the type is not
# covered, or no permission) the order stays node index / launch order, and the log says why.
my_ip=$(imds meta-data/local-ipv4 || true)
leader=0 # this node heads the list (asked once: the order below keeps the leader first)
[ "$my_ip" = "$(awk 'NR == 1 {print $2}' <<<"$nodes")" ] && leader=1
if [ "$leader" = 1 ] || [ "$joining" = 1 ]; then
  topo="$STATE/topology"
  mapfile -t ids < <(awk '{print $3}' <<<"$nodes")
  ordered=1
  topology_answers "$topo" "${ids[@]}" || ordered=0
  if [ "$ordered" = 1 ]; then
    nodes=$(python3 "$(dirname "$0")/topology.py" "$topo"/*.json <<<"$nodes" | awk '{print $1, $2}')
    log "nodes ordered by instance topology"
  else
    log "no instance topology ($(tail -n1 "$topo/error")): node index / address order"
  fi
fi
awk -v slots="${EFA_CDK_SLOTS:?}" '{print $2 " slots=" slots}' <<<"$nodes" >"$ETC/hostfile"
cp "$ETC/hostfile" "$(user_home)/hostfile"
chown "$EFA_CDK_USER:$EFA_CDK_USER" "$(user_home)/hostfile"
log "hostfile: $have nodes, $EFA_CDK_SLOTS slots each ($ETC/hostfile, ~$EFA_CDK_USER/hostfile)"
# A node that joins later hands out ~/hostfile (as the login user): the root copy follows it.
install_path hostfile hostfile-sync.sh "/home/$EFA_CDK_USER/hostfile" "the root copy of the MPI hostfile follows ~$EFA_CDK_USER/hostfile"

mapfile -t hosts < <(awk '{print $2}' <<<"$nodes")
if [ "$joining" = 1 ]; then # hand the new hostfile to every member; a member that does not answer is logged
  date -u +%FT%TZ >"$STATE/joined"
  for host in "${hosts[@]}"; do
    [ "$host" != "$my_ip" ] || continue
    retry 3 10 as_user ssh -o BatchMode=yes -o ConnectTimeout=10 "$host" "cat > hostfile" <"$(user_home)/hostfile" \
      || log "WARNING: could not give $host the new hostfile (it lists the cluster before this node joined)"
  done
  log "joined: every member has the hostfile of the $have nodes"
  exit 0
fi
[ "$leader" = 1 ] || exit 0 # Auto Scaling follower: done

reach() { # reach HOST: wait until HOST answers over the cluster key with EFA verified; give it the hostfile
  until_ok "$deadline" as_user ssh -o BatchMode=yes -o ConnectTimeout=10 "$1" test -e /var/lib/efa-cdk/verified \
    || return 1
  as_user ssh -o BatchMode=yes "$1" "cat > hostfile" <"$(user_home)/hostfile"
}
unreachable="$STATE/unreachable"
: >"$unreachable"
running=0
for host in "${hosts[@]:1}"; do
  reach "$host" || echo "$host" >>"$unreachable" &
  running=$((running + 1))
  if [ "$running" -ge 32 ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
[ -s "$unreachable" ] && die "node(s) $(paste -sd, "$unreachable") never verified EFA or are unreachable over SSH"
log "all $have nodes verified EFA and have the hostfile"
retry 3 5 aws_ ssm put-parameter --name "$EFA_CDK_FORMED_PARAMETER" --value "$generation" --overwrite >/dev/null \
  || die "could not mark the cluster formed in SSM parameter $EFA_CDK_FORMED_PARAMETER"
log "cluster formed (generation $generation): its nodes that boot from now on join the hostfiles"
