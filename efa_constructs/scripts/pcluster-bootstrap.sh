#!/usr/bin/env bash
# ParallelCluster OnNodeConfigured action for EFA clusters built by efa-cdk. ParallelCluster runs
# it as root at the end of a node's setup:
#   pcluster-bootstrap.sh REGION SCRIPTS_ZIP_S3_URL RDMA(0|1) SLOTS STEPS(comma-separated) [QUEUE...]
# It fetches the efa-cdk scripts, writes their settings and runs the steps (no CloudFormation
# signal: ParallelCluster tracks its own nodes). Logged to /var/log/efa-cdk.log.
set -euo pipefail
R="${EFA_CDK_ROOT:-}"
mkdir -p "$R/etc/efa-cdk" "$R/var/lib/efa-cdk" "$R/opt/efa-cdk/bin" "$R/var/log"
exec > >(tee -a "$R/var/log/efa-cdk.log") 2>&1
region=$1 zip_url=$2 rdma=$3 slots=$4 steps=$5
shift 5
aws s3 cp --region "$region" --only-show-errors "$zip_url" "$R/var/lib/efa-cdk/scripts.zip"
python3 -m zipfile -e "$R/var/lib/efa-cdk/scripts.zip" "$R/opt/efa-cdk/bin"
chmod 0755 "$R"/opt/efa-cdk/bin/*
cat >"$R/etc/efa-cdk/node.env" <<ENV
EFA_CDK_REGION='$region'
EFA_CDK_RDMA_READ='$rdma'
EFA_CDK_SLOTS='$slots'
EFA_CDK_QUEUES='$*'
EFA_CDK_SHARED_DIR='${EFA_CDK_SHARED_DIR:-/shared}'
ENV
# shellcheck disable=SC2086  # the steps are a word list
"$R/opt/efa-cdk/bin/run-steps.sh" ${steps//,/ }
