#!/usr/bin/env bash
# Boot one node of the one-machine cluster, as root, inside its network namespace and private mount
# and UTS namespaces: `nsenter --net=/var/run/netns/NS unshare --mount --uts --propagation private
# node.sh ROOT`.
#
# ROOT holds the node's files (EFA_CDK_ROOT of the node software: /etc/efa-cdk, /var/lib/efa-cdk,
# the fake /sys/class/infiniband, /opt/amazon/efa) and: user-data (taken from the launch template
# moto stored), hostname (EC2's IP name), imds.json, aws.env (the AWS CLI's endpoint, region and
# keys), passwd/group/shadow (the host's plus the login user). This script sets the host name,
# bind-mounts ROOT/home on /home, ROOT/var/lib/efa-cdk on /var/lib/efa-cdk (what other nodes reach
# over SSH) and the user files on /etc, starts the node's IMDS and sshd (PIDs in ROOT/run), then runs
# the user data for real.
set -euo pipefail
[ "$(readlink /proc/self/ns/uts)" != "$(readlink "/proc/$PPID/ns/uts")" ] || { # never rename its launcher's machine
  echo "$0: run me in my own UTS namespace (unshare --uts)" >&2
  exit 1
}
root=$1
here=$(cd "$(dirname "$0")" && pwd)
project=$(cd "$here/../.." && pwd)
for f in passwd group shadow; do mount --bind "$root/$f" "/etc/$f"; done
mount --bind "$root/home" /home
mkdir -p /var/lib/efa-cdk # other nodes check /var/lib/efa-cdk/verified over SSH
mount --bind "$root/var/lib/efa-cdk" /var/lib/efa-cdk
mkdir -p "$root/run" /run/sshd
hostname "$(cat "$root/hostname")" # the node's own, as on EC2 (ip-10-0-64-5)

(cd "$project" && exec "$project/.venv/bin/python" -m tests.e2e.imds "$root/imds.json") &
echo $! >"$root/run/imds.pid"
/usr/sbin/sshd -f "$root/etc/ssh/sshd_config" -E "$root/var/log/sshd.log"
for _ in $(seq 50); do # both listening before the user data starts
  [ -s "$root/run/sshd.pid" ] && curl -s -o /dev/null -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' \
    http://169.254.169.254/latest/api/token && break
  sleep 0.1
done

if [ -d "$root/docker" ]; then # the node's own Docker engine, in its namespaces, with the test image
  mkdir -p /etc/efa-cdk "$root/etc/efa-cdk" # the container step's --env-file names /etc/efa-cdk/efa.env, as on a node
  mount --bind "$root/etc/efa-cdk" /etc/efa-cdk
  if [ -s "$root/docker/accelerators" ]; then # the accelerators' device files (/dev/neuron<i>), as a driver makes them
    mkdir -p "$root/docker/host-dev"
    mount --rbind /dev "$root/docker/host-dev"
    mount -t tmpfs -o mode=0755 tmpfs /dev # this node's /dev: the machine's entries, plus the accelerators
    for entry in "$root/docker/host-dev"/* "$root/docker/host-dev"/.[!.]*; do
      [ -e "$entry" ] || [ -L "$entry" ] || continue
      target="/dev/${entry##*/}"
      if [ -L "$entry" ]; then cp -P "$entry" "$target"
      elif [ -d "$entry" ]; then mkdir -p "$target" && mount --rbind "$entry" "$target"
      else touch "$target" && mount --bind "$entry" "$target"
      fi
    done
    while read -r dev; do mknod -m 0666 "$dev" c 10 200; done <"$root/docker/accelerators"
  fi
  export DOCKER_HOST="unix://$root/run/docker.sock"
  "$here/dockerd.sh" "$root"
  docker image inspect "$(cat "$root/docker/image.tag")" >/dev/null 2>&1 \
    || docker import "$root/docker/image.tar" "$(cat "$root/docker/image.tag")" >/dev/null
fi

set -a
# shellcheck source=/dev/null
. "$root/aws.env"
set +a
export EFA_CDK_ROOT=$root PATH="$project/.venv-e2e/bin:$root/harness-bin:$PATH"
exec bash "$root/user-data"
