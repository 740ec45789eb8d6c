# shellcheck shell=bash
# efa-cdk node library, sourced by every step. All paths sit under $EFA_CDK_ROOT: empty on a
# node, a scratch directory in the tests (which also put stub commands first on PATH).
R="${EFA_CDK_ROOT:-}"
ETC="$R/etc/efa-cdk"
STATE="$R/var/lib/efa-cdk"
if [ -r "$ETC/node.env" ]; then
  # shellcheck source=/dev/null
  . "$ETC/node.env"
fi
if [ -r "$ETC/node.secret.env" ]; then # root's alone (bootstrap.sh): the credentials among the settings
  # shellcheck source=/dev/null
  . "$ETC/node.secret.env"
fi

# Slurm's commands: ParallelCluster installs Slurm under /opt/slurm and puts /opt/slurm/bin on PATH only
# for login shells (/etc/profile.d/slurm.sh); custom actions and systemd units run without it, so the
# steps call them by this path (ParallelCluster's own recipes call /opt/slurm/bin/scontrol the same way).
# AWS PCS installs its Slurm under /opt/aws/pcs/scheduler/slurm-<version>: EFA_CDK_SLURM_BIN says so there.
# shellcheck disable=SC2034  # used by the steps that source this file
SLURM_BIN="$R${EFA_CDK_SLURM_BIN:-/opt/slurm/bin}"

log() { printf '%s efa-cdk[%s] %s\n' "$(date -u +%H:%M:%S)" "${STEP:-main}" "$*" >&2; }

# The libfabric provider the checks and benchmarks use: efa. EFA_CDK_TEST_ONLY_PROVIDER (never set
# by the library, only by the one-machine test harness, scripts/e2e, which has no EFA device) names
# the provider that stands in for it; every step that uses it says so in the log.
FABRIC=efa
if [ -n "${EFA_CDK_TEST_ONLY_PROVIDER:-}" ]; then
  FABRIC=$EFA_CDK_TEST_ONLY_PROVIDER
  log "TEST HARNESS: libfabric provider $FABRIC stands in for efa (EFA_CDK_TEST_ONLY_PROVIDER)"
fi

# die REASON: log it, keep it for the signal (CloudFormation shows the start of it), stop.
die() {
  log "FAILED: $*"
  mkdir -p "$STATE"
  printf '%s\n' "$*" >"$STATE/failure"
  exit 1
}

# root_only_dir DIR: make DIR (in a folder every user may write to, such as /shared) a directory root owns
# and no one else may write to, where none is; succeed only when it is one (not a link, not a user's own or
# writable directory), so root never writes through a link or file a user planted there.
root_only_dir() {
  local dir=$1
  [ -e "$dir" ] || [ -L "$dir" ] || { mkdir -p "${dir%/*}" && mkdir -m 0755 "$dir"; } || return 1
  [ ! -L "$dir" ] && [ -d "$dir" ] && [ "$(stat -c %u "$dir")" = 0 ] \
    && [ -z "$(find "$dir" -maxdepth 0 -perm /022)" ]
}

# own_dir FD TOP [INODE]: the directory open at FD is the one this run made: a directory of root's, mode 0700,
# on TOP's file system, and empty (with INODE: that very directory); prints its inode. A path in a file system
# every user may write to can be swapped for a link between any two steps (without the sticky bit a user may
# rename root's entries): so a run's directory is opened once, checked through the open descriptor, and used
# only through it (/proc/self/fd/FD/<name>: the directory opened, wherever its name now points).
own_dir() {
  python3 - "$1" "$2" "${3:-}" <<'PY'
import os, stat, sys
fd, top, inode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
st = os.fstat(fd)
ok = stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700
ok = ok and st.st_dev == os.stat(top).st_dev and (str(st.st_ino) == inode if inode else not os.listdir(fd))
print(st.st_ino if ok else "", end="")
sys.exit(0 if ok else 1)
PY
}

# imds PATH: read instance metadata with an IMDSv2 session token.
imds() {
  local token
  token=$(curl -sS -f -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' \
    "http://169.254.169.254/latest/api/token") || return 1
  curl -sS -f -H "X-aws-ec2-metadata-token: $token" "http://169.254.169.254/latest/$1"
}

# tag KEY: this instance's tag (instance metadata tags are enabled by the launch template).
tag() { imds "meta-data/tags/instance/$1"; }

# os_id: ID from os-release (amzn, ubuntu, ...).
# shellcheck source=/dev/null
os_id() { (. "$R/etc/os-release" && printf '%s\n' "$ID"); }

# Everything the steps call is on this PATH once EFA is installed.
efa_path() { printf '%s' "$R/opt/amazon/openmpi/bin:$R/opt/amazon/efa/bin:$PATH"; }

# retry N SECONDS CMD...: run CMD up to N times, SECONDS apart.
retry() {
  local n=$1 pause=$2 i
  shift 2
  for ((i = 1; i <= n; i++)); do
    "$@" && return 0
    [ "$i" -lt "$n" ] && sleep "$pause"
  done
  return 1
}

# until_listening PAUSE LOG CMD...: a fi_pingpong client (CMD, its output in LOG) run again while its server
# is not listening yet: fabtests' pingpong.c connects once and exits "failed to connect", and the server
# starts over SSH (slow on a busy node). 20 tries, PAUSE seconds before each; CMD's status.
until_listening() {
  local pause=$1 log=$2 try rc=0
  shift 2
  for try in $(seq 1 20); do
    sleep "$pause"
    rc=0
    "$@" >"$log" 2>&1 || rc=$?
    [ "$rc" = 0 ] && return 0
    grep -q "failed to connect" "$log" || return "$rc"
    echo "efa-cdk: fi_pingpong's server not listening yet (try $try of 20)" >&2
  done
  return "$rc"
}

# aws_ CMD...: the AWS CLI in the stack's region.
aws_() { aws --region "${EFA_CDK_REGION:?}" --output text "$@"; }

user_home() { printf '%s' "$R/home/${EFA_CDK_USER:?}"; }

# as_user CMD...: run CMD as the login user (the cluster SSH key is theirs), with this PATH.
as_user() { runuser -u "${EFA_CDK_USER:?}" -- env "PATH=$PATH" "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" "$@"; }

# report_fault REASON: FAILURE with REASON to the benchmark wait condition (EFA_CDK_BENCHMARK_URL).
report_fault() {
  local body="$STATE/fault.json"
  mkdir -p "$STATE"
  python3 -c 'import json, sys; print(json.dumps({"Status": "FAILURE", "Reason": sys.argv[1][:250], "UniqueId": "benchmarks", "Data": json.dumps([{"benchmark": "all", "ok": False, "reason": sys.argv[1]}])}))' "$1" >"$body"
  retry 5 10 curl -sS -f -X PUT -H 'Content-Type:' --data-binary "@$body" "${EFA_CDK_BENCHMARK_URL:?}"
}

# version_at_least VERSION MIN: VERSION (dotted, non-empty) is MIN or newer (sort -V order).
version_at_least() { [ -n "$1" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]; }

# key_fingerprints KEYFILE: the fingerprint of each primary key in KEYFILE, one a line (a throwaway
# keyring: nothing is trusted by importing it).
key_fingerprints() {
  local home status=0
  home=$(mktemp -d)
  chmod 700 "$home"
  if GNUPGHOME=$home gpg --batch --quiet --import "$1" 2>/dev/null; then
    GNUPGHOME=$home gpg --batch --with-colons --fingerprint | awk -F: '$1 == "pub" {p = 1; next} p && $1 == "fpr" {print $10; p = 0}'
  else
    status=1
  fi
  rm -rf "$home"
  return $status
}

# verify_signed FILE SIGNATURE KEYFILE FINGERPRINT: FILE's detached SIGNATURE verifies against
# KEYFILE, and KEYFILE carries exactly the pinned FINGERPRINT (whatever the download server says).
# Uses a throwaway keyring; dies (fail closed) on any mismatch.
verify_signed() {
  local file=$1 sig=$2 key=$3 fpr=$4 home imported status
  home=$(mktemp -d)
  chmod 700 "$home"
  GNUPGHOME=$home gpg --batch --quiet --import "$key" 2>/dev/null || die "could not import the key for $(basename "$file")"
  imported=$(GNUPGHOME=$home gpg --batch --with-colons --fingerprint | awk -F: '$1 == "fpr" {print $10; exit}')
  [ "$imported" = "$fpr" ] \
    || die "the key for $(basename "$file") has fingerprint ${imported:-none}, expected $fpr; not installing"
  status=$(GNUPGHOME=$home gpg --batch --status-fd 1 --verify "$sig" "$file" 2>/dev/null || true)
  rm -rf "$home"
  grep -Eq "^\[GNUPG:\] VALIDSIG .*\b$fpr\b" <<<"$status" \
    || die "the signature of $(basename "$file") does not verify against key $fpr; not installing"
  log "$(basename "$file"): signature by $fpr verified"
}

# NCCL's EFA plugin (aws-ofi-nccl): the names NCCL loads it by, and where images keep it. The EFA
# installer's place moved between releases (/opt/amazon/ofi-nccl/lib/<arch>-linux-gnu, then lib64), builds
# from source use their own prefix (/opt/aws-ofi-nccl; older Deep Learning AMIs and many images built it
# into the CUDA tree, /usr/local/cuda[-X.Y]/efa/lib), NGC-style images /opt/amazon/aws-ofi-nccl: field
# reports of each (NVIDIA-NeMo/RL#2359, aws/aws-ofi-nccl INSTALL.md's --prefix); NCCL itself finds it only
# on the loader's path or by NCCL_NET_PLUGIN (NCCL environment variables).
NCCL_PLUGIN_NAMES="libnccl-net-ofi.so libnccl-net.so libnccl-net-aws-ofi.so"
# nccl_plugin_in DIR...: the first plugin (a file of NCCL_PLUGIN_NAMES) in these node directories, in
# their order, as a node path; nothing when none has one.
nccl_plugin_in() {
  local dir name
  for dir in "$@"; do
    for name in $NCCL_PLUGIN_NAMES; do
      if [ -n "$dir" ] && [ -e "$R$dir/$name" ]; then
        echo "$dir/$name"
        return 0
      fi
    done
  done
}
# nccl_plugin_dir: the directory of an installed aws-ofi-nccl plugin where images keep it, or nothing.
nccl_plugin_dir() {
  local dir dirs=() found
  for dir in "$R"/opt/amazon/ofi-nccl/lib64 "$R"/opt/amazon/ofi-nccl/lib "$R"/opt/amazon/ofi-nccl/lib/*-linux-gnu \
    "$R"/opt/amazon/aws-ofi-nccl/lib "$R"/opt/aws-ofi-nccl/lib "$R"/usr/local/cuda/efa/lib "$R"/usr/local/cuda-*/efa/lib; do
    dirs+=("${dir#"$R"}")
  done
  found=$(nccl_plugin_in "${dirs[@]}")
  [ -z "$found" ] || dirname "$found"
}

# efa_devices: the number of devices bound to the efa driver (a p6-b200 also lists NVLink
# controllers under /sys/class/infiniband; they do not count). Lists the others on stderr.
# rdma_driver NAME: the kernel driver an RDMA device (/sys/class/infiniband/NAME) is bound to.
rdma_driver() { basename "$(readlink -f "$R/sys/class/infiniband/$1/device/driver")"; }

efa_devices() {
  local dev driver have=0 others=""
  for dev in "$R"/sys/class/infiniband/*; do
    [ -e "$dev" ] || continue
    driver=$(rdma_driver "${dev##*/}")
    if [ "$driver" = efa ]; then have=$((have + 1)); else others="$others ${dev##*/}($driver)"; fi
  done
  [ -z "$others" ] || log "not EFA, not counted:$others"
  echo "$have"
}

# efa_uverbs: the verbs device (/dev/infiniband/uverbsN) of every device bound to the efa driver, one a
# line: what a container is given. Not the whole /dev/infiniband: on p6-b200 it also holds the NVLink
# controllers' devices, and with them fi_info -p efa fails inside the container (aws-samples/aws-do-eks
# PR #63). The verbs device of an RDMA device: /sys/class/infiniband_verbs/uverbsN/ibdev names it
# (Linux, Documentation/ABI/stable/sysfs-class-infiniband).
efa_uverbs() {
  local verbs dev
  for verbs in "$R"/sys/class/infiniband_verbs/uverbs*; do
    [ -r "$verbs/ibdev" ] || continue
    dev=$(cat "$verbs/ibdev")
    [ "$(rdma_driver "$dev")" = efa ] || continue
    echo "/dev/infiniband/${verbs##*/}"
  done
}

# until_ok DEADLINE CMD...: run CMD every EFA_CDK_POLL_SECONDS until it succeeds (0) or the clock
# passes DEADLINE (epoch seconds; 1).
until_ok() {
  local deadline=$1
  shift
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep "${EFA_CDK_POLL_SECONDS:-15}"
  done
}

# topology_answers DIR ID...: DescribeInstanceTopology for the instances, one JSON file per call
# (at most 100 instance ids per call: EC2 API reference) in DIR; on a failure, the reason is the last
# line of DIR/error and the result 1.
topology_answers() {
  local dir=$1 i
  shift
  local ids=("$@")
  rm -rf "$dir" && mkdir -p "$dir"
  for ((i = 0; i < ${#ids[@]}; i += 100)); do
    aws --region "${EFA_CDK_REGION:?}" --output json ec2 describe-instance-topology \
      --instance-ids "${ids[@]:i:100}" >"$dir/$i.json" 2>"$dir/error" || return 1
  done
}

# install_timer UNIT SCRIPT BOOT_MIN EVERY_MIN JITTER_S DESCRIPTION: a systemd service efa-cdk-UNIT
# running /opt/efa-cdk/bin/SCRIPT, and a timer starting it BOOT_MIN minutes after boot and every
# EVERY_MIN minutes after that (JITTER_S seconds of random delay, 0 for none), enabled and started.
# A run is stopped after half the period: a oneshot service has no start timeout unless given one
# (systemd.service(5), TimeoutStartSec=), and a timer leaves a unit that is still running alone
# (systemd.timer(5)), so one run hung on an unanswered IMDS or AWS call would end every later run.
# install_path UNIT SCRIPT PATH DESCRIPTION: run /opt/efa-cdk/bin/SCRIPT whenever PATH changes
# (systemd.path(5): efa-cdk-UNIT.path starts efa-cdk-UNIT.service).
install_path() {
  local unit=$1 script=$2 watched=$3 description=$4 units="$R/etc/systemd/system"
  mkdir -p "$units"
  printf '[Unit]\nDescription=efa-cdk: %s\n[Service]\nType=oneshot\nExecStart=/opt/efa-cdk/bin/%s\n' \
    "$description" "$script" >"$units/efa-cdk-$unit.service"
  printf '[Unit]\nDescription=efa-cdk: %s, when %s changes\n[Path]\nPathChanged=%s\n[Install]\nWantedBy=paths.target\n' \
    "$description" "$watched" "$watched" >"$units/efa-cdk-$unit.path"
  systemctl daemon-reload
  systemctl enable --now "efa-cdk-$unit.path" >/dev/null || die "could not start the efa-cdk-$unit path unit"
}

install_timer() {
  local unit=$1 script=$2 boot=$3 every=$4 jitter=$5 description=$6 units="$R/etc/systemd/system"
  mkdir -p "$units"
  {
    printf '[Unit]\nDescription=efa-cdk: %s\n[Service]\nType=oneshot\n' "$description"
    printf 'ExecStart=/opt/efa-cdk/bin/%s\nTimeoutStartSec=%s\n' "$script" "$((every * 30))"
  } >"$units/efa-cdk-$unit.service"
  {
    printf '[Unit]\nDescription=efa-cdk: %s, every %s minutes\n[Timer]\n' "$description" "$every"
    printf 'OnBootSec=%smin\nOnUnitActiveSec=%smin\n' "$boot" "$every"
    [ "$jitter" = 0 ] || printf 'RandomizedDelaySec=%s\n' "$jitter"
    printf '[Install]\nWantedBy=timers.target\n'
  } >"$units/efa-cdk-$unit.timer"
  systemctl daemon-reload
  systemctl enable --now "efa-cdk-$unit.timer" >/dev/null || die "could not start the efa-cdk-$unit timer"
}
