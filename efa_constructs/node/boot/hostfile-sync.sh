#!/usr/bin/env bash
# Run by efa-cdk-hostfile.path whenever the login user's ~/hostfile changes: a node that joined the formed
# cluster (a replacement, a scale-out) handed every member the new list over SSH, as that user. The root
# copy $ETC/hostfile (what on-demand benchmarks and a container's /efa-cdk/etc/hostfile read) follows it,
# once every line is "<ip> slots=<ranks>".
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
STEP=hostfile-sync
src="$(user_home)/hostfile"
[ -s "$src" ] || die "$src is empty: $ETC/hostfile left as it was"
if grep -qvE '^[0-9]+(\.[0-9]+){3} slots=[0-9]+$' "$src"; then
  die "$src has a line that is not '<ip> slots=<ranks>': $ETC/hostfile left as it was"
fi
install -m 0644 "$src" "$ETC/hostfile.new"
mv "$ETC/hostfile.new" "$ETC/hostfile"
log "$ETC/hostfile follows $src: $(grep -c . "$ETC/hostfile") nodes"
