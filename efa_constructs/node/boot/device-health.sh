#!/usr/bin/env bash
# The devices' own state, on every orchestrator: the accelerator check (every device there, the GPUs' own
# flags read from the driver, NVLink, Neuron's counters, the driver's Xid events: accelerator-check.sh) and
# EFA's counters since the last check (devices.py efa), each problem one line naming the device, the
# reading and the mend; then the ladder of mends (mend.sh), the way this node's orchestrator expects it.
# Run by its own timer (the `devices` step: ParallelCluster, PCS) or by the health check (health-check.sh,
# a monitored EfaCluster). Prints the problems on stdout; what the ladder did goes to the log
# (/var/log/efa-cdk-devices.log). Exit 0: healthy (or only watched counters rose); 1: a problem was found
# (even one its mend ended in this run: the log says so, the next check finds it gone).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
STEP=devices
mkdir -p "$STATE" "$R/var/log"
check() {
  local accel
  accel=$(bash "$here/accelerator-check.sh" 2>/dev/null) || printf '%s\n' "$accel"
  python3 "$here/devices.py" efa "$R/sys" "$STATE/efa-counters.json" || true
}
found=$(check)
rc=0
# a mend made (a GPU reset) is checked again at once: resumed when it held, the next rung when not
printf '%s\n' "$found" | bash "$here/mend.sh" >>"$R/var/log/efa-cdk-devices.log" 2>&1 || rc=$?
if [ "$rc" = 3 ]; then # what this check found stands (printed below); the log says whether the mend held
  again=$(check)
  printf '%s\n' "$again" | bash "$here/mend.sh" >>"$R/var/log/efa-cdk-devices.log" 2>&1 || rc=$?
fi
[ "$rc" = 0 ] || [ "$rc" = 3 ] || log "the ladder of mends failed ($rc): see /var/log/efa-cdk-devices.log"
[ -z "$found" ] || printf '%s\n' "$found"
[ "$(printf '%s\n' "$found" | python3 "$here/devices.py" worst)" = none ] \
  || [ "$(printf '%s\n' "$found" | python3 "$here/devices.py" worst)" = watch ]
