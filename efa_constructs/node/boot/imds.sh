#!/usr/bin/env bash
# Instance metadata, and with it the node role, for root and the login user only (EFA_CDK_USER: the
# user jobs run as, who keeps the role's grants). Any other local user would otherwise act as the node
# role: read the cluster SSH key (root on every node), mark peers unhealthy, rewrite the cluster's
# parameters. The rule is the one PCS nodes get (node/pcs/prep.sh imds: iptables and ip6tables owner
# match, fail closed), applied now and at every boot by a unit (rules do not survive a reboot).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

user=${EFA_CDK_USER:?}
id -u "$user" >/dev/null 2>&1 || die "the login user $user does not exist on this image: set the image's user"
EFA_CDK_ROOT=$R bash "$here/prep.sh" imds root "$user" \
  || die "could not restrict instance metadata to root and $user (iptables/ip6tables; /var/log/efa-cdk.log)"
units="$R/etc/systemd/system"
mkdir -p "$units"
cat >"$units/efa-cdk-imds.service" <<UNIT
[Unit]
Description=efa-cdk: instance metadata for root and $user only
DefaultDependencies=no
After=local-fs.target
Before=network-pre.target
Wants=network-pre.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/opt/efa-cdk/bin/prep.sh imds root $user
[Install]
WantedBy=sysinit.target
UNIT
systemctl daemon-reload
systemctl enable efa-cdk-imds.service >/dev/null || die "could not enable the efa-cdk-imds unit"
