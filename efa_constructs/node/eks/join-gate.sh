#!/bin/bash
# efa-cdk on an EKS node (an EfaNodegroup with an FSx for Lustre file system): the user data part EKS merges
# with its own bootstrap. It runs efa-cdk's bootstrap (written to a file first, so no step can read the
# script from stdin) and, when that fails, keeps the node out of the cluster. nodeadm-run.service starts
# kubelet after cloud-init's scripts (awslabs/amazon-eks-ami, templates/al2023/runtime/rootfs/etc/systemd/
# system/nodeadm-run.service: After=cloud-final.service): stopping it replaces its queued start (systemctl's
# default job mode) and disabling it keeps it from later boots, so the node never registers, and EKS reports
# the node group's instances that do not join (health issue NodeCreationFailure).
set -uo pipefail
R="${EFA_CDK_ROOT:-}" # empty on a node; a scratch root in the tests
unit=nodeadm-run.service
script="$R/var/lib/efa-cdk/bootstrap.sh"
mkdir -p "${script%/*}"
cat >"$script" <<'EFA_CDK_PART_END'
# efa-cdk:bootstrap
EFA_CDK_PART_END
bash "$script" && exit 0
echo "efa-cdk: the node software failed (the reason is above and in /var/log/efa-cdk.log):" \
  "$unit is held, so this node does not join the cluster" >&2
systemctl disable "$unit" || true
systemctl stop --no-block "$unit" || true
exit 1
