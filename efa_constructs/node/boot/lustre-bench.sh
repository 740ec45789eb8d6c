#!/usr/bin/env bash
# The storage benchmark (issue 44): direct I/O to FSx for Lustre from every node at once, run by the leader's
# benchmarks step beside the fabric figures. Prints the result JSON (node/lnet.py bench).
#   lustre-bench.sh                 the leader: every node of the hostfile, phase by phase
#   lustre-bench.sh --node PHASE    on one node (root): counts (lnetctl net show -v), write or read
# EFA_CDK_LUSTRE_BENCH_MIB: MiB each node writes and reads (default 1024), in 1 MiB direct blocks.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
fs="$R${EFA_CDK_LUSTRE_DIR:-/fsx}"
mib=${EFA_CDK_LUSTRE_BENCH_MIB:-1024}
[[ "$mib" =~ ^[1-9][0-9]{0,6}$ ]] || { echo "EFA_CDK_LUSTRE_BENCH_MIB is not a size in MiB: $mib" >&2; exit 1; }

if [ "${1:-}" = --node ]; then
  # Root writes and reads in a directory of its own, made new for each run (mktemp -d: 0700, a name no one can
  # foresee) and kept (name and inode) in root's state, so no link or file a user put in the file system is
  # followed (lib.sh own_dir).
  mkdir -p "$STATE"
  kept="$STATE/lustre-bench-dir.$(hostname)"
  case "${2:-}" in
    counts) lnetctl net show -v ;;
    write)
      run=$(mktemp -d "$fs/.efa-cdk-bench.XXXXXXXX")
      if ! { exec {dir}<"$run"; } 2>/dev/null || ! inode=$(own_dir "$dir" "$fs"); then
        echo "${run#"$R"} is not the directory this run made: not written" >&2 && exit 1
      fi
      printf '%s %s\n' "$run" "$inode" >"$kept"
      dd if=/dev/zero of="/proc/self/fd/$dir/data" bs=1M count="$mib" oflag=direct,nofollow conv=excl 2>&1 ;;
    read)
      read -r run inode <"$kept" 2>/dev/null || run=
      case "$run" in "$fs"/.efa-cdk-bench.*) ;; *) echo "no write of this node to read back" >&2 && exit 1 ;; esac
      rm -f "$kept"
      if ! { exec {dir}<"$run"; } 2>/dev/null || ! own_dir "$dir" "$fs" "$inode" >/dev/null; then
        echo "${run#"$R"} is no longer the directory this run made: not read" >&2 && exit 1
      fi
      dd if="/proc/self/fd/$dir/data" of=/dev/null bs=1M iflag=direct,nofollow 2>&1
      rm -f "/proc/self/fd/$dir/data"
      rmdir "$run" 2>/dev/null || true ;; # only ever an empty directory
    *) echo "usage: lustre-bench.sh --node counts|write|read" >&2 && exit 2 ;;
  esac
  exit 0
fi

mapfile -t hosts < <(awk '{print $1}' "$ETC/hostfile")
me=$(imds meta-data/local-ipv4 || true)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# every_node PHASE: PHASE on every node at once (the leader itself without SSH), each node's output in
# $work/<host>.<name> (name: PHASE, or the counts' before/after); the phase's wall time in seconds.
every_node() {
  local phase=$1 name=${2:-$1} host pids=() start end
  start=$(date +%s.%N)
  for host in "${hosts[@]}"; do
    if [ "$host" = "$me" ]; then
      bash "$here/lustre-bench.sh" --node "$phase" >"$work/$host.$name" 2>&1 &
    else
      as_user ssh -o BatchMode=yes "$host" sudo -n /opt/efa-cdk/bin/lustre-bench.sh --node "$phase" \
        >"$work/$host.$name" 2>&1 &
    fi
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  end=$(date +%s.%N)
  python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.3f}")' "$start" "$end"
}
log "storage benchmark: ${#hosts[@]} nodes, $mib MiB each, direct I/O to ${fs#"$R"}"
every_node counts before >/dev/null
printf 'write %s\n' "$(every_node write)" >"$work/phases"
printf 'read %s\n' "$(every_node read)" >>"$work/phases"
every_node counts after >/dev/null
efa=()
[ "${EFA_CDK_LUSTRE_EFA_INTERFACES:-0}" = 0 ] || efa=(--efa)
python3 "$here/lnet.py" bench "$work" "${efa[@]}"
