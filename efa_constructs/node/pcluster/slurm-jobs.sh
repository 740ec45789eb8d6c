#!/usr/bin/env bash
# Head node: put the Slurm job templates on the shared file system, for every user.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

dest="$R${EFA_CDK_SHARED_DIR:-/shared}/jobs"
mkdir -p "$dest"
cp "$(dirname "$0")"/*.sbatch "$dest/"
chmod 0755 "$dest"
chmod 0644 "$dest"/*.sbatch
log "job templates in $dest: $(cd "$dest" && echo *.sbatch)"
