#!/bin/sh
# The Pushgateway for the suite. Pushed groups persist in PERSISTENCE_FILE (mount its folder to keep
# them across restarts; empty keeps them in memory only). Extra flags pass through.
set -eu
exec prometheus-pushgateway --web.listen-address="${LISTEN_ADDRESS}" --persistence.file="${PERSISTENCE_FILE}" "$@"
