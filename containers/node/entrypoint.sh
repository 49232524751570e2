#!/bin/sh
# Host keys are made per container (never baked into a layer); sshd listens on loopback only, on
# the port the cluster gave this node, and takes only the cluster's key.
set -eu
: "${SSH_PORT:?SSH_PORT is not set}"
ssh-keygen -A >/dev/null
mkdir -p /root/.ssh && chmod 700 /root/.ssh
cp /etc/fleetbench/authorized_keys /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys
exec /usr/sbin/sshd -D -e -p "$SSH_PORT" -o ListenAddress=127.0.0.1 -o PasswordAuthentication=no \
  -o PermitRootLogin=prohibit-password -o PidFile=/run/sshd.pid
