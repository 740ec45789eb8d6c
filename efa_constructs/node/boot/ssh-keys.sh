#!/usr/bin/env bash
# Passwordless SSH between the nodes: every node fetches the cluster key the stack created
# (AWS::EC2::KeyPair keeps the private key in SSM Parameter Store, encrypted with the account's
# aws/ssm key; the nodes' role is granted it, and so is any principal of the account allowed
# ssm:GetParameter on it) and trusts it for the login user. Nothing secret is in the template or
# the user data.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

user=${EFA_CDK_USER:?}
ssh_dir="$(user_home)/.ssh"
key="$ssh_dir/id_efa_cdk"
mkdir -p "$ssh_dir"
chmod 700 "$ssh_dir"
umask 077
retry 5 5 aws_ ssm get-parameter --with-decryption --name "/ec2/keypair/${EFA_CDK_KEY_PAIR_ID:?}" \
  --query Parameter.Value >"$key.tmp" || die "could not read the cluster SSH key /ec2/keypair/$EFA_CDK_KEY_PAIR_ID from SSM"
mv "$key.tmp" "$key"
ssh-keygen -y -f "$key" >"$key.pub" || die "the cluster SSH key from SSM is not a private key"
touch "$ssh_dir/authorized_keys"
grep -qxF "$(cat "$key.pub")" "$ssh_dir/authorized_keys" || cat "$key.pub" >>"$ssh_dir/authorized_keys"
# ssh_patterns CIDR: Host patterns covering the VPC's addresses (ssh_config has no CIDR syntax: the
# prefix is rounded down to a whole octet, so a /20 gives a.b.*).
ssh_patterns() {
  local ip=${1%/*} bits=${1#*/} IFS=.
  # shellcheck disable=SC2206  # split on dots on purpose
  local o=($ip)
  if [ "$bits" -ge 24 ]; then echo "${o[0]}.${o[1]}.${o[2]}.*"
  elif [ "$bits" -ge 16 ]; then echo "${o[0]}.${o[1]}.*"
  elif [ "$bits" -ge 8 ]; then echo "${o[0]}.*"
  else echo "*"; fi
}
hosts=$(ssh_patterns "${EFA_CDK_VPC_CIDR:-10.0.0.0/8}")
# Inside the VPC: use the cluster key. Host keys are not remembered: a replaced node comes back with
# a new key at the same address, which a known_hosts entry would refuse ("host identification has
# changed"); the peers are the cluster's own nodes, reached only inside its security group.
cat >"$ssh_dir/config.efa-cdk" <<CONF
Host $hosts
  IdentityFile ~/.ssh/id_efa_cdk
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  ConnectTimeout 10
CONF
touch "$ssh_dir/config"
grep -qxF "Include ~/.ssh/config.efa-cdk" "$ssh_dir/config" \
  || printf 'Include ~/.ssh/config.efa-cdk\n%s\n' "$(cat "$ssh_dir/config")" >"$ssh_dir/config"
chown -R "$user:$user" "$ssh_dir"
log "cluster SSH key installed for $user"
