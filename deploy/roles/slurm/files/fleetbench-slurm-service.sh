#!/bin/sh
# Start, stop or restart a Slurm daemon where there is no init system (slurm_service_manager: direct,
# e.g. the local cluster's node containers, where sshd is PID 1). Each daemon keeps a pid file under
# /run; a process counts as running when that pid is alive and has the daemon's name. Options come
# from /etc/default/<service>, as Debian's units read them.
#   fleetbench-slurm-service start|stop|restart|status munge|slurmctld|slurmd|fleetbench-slurm-exporter
# start prints "running" when the daemon already runs and "started" when it started it; status
# exits 0 when it runs and 3 when it does not.
set -eu

usage() {
  echo "usage: fleetbench-slurm-service start|stop|restart|status munge|slurmctld|slurmd|fleetbench-slurm-exporter" >&2
  exit 2
}
[ "$#" -eq 2 ] || usage
action=$1
service=$2
case $service in
  munge) pidfile=/run/munge/munged.pid comm=munged ;;
  slurmctld) pidfile=/run/slurmctld.pid comm=slurmctld ;;
  slurmd) pidfile=/run/slurmd.pid comm=slurmd ;;
  fleetbench-slurm-exporter) pidfile=/run/fleetbench-slurm-exporter.pid comm=python3 ;;
  *) usage ;;
esac

running_pid() {
  [ -s "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$comm" ] || return 1
  echo "$pid"
}

launch() {
  OPTIONS="" SLURMD_OPTIONS="" SLURMCTLD_OPTIONS="" EXPORTER_OPTIONS=""
  EXPORTER_SCRIPT=/usr/local/lib/fleetbench/slurm_exporter.py
  if [ -r "/etc/default/$service" ]; then
    # shellcheck source=/dev/null
    . "/etc/default/$service"
  fi
  case $service in
    munge)
      mkdir -p /run/munge && chown munge:munge /run/munge && chmod 0755 /run/munge
      # shellcheck disable=SC2086 # options are words
      setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged $OPTIONS ;;
    slurmctld)
      # shellcheck disable=SC2086
      /usr/sbin/slurmctld $SLURMCTLD_OPTIONS ;;
    slurmd)
      # shellcheck disable=SC2086
      /usr/sbin/slurmd $SLURMD_OPTIONS ;;
    fleetbench-slurm-exporter)
      # The exporter stays in the foreground: started in the background, in a session of its own.
      # shellcheck disable=SC2086
      setsid setpriv --reuid=slurm --regid=slurm --init-groups python3 "$EXPORTER_SCRIPT" \
        $EXPORTER_OPTIONS </dev/null >>/var/log/slurm/fleetbench-slurm-exporter.log 2>&1 &
      echo "$!" >"$pidfile" ;;
  esac
}

start() {
  if running_pid >/dev/null; then
    echo running
    return 0
  fi
  rm -f "$pidfile"
  launch
  tries=0
  until running_pid >/dev/null; do
    tries=$((tries + 1))
    if [ "$tries" -gt 100 ]; then
      echo "$service did not start within 10 s (no live process in $pidfile); see its log under /var/log" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo started
}

stop() {
  if ! pid=$(running_pid); then
    rm -f "$pidfile"
    echo stopped
    return 0
  fi
  kill -TERM "$pid"
  tries=0
  while [ -d "/proc/$pid" ]; do
    tries=$((tries + 1))
    if [ "$tries" -gt 200 ]; then
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
  done
  rm -f "$pidfile"
  echo stopped
}

case $action in
  start) start ;;
  stop) stop ;;
  restart) stop >/dev/null && start ;;
  status) if running_pid >/dev/null; then echo running; else echo stopped; exit 3; fi ;;
  *) usage ;;
esac
