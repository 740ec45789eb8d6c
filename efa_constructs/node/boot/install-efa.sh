#!/usr/bin/env bash
# Install the pinned EFA software unless the image already has it (DLAMIs do). The tarball is
# checked against the pinned SHA-256 and its detached signature against the pinned key
# fingerprint BEFORE anything from it runs; any mismatch stops the node (fail closed).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

if [ -x "$R/opt/amazon/efa/bin/fi_info" ]; then
  log "EFA software already installed ($(head -n1 "$R/opt/amazon/efa_installed_packages" 2>/dev/null || echo "version unknown")); skipping the installer"
  exit 0
fi
version=${EFA_CDK_INSTALLER_VERSION:?}
fingerprint=${EFA_CDK_INSTALLER_FINGERPRINT:?}

# Operating systems the installer dropped: "ID VERSION_ID first-version-without-it". Source: the EC2
# user guide's "Elastic Fabric Adapter release notes" (1.40.0 Debian 10, 1.43.0 Ubuntu 20.04,
# 1.50.0 Amazon Linux 2, 1.51.0 Debian 11). Refuse here, with the reason, instead of a cryptic
# installer error halfway through.
# shellcheck source=/dev/null
os=$(. "$R/etc/os-release" && printf '%s %s' "$ID" "$VERSION_ID")
while read -r id release dropped; do
  [ "$os" = "$id $release" ] || continue
  version_at_least "$version" "$dropped" || continue
  die "EFA installer $version does not support $os (dropped in $dropped): use an image with a supported OS (Amazon Linux 2023, Ubuntu 22.04/24.04, RHEL/Rocky 8-9) or pin an older installer with EfaInstaller(version=...)"
done <<'DROPPED'
debian 10 1.40.0
ubuntu 20.04 1.43.0
amzn 2 1.50.0
debian 11 1.51.0
DROPPED
url=${EFA_CDK_INSTALLER_URL:-https://efa-installer.amazonaws.com}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
tarball="aws-efa-installer-$version.tar.gz"
for f in "$tarball" "$tarball.sig" aws-efa-installer.key; do
  retry 5 10 curl -sS -f -o "$f" "$url/$f" || die "could not download $url/$f"
done

if [ -n "${EFA_CDK_INSTALLER_SHA256:-}" ]; then
  actual=$(sha256sum "$tarball" | cut -d' ' -f1)
  [ "$actual" = "$EFA_CDK_INSTALLER_SHA256" ] \
    || die "$tarball has SHA-256 $actual, expected $EFA_CDK_INSTALLER_SHA256; not installing"
fi

verify_signed "$tarball" "$tarball.sig" aws-efa-installer.key "$fingerprint"

tar -xzf "$tarball"
cd aws-efa-installer
# shellcheck disable=SC2086  # flags are a word list by design
./efa_installer.sh -y ${EFA_CDK_INSTALLER_FLAGS:-} || die "efa_installer.sh $version failed"
log "EFA installer $version done"
