#!/usr/bin/env bash
# Start a Docker engine for the images and their tests when none answers; idempotent.
#
# No bridge and no iptables rules: builds and containers use host networking, so every address they
# use is loopback. Log and pidfile under $FLEETBENCH_STATE_DIR/dockerd (default .fleetbench/dockerd);
# data root is dockerd's default (/var/lib/docker). Exit 0 once `docker version` answers; non-zero
# with the log's tail when it cannot start (not root, no dockerd installed, ...).
set -euo pipefail

STATE_DIR=${FLEETBENCH_STATE_DIR:-.fleetbench}/dockerd
TIMEOUT_S=${DOCKERD_TIMEOUT_S:-60}
say() { printf 'dockerd: %s\n' "$*" >&2; }

answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

if answers; then
  exit 0
fi
if [ -n "${DOCKER_HOST:-}" ]; then
  say "DOCKER_HOST=$DOCKER_HOST does not answer; unset it to use a local engine, or start that one"
  exit 1
fi
command -v dockerd >/dev/null 2>&1 || { say "dockerd not found: run \`make setup\` (installs Debian's docker.io)"; exit 1; }
command -v docker >/dev/null 2>&1 || { say "docker CLI not found: run \`make setup\` (installs Debian's docker.io)"; exit 1; }
if [ "$(id -u)" -ne 0 ]; then
  say "no Docker engine answers and starting one needs root: run \`sudo bash scripts/dockerd.sh\`"
  exit 1
fi

mkdir -p "$STATE_DIR"
log="$STATE_DIR/dockerd.log"
pidfile="$STATE_DIR/dockerd.pid"
# A pidfile left by an engine that died would stop dockerd from starting again.
if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  rm -f "$pidfile"
fi
if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
  rm -f /var/run/docker.pid
fi
if [ ! -f "$pidfile" ]; then
  say "starting dockerd --bridge=none --iptables=false (log: $log)"
  # setsid: the engine outlives the shell (make, pytest) that started it.
  setsid dockerd --bridge=none --iptables=false --ip6tables=false --pidfile "$pidfile" \
    >>"$log" 2>&1 </dev/null &
fi
deadline=$((SECONDS + TIMEOUT_S))
until answers; do
  if [ $SECONDS -ge $deadline ]; then
    say "dockerd did not answer within ${TIMEOUT_S}s; last lines of $log:"
    tail -n 15 "$log" >&2 || true
    exit 1
  fi
  sleep 0.5
done
say "Docker engine $(docker version --format '{{.Server.Version}}') ready"
