#!/usr/bin/env bash
# Prove EFA works on this node: libfabric lists the efa provider for reliable datagrams, and the
# node has exactly as many EFA devices as the launch template attached. Only devices bound to the
# `efa` driver count: a p6-b200 also lists 2 NVLink controllers (`ibp*`) under
# /sys/class/infiniband next to its 8 EFAs (sagemaker-hyperpod-cli PR #282).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
PATH=$(efa_path)

want=${EFA_CDK_EFA_COUNT:?}
out=$(fi_info -p "$FABRIC" -t FI_EP_RDM 2>&1) \
  || die "fi_info -p $FABRIC -t FI_EP_RDM failed: $(tail -n1 <<<"$out") (EFA software or security group)"
grep -q "provider: $FABRIC" <<<"$out" || die "fi_info did not list the $FABRIC provider"
have=$(efa_devices)
[ "$have" -eq "$want" ] \
  || die "found $have EFA devices, the launch template attached $want (check the instance's interfaces and the EFA driver)"
# What a job would communicate over: the jobs' environment, every device's endpoint, NCCL's plugin.
guard=$(bash "$(dirname "$0")/fabric-guard.sh" 2>&1) || die "${guard#*REFUSED: }"
log "$guard"
# The accelerators the type has, and no fault their driver reports (accelerator-check.sh): a node that
# cannot train fails here, as one without its EFAs does.
accel=$(bash "$(dirname "$0")/accelerator-check.sh" --boot 2>&1) || die "accelerators: ${accel//$'\n'/; }"
log "accelerators: $accel"
mkdir -p "$STATE"
date -u +%FT%TZ >"$STATE/verified"
log "EFA verified: provider $FABRIC, $have devices"
