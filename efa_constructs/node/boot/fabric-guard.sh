#!/usr/bin/env bash
# The guard against silent fallback: what a job started on this node would communicate over, checked
# before it runs (by verify-efa at boot, the health timer, the Slurm Prolog and job templates, and users
# before mpirun). A job that cannot reach EFA does not fail: libfabric hands it another provider and NCCL
# falls back to TCP sockets, 4 to 100 times slower (skypilot-org/skypilot#8391, #10055). In the
# environment the cluster's jobs get ($ETC/efa.env, /etc/profile.d/efa-cdk.sh):
# - libfabric offers reliable-datagram endpoints of the expected provider first (efa; the one-machine
#   harness's stand-in), and FI_PROVIDER names no other;
# - the efa provider offers an endpoint on every device bound to the efa driver: it names a device's RDM
#   domain "<device>-rdm" (libfabric prov/efa/src/efa_domain.h, efa_domain_name_suffix), listed once per
#   fabric (efa, and efa-direct since libfabric 2.0: ofiwg/libfabric#10735); at least as many as the
#   launch template attached;
# - where NCCL runs the collectives (EFA_CDK_COLLECTIVES=nccl), the aws-ofi-nccl plugin NCCL loads
#   (lib.sh's NCCL_PLUGIN_NAMES) is on the jobs' library path or named by NCCL_NET_PLUGIN, and NCCL_NET,
#   when set, names the plugin's network (any case), not another transport (NCCL environment variables).
# One line either way, naming the node and what it found; exit 1 on a refusal.
#   fabric-guard.sh                  check this node
#   fabric-guard.sh --hostfile FILE  check every node of an MPI hostfile over SSH (before mpirun)
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

if [ "${1:-}" = --hostfile ]; then
  [ -r "${2:-}" ] || { echo "usage: $0 --hostfile FILE (a readable MPI hostfile)" >&2; exit 2; }
  bad=0
  mapfile -t hosts < <(awk '!/^#/ && NF {print $1}' "$2")
  for host in "${hosts[@]}"; do
    ssh -n -o BatchMode=yes -o ConnectTimeout=10 "$host" /opt/efa-cdk/bin/fabric-guard.sh && continue
    [ "$?" -ne 255 ] || echo "efa-cdk guard: $host: REFUSED: not reached over SSH"
    bad=1
  done
  exit "$bad"
fi

node=$(hostname 2>/dev/null || echo "this node")
refuse() {
  echo "efa-cdk guard: $node: REFUSED: $*"
  exit 1
}
# The jobs' environment: FI_PROVIDER and the FI_EFA_* settings, then the paths login shells get.
if [ -r "$ETC/efa.env" ]; then
  set -a
  # shellcheck source=/dev/null
  . "$ETC/efa.env"
  set +a
fi
if [ -r "$R/etc/profile.d/efa-cdk.sh" ]; then
  # shellcheck source=/dev/null
  . "$R/etc/profile.d/efa-cdk.sh"
fi
PATH=$(efa_path)
# The one-machine harness's stand-in takes efa's place where the jobs name efa, as everywhere (lib.sh).
if [ "${FI_PROVIDER:-}" = efa ] && [ "$FABRIC" != efa ]; then FI_PROVIDER=$FABRIC; fi

if [ -n "${FI_PROVIDER:-}" ] && [ "${FI_PROVIDER%%;*}" != "$FABRIC" ]; then
  refuse "the jobs' environment sets FI_PROVIDER=$FI_PROVIDER: libfabric would use it, not $FABRIC"
fi
out=$(fi_info -t FI_EP_RDM 2>&1) \
  || refuse "libfabric offers no reliable-datagram endpoint (FI_PROVIDER=${FI_PROVIDER:-unset}): $(tail -n1 <<<"$out")"
# "provider domain", one line per endpoint libfabric offers, in its order (the first is what a job gets)
offers=$(awk '/^provider:/ {p = $2} /^[[:space:]]+domain:/ {print p, $2}' <<<"$out")
[ -n "$offers" ] || refuse "fi_info lists no reliable-datagram endpoint: $(tail -n1 <<<"$out")"
first=$(head -n1 <<<"$offers" | cut -d' ' -f1)
if [ "${first%%;*}" != "$FABRIC" ]; then
  refuse "libfabric offers $first first ($(awk -v p="$first" '$1 == p {print $2}' <<<"$offers" | sort -u | paste -sd, -)), not $FABRIC: a job would run over $first"
fi
domains=$(awk -v f="$FABRIC" '{split($1, p, ";")} p[1] == f {print $2}' <<<"$offers" | sort -u)

if [ "$FABRIC" = efa ]; then
  missing=() devices=0
  for dev in "$R"/sys/class/infiniband/*; do
    [ -e "$dev" ] && [ "$(rdma_driver "${dev##*/}")" = efa ] || continue
    devices=$((devices + 1))
    grep -qx "${dev##*/}-rdm" <<<"$domains" || missing+=("${dev##*/}")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    refuse "libfabric's efa provider offers no endpoint on ${missing[*]}: jobs would use $((devices - ${#missing[@]})) of $devices EFAs (it offers: $(paste -sd, - <<<"$domains"))"
  fi
  # the launch template's count (none on ParallelCluster's nodes, whose EFAs ParallelCluster attaches)
  want=${EFA_CDK_EFA_COUNT:-0}
  [ "$devices" -gt 0 ] || refuse "no device is bound to the efa driver"
  [ "$devices" -ge "$want" ] || refuse "$devices EFA devices, the launch template attached $want"
fi

plugin=""
if [ "${EFA_CDK_COLLECTIVES:-none}" = nccl ]; then
  if [ -n "${NCCL_NET_PLUGIN:-}" ] && [ "${NCCL_NET_PLUGIN#/}" != "$NCCL_NET_PLUGIN" ] && [ -e "$R$NCCL_NET_PLUGIN" ]; then
    plugin=$NCCL_NET_PLUGIN
  fi
  if [ -z "$plugin" ]; then
    IFS=: read -ra dirs <<<"${LD_LIBRARY_PATH:-}"
    plugin=$(nccl_plugin_in "${dirs[@]}")
  fi
  if [ -z "$plugin" ]; then # or in the loader's cache, where dlopen finds it too
    plugin=$(ldconfig -p 2>/dev/null | awk -v names=" $NCCL_PLUGIN_NAMES " 'index(names, " " $1 " ") {print $NF; exit}')
  fi
  if [ -z "$plugin" ]; then
    installed=$(nccl_plugin_dir)
    where=${installed:+"in $installed but "}
    refuse "NCCL's EFA plugin (aws-ofi-nccl) is ${where}on none of the jobs' library paths (${LD_LIBRARY_PATH:-none}): NCCL would fall back to TCP sockets"
  fi
  # NCCL picks the network whose name NCCL_NET gives, compared case-insensitively (NCCL src/plugin/net.cc,
  # strcasecmp); aws-ofi-nccl answers to Libfabric, and renames itself for NCCL_NET "AWS Libfabric" (its 1.11
  # name) or "OFI" (nvidia_plugin_name_fixup). Any other name (Socket, IB, ...) is another transport.
  net=${NCCL_NET:-}
  case "${net,,}" in
    "" | libfabric | "aws libfabric" | ofi) ;;
    *) refuse "the jobs' environment sets NCCL_NET=$NCCL_NET: NCCL would not use EFA (aws-ofi-nccl answers to Libfabric)" ;;
  esac
fi
echo "efa-cdk guard: $node: ok: $FABRIC on $(grep -c . <<<"$domains") endpoint domains ($(paste -sd, - <<<"$domains"))${plugin:+, NCCL plugin $plugin}"
