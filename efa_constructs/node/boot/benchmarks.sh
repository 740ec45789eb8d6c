#!/usr/bin/env bash
# On the leader (the hostfile's first node): once every node in the hostfile has verified EFA, run the
# cross-node benchmarks chosen for the accelerator, keep logs and JSON in $STATE, publish the figures
# as CloudWatch metrics, and report them to the stack's benchmark wait condition (the stack outputs).
# On demand (EFA_CDK_ON_DEMAND=1: the stack's SSM document, or by hand) it publishes and keeps a dated
# copy, and posts nothing to CloudFormation.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
if [ -r "$R/etc/profile.d/efa-cdk.sh" ]; then
  # shellcheck source=/dev/null
  . "$R/etc/profile.d/efa-cdk.sh" # EFA, Open MPI and aws-ofi-nccl paths (efa-env step)
fi
PATH="$(efa_path):/opt/aws/neuron/bin"
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"

url=${EFA_CDK_BENCHMARK_URL:-}
[ -n "$url" ] || [ "${EFA_CDK_ON_DEMAND:-0}" = 1 ] || die "no benchmark wait condition (EFA_CDK_BENCHMARK_URL)"
out="$STATE/benchmarks"
mkdir -p "$out"
rm -f "$out"/*.json

# keep_results: this generation's results in the cluster's SSM parameter (EFA_CDK_RESULTS_PARAMETER), with
# when and which generation, where `efa-cdk status` reads them: the BenchmarkResults output is the
# creation's (a wait condition takes one answer). Intelligent-Tiering: a body over 4 KB is stored.
keep_results() {
  [ -n "${EFA_CDK_RESULTS_PARAMETER:-}" ] || return 0
  python3 -c 'import json, sys; body = json.load(open(sys.argv[1])); print(json.dumps({"generation": sys.argv[2], "at": sys.argv[3], "status": body["Status"], "data": json.loads(body["Data"])}, separators=(",", ":")))' \
    "$out/signal.json" "$(cat "$STATE/generation" 2>/dev/null || echo unknown)" "$(date -u +%FT%TZ)" >"$out/results.json"
  retry 3 5 aws_ ssm put-parameter --name "$EFA_CDK_RESULTS_PARAMETER" --tier Intelligent-Tiering --overwrite \
    --value "file://$out/results.json" >/dev/null || log "could not keep the results in SSM parameter $EFA_CDK_RESULTS_PARAMETER"
}

# Not strict (the default): a benchmark problem is reported as data and the stack still completes;
# strict (EFA_CDK_BENCHMARK_STRICT=1): it fails the stack. EFA faults fail it either way (report_fault).
report() { # report JSON...: publish the figures, and (at creation) post them to the wait condition
  local strict=()
  [ "${EFA_CDK_BENCHMARK_STRICT:-0}" = 1 ] || strict=(--not-strict)
  python3 "$here/bench_parse.py" signal-body "${strict[@]}" "$@" >"$out/signal.json"
  if [ -n "${EFA_CDK_METRICS_NAMESPACE:-}" ]; then
    python3 "$here/bench_parse.py" metric-data "$@" >"$out/metrics.json"
    [ "$(cat "$out/metrics.json")" = "[]" ] || retry 3 5 aws_ cloudwatch put-metric-data \
      --namespace "$EFA_CDK_METRICS_NAMESPACE" --metric-data "file://$out/metrics.json" \
      || log "could not publish the benchmark figures to CloudWatch"
  fi
  if [ "${EFA_CDK_ON_DEMAND:-0}" = 1 ]; then # re-run by hand or SSM: keep a dated copy, post nothing
    cp "$out/signal.json" "$STATE/benchmarks-$(date -u +%Y%m%dT%H%M%SZ).json"
    keep_results # the newest figures (and fabric sweep) are what status shows and health checks read
    log "on demand: $(cat "$out/signal.json")"
  else
    cp "$out/signal.json" "$STATE/benchmarks.json"
    keep_results
    if [ -e "$STATE/reformed" ]; then # a later generation: the stack's wait condition completed long ago
      retry 2 10 curl -sS -f -X PUT -H 'Content-Type:' --data-binary "@$out/signal.json" "$url" \
        || log "the stack's wait condition did not take this generation's results (it completed at creation)"
    else
      retry 5 10 curl -sS -f -X PUT -H 'Content-Type:' --data-binary "@$out/signal.json" "$url" \
        || die "could not report the benchmark results to CloudFormation"
    fi
    log "reported: $(cat "$out/signal.json")"
  fi
  grep -q '"Status": "SUCCESS"' "$out/signal.json"
}

# A node that joined a formed cluster (a replacement, a scale-out) runs none: benchmarks run at the
# cluster's creation, not across a cluster whose jobs may be running (on demand they run on purpose).
if [ -e "$STATE/joined" ] && [ "${EFA_CDK_ON_DEMAND:-0}" != 1 ]; then
  log "joined a formed cluster: the benchmarks ran at its formation (re-run them on demand)"
  exit 0
fi
# Followers have no $ETC/hostfile (the leader lists the nodes; they get ~/hostfile from it).
[ -r "$ETC/hostfile" ] || { log "not the leader; nothing to run"; exit 0; }
mapfile -t hosts < <(awk '{print $1}' "$ETC/hostfile")
# The leader is the hostfile's first node: node 0, or in an Auto Scaling group the oldest node.
[ "$(imds meta-data/local-ipv4 || true)" = "${hosts[0]:-}" ] || { log "not the leader; nothing to run"; exit 0; }
if [ "${#hosts[@]}" -lt 2 ]; then
  printf '{"benchmark":"all","ok":true,"skipped":"one node: cross-node benchmarks need two"}\n' >"$out/skipped.json"
  report "$out/skipped.json"
  exit 0
fi

benchmarks=${EFA_CDK_BENCHMARKS:?}
if [ "${EFA_CDK_SWEEP_ONLY:-0}" = 1 ]; then # the health timer's sweep: no benchmark, the sweep alone
  benchmarks=""
  [ "${#hosts[@]}" -ge 3 ] || { log "a fabric sweep needs three nodes: ${#hosts[@]} here"; exit 0; }
fi
log "${#hosts[@]} nodes (the hostfile step saw each verify EFA); running: ${benchmarks:-the fabric sweep}"

nodes=${#hosts[@]}
slots=${EFA_CDK_SLOTS:?}
rate=${EFA_CDK_LINE_RATE_GBPS:-0}
mpi_env=(-x "FI_PROVIDER=$FABRIC" -x PATH -x LD_LIBRARY_PATH)
[ "${EFA_CDK_RDMA_READ:-0}" = 1 ] && mpi_env+=(-x FI_EFA_USE_DEVICE_RDMA=1)

# Where the tools run: as the login user on the host, or (with a container image) inside the image;
# `here_run` is the prefix for a command the leader runs itself (root on the host).
if [ -n "${EFA_CDK_CONTAINER_IMAGE:-}" ]; then
  in_image=(docker exec efa-cdk) here_run=(docker exec efa-cdk) mpi_hostfile=/efa-cdk/etc/hostfile
else
  in_image=(as_user) here_run=() mpi_hostfile="$ETC/hostfile"
fi

run_nccl_tests() {
  [ -z "${EFA_CDK_CONTAINER_IMAGE:-}" ] || { in_image_nccl_tests; return; }
  # The GPU DLAMI keeps nccl-tests per CUDA (/usr/local/cuda-X.Y/efa/test-cuda-X.Y): take the CUDA
  # /usr/local/cuda points to, and give the ranks that CUDA's libraries and its EFA build of NCCL.
  local cuda dir bin
  cuda=$(readlink -f "$R/usr/local/cuda" || true)
  dir=${EFA_CDK_NCCL_TESTS:-$cuda/efa/test-cuda-${cuda##*/cuda-}}
  bin="$dir/all_reduce_perf"
  [ -n "${EFA_CDK_NCCL_TESTS:-}$cuda" ] && [ -x "$bin" ] || {
    echo "all_reduce_perf not found in ${dir:-/usr/local/cuda (missing)} (set EFA_CDK_NCCL_TESTS to its directory)"
    return 1
  }
  [ -n "$cuda" ] && LD_LIBRARY_PATH="$cuda/efa/lib:$cuda/lib:$cuda/lib64:$LD_LIBRARY_PATH"
  # Open MPI by absolute path with --prefix, as AWS's EFA examples run it: remote orted is found over
  # non-interactive SSH, whose PATH (Ubuntu's) lacks /opt/amazon/openmpi/bin.
  local mpi="$R/opt/amazon/openmpi"
  [ -x "$mpi/bin/mpirun" ] || { echo "Open MPI not found at $mpi/bin/mpirun (EFA installer's Open MPI)"; return 1; }
  as_user "$mpi/bin/mpirun" --prefix "$mpi" -n $((nodes * slots)) -N "$slots" --hostfile "$ETC/hostfile" --tag-output \
    "${mpi_env[@]}" -x NCCL_DEBUG=INFO --mca pml ^cm --mca btl tcp,self \
    --mca btl_tcp_if_exclude lo,docker0 --bind-to none \
    "$bin" -b 8 -e 1G -f 2 -g 1 -c 1 -n 100
}
# With a container image (the container step started it on every node), the benchmarks run INSIDE
# it: mpirun and the tools from the image, ranks reached over the containers' SSH port.
in_image_nccl_tests() {
  local bin
  bin=$("${in_image[@]}" sh -c 'command -v all_reduce_perf || ls /opt/nccl-tests/build/all_reduce_perf' 2>/dev/null) \
    || { echo "all_reduce_perf not found in $EFA_CDK_CONTAINER_IMAGE (on PATH or /opt/nccl-tests/build)"; return 1; }
  "${in_image[@]}" mpirun --allow-run-as-root -n $((nodes * slots)) -N "$slots" --hostfile "$mpi_hostfile" \
    --tag-output -x "FI_PROVIDER=$FABRIC" -x NCCL_DEBUG=INFO --mca pml ^cm --mca btl tcp,self \
    --mca btl_tcp_if_exclude lo,docker0 --bind-to none "$bin" -b 8 -e 1G -f 2 -g 1 -c 1 -n 100
}
run_nccom_test() {
  "${in_image[@]}" env "FI_PROVIDER=$FABRIC" NEURON_RT_ROOT_COMM_ID="${hosts[0]}:45654" \
    nccom-test -r $((nodes * slots)) -N "$nodes" -b 8 -e 1GB -f 2 -n 20 -w 5 -d fp32 allr --hosts "${hosts[@]}"
}
run_fi_pingpong() { # server on the second node, client here (in the image when there is one)
  # -I: iterations per message size, the same on both sides (EFA_CDK_PINGPONG_ITERATIONS: fewer where the
  # fabric is slow, as the one-machine cluster's tcp stand-in is); the server outlives the client's tries.
  local iterations=${EFA_CDK_PINGPONG_ITERATIONS:-1000}
  [[ "$iterations" =~ ^[1-9][0-9]{0,5}$ ]] || { echo "EFA_CDK_PINGPONG_ITERATIONS is not a count: $iterations"; return 1; }
  "${in_image[@]}" ssh -o BatchMode=yes "${hosts[1]}" \
    "PATH=/opt/amazon/efa/bin:\$PATH timeout 330 fi_pingpong -p $FABRIC -e rdm -I $iterations -S all" >"$out/fi_pingpong-server.log" 2>&1 &
  local rc=0 # the client tries again while the server starts (lib.sh until_listening), for up to a minute
  until_listening 3 "$out/fi_pingpong-client.log" "${here_run[@]}" env "PATH=/opt/amazon/efa/bin:$PATH" \
    "FI_PROVIDER=$FABRIC" timeout 240 fi_pingpong -p "$FABRIC" -e rdm -I "$iterations" -S all "${hosts[1]}" || rc=$?
  cat "$out/fi_pingpong-client.log"
  return "$rc"
}

run_hccl_demo() { # HabanaAI/hccl_demo's MPI mode over the hostfile (README "Examples - MPI mode")
  local demo=${EFA_CDK_HCCL_DEMO:-/hccl_demo}
  "${in_image[@]}" sh -c "cd '$demo' 2>/dev/null && test -f run_hccl_demo.py" \
    || { echo "hccl_demo not found in $demo (build HabanaAI/hccl_demo there, or set EFA_CDK_HCCL_DEMO)"; return 1; }
  "${in_image[@]}" sh -c "cd '$demo' && python3 run_hccl_demo.py --test all_reduce --loop 1000 --size 32m -mpi --hostfile $mpi_hostfile"
}

# failed_result NAME WHY: NAME's result (out/NAME.json) as a failure, the reason WHY and its log's last line
# (out/NAME.log; quotes and backslashes dropped, so the JSON holds).
failed_result() {
  local reason
  reason=$(tail -n1 "$out/$1.log" | tr -d "\"\\\\" | cut -c1-200)
  printf '{"benchmark":"%s","ok":false,"reason":"%s: %s"}\n' "$1" "$2" "$reason" >"$out/$1.json"
}

results=()
for bench in $benchmarks; do
  log "running $bench"
  fn="run_${bench//-/_}"
  if ! declare -F "$fn" >/dev/null; then
    printf '{"benchmark":"%s","ok":false,"reason":"unknown benchmark"}\n' "$bench" >"$out/$bench.json"
  elif "$fn" >"$out/$bench.log" 2>&1; then
    # fi_pingpong drives one EFA: compare it with one card's rate, the collectives with the node's.
    [ "$bench" = fi_pingpong ] && bench_rate=${EFA_CDK_CARD_GBPS:-0} || bench_rate=$rate
    python3 "$here/bench_parse.py" "$bench" "$out/$bench.log" --line-rate-gbps "$bench_rate" --provider "$FABRIC" \
      ${EFA_CDK_CONTAINER_IMAGE:+--image "$EFA_CDK_CONTAINER_IMAGE"} >"$out/$bench.json" || true
  else
    failed_result "$bench" "exited non-zero"
  fi
  log "$bench: $(cat "$out/$bench.json")"
  results+=("$out/$bench.json")
done
# The fabric sweep (fabric-sweep.sh): which node or link is slow, from three nodes up (two cannot tell
# which of them it is). Its verdict is one more result: reported, published, and in strict mode fatal.
if [ "$nodes" -ge 3 ]; then
  log "running the fabric sweep"
  bash "$here/fabric-sweep.sh" >"$out/fabric-sweep.log" 2>&1 || true
  if [ -s "$STATE/sweep/verdict.json" ]; then
    python3 "$here/sweep.py" result "$STATE/sweep/verdict.json" >"$out/fabric-sweep.json"
  else
    failed_result fabric-sweep "did not finish"
  fi
  log "fabric-sweep: $(cat "$out/fabric-sweep.json")"
  results+=("$out/fabric-sweep.json")
fi
# The storage benchmark (lustre-bench.sh): direct I/O from every node at once to the FSx for Lustre file
# system, and the share of Lustre's traffic that rode EFA. Not in the health timer's sweep-only runs.
if [ -n "${EFA_CDK_LUSTRE_DNS:-}" ] && [ "${EFA_CDK_SWEEP_ONLY:-0}" != 1 ]; then
  log "running the storage benchmark"
  bash "$here/lustre-bench.sh" >"$out/lustre.json" 2>"$out/lustre.log" || true
  if ! [ -s "$out/lustre.json" ]; then
    failed_result lustre "did not finish"
  fi
  log "lustre: $(cat "$out/lustre.json")"
  results+=("$out/lustre.json")
fi
report "${results[@]}" || die "benchmarks failed: $(python3 -c 'import json,sys; print(json.load(sys.stdin)["Reason"])' <"$out/signal.json")"
if grep -q '"ok":false' "$out/signal.json"; then
  log "benchmark problems reported as data (EFA_CDK_BENCHMARK_STRICT=1 fails the stack on them)"
fi
