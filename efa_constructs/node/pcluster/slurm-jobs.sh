#!/usr/bin/env bash
# Head node: put the Slurm job templates on the shared file system, for every user.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

dest="$R${EFA_CDK_SHARED_DIR:-/shared}/jobs"
# /shared is every user's and outlives the cluster (retained): a jobs entry that is not root's alone (a link to
# /etc, a user's directory with links in it) is moved aside, never written through
if ! root_only_dir "$dest"; then
  aside="$dest.not-root-only.$(date +%s)"
  mv "$dest" "$aside" && log "moved ${dest#"$R"} aside to ${aside#"$R"}: it was not a directory only root may write to"
  root_only_dir "$dest" || die "could not make ${dest#"$R"} a directory only root may write to"
fi
cp "$(dirname "$0")"/*.sbatch "$dest/"
chmod 0755 "$dest"
chmod 0644 "$dest"/*.sbatch
log "job templates in $dest: $(cd "$dest" && echo *.sbatch)"
