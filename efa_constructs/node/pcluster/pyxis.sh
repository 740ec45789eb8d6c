#!/usr/bin/env bash
# Switch on Enroot and Pyxis, which ParallelCluster (3.11 and later) installs in its images but leaves
# off, so Slurm jobs run in containers: `srun --container-image=<image> ...`. Follows the ParallelCluster
# user guide's "Enroot and Pyxis" steps with the samples the images ship in
# /opt/parallelcluster/examples (aws-parallelcluster-cookbook #2820): on every node the Enroot
# directories and configuration and the Pyxis runtime directory; on the head node the Slurm plugstack
# entries, then `scontrol reconfigure`. For EFA, on every node: the node's EFA environment in every
# container (Enroot environ.d) and a pre-start hook that stops an image without libfabric on an EFA
# node, with the fix (enroot-efa-hook.sh).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

examples="$R/opt/parallelcluster/examples"
[ -r "$examples/enroot/enroot.conf" ] \
  || die "no Enroot/Pyxis samples in $examples: the image is older than ParallelCluster 3.11"
for dir in /var/enroot /run/enroot /run/pyxis; do
  mkdir -p "$R$dir"
  chmod 1777 "$R$dir"
done
mkdir -p "$R/etc/enroot"
cp "$examples/enroot/enroot.conf" "$R/etc/enroot/enroot.conf"
chmod 0644 "$R/etc/enroot/enroot.conf"
grep -Eqi '^[[:space:]]*ENROOT_RESTRICT_DEV[[:space:]]+(y|yes|1|true)' "$R/etc/enroot/enroot.conf" \
  && die "the sample enroot.conf sets ENROOT_RESTRICT_DEV: containers would not see /dev/infiniband (EFA)"
mkdir -p "$R/etc/enroot/hooks.d"
install -m 0755 "$(dirname "$0")/enroot-efa-hook.sh" "$R/etc/enroot/hooks.d/90-efa-cdk.sh"
# shellcheck source=/dev/null
node_type=$(. "$R/etc/parallelcluster/cfnconfig" && printf '%s' "${cfn_node_type:-}")
if [ "$node_type" != HeadNode ]; then  # the jobs' nodes: their containers get the EFA environment
  [ -r "$ETC/efa.env" ] || die "$ETC/efa.env missing: the efa-env step runs before pyxis"
  mkdir -p "$R/etc/enroot/environ.d"
  grep -v '^EFA_LIBDIR=' "$ETC/efa.env" >"$R/etc/enroot/environ.d/50-efa-cdk.env"  # FI_PROVIDER, FI_EFA_*
else  # the head node: Pyxis in Slurm's plugstack; no EFA there, so no FI_PROVIDER=efa in its containers
  slurm_etc="$R/opt/slurm/etc"
  mkdir -p "$slurm_etc/plugstack.conf.d"
  cp "$examples/spank/plugstack.conf" "$slurm_etc/plugstack.conf"
  cp "$examples/pyxis/pyxis.conf" "$slurm_etc/plugstack.conf.d/pyxis.conf"
  "$SLURM_BIN/scontrol" reconfigure || die "scontrol reconfigure failed after adding Pyxis to the plugstack"
fi
log "Enroot and Pyxis on ($node_type): srun --container-image=<image> runs a job step in a container"
