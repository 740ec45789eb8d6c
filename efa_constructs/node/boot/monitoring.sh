#!/usr/bin/env bash
# Watch the node after day one: the CloudWatch agent with the cluster's configuration (EFA counters
# per node and for the cluster, GPU figures on NVIDIA, the node software's logs), and a systemd timer
# that re-runs the light EFA checks (health-check.sh) every EFA_CDK_HEALTH_MINUTES.
# The agent is installed unless the image has one at least EFA_CDK_CW_AGENT_MIN_VERSION (the first
# that knows the `efa` metrics section; an older agent refuses the configuration): AWS's package,
# checked against the pinned key fingerprint of the CloudWatch agent's signing key (CloudWatch user
# guide, "Verify the signature of the CloudWatch agent package") BEFORE it is installed. The package
# is the documented `latest`: its version floats, its signer does not.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

agent="$R/opt/aws/amazon-cloudwatch-agent"
ctl="$agent/bin/amazon-cloudwatch-agent-ctl"
min=${EFA_CDK_CW_AGENT_MIN_VERSION:?}
# The agent's own version file (bin/CWAGENT_VERSION, e.g. 1.300068.0b1337): its dotted number.
agent_version() { sed -nE '1s/^([0-9]+(\.[0-9]+)*).*/\1/p' "$agent/bin/CWAGENT_VERSION" 2>/dev/null || true; }
have=$(agent_version)
if [ -x "$ctl" ] && ! version_at_least "$have" "$min"; then
  log "the image's CloudWatch agent (${have:-version unknown}) is older than $min, the first with EFA metrics: upgrading"
fi
if [ ! -x "$ctl" ] || ! version_at_least "$have" "$min"; then
  case "$(uname -m)" in aarch64 | arm64) arch=arm64 ;; *) arch=amd64 ;; esac
  case "$(os_id)" in
    ubuntu | debian) pkg="ubuntu/$arch/latest/amazon-cloudwatch-agent.deb" install=(dpkg -i) ;;
    amzn | rhel | rocky) pkg="amazon_linux/$arch/latest/amazon-cloudwatch-agent.rpm" install=(rpm -U) ;;
    *) die "no CloudWatch agent package for $(os_id); use an image with the agent, or monitoring=False" ;;
  esac
  # The region's own bucket (CloudWatch user guide, "Verifying the signature of the CloudWatch agent
  # package": amazoncloudwatch-agent-<region>.s3.<region>.amazonaws.com), which a subnet that reaches S3
  # only through the region's gateway endpoint can reach; the global link is us-east-1's bucket.
  region=${EFA_CDK_REGION:?}
  base=${EFA_CDK_CW_AGENT_URL:-https://amazoncloudwatch-agent-$region.s3.$region.amazonaws.com}
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  for f in "$pkg" "$pkg.sig"; do
    retry 5 10 curl -sS -f -o "$work/$(basename "$f")" "$base/$f" || die "could not download $base/$f"
  done
  # The signing key: the region's bucket, else where the user guide publishes it (the global bucket);
  # either way it must carry the pinned fingerprint, so where it came from does not matter.
  key=assets/amazon-cloudwatch-agent.gpg
  global=https://amazoncloudwatch-agent.s3.amazonaws.com
  retry 2 5 curl -sS -f -o "$work/amazon-cloudwatch-agent.gpg" "$base/$key" \
    || retry 5 10 curl -sS -f -o "$work/amazon-cloudwatch-agent.gpg" "$global/$key" \
    || die "could not download the CloudWatch agent's signing key from $base/$key or $global/$key"
  file="$work/$(basename "$pkg")"
  verify_signed "$file" "$file.sig" "$work/amazon-cloudwatch-agent.gpg" "${EFA_CDK_CW_AGENT_FINGERPRINT:?}"
  "${install[@]}" "$file" >/dev/null || die "could not install the CloudWatch agent ($(basename "$pkg"))"
  have=$(agent_version)
  version_at_least "$have" "$min" \
    || die "the CloudWatch agent installed is ${have:-of unknown version}, older than $min (EFA metrics); use monitoring=False or an image with a newer agent"
fi
mkdir -p "$agent/etc"
printf '%s\n' "${EFA_CDK_AGENT_CONFIG:?}" >"$agent/etc/efa-cdk.json"
"$ctl" -a fetch-config -m ec2 -s -c "file:$agent/etc/efa-cdk.json" >/dev/null \
  || die "the CloudWatch agent refused its configuration ($agent/etc/efa-cdk.json)"

minutes=${EFA_CDK_HEALTH_MINUTES:-5}
install_timer health health-check.sh "$minutes" "$minutes" 30 "EFA health check (device count, libfabric), published to CloudWatch"
log "CloudWatch agent running (namespace ${EFA_CDK_METRICS_NAMESPACE:?}); health check every ${EFA_CDK_HEALTH_MINUTES:-5} min"
