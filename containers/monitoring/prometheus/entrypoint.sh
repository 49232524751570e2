#!/bin/sh
# Prometheus for the suite: config from prometheus.yml.in and the environment (or PROMETHEUS_CONFIG),
# data in /prometheus, extra flags passed through.
set -eu
config=${PROMETHEUS_CONFIG:-}
if [ -z "$config" ]; then
  config=/prometheus/prometheus.yml
  sed -e "s|@SCRAPE_INTERVAL@|${SCRAPE_INTERVAL}|g" \
      -e "s|@PUSHGATEWAY_TARGET@|${PUSHGATEWAY_TARGET}|g" \
      -e "s|@LISTEN_PORT@|${LISTEN_ADDRESS##*:}|g" \
      /etc/fleetbench/prometheus.yml.in > "$config"
fi
exec prometheus \
  --config.file="$config" \
  --storage.tsdb.path=/prometheus/data \
  --storage.tsdb.retention.time="${RETENTION}" \
  --web.listen-address="${LISTEN_ADDRESS}" \
  --web.enable-lifecycle \
  "$@"
