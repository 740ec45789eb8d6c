#!/bin/bash
# efa-cdk node bootstrap: the EC2 user data of an EfaCluster node, and ParallelCluster's
# OnNodeConfigured script of an EfaParallelCluster node. efa-cdk renders this file: the settings
# line in the heredoc below becomes the node's settings (EFA_CDK_*='...' lines); arguments of the form
# EFA_CDK_*=VALUE add more (ParallelCluster passes values known only at deploy this way).
# It writes the settings to /etc/efa-cdk/node.env, fetches the node scripts (EFA_CDK_SCRIPTS_URL,
# an S3 zip), and runs the steps named in EFA_CDK_STEPS, logging everything to /var/log/efa-cdk.log
# and the console. On EC2 nodes (EFA_CDK_STACK set), a failure before the steps take over signals
# FAILURE to the node's CreationPolicy at once, instead of leaving the stack waiting.
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
# shellcheck source=/dev/null
. "$env_file"

bootstrap_failed() {
  [ -n "${EFA_CDK_STACK:-}" ] || return 0
  local t
  t=$(curl -sS -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token)
  md() { curl -sS -H "X-aws-ec2-metadata-token: $t" "http://169.254.169.254/latest/meta-data/$1"; }
  aws cloudformation signal-resource --region "$EFA_CDK_REGION" --stack-name "$EFA_CDK_STACK" \
    --logical-resource-id "$(md tags/instance/efa-cdk:logical-id)" \
    --unique-id "$(md instance-id)-bootstrap-failed" --status FAILURE
}
trap bootstrap_failed ERR
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
