#!/usr/bin/env bash
# The ladder of mends for the devices' problems: device-health.sh hands them on stdin, one a line, each
# ending ": mend: watch|reset|reboot|replace" (devices.py; a line without one asks for a reboot). The worst
# problem's mend is made, the cheapest first, and a fault that outlives the mend made for it climbs a rung:
#   reset    drain (Slurm: scontrol, reason "efa-cdk: ..."), wait for the node's work to end, reset the GPUs
#            (nvidia-smi -r, the daemons that hold them stopped meanwhile), then check again at once (exit 3);
#            a reset that fails, or a node without nvidia-smi, climbs to reboot
#   reboot   drain, wait, reboot: bounded (an Auto Scaling node takes the group's replacement claim,
#            replace-node.sh --claim-only; any other node reboots at most once per EFA_CDK_REPLACE_MINUTES,
#            default 60); the check after the boot resumes the node
#   replace  drain; an Auto Scaling node marks itself Unhealthy (replace-node.sh, bounded); on ParallelCluster
#            clustermgtd replaces a drained node once its jobs end; elsewhere the log and the tag say how
# A node this ladder drained is resumed when a check finds nothing, and only while Slurm's reason is still
# efa-cdk's (an operator's own drain stays). Each check publishes EfaDeviceFaults per mend (where the cluster
# has a namespace) and keeps the instance's tag efa-cdk:device-fault, which `efa-cdk status` shows.
# State: $STATE/mend/ (fault: the problem being mended, rung, done: the last mend made for it).
# Exit 0: nothing more this check; 3: a mend was made, check again now.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
STEP=mend
M="$STATE/mend"
TAG_KEY=efa-cdk:device-fault
mkdir -p "$M"
# each problem with its mend (devices.py mends: "<mend><tab><line>")
mapfile -t marked < <(python3 "$here/devices.py" mends)
lines=() mends=()
for entry in "${marked[@]}"; do mends+=("${entry%%$'\t'*}") lines+=("${entry#*$'\t'}"); done
# the rung after RUNG: reset -> reboot -> replace
climb() { case $1 in reset) echo reboot ;; *) echo replace ;; esac; }
rank() { case $1 in watch) echo 0 ;; reset) echo 1 ;; reboot) echo 2 ;; *) echo 3 ;; esac; }
higher() { if [ "$(rank "$1")" -ge "$(rank "$2")" ]; then echo "$1"; else echo "$2"; fi; } # the later rung

publish() { # EfaDeviceFaults per mend: how many problems ask for it (0 included, so the graph falls back)
  [ -n "${EFA_CDK_METRICS_NAMESPACE:-}" ] || return 0
  local data=() mend n m
  for mend in watch reset reboot replace; do
    n=0
    for m in "${mends[@]}"; do [ "$m" != "$mend" ] || n=$((n + 1)); done
    data+=("MetricName=EfaDeviceFaults,Dimensions=[{Name=Mend,Value=$mend}],Value=$n")
  done
  retry 3 5 aws_ cloudwatch put-metric-data --namespace "$EFA_CDK_METRICS_NAMESPACE" --metric-data "${data[@]}" \
    || log "could not publish EfaDeviceFaults"
}

instance() { imds meta-data/instance-id 2>/dev/null; }
# tag_node VALUE (or nothing: remove it): best effort, efa-cdk status reads it; a tag value holds 256 characters
tag_node() {
  local id
  id=$(instance) || return 0
  if [ $# -eq 0 ]; then
    aws_ ec2 delete-tags --resources "$id" --tags "Key=$TAG_KEY" >/dev/null 2>&1 || true
  else
    # as JSON: the CLI's shorthand would read a quote or a comma in the problem's words as its own syntax
    local tags
    tags=$(python3 -c 'import json, sys; print(json.dumps([{"Key": sys.argv[1], "Value": sys.argv[2][:256]}]))' \
      "$TAG_KEY" "$1")
    aws_ ec2 create-tags --resources "$id" --tags "$tags" >/dev/null 2>&1 \
      || log "could not tag $id $TAG_KEY (its role may not tag instances)"
  fi
}

# ---- the scheduler: Slurm where this node runs slurmd (ParallelCluster, PCS) ----------------------------
slurm_node() { # this node's Slurm name: NodeHostName or NodeAddr is this host, or NodeName its short name
  [ -x "$SLURM_BIN/scontrol" ] || return 1
  local host addrs
  host=$(hostname -s 2>/dev/null || hostname)
  addrs=" $(hostname -I 2>/dev/null || true) "
  "$SLURM_BIN/scontrol" show nodes -o 2>/dev/null | tr ' ' '\n' | awk -v host="$host" -v addrs="$addrs" -F= '
    $1 == "NodeName" { name = $2 }
    ($1 == "NodeName" && $2 == host) || ($1 == "NodeHostName" && $2 == host) \
      || ($1 == "NodeAddr" && index(addrs, " " $2 " ")) { print name; exit }'
}
node=$(slurm_node || true)
slurm_says() { "$SLURM_BIN/scontrol" show node "$node" -o 2>/dev/null; }

drain() { # drain WHY: no new work starts here (Slurm); running work goes on
  [ -n "$node" ] || return 0
  slurm_says | grep -q ' State=[^ ]*DRAIN' && return 0
  if "$SLURM_BIN/scontrol" update nodename="$node" state=drain reason="efa-cdk: ${1:0:200}"; then
    log "drained Slurm node $node: $1"
  else
    log "could not drain Slurm node $node"
  fi
}
resume() {
  [ -n "$node" ] || return 0
  if slurm_says | grep -q ' Reason=efa-cdk:'; then
    if "$SLURM_BIN/scontrol" update nodename="$node" state=resume; then
      log "resumed Slurm node $node"
    else
      log "could not resume Slurm node $node"
    fi
  fi
}
# Work on the node: Slurm jobs (allocated, mixed, completing), or a process (not the drivers' own daemons)
# holding a GPU, a Neuron device or an EFA verbs device open.
busy() {
  if [ -n "$node" ] && slurm_says | grep -Eq ' State=[^ ]*(ALLOC|MIX|COMP)'; then return 0; fi
  local fd pid
  while IFS= read -r fd; do
    pid=${fd#"$R"/proc/} pid=${pid%%/*}
    case $(cat "$R/proc/$pid/comm" 2>/dev/null) in
      nvidia-persiste* | nv-fabricmanage* | nv-hostengine | dcgm*) ;;
      *) return 0 ;;
    esac
  done < <(find "$R"/proc/[0-9]*/fd -maxdepth 1 \( -lname '/dev/nvidia[0-9]*' -o -lname '/dev/neuron[0-9]*' \
    -o -lname '/dev/infiniband/uverbs*' \) 2>/dev/null)
  return 1
}

# ---- the mends ----------------------------------------------------------------------------------------
GPU_DAEMONS=(nvidia-persistenced nvidia-fabricmanager nvidia-dcgm)
reset_gpus() { # nvidia-smi -r: every GPU (NVSwitch systems reset them together), their daemons stopped
  command -v nvidia-smi >/dev/null || { log "no nvidia-smi: a reset cannot be done here" && return 1; }
  local stopped=() unit out rc=0
  for unit in "${GPU_DAEMONS[@]}"; do
    systemctl is-active --quiet "$unit" 2>/dev/null && systemctl stop "$unit" && stopped+=("$unit")
  done
  out=$(nvidia-smi -r 2>&1) || rc=$?
  for unit in "${stopped[@]}"; do systemctl start "$unit" || log "could not start $unit again"; done
  [ "$rc" = 0 ] || log "nvidia-smi -r failed ($rc): $(head -c 300 <<<"$out")"
  return "$rc"
}

reboot_node() {
  if [ "${EFA_CDK_NODE_GROUP:-explicit}" = asg ]; then
    bash "$here/replace-node.sh" --claim-only "reboot: $1" || {
      tag_node "reboot held back: $1"
      return 0
    }
  else
    local last window=$((${EFA_CDK_REPLACE_MINUTES:-60} * 60)) now
    now=$(date +%s)
    last=$(cat "$STATE/mend-rebooted-at" 2>/dev/null || echo 0)
    if [ $((now - last)) -lt "$window" ]; then
      log "NOT REBOOTED: this node rebooted for a device $(((now - last) / 60)) min ago (at most once per $((window / 60)) min): $1"
      tag_node "reboot held back: $1"
      return 0
    fi
    echo "$now" >"$STATE/mend-rebooted-at"
  fi
  echo reboot >"$M/done"
  tag_node "rebooting: $1"
  log "REBOOTING for: $1"
  systemctl reboot
}

replace_node() {
  echo replace >"$M/done"
  tag_node "replace: $1"
  case "${EFA_CDK_NODE_GROUP:-explicit}" in
    asg) bash "$here/replace-node.sh" "$1" || true ;;
    parallelcluster) log "REPLACE: drained; ParallelCluster's clustermgtd replaces a drained node once its jobs end: $1" ;;
    pcs) log "REPLACE: drained; terminate this instance once its jobs end (the node group launches another): $1" ;;
    *) log "REPLACE: this node needs replacing: cdk deploy -c node_replacements=$(tag efa-cdk:node-index 2>/dev/null || echo INDEX):<a new label> (docs/operate.md): $1" ;;
  esac
}

# ---- the ladder ---------------------------------------------------------------------------------------
publish
acting=() acting_mends=() worst=watch
for i in "${!lines[@]}"; do
  if [ "${mends[$i]}" = watch ]; then
    log "watched: ${lines[$i]}"
  else
    acting+=("${lines[$i]}") acting_mends+=("${mends[$i]}")
    worst=$(higher "$worst" "${mends[$i]}")
  fi
done
if [ "${#acting[@]}" -eq 0 ]; then
  if [ -s "$M/fault" ]; then
    log "MENDED: $(cat "$M/fault") (by $(cat "$M/done" 2>/dev/null || echo "itself"))"
    resume
    tag_node
    rm -f "$M/fault" "$M/rung" "$M/done"
  fi
  exit 0
fi
for i in "${!acting[@]}"; do [ "${acting_mends[$i]}" = "$worst" ] && first=${acting[$i]} && break; done
key=$(sed -E 's/ \([^()]*\): mend: [a-z]+$//' <<<"$first") # the fault without its reading
rung=$worst
if [ "$(cat "$M/fault" 2>/dev/null)" = "$key" ] && [ -s "$M/done" ]; then
  rung=$(higher "$rung" "$(climb "$(cat "$M/done")")") # the mend made did not hold: the next rung
  log "still: $first (after a $(cat "$M/done")): climbing to $rung"
else
  rm -f "$M/done"
fi
printf '%s\n' "$key" >"$M/fault"
echo "$rung" >"$M/rung"
[ "${#acting[@]}" -eq 1 ] || log "and $((${#acting[@]} - 1)) more: $(printf '%s; ' "${acting[@]:1}")"

drain "$rung: $first"
if [ "$rung" = replace ]; then
  replace_node "$first"
  exit 0
fi
if busy; then
  log "PENDING $rung: $first (drained; waiting for this node's work to end)"
  tag_node "$rung pending: $first"
  exit 0
fi
if [ "$rung" = reset ]; then
  if reset_gpus; then
    echo reset >"$M/done"
    log "RESET the GPUs for: $first; checking again"
    tag_node "reset done, checking: $first"
    exit 3
  fi
  rung=reboot
  echo reboot >"$M/rung"
fi
reboot_node "$first"
