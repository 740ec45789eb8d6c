#!/usr/bin/env bash
# Passwordless SSH between the nodes: every node fetches the cluster key the stack created
# (AWS::EC2::KeyPair keeps the private key in SSM Parameter Store; only the nodes' role may read
# it) and trusts it for the login user. Nothing secret is in the template or the user data.
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
# Inside the VPC: use the cluster key, and learn host keys on first contact (nodes are new).
cat >"$ssh_dir/config.efa-cdk" <<CONF
Host ${EFA_CDK_SSH_HOSTS:-10.* 172.* 192.168.*}
  IdentityFile ~/.ssh/id_efa_cdk
  StrictHostKeyChecking accept-new
  ConnectTimeout 10
CONF
touch "$ssh_dir/config"
grep -qxF "Include ~/.ssh/config.efa-cdk" "$ssh_dir/config" \
  || printf 'Include ~/.ssh/config.efa-cdk\n%s\n' "$(cat "$ssh_dir/config")" >"$ssh_dir/config"
chown -R "$user:$user" "$ssh_dir"
log "cluster SSH key installed for $user"
