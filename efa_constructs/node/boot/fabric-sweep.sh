#!/usr/bin/env bash
# The fabric sweep (issue 43): every node of the hostfile measured against its ring neighbours, each
# round's pairs at once, then each suspect against a node known fast (sweep.py plans the rounds and
# judges: their number stays flat as the cluster grows). Names the slow node, or the slow link between
# two nodes, with its figure against the cluster's median.
#   fabric-sweep.sh [--hostfile FILE]     default: the leader's hostfile ($ETC/hostfile)
# Prints one line per node or link named and a summary line; keeps the figures, logs and verdict in
# $STATE/sweep (verdict.json). Exit 0: nothing named; 1: a node or link named, or no pair was fast;
# 4: it could not run (no hostfile, one node). Each pair: fi_pingpong over the jobs' provider, server
# on the second node and client on the first, both as the login user over the cluster's SSH key.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
hostfile="$ETC/hostfile"
[ "${1:-}" = --hostfile ] && hostfile=$2
[ -r "$hostfile" ] || { echo "efa-cdk sweep: no hostfile at $hostfile (run it on the leader, or pass --hostfile)"; exit 4; }
mapfile -t hosts < <(awk 'NF {print $1}' "$hostfile")
[ "${#hosts[@]}" -ge 2 ] || { echo "efa-cdk sweep: ${#hosts[@]} node in $hostfile: a sweep needs two"; exit 4; }

size=${EFA_CDK_SWEEP_BYTES:-4194304}     # one message size: large enough to be bandwidth, not latency
iterations=${EFA_CDK_SWEEP_ITERATIONS:-50}
threshold=${EFA_CDK_SWEEP_THRESHOLD:-0.5} # a node below this share of the median is named
[[ "$size$iterations" =~ ^[0-9]+$ ]] || { echo "efa-cdk sweep: EFA_CDK_SWEEP_BYTES and _ITERATIONS are counts"; exit 4; }
[[ "$threshold" =~ ^0?\.[0-9]*[1-9][0-9]*$ ]] ||
  { echo "efa-cdk sweep: EFA_CDK_SWEEP_THRESHOLD=$threshold: a share of the median between 0 and 1, as 0.5"; exit 4; }
out="$STATE/sweep"
rm -rf "$out"
mkdir -p "$out"
echo '{}' >"$out/figures.json"
pingpong="PATH=/opt/amazon/efa/bin:\$PATH FI_PROVIDER=$FABRIC timeout 300 fi_pingpong -p $FABRIC -e rdm -I $iterations -S $size"

measure() { # measure CLIENT SERVER: one pair's Gbps into $out/CLIENT:SERVER.gbps (0 when it failed)
  local client=$1 server=$2 log="$out/$1:$2" ok=0 listening
  as_user ssh -n -o BatchMode=yes "$server" "$pingpong" >"$log.server" 2>&1 &
  listening=$!
  # the client tries again while the server starts over SSH (lib.sh until_listening)
  until_listening 1 "$log.client" as_user ssh -n -o BatchMode=yes "$client" "$pingpong $server" 2>/dev/null && ok=1
  [ "$ok" = 1 ] || kill "$listening" 2>/dev/null || true # a failed pair: its figure is 0
  wait "$listening" || true
  python3 "$here/sweep.py" figure "$log.client" >"$log.gbps"
}

run_round() { # run_round "A:B C:D ...": the pairs at once, then their figures into figures.json
  local pair
  for pair in $1; do measure "${pair%%:*}" "${pair#*:}" & done
  wait
  for pair in $1; do
    python3 -c 'import json, sys; f = json.load(open(sys.argv[1])); f[sys.argv[2]] = float(open(sys.argv[3]).read()); json.dump(f, open(sys.argv[1], "w"))' \
      "$out/figures.json" "$pair" "$out/$pair.gbps"
  done
}

start=$(date +%s)
rounds=0
for phase in rounds next; do # the ring, then the suspects against nodes known fast
  args=("${hosts[@]}")
  [ "$phase" = rounds ] || args=("$out/figures.json" "${hosts[@]}")
  mapfile -t planned < <(python3 "$here/sweep.py" "$phase" --threshold "$threshold" "${args[@]}")
  for round in "${planned[@]}"; do
    [ -n "$round" ] || continue
    run_round "$round"
    rounds=$((rounds + 1))
  done
done

rc=0
python3 "$here/sweep.py" verdict --threshold "$threshold" "$out/figures.json" "${hosts[@]}" >"$out/verdict.json" || rc=$?
python3 - "$out/verdict.json" "$rounds" "$(($(date +%s) - start))" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
v["rounds"], v["seconds"] = int(sys.argv[2]), int(sys.argv[3])
json.dump(v, open(sys.argv[1], "w"), separators=(",", ":"))
for host, gbps in v["slow_nodes"].items():
    print(f"efa-cdk sweep: SLOW node {host}: {gbps:g} Gbps, the cluster's median {v['median_gbps']:g} Gbps")
for link, gbps in v["slow_links"].items():
    print(f"efa-cdk sweep: SLOW link {link.replace(':', ' <-> ')}: {gbps:g} Gbps, the median {v['median_gbps']:g} Gbps")
if v["no_fast_pair"]:
    print("efa-cdk sweep: no pair measured fast: the whole fabric is slow or failing (see the logs in the sweep folder)")
named = len(v["slow_nodes"]) + len(v["slow_links"])
print(f"efa-cdk sweep: {len(v['nodes'])} nodes, {v['pairs']} pairs in {v['rounds']} rounds, {v['seconds']} s; "
      f"median {v['median_gbps']:g} Gbps; {named or 'none'} named")
PY
exit "$rc"
