#!/usr/bin/env bash
# The `devices` step (ParallelCluster, PCS): a timer that runs device-health.sh every EFA_CDK_DEVICE_MINUTES
# (default 5) for the life of the node: the devices' own state, mended by their ladder (mend.sh). A
# monitored EfaCluster's nodes run it from their health check instead (health-check.sh).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
minutes=${EFA_CDK_DEVICE_MINUTES:-5}
install_timer devices device-health.sh "$minutes" "$minutes" 30 "the devices' own state, and its mends"
log "device checks every $minutes min (the GPUs' flags, EFA's and Neuron's counters), mended by their ladder"
