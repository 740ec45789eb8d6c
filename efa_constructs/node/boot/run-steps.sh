#!/usr/bin/env bash
# Run the node's steps in order, each logged with its timing. When the list has a `signal` step,
# a failure before it signals FAILURE to CloudFormation (so `cdk deploy` stops with this node's
# reason); a failure after it (hostfile, benchmarks) is reported to the benchmark wait condition at
# once as FAILURE with the reason, unless a report was already posted. Without `signal` (a step re-run by hand, e.g.
# `sudo /opt/efa-cdk/bin/run-steps.sh hostfile`), nothing is signalled.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
mkdir -p "$STATE"
total=$#
i=0
pending=0 # 1 while a `signal` step is still ahead
for step in "$@"; do [ "$step" = signal ] && pending=1; done
for step in "$@"; do
  i=$((i + 1))
  log "==> step $i/$total: $step"
  start=$(date +%s)
  rm -f "$STATE/failure"
  if STEP=$step bash "$here/$step.sh"; then
    log "<== $step done in $(($(date +%s) - start))s"
    [ "$step" = signal ] && pending=0
    continue
  fi
  reason="$step: $(cat "$STATE/failure" 2>/dev/null || echo "exited non-zero, see /var/log/efa-cdk.log")"
  log "!!! $reason"
  if [ "$pending" = 1 ]; then
    STEP=signal bash "$here/signal.sh" FAILURE "$reason" || log "could not signal CloudFormation"
  elif [ -n "${EFA_CDK_BENCHMARK_URL:-}" ] && [ ! -s "$STATE/benchmarks.json" ] && [ "${EFA_CDK_ON_DEMAND:-0}" != 1 ]; then
    # After this node's own signal, the stack still waits for the benchmark report: fail it now,
    # with the reason, instead of leaving it to time out (a report already posted is not replaced).
    report_fault "$reason" || log "could not report the failure to the benchmark wait condition"
  fi
  exit 1
done
log "all $total steps done"
