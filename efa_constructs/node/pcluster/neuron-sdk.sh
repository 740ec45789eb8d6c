#!/usr/bin/env bash
# Install the Neuron SDK's system packages on a ParallelCluster compute node (ParallelCluster's own
# images carry none, so nccom-test and the Neuron runtime would be missing): driver, runtime,
# collectives and tools, pinned to one Neuron release (EFA_CDK_NEURON_PACKAGES, chosen in
# efa_constructs/core/software.py with its source), from the Neuron repository the Neuron docs name.
# apt checks every package against the repository's signing key (signed-by). The key, fetched over
# HTTPS from the repository, is trusted only when it is one key whose fingerprint ends with the long
# key id the Neuron docs publish (EFA_CDK_NEURON_KEY_ID; no full fingerprint is published).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

if [ -x "$R/opt/aws/neuron/bin/nccom-test" ]; then
  log "Neuron tools already installed (the image has them)"
  exit 0
fi
[ "$(os_id)" = ubuntu ] || die "the Neuron SDK step installs on Ubuntu only (image_os ubuntu2204/ubuntu2404); this is $(os_id)"
# shellcheck source=/dev/null
codename=$(. "$R/etc/os-release" && printf '%s' "$VERSION_CODENAME")
repo=https://apt.repos.neuron.amazonaws.com
keyring="$R/usr/share/keyrings/aws-neuron.gpg"
mkdir -p "$(dirname "$keyring")" "$R/etc/apt/sources.list.d"
retry 5 10 curl -sS -f -o "$STATE/neuron.pub" "$repo/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB" \
  || die "could not download the Neuron repository key from $repo"
key_fingerprints "$STATE/neuron.pub" >"$STATE/neuron.fpr" || die "the Neuron repository key is not a PGP key"
if [ "$(wc -l <"$STATE/neuron.fpr")" != 1 ] || ! grep -q "${EFA_CDK_NEURON_KEY_ID:?}\$" "$STATE/neuron.fpr"; then
  die "the Neuron repository key has fingerprint(s) $(tr '\n' ' ' <"$STATE/neuron.fpr"), expected one ending with $EFA_CDK_NEURON_KEY_ID; not trusting it"
fi
gpg --batch --yes --dearmor -o "$keyring" "$STATE/neuron.pub" || die "the Neuron repository key is not a PGP key"
echo "deb [signed-by=/usr/share/keyrings/aws-neuron.gpg] $repo $codename main" >"$R/etc/apt/sources.list.d/neuron.list"
export DEBIAN_FRONTEND=noninteractive
retry 3 10 apt-get update -q || die "apt-get update failed with the Neuron repository"
# shellcheck disable=SC2086  # one word per package=version
retry 3 10 apt-get install -y -q "linux-headers-$(uname -r)" ${EFA_CDK_NEURON_PACKAGES:?} \
  || die "could not install the Neuron packages: $EFA_CDK_NEURON_PACKAGES"
log "installed: $EFA_CDK_NEURON_PACKAGES"
