#!/usr/bin/env bash
# Head node: put the Slurm job templates on the shared file system, for every user.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

shared="$R${EFA_CDK_SHARED_DIR:-/shared}"
dest="$shared/jobs"
# /shared is every user's and outlives the cluster (retained): a jobs entry that is not root's alone (a link to
# /etc, a user's directory with links in it) is moved aside, never written through. Aside is a directory made
# new for it (mktemp -d: a name no one can foresee, root's, in a sticky /shared no user can rename it), and the
# entry is moved to a name inside it (mv -T: never into a directory a link at that name would lead to).
if ! root_only_dir "$dest"; then
  aside=$(mktemp -d "$shared/.efa-cdk-moved-aside.XXXXXXXX") || die "could not make a directory in ${shared#"$R"}"
  chmod 0755 "$aside"
  mv -T "$dest" "$aside/jobs" || die "could not move ${dest#"$R"} aside"
  log "moved ${dest#"$R"} aside to ${aside#"$R"}/jobs: it was not a directory only root may write to"
  root_only_dir "$dest" || die "could not make ${dest#"$R"} a directory only root may write to"
fi
cp "$(dirname "$0")"/*.sbatch "$dest/"
chmod 0755 "$dest"
chmod 0644 "$dest"/*.sbatch
log "job templates in $dest: $(cd "$dest" && echo *.sbatch)"
