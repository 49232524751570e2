#!/bin/bash
# HEALTHCHECK of the monitoring images: GET HEALTH_PATH (default /-/healthy) on the service's own address
# (LISTEN_ADDRESS; a wildcard host is reached on 127.0.0.1). Only bash is needed: no curl or wget.
set -u
address=${LISTEN_ADDRESS:-0.0.0.0:9090}
port=${address##*:}
host=${address%:*}
case "$host" in "" | "0.0.0.0" | "[::]" | "::") host=127.0.0.1 ;; esac
exec 3<>"/dev/tcp/${host}/${port}" || exit 1
printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "${HEALTH_PATH:-/-/healthy}" "$host" >&3
IFS= read -r -t 5 status <&3 || exit 1
case "$status" in
  *" 200 "*) exit 0 ;;
esac
echo "unhealthy: $status" >&2
exit 1
