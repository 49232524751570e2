#!/bin/sh
# node_exporter for the suite: listen address and textfile folder from the environment, extra
# flags (e.g. --path.rootfs=/host) passed through.
set -eu
exec prometheus-node-exporter --web.listen-address="${LISTEN_ADDRESS}" \
  --collector.textfile.directory="${TEXTFILE_DIR}" "$@"
