"""Ansible deploys launched through ansible-runner, and the local cluster of SSH nodes that tests them."""
