#!/usr/bin/env bash
# Run the cluster's image on this node so the job inside reaches the fabric, and prove it does:
# `docker run` with the arguments efa_constructs.core.containers.ContainerRun chose for the type
# (host network and IPC, unlimited locked memory, a restart policy, the accelerators, the EFA
# environment) and the node's EFA devices (the verbs device of each device bound to the efa driver:
# efa_uverbs), an SSH server inside on EFA_CDK_CONTAINER_SSH_PORT with the cluster key (so mpirun in
# the leader's container reaches every node's), then libfabric's EFA provider checked INSIDE the
# image. The leader also waits until it reaches every node's container over SSH. The restart policy
# brings the container and its SSH server back when Docker starts again (a node stop/start).
#
# A fault of the image (it cannot be pulled or started, or has no EFA provider inside) comes after the
# node verified EFA on the host: with strict benchmarks it fails the stack like any fault; otherwise it
# is the cluster's benchmark result (ok: false, the image and the reason) and the stack completes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

image_fault() {
  [ "${EFA_CDK_BENCHMARK_STRICT:-0}" != 1 ] || die "$1"
  log "IMAGE FAULT (reported as the benchmark result; EFA_CDK_BENCHMARK_STRICT=1 fails the stack): $1"
  mkdir -p "$STATE/benchmarks"
  python3 -c 'import json, sys; print(json.dumps({"benchmark": "container", "ok": False, "image": sys.argv[1], "reason": sys.argv[2]}))' \
    "$image" "$1" >"$STATE/benchmarks/container.json"
  python3 "$here/bench_parse.py" signal-body --not-strict "$STATE/benchmarks/container.json" >"$STATE/benchmarks.json"
  if [ -n "${EFA_CDK_BENCHMARK_URL:-}" ] && [ "${EFA_CDK_ON_DEMAND:-0}" != 1 ]; then
    retry 5 10 curl -sS -f -X PUT -H 'Content-Type:' --data-binary "@$STATE/benchmarks.json" "$EFA_CDK_BENCHMARK_URL" \
      || log "could not report the image fault to CloudFormation"
  fi
  printf '%s\n' "$1" >"$STATE/failure"
  exit 1 # the steps after this one need the container; run-steps sees the result already reported
}

image=${EFA_CDK_CONTAINER_IMAGE:?}
port=${EFA_CDK_CONTAINER_SSH_PORT:?}
if ! command -v docker >/dev/null && [ "$(os_id)" = amzn ]; then # Amazon Linux 2023 packages Docker
  dnf install -y -q docker >/dev/null || die "could not install docker from the Amazon Linux repositories"
  systemctl enable --now docker >/dev/null || die "could not start docker"
fi
command -v docker >/dev/null \
  || die "no docker on this image: the DLAMIs have it (with the NVIDIA/Neuron toolkits); otherwise add a step that installs it"
case " ${EFA_CDK_CONTAINER_ARGS:?} " in
  *" --runtime=habana "*) # Gaudi: register the habana runtime with Docker (docs.habana.ai, "Docker Installation")
    [ -x "$R/usr/bin/habana-container-runtime" ] \
      || die "no habana-container-runtime on this image: DL1 needs an image with the Intel Gaudi software for first-gen Gaudi (the Support Matrix lists it up to 1.21.0), passed as ami_id"
    if ! grep -q '"habana"' "$R/etc/docker/daemon.json" 2>/dev/null; then
      mkdir -p "$R/etc/docker"
      python3 - "$R/etc/docker/daemon.json" <<'PY'
import json, os, sys
path = sys.argv[1]
config = json.load(open(path)) if os.path.exists(path) else {}
config.setdefault("runtimes", {})["habana"] = {"path": "/usr/bin/habana-container-runtime", "runtimeArgs": []}
json.dump(config, open(path, "w"), indent=2)
PY
      systemctl restart docker || die "could not restart docker with the habana runtime"
      log "registered the habana container runtime with Docker"
    fi
    ;;
esac
docker image inspect "$image" >/dev/null 2>&1 || retry 3 "${EFA_CDK_PULL_PAUSE:-20}" docker pull -q "$image" >/dev/null \
  || image_fault "could not pull $image (registry login? ECR: the nodes' role needs ecr:GetAuthorizationToken and pull rights)"
docker rm -f efa-cdk >/dev/null 2>&1 || true
mapfile -t uverbs < <(efa_uverbs)
[ "${#uverbs[@]}" -gt 0 ] || die "no device bound to the efa driver to give the container"
devices=()
for dev in "${uverbs[@]}"; do devices+=("--device=$R$dev:$dev"); done

# Inside: root gets the cluster key and talks SSH on $port to the other containers; sshd comes from the
# image, or is installed when missing (Debian/Ubuntu or Amazon Linux/RHEL based images).
inner="mkdir -p /root/.ssh /run/sshd && cp /efa-cdk/ssh/id_efa_cdk /efa-cdk/ssh/authorized_keys /root/.ssh/ \
&& printf 'Host *\n  Port $port\n  IdentityFile ~/.ssh/id_efa_cdk\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n' >/root/.ssh/config \
&& chmod 700 /root/.ssh && chmod 600 /root/.ssh/* \
&& { command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || { (apt-get update -q && apt-get install -y -q openssh-server) || dnf install -y -q openssh-server; } >/dev/null; } \
&& ssh-keygen -A >/dev/null && exec /usr/sbin/sshd -D -e -p $port"
# shellcheck disable=SC2086  # the arguments are a word list chosen at synth
docker run ${EFA_CDK_CONTAINER_ARGS:?} "${devices[@]}" -v "$(user_home)/.ssh:/efa-cdk/ssh:ro" \
  -v "$ETC:/efa-cdk/etc:ro" "$image" bash -c "$inner" >/dev/null || image_fault "could not start $image"

out=$(docker exec -e "FI_PROVIDER=$FABRIC" efa-cdk sh -c "PATH=/opt/amazon/efa/bin:\$PATH fi_info -p $FABRIC -t FI_EP_RDM" 2>&1) \
  || image_fault "inside $image, fi_info -p $FABRIC finds no EFA: $(tail -n1 <<<"$out") (install the EFA software in the image: efa_installer.sh -y --skip-kmod --skip-limit-conf --no-verify, or --enable-ngc for NGC images)"
grep -q "provider: $FABRIC" <<<"$out" || image_fault "inside $image, libfabric lists no $FABRIC provider"
log "container $image: EFA provider $FABRIC inside (${#uverbs[@]} EFA devices); SSH on port $port"

[ -r "$ETC/hostfile" ] || exit 0 # followers: done; the leader checks every container
deadline=$(($(date +%s) + ${EFA_CDK_WAIT_SECONDS:-1800}))
mapfile -t peers < <(awk 'NR > 1 {print $1}' "$ETC/hostfile")
for host in "${peers[@]}"; do
  until_ok "$deadline" docker exec efa-cdk ssh -o BatchMode=yes -o ConnectTimeout=10 "$host" true \
    || die "the container on $host is not reachable over SSH on port $port"
done
log "every node's container reachable on port $port: mpirun in the leader's container uses /efa-cdk/etc/hostfile"
