#!/usr/bin/env bash
# The accelerator checks (issues 43, 59): the node has every accelerator its type has, each device's own
# state says it can train (NVIDIA: the driver's flags, NVLink; Neuron: its sysfs counters: devices.py), and
# no driver event says otherwise (Xid, neuron-ls, hl-smi: accel.py). At boot (verify-efa.sh) a problem fails
# the node's verification; later (device-health.sh, by a timer) each is mended by its ladder (mend.sh).
#   accelerator-check.sh [--boot]    --boot: also DCGM's diagnostic at EFA_CDK_DCGM_LEVEL (NVIDIA GPUs)
# Prints one line per problem (devices.py's end with the mend they ask for). Exit 0: healthy (or no
# accelerator); 1: a problem.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
PATH="$PATH:/opt/aws/neuron/bin" # neuron-ls on the Neuron images
want=${EFA_CDK_ACCELERATOR_COUNT:-0}
problems=()

count() { # count PATH...: how many of the globbed device files exist
  local n=0 f
  for f in "$@"; do [ -e "$f" ] && n=$((n + 1)); done
  echo "$n"
}
# NVIDIA: the GPUs the driver lists (nvidia-smi -L; its device files /dev/nvidiaN appear only once
# something has asked the driver, so they are counted only without nvidia-smi). nvidia-smi failing (no
# driver loaded: "couldn't communicate with the NVIDIA driver") counts none, and its words are kept for the
# problem line. Neuron and Gaudi: the driver's device files, one per device: /dev/neuronN (the Neuron
# container guide passes each with --device), /dev/accel/accelN (Gaudi's habanalabs in the kernel's accel
# subsystem) or /dev/hlN (its older out-of-tree driver).
said=
case "${EFA_CDK_ACCELERATOR:-none}" in
  nvidia-gpu)
    label="NVIDIA GPU"
    if command -v nvidia-smi >/dev/null; then
      listed=$(nvidia-smi -L 2>&1) || said="; nvidia-smi -L: $(head -n1 <<<"$listed" | cut -c1-200)"
      have=$(printf '%s\n' "$listed" | python3 "$here/accel.py" gpus) || have=0
    else
      have=$(count "$R"/dev/nvidia[0-9]*)
    fi
    ;;
  neuron) label="Neuron" have=$(count "$R"/dev/neuron[0-9]*) ;;
  gaudi) label="Gaudi" have=$(count "$R"/dev/accel/accel[0-9]* "$R"/dev/hl[0-9]*) ;;
  *) echo "no accelerator to check" && exit 0 ;;
esac
[ "$have" -ge "$want" ] \
  || problems+=("$have of $want $label devices (the driver is missing from the image, or a device was lost)$said")

if [ "$EFA_CDK_ACCELERATOR" = nvidia-gpu ] && [ -z "$said" ] && command -v nvidia-smi >/dev/null; then
  # Each GPU's own state, from the driver (devices.py gpu: remapped rows, pages pending retirement, the
  # recovery action, uncorrectable ECC, slowdowns, the PCIe link under load): the query with the newer
  # drivers' fields, else without them, else the whole XML report (-q -x), whichever the driver answers.
  # (an answer is its stdout: a warning on stderr is not part of the table; a refusal's words are kept)
  fields=$(python3 "$here/devices.py" fields --newer)
  if ! state=$(nvidia-smi --query-gpu="$fields" --format=csv 2>/dev/null); then
    fields=$(python3 "$here/devices.py" fields)
    if ! state=$(nvidia-smi --query-gpu="$fields" --format=csv 2>/dev/null); then
      fields="" state=$(nvidia-smi -q -x 2>/dev/null) || state=$(nvidia-smi -q -x 2>&1) || true
    fi
  fi
  mapfile -t found < <(printf '%s\n' "$state" | python3 "$here/devices.py" gpu ${fields:+--fields "$fields"} || true)
  problems+=("${found[@]}")
  # NVLink, where the type's GPUs have it (EFA_CDK_NVLINK, from the catalogue): a link listed but down
  if [ "${EFA_CDK_NVLINK:-0}" = 1 ]; then
    links=$(nvidia-smi nvlink --status 2>/dev/null) || links=
    mapfile -t found < <(printf '%s\n' "$links" | python3 "$here/devices.py" nvlink || true)
    problems+=("${found[@]}")
  fi
fi
if [ "$EFA_CDK_ACCELERATOR" = nvidia-gpu ]; then
  # The driver's own signals since boot: Xid events that call for a reset, a reboot or a replacement
  # (ECC, NVLink, off the bus, GSP; accel.py has the list and its sources).
  kernel=$(journalctl -k -b -q --no-pager 2>/dev/null || dmesg 2>/dev/null || true)
  mapfile -t xids < <(printf '%s\n' "$kernel" | python3 "$here/accel.py" xid || true)
  problems+=("${xids[@]}")
  if [ "${1:-}" = --boot ] && [ -n "${EFA_CDK_DCGM_LEVEL:-}" ]; then
    level=$EFA_CDK_DCGM_LEVEL
    if ! command -v dcgmi >/dev/null; then
      problems+=("dcgmi not found: DCGM diagnostic level $level needs DCGM (datacenter-gpu-manager) in the image, or no dcgm_diag_level")
    else
      systemctl start nvidia-dcgm 2>/dev/null || true # dcgmi talks to DCGM's host engine
      rc=0
      out=$(dcgmi diag -r "$level" -j 2>&1) || rc=$?
      mapfile -t failed < <(printf '%s\n' "$out" | python3 "$here/accel.py" dcgm || true)
      [ "$rc" = 0 ] || [ "${#failed[@]}" -gt 0 ] || failed=("dcgmi diag -r $level exited $rc: $(tail -n1 <<<"$out")")
      [ "${#failed[@]}" -eq 0 ] || problems+=("${failed[@]/#/DCGM diagnostic level $level: }")
      [ "${#failed[@]}" -gt 0 ] || log "DCGM diagnostic level $level passed"
    fi
  fi
fi
if [ "$EFA_CDK_ACCELERATOR" = neuron ]; then
  # each device's hardware counters and its cores' errors, from the Neuron driver's sysfs (devices.py neuron)
  mapfile -t found < <(python3 "$here/devices.py" neuron "$R/sys" || true)
  problems+=("${found[@]}")
fi
if [ "$EFA_CDK_ACCELERATOR" = neuron ] && command -v neuron-ls >/dev/null; then
  mapfile -t listed < <(neuron-ls 2>&1 | python3 "$here/accel.py" neuron "$want" || true)
  problems+=("${listed[@]}")
fi
if [ "$EFA_CDK_ACCELERATOR" = gaudi ] && command -v hl-smi >/dev/null; then
  # hl-smi's summary table: every device of the type, none with uncorrectable errors (accel.py gaudi)
  mapfile -t listed < <(hl-smi 2>&1 | python3 "$here/accel.py" gaudi "$want" || true)
  problems+=("${listed[@]}")
fi

if [ "${#problems[@]}" -gt 0 ]; then
  printf '%s\n' "${problems[@]}"
  exit 1
fi
echo "$have $label devices, no fault reported"
