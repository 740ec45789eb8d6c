#!/usr/bin/env bash
# Start a node's own Docker engine (Debian's docker.io) in the node's namespaces and wait until it
# answers: data, state and socket under ROOT/docker and ROOT/run, no bridge and no iptables (the
# containers use host networking, which is the node's network namespace). Run by node.sh at boot, and
# by the harness to start the engine again after stopping it (a node's stop/start).
set -euo pipefail
root=$1
mkdir -p "$root/docker/data" "$root/docker/exec" "$root/run"
dockerd --data-root="$root/docker/data" --exec-root="$root/docker/exec" --pidfile="$root/run/dockerd.pid" \
  --host="unix://$root/run/docker.sock" --bridge=none --iptables=false --ip6tables=false \
  >>"$root/var/log/dockerd.log" 2>&1 &
for _ in $(seq 120); do
  DOCKER_HOST="unix://$root/run/docker.sock" docker version >/dev/null 2>&1 && exit 0
  sleep 0.5
done
echo "dockerd did not answer in 60 s: $(tail -n3 "$root/var/log/dockerd.log")" >&2
exit 1
