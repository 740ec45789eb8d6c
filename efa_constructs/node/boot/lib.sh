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
