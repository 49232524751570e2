#!/bin/sh
# The Pushgateway for the suite; extra flags (e.g. --persistence.file=/pushgateway/metrics) pass through.
set -eu
exec prometheus-pushgateway --web.listen-address="${LISTEN_ADDRESS}" "$@"
