#!/usr/bin/env bash
# pgaf.sh: a pg_auto_failover formation on this host for the failover
# soak: a monitor and two Postgres nodes, each with its own data directory
# and port, trust authentication on 127.0.0.1, run as the postgres OS user
# (pg_autoctl refuses root).
#
#   pgaf.sh install                 install pg_auto_failover if missing
#   pgaf.sh start DIR [sync|async]  create (or restart) the formation in DIR
#   pgaf.sh stop DIR                stop every process of it
#   pgaf.sh dsn DIR                 the multi-host DSN a client connects with
#   pgaf.sh primary DIR             the primary's node name (node1, node2)
#   pgaf.sh failover DIR            a switchover (pg_autoctl perform failover)
#   pgaf.sh kill-primary DIR [LAG]  SIGKILL the primary's pg_autoctl and
#                                   Postgres; wait for the standby's promotion;
#                                   bring the old primary back as a standby.
#                                   LAG seconds: the standby's WAL receiver
#                                   stopped that long before the kill, and
#                                   killed with the primary (what it had
#                                   not read is lost)
#   pgaf.sh crash-primary DIR       SIGKILL the primary's Postgres alone (its
#                                   pg_autoctl restarts it)
#   pgaf.sh lag-standby DIR SECS    stop the standby's WAL receiver for SECS
#                                   (SIGSTOP): it falls behind, then resumes
#   pgaf.sh mode DIR sync|async     replication quorum on (synchronous
#                                   standby) or off (asynchronous)
#   pgaf.sh wait DIR                until one primary and one secondary
#
# Ports: PGAF_PORT (55432) for the monitor, the next two for the nodes.
# PGAF_UNHEALTHY_MS is how long the monitor waits before it fails a
# primary it cannot reach over: pg_auto_failover's default, 20000, well
# above a crashed primary's recovery in place (with 4000 a loaded host's
# recovery outlasts it, and the monitor fails over a primary that has
# already shown what it recovered).
# Installs postgresql-15-auto-failover and pg-auto-failover-cli from the
# distribution when pg_autoctl is missing (as root).
set -euo pipefail

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PORT=${PGAF_PORT:-55432}
DB=test
FORMATION=default
TIMEOUT=${PGAF_TIMEOUT:-120}

say() { printf 'pgaf: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && { [ -n "$dir" ] || [ "$cmd" = install ]; } || die "usage: pgaf.sh start|stop|dsn|primary|failover|kill-primary|crash-primary|lag-standby|mode|wait DIR [ARG]"

monport=$PORT
port_of() { echo $((PORT + ${1#node})); } # node1 -> PORT+1

# as runs a command as the postgres user with the formation's environment:
# pg_autoctl keeps its configuration and state under XDG directories,
# here inside DIR.
as() {
  local env=(env "XDG_CONFIG_HOME=$dir/config" "XDG_DATA_HOME=$dir/share" "PATH=$PG_BIN:$PATH" "PG_CONFIG=$PG_BIN/pg_config")
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "${env[@]}" "$@"
  else
    "${env[@]}" "$@"
  fi
}

monitor_uri() { echo "postgres://autoctl_node@127.0.0.1:$monport/pg_auto_failover?sslmode=disable"; }

sql_monitor() { as "$PG_BIN/psql" -X -qAt -h 127.0.0.1 -p "$monport" -U autoctl_node -d pg_auto_failover -c "$1"; }

install() {
  command -v pg_autoctl >/dev/null 2>&1 && [ -d /usr/share/postgresql/15/extension ] &&
    ls /usr/share/postgresql/15/extension/pgautofailover.control >/dev/null 2>&1 && return 0
  [ "$(id -u)" = 0 ] || die "pg_autoctl is not installed, and installing it needs root"
  say "installing pg_auto_failover"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15-auto-failover pg-auto-failover-cli >/dev/null
}

# run starts one node's pg_autoctl service in a session of its own, so
# that a kill reaches the whole node.
run() { # name
  local name=$1
  # setsid execs in place (a background job leads no group): the pid is
  # the session's, and so the process group's, of runuser, pg_autoctl
  # and the Postgres it starts.
  setsid bash -c "$(declare -f as); dir='$dir' PG_BIN='$PG_BIN'; as pg_autoctl run --pgdata '$dir/$name'" >>"$dir/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.run.pid"
}

running() { # name
  [ -f "$dir/$1.run.pid" ] && kill -0 "$(cat "$dir/$1.run.pid")" 2>/dev/null
}

stop_node() { # name
  local name=$1
  if running "$name"; then
    as pg_autoctl stop --pgdata "$dir/$name" >/dev/null 2>&1 || true
    for _ in $(seq 1 100); do running "$name" || break; sleep 0.1; done
    running "$name" && kill -9 -- "-$(cat "$dir/$name.run.pid")" 2>/dev/null || true
  fi
  if [ -f "$dir/$name/postmaster.pid" ]; then
    local pm; pm=$(head -1 "$dir/$name/postmaster.pid")
    kill -0 "$pm" 2>/dev/null && as "$PG_BIN/pg_ctl" -D "$dir/$name" -m immediate stop >/dev/null 2>&1 || true
  fi
  rm -f "$dir/$name.run.pid"
}

wait_healthy() {
  local deadline=$((SECONDS + TIMEOUT))
  while [ $SECONDS -lt $deadline ]; do
    local states
    states=$(sql_monitor "SELECT string_agg(reportedstate::text || '/' || goalstate::text, ' ' ORDER BY reportedstate) FROM pgautofailover.node WHERE formationid = '$FORMATION'" 2>/dev/null || true)
    if [ "$states" = "primary/primary secondary/secondary" ]; then return 0; fi
    sleep 0.3
  done
  die "the formation did not settle in ${TIMEOUT}s: $(sql_monitor "SELECT string_agg(nodename || ' ' || reportedstate || '/' || goalstate, ', ') FROM pgautofailover.node" 2>&1 || true)"
}

# wait_writable waits until the multi-host DSN reaches a primary that
# takes writes: the monitor may call a node primary before it serves.
wait_writable() {
  local deadline=$((SECONDS + TIMEOUT))
  while [ $SECONDS -lt $deadline ]; do
    [ "$(as "$PG_BIN/psql" -X -qAt "$(dsn)&connect_timeout=2" -c "SELECT pg_is_in_recovery()" 2>/dev/null)" = f ] && return 0
    sleep 0.2
  done
  die "no primary takes writes after ${TIMEOUT}s"
}

primary() {
  sql_monitor "SELECT nodename FROM pgautofailover.node WHERE formationid = '$FORMATION' AND reportedstate IN ('primary', 'wait_primary', 'single') AND goalstate IN ('primary', 'wait_primary', 'single') ORDER BY nodeid LIMIT 1"
}

standby() {
  sql_monitor "SELECT nodename FROM pgautofailover.node WHERE formationid = '$FORMATION' AND reportedstate = 'secondary' ORDER BY nodeid LIMIT 1"
}

set_mode() { # sync|async
  local quorum
  case $1 in
    sync) quorum=true ;;
    async) quorum=false ;;
    *) die "mode: sync or async, not $1" ;;
  esac
  for n in node1 node2; do
    as pg_autoctl set node replication-quorum "$quorum" --pgdata "$dir/$n" >>"$dir/set.log" 2>&1
  done
  wait_healthy
  # The primary's synchronous_standby_names says which it is.
  local p; p=$(primary)
  local names; names=$(as "$PG_BIN/psql" -X -qAt -h 127.0.0.1 -p "$(port_of "$p")" -U postgres -d "$DB" -c "SHOW synchronous_standby_names")
  say "mode $1: synchronous_standby_names='$names'"
  if [ "$1" = sync ] && [ -z "$names" ]; then die "mode sync: the primary has no synchronous standby"; fi
  if [ "$1" = async ] && [ -n "$names" ]; then die "mode async: the primary still waits for a standby"; fi
}

start() {
  local mode=${3:-sync}
  install
  mkdir -p "$dir"
  chown postgres: "$dir" 2>/dev/null || true
  if [ ! -f "$dir/monitor/PG_VERSION" ]; then
    say "creating the monitor on $monport"
    as pg_autoctl create monitor --pgdata "$dir/monitor" --pgport "$monport" --hostname 127.0.0.1 \
      --auth trust --no-ssl --pgctl "$PG_BIN/pg_ctl" >"$dir/monitor.create.log" 2>&1 ||
      die "create monitor failed: $(tail -5 "$dir/monitor.create.log")"
  fi
  running monitor || run monitor
  for _ in $(seq 1 100); do sql_monitor "SELECT 1" >/dev/null 2>&1 && break; sleep 0.2; done
  sql_monitor "SELECT 1" >/dev/null || die "the monitor does not answer: $(tail -5 "$dir/monitor.log")"
  # Notice a dead primary within seconds, not the default half minute.
  as "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$monport" -U postgres -d pg_auto_failover \
    -c "ALTER SYSTEM SET pgautofailover.health_check_period = 1000" \
    -c "ALTER SYSTEM SET pgautofailover.health_check_timeout = 2000" \
    -c "ALTER SYSTEM SET pgautofailover.health_check_max_retries = 2" \
    -c "ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500" \
    -c "ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = ${PGAF_UNHEALTHY_MS:-20000}" \
    -c "ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 6000" \
    -c "SELECT pg_reload_conf()" >/dev/null
  for n in node1 node2; do
    if [ ! -f "$dir/$n/PG_VERSION" ]; then
      say "creating $n on $(port_of $n)"
      # pg_autoctl gives a standby's Postgres under 3 s to take
      # connections after its base backup, which a loaded host can miss;
      # the same command again resumes the node's initialisation. Its exit
      # status can also come from stopping the Postgres it started, once
      # the node is initialised: that node is good.
      local ok=""
      for _ in 1 2 3 4; do
        if as pg_autoctl create postgres --pgdata "$dir/$n" --pgport "$(port_of $n)" --pghost 127.0.0.1 \
          --hostname 127.0.0.1 --name "$n" --dbname "$DB" --monitor "$(monitor_uri)" --auth trust --no-ssl \
          --pgctl "$PG_BIN/pg_ctl" >>"$dir/$n.create.log" 2>&1 ||
          grep -q "keeper has been successfully initialized" "$dir/$n.create.log"; then
          ok=1; break
        fi
        say "create $n: again"
        sleep 1
      done
      [ -n "$ok" ] || die "create $n failed: $(tail -5 "$dir/$n.create.log")"
      # A standby's timings: give up on an unreachable primary fast.
      as pg_autoctl config set --pgdata "$dir/$n" timeout.network_partition_timeout 3 >/dev/null
      as pg_autoctl config set --pgdata "$dir/$n" timeout.prepare_promotion_walreceiver 1 >/dev/null
    fi
    running "$n" || run "$n"
    [ "$n" = node1 ] && { for _ in $(seq 1 300); do [ "$(primary 2>/dev/null)" = node1 ] && break; sleep 0.2; done; }
  done
  wait_healthy
  for n in node1 node2; do
    as "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$(port_of $n)" -U postgres -d "$DB" -c "SELECT 1" >/dev/null ||
      die "$n does not take connections"
  done
  set_mode "$mode"
  wait_writable
  say "up: $(dsn)"
}

dsn() { echo "postgres://postgres@127.0.0.1:$((PORT + 1)),127.0.0.1:$((PORT + 2))/$DB?sslmode=disable&target_session_attrs=read-write"; }

failover() {
  wait_healthy
  local before; before=$(primary)
  as pg_autoctl perform failover --pgdata "$dir/monitor" --formation "$FORMATION" >>"$dir/failover.log" 2>&1 ||
    die "perform failover failed: $(tail -5 "$dir/failover.log")"
  wait_healthy
  wait_writable
  say "failover: $before -> $(primary)"
}

kill_primary() { # [lag seconds]
  wait_healthy
  local p; p=$(primary)
  local pm; pm=$(head -1 "$dir/$p/postmaster.pid")
  local stopped=""
  if [ -n "${1:-}" ]; then
    # The standby falls behind first: its WAL receiver stopped, the
    # primary goes on committing.
    stopped=$(walreceiver "$(standby)")
    kill -STOP $stopped
    sleep "$1"
  fi
  local ahead=""
  if [ -n "$stopped" ]; then
    # How far the primary is ahead of what the standby received, in WAL
    # bytes, a moment before the kill.
    local at; at=$(as "$PG_BIN/psql" -X -qAt -h 127.0.0.1 -p "$(port_of "$p")" -U postgres -d "$DB" -c "SELECT pg_current_wal_lsn()" 2>/dev/null || true)
    local got; got=$(as "$PG_BIN/psql" -X -qAt -h 127.0.0.1 -p "$(port_of "$(standby)")" -U postgres -d "$DB" -c "SELECT pg_last_wal_receive_lsn()" 2>/dev/null || true)
    [ -n "$at" ] && [ -n "$got" ] && ahead=$(as "$PG_BIN/psql" -X -qAt -h 127.0.0.1 -p "$(port_of "$p")" -U postgres -d "$DB" -c "SELECT pg_wal_lsn_diff('$at', '$got')" 2>/dev/null || true)
  fi
  kill -9 -- "-$(cat "$dir/$p.run.pid")" 2>/dev/null || true
  kill -9 "$pm" 2>/dev/null || true
  rm -f "$dir/$p.run.pid"
  # What the primary sent meanwhile waits in the stopped receiver's
  # socket: it goes with the receiver, as it would with a network cut.
  # The standby starts another, which finds no primary.
  [ -z "$stopped" ] || kill -9 $stopped 2>/dev/null || true
  [ -z "$ahead" ] || say "kill-primary: the standby was ${ahead} bytes of WAL behind"
  local deadline=$((SECONDS + TIMEOUT))
  while [ $SECONDS -lt $deadline ]; do
    local now; now=$(primary 2>/dev/null || true)
    [ -n "$now" ] && [ "$now" != "$p" ] && break
    sleep 0.2
  done
  [ "$(primary)" != "$p" ] || die "kill-primary: $p was not replaced in ${TIMEOUT}s"
  say "kill-primary: $p killed, $(primary) promoted"
  # Postgres may still be going down: its backends outlive the postmaster
  # for a moment.
  for _ in $(seq 1 100); do kill -0 "$pm" 2>/dev/null || break; sleep 0.1; done
  run "$p"
  wait_healthy
  wait_writable
}

crash_primary() {
  wait_healthy
  local p; p=$(primary)
  local pm; pm=$(head -1 "$dir/$p/postmaster.pid")
  kill -9 "$pm"
  say "crash-primary: $p's postgres killed"
  # Until its pg_autoctl has started it again, and it serves.
  local deadline=$((SECONDS + TIMEOUT))
  while [ $SECONDS -lt $deadline ]; do
    [ -f "$dir/$p/postmaster.pid" ] && [ "$(head -1 "$dir/$p/postmaster.pid")" != "$pm" ] && break
    sleep 0.2
  done
  wait_healthy
  wait_writable
}

walreceiver() { # node
  local pids=""
  for _ in $(seq 1 50); do
    pids=$(pgrep -f "walreceiver" -P "$(head -1 "$dir/$1/postmaster.pid")" || true)
    [ -n "$pids" ] && break
    sleep 0.2
  done
  [ -n "$pids" ] || die "$1 has no WAL receiver"
  echo "$pids"
}

lag_standby() { # secs
  local pids; pids=$(walreceiver "$(standby)")
  kill -STOP $pids
  sleep "$1"
  kill -CONT $pids 2>/dev/null || true
}

case $cmd in
  install) install ;;
  start) start "$@" ;;
  stop)
    for n in node2 node1 monitor; do [ -d "$dir/$n" ] && stop_node "$n"; done
    exit 0 ;;
  dsn) dsn ;;
  primary) primary ;;
  failover) failover ;;
  kill-primary) kill_primary "${3:-}" ;;
  crash-primary) crash_primary ;;
  lag-standby) lag_standby "${3:?seconds}" ;;
  mode) set_mode "${3:?sync or async}" ;;
  wait) wait_healthy ;;
  *) die "unknown command $cmd" ;;
esac
