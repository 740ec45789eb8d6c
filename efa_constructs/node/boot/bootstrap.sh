#!/bin/bash
# efa-cdk node bootstrap: the EC2 user data of an EfaCluster node, and ParallelCluster's
# OnNodeConfigured script of an EfaParallelCluster node. efa-cdk renders this file: the settings
# line in the heredoc below becomes the node's settings (EFA_CDK_*='...' lines); arguments of the form
# EFA_CDK_*=VALUE add more (ParallelCluster passes values known only at deploy this way).
# It writes the settings to /etc/efa-cdk/node.env, fetches the node scripts (EFA_CDK_SCRIPTS_URL,
# an S3 zip), and runs the steps named in EFA_CDK_STEPS, logging everything to /var/log/efa-cdk.log
# and the console. On EC2 nodes (EFA_CDK_STACK set), a failure before the steps take over signals
# FAILURE to the node's CreationPolicy at once, instead of leaving the stack waiting; an image without
# the AWS CLI (which the node software needs) is such a failure, found first, and signalled by curl
# itself (--aws-sigv4, curl >= 7.75) with the instance role's credentials.
set -euo pipefail
R="${EFA_CDK_ROOT:-}" # empty on a node; a scratch root in the tests
mkdir -p "$R/etc/efa-cdk" "$R/var/lib/efa-cdk" "$R/opt/efa-cdk/bin" "$R/var/log"
exec > >(tee -a "$R/var/log/efa-cdk.log") 2>&1
echo "efa-cdk: bootstrap started $(date -u +%FT%TZ)"
env_file="$R/etc/efa-cdk/node.env"
cat >"$env_file" <<'EFA_CDK_SETTINGS'
# efa-cdk:settings
EFA_CDK_SETTINGS
for kv in "$@"; do
  case "$kv" in
    EFA_CDK_[A-Z0-9_]*=*)
      case "$kv" in *"'"*) echo "efa-cdk: bootstrap argument has a quote: $kv" >&2 && exit 1 ;; esac
      printf "%s='%s'\n" "${kv%%=*}" "${kv#*=}" >>"$env_file"
      ;;
    *) echo "efa-cdk: bootstrap argument is not EFA_CDK_*=VALUE: $kv" >&2 && exit 1 ;;
  esac
done
# A setting that is a credential (the benchmark wait condition's presigned handle: whoever holds it can signal
# the stack or forge the results efa-cdk status prints) moves to a file only root reads; node.env stays
# readable (0644) for users' jobs, which read EFA_CDK_SLOTS from it.
secret_file="$R/etc/efa-cdk/node.secret.env"
(umask 077 && grep -E '^EFA_CDK_BENCHMARK_URL=' "$env_file" >"$secret_file" || true)
sed -i '/^EFA_CDK_BENCHMARK_URL=/d' "$env_file"
# shellcheck source=/dev/null
. "$env_file"
# shellcheck source=/dev/null
. "$secret_file"

failure=bootstrap-failed # what the FAILURE signal's unique id says after the instance id
bootstrap_failed() {
  [ -n "${EFA_CDK_STACK:-}" ] || return 0
  local t imds=${EFA_CDK_IMDS_URL:-http://169.254.169.254} id logical role creds
  t=$(curl -sS -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "$imds/latest/api/token")
  md() { curl -sS -f -H "X-aws-ec2-metadata-token: $t" "$imds/latest/meta-data/$1"; }
  id=$(md instance-id) logical=$(md tags/instance/efa-cdk:logical-id)
  if command -v aws >/dev/null; then
    aws cloudformation signal-resource --region "$EFA_CDK_REGION" --stack-name "$EFA_CDK_STACK" \
      --logical-resource-id "$logical" --unique-id "$id-$failure" --status FAILURE
    return
  fi
  role=$(md iam/security-credentials/) creds=$(md "iam/security-credentials/$role")
  field() { sed -nE "s/.*\"$1\" *: *\"([^\"]*)\".*/\1/p" <<<"$creds" | head -n 1; }
  local suffix=amazonaws.com
  case "$EFA_CDK_REGION" in cn-*) suffix=amazonaws.com.cn ;; esac
  curl -sS -f --aws-sigv4 "aws:amz:$EFA_CDK_REGION:cloudformation" \
    --user "$(field AccessKeyId):$(field SecretAccessKey)" -H "x-amz-security-token: $(field Token)" \
    --data-urlencode Action=SignalResource --data-urlencode Version=2010-05-15 \
    --data-urlencode "StackName=$EFA_CDK_STACK" --data-urlencode "LogicalResourceId=$logical" \
    --data-urlencode "UniqueId=$id-$failure" --data-urlencode Status=FAILURE \
    "${AWS_ENDPOINT_URL:-https://cloudformation.$EFA_CDK_REGION.$suffix}/" >/dev/null
}
trap bootstrap_failed ERR
if ! command -v aws >/dev/null; then
  echo "efa-cdk: this image has no AWS CLI, which the node software needs (scripts from S3, signals," \
    "parameters): use an image with AWS CLI v2 (AWS's DLAMIs and Amazon Linux have it), or turn the node" \
    "software off (NodeSoftware.none(), -c node_software=false)" >&2
  failure=no-aws-cli
  false
fi
zip="$R/var/lib/efa-cdk/scripts.zip"
for attempt in 1 2 3 4 5; do
  aws s3 cp --region "${EFA_CDK_REGION:?}" --only-show-errors "${EFA_CDK_SCRIPTS_URL:?}" "$zip" && break
  [ "$attempt" -lt 5 ] || false
  sleep $((attempt * 5))
done
python3 -m zipfile -e "$zip" "$R/opt/efa-cdk/bin"
chmod 0755 "$R"/opt/efa-cdk/bin/*
trap - ERR
# shellcheck disable=SC2086  # the steps are a word list (spaces or commas)
"$R/opt/efa-cdk/bin/run-steps.sh" ${EFA_CDK_STEPS//,/ }
