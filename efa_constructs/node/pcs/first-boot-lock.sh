# shellcheck shell=sh
# A PCS node's first boot, before cloud-init's write_files has written prep.sh (bootcmd runs first, and sshd
# may start before runcmd): the lock prep.sh keeps until its rule holds, made without it. Only root may log in
# (/etc/nologin with prep.sh's own reason, which prep.sh removes once its rule holds), and instance metadata
# answers root alone (iptables and ip6tables, where the image has them), so no user reaches the node role in
# between, nor a Session Manager session (pam_nologin does not stop one; the rule does). Inlined into the
# cloud-config's bootcmd by efa_constructs/core/pcs.py, which puts prep.sh's reason in place of the mark.
# EFA_CDK_ROOT: empty on a node (a scratch root in the tests).
mkdir -p "${EFA_CDK_ROOT:-}/etc" && echo @NOLOGIN_REASON@ >"${EFA_CDK_ROOT:-}/etc/nologin"
for rule in "iptables 169.254.169.254/32" "ip6tables fd00:ec2::254/128"; do
  # shellcheck disable=SC2086 # the tool and the address: two words, split on purpose
  set -- $rule
  command -v "$1" >/dev/null || continue
  "$1" -w -N efa-cdk-imds 2>/dev/null || "$1" -w -F efa-cdk-imds
  "$1" -w -A efa-cdk-imds -m owner --uid-owner 0 -j ACCEPT
  "$1" -w -A efa-cdk-imds -j REJECT
  "$1" -w -C OUTPUT -d "$2" -j efa-cdk-imds 2>/dev/null || "$1" -w -I OUTPUT 1 -d "$2" -j efa-cdk-imds
done
