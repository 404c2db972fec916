#!/usr/bin/env bash
# galera.sh — a three-node MariaDB Galera cluster on one machine, for the
# reliability tests: every node accepts writes, each has its own data
# directory, socket and ports, and none touches a MariaDB already running
# on the machine (its port, its configuration files, its data).
#
#   galera.sh start        bootstrap node 1, join nodes 2 and 3; wait until all are synced
#   galera.sh stop         stop every node (SIGTERM, then SIGKILL) and remove the data
#   galera.sh kill N       SIGKILL node N (1-3)
#   galera.sh restart N    start node N again: it recovers its position and rejoins (IST, else SST)
#   galera.sh status       each node's pid, state and cluster size
#   galera.sh dsn N        the go-sql-driver DSN of node N
#   galera.sh install      install what is missing from the distribution's packages (as root)
#
# Environment:
#   IDEM_GALERA_DIR    where the nodes live (default: .galera at the repository's root)
#   IDEM_GALERA_PORT   node N listens on IDEM_GALERA_PORT+N (default 13060: 13061-13063)
#   (The defaults lie below the kernel's usual ephemeral range, 32768 and
#   up: a port in it can be taken at any moment as the local end of some
#   other program's connection, and a node whose group port is taken dies
#   at start with "Failed to set thread schedparams".)
#   IDEM_GALERA_WSREP  node N's group port is IDEM_GALERA_WSREP+N, its IST port +10,
#                      its SST port +20 (default 14570: 14571-14573, 14581-14583, 14591-14593)
#
# It needs mariadb-server, galera-4 and rsync from the distribution:
#   apt-get install -y mariadb-server galera-4 rsync
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
DIR=${IDEM_GALERA_DIR:-$(cd "$here/../.." && pwd)/.galera}
PORT=${IDEM_GALERA_PORT:-13060}
WSREP=${IDEM_GALERA_WSREP:-14570}
MARIADBD=${IDEM_GALERA_MARIADBD:-/usr/sbin/mariadbd}
NODES=(1 2 3)
# The nodes run as the mysql user when started by root: the rsync daemon
# of a state transfer started by root would write as nobody.
RUNAS=$(id -un)
if [ "$(id -u)" = 0 ] && id mysql >/dev/null 2>&1; then RUNAS=mysql; fi

say() { printf 'galera: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

provider() {
	local p
	for p in /usr/lib/galera/libgalera_smm.so /usr/lib/libgalera_smm.so /usr/lib64/galera-4/libgalera_smm.so; do
		[ -f "$p" ] && { echo "$p"; return; }
	done
	p=$(dpkg -L galera-4 2>/dev/null | grep 'libgalera_smm.so$' | head -1 || true)
	[ -n "$p" ] || die "libgalera_smm.so not found: apt-get install -y galera-4"
	echo "$p"
}

need() {
	[ -x "$MARIADBD" ] || die "$MARIADBD not found: apt-get install -y mariadb-server"
	command -v mariadb-install-db >/dev/null || die "mariadb-install-db not found: apt-get install -y mariadb-server"
	command -v rsync >/dev/null || die "rsync not found (the state transfer uses it): apt-get install -y rsync"
	command -v mariadb >/dev/null || die "the mariadb client not found: apt-get install -y mariadb-client"
}

node_dir() { echo "$DIR/n$1"; }
cnf() { echo "$(node_dir "$1")/my.cnf"; }
pidfile() { echo "$(node_dir "$1")/launched.pid"; }
serverpid() { echo "$(node_dir "$1")/mariadbd.pid"; }
sock() { echo "$(node_dir "$1")/mariadbd.sock"; }

cluster_address() {
	local n addrs=()
	for n in "${NODES[@]}"; do addrs+=("127.0.0.1:$((WSREP + n))"); done
	local IFS=,
	echo "gcomm://${addrs[*]}"
}

# write_cnf N: node N's whole configuration. --defaults-file keeps the
# machine's own configuration files out.
write_cnf() {
	local n=$1 d
	d=$(node_dir "$n")
	mkdir -p "$d/data" "$d/tmp"
	cat >"$(cnf "$n")" <<EOF
[mysqld]
user=$RUNAS
datadir=$d/data
tmpdir=$d/tmp
socket=$(sock "$n")
pid-file=$(serverpid "$n")
log-error=$d/error.log
port=$((PORT + n))
bind-address=127.0.0.1
skip-name-resolve
max_connections=300
innodb_buffer_pool_size=64M
innodb_log_file_size=32M
innodb_flush_log_at_trx_commit=2
# What Galera requires: row events, InnoDB, interleaved auto-increment
# locks (no table-level AUTO-INC lock a replicated insert would wait on).
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
wsrep_on=ON
wsrep_provider=$(provider)
wsrep_cluster_name=idem
wsrep_cluster_address=$(cluster_address)
wsrep_node_name=n$n
wsrep_node_address=127.0.0.1:$((WSREP + n))
wsrep_sst_receive_address=127.0.0.1:$((WSREP + 20 + n))
wsrep_sst_method=rsync
wsrep_slave_threads=2
# A dead node is noticed within a few seconds (the defaults wait 5 s to
# suspect and 15 s to evict), so the survivors' commits resume sooner.
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:$((WSREP + n));ist.recv_addr=127.0.0.1:$((WSREP + 10 + n));gcache.size=128M;evs.suspect_timeout=PT2S;evs.inactive_timeout=PT3S;evs.install_timeout=PT3S;evs.keepalive_period=PT0.5S;evs.inactive_check_period=PT0.5S;pc.wait_prim_timeout=PT10S"
EOF
}

pid_of() {
	local f
	f=$(pidfile "$1")
	[ -f "$f" ] || return 1
	local p
	p=$(cat "$f" 2>/dev/null) || return 1
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo "$p"
}

sql() { # N, statement
	mariadb --no-defaults -uroot --socket="$(sock "$1")" -N -B -e "$2"
}

wsrep_state() { sql "$1" "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | awk '{print $2}'; }
cluster_size() { sql "$1" "SHOW STATUS LIKE 'wsrep_cluster_size'" 2>/dev/null | awk '{print $2}'; }

# wait_synced N [size]: until node N is Synced in a primary component of
# at least size nodes.
wait_synced() {
	local n=$1 want=${2:-1} i
	for i in $(seq 1 240); do
		if [ "$(wsrep_state "$n")" = Synced ] && [ "$(cluster_size "$n" || echo 0)" -ge "$want" ] 2>/dev/null; then
			return 0
		fi
		pid_of "$n" >/dev/null || { tail -n 30 "$(node_dir "$n")/error.log" >&2 || true; say "node $n died while starting"; return 1; }
		sleep 0.25
	done
	tail -n 30 "$(node_dir "$n")/error.log" >&2 || true
	say "node $n did not reach Synced"
	return 1
}

# up N size [flags...]: launch node N and wait until it is synced in a
# component of size nodes, five tries: a port of the node's may be held
# for a moment by a connection in TIME_WAIT, or a state transfer cut
# short.
up() {
	local n=$1 size=$2 try p; shift 2
	for try in 1 2 3 4 5; do
		launch "$n" "$@"
		wait_synced "$n" "$size" && return 0
		if p=$(pid_of "$n"); then kill -KILL "$p" 2>/dev/null || true; fi
		say "node $n: start $try failed"
		sleep "$try"
	done
	die "node $n did not start"
}

launch() { # N, extra flags...
	local n=$1; shift
	nohup "$MARIADBD" --defaults-file="$(cnf "$n")" "$@" >>"$(node_dir "$n")/stdout.log" 2>&1 </dev/null &
	echo $! >"$(pidfile "$n")"
	disown || true
}

# recovered N: the position node N's InnoDB holds, as uuid:seqno, after a
# crash left its grastate's seqno at -1 (what galera_recovery does).
recovered() {
	local n=$1 log
	log=$(node_dir "$n")/recover.log
	: >"$log"
	"$MARIADBD" --defaults-file="$(cnf "$n")" --wsrep-recover --log-error="$log" >/dev/null 2>&1 || true
	sed -n 's/.*WSREP: Recovered position: *\([0-9a-f-]*:-\{0,1\}[0-9]*\).*/\1/p' "$log" | tail -n 1
}

# install installs from the distribution's packages what start needs and
# the machine lacks; it changes nothing on a machine that has it all.
install() {
	local pkgs=()
	[ -x "$MARIADBD" ] && command -v mariadb-install-db >/dev/null || pkgs+=(mariadb-server)
	command -v mariadb >/dev/null || pkgs+=(mariadb-client)
	[ -f /usr/lib/galera/libgalera_smm.so ] || [ -f /usr/lib/libgalera_smm.so ] || pkgs+=(galera-4)
	command -v rsync >/dev/null || pkgs+=(rsync)
	[ ${#pkgs[@]} -eq 0 ] && return 0
	[ "$(id -u)" = 0 ] || die "missing: ${pkgs[*]}: run apt-get install -y ${pkgs[*]} as root"
	say "installing ${pkgs[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}" >&2 ||
		{ apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}" >&2; }
}

start() {
	need
	local n
	for n in "${NODES[@]}"; do
		if pid_of "$n" >/dev/null; then die "node $n is already running (galera.sh stop first)"; fi
	done
	rm -rf "$DIR"
	mkdir -p "$DIR"
	# The three data directories at once: each install is a server start
	# of its own, and they share nothing.
	local pids=()
	for n in "${NODES[@]}"; do
		write_cnf "$n"
		chown -R "$RUNAS" "$(node_dir "$n")"
		mariadb-install-db --defaults-file="$(cnf "$n")" --auth-root-authentication-method=normal \
			--skip-test-db >"$(node_dir "$n")/install.log" 2>&1 &
		pids+=($!)
	done
	for n in "${NODES[@]}"; do
		wait "${pids[$((n - 1))]}" || { cat "$(node_dir "$n")/install.log" >&2; die "mariadb-install-db failed for node $n"; }
	done
	up 1 1 --wsrep-new-cluster
	# Tests connect over TCP as root without a password; the grant
	# replicates to the joiners with their state transfer.
	sql 1 "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; CREATE DATABASE IF NOT EXISTS test"
	for n in 2 3; do
		up "$n" "$n"
	done
	say "3 nodes synced on ports $((PORT + 1))-$((PORT + 3))"
}

stop() {
	local n p
	for n in "${NODES[@]}"; do
		if p=$(pid_of "$n"); then kill -TERM "$p" 2>/dev/null || true; fi
	done
	for n in "${NODES[@]}"; do
		for _ in $(seq 1 60); do pid_of "$n" >/dev/null || break; sleep 0.25; done
		if p=$(pid_of "$n"); then kill -KILL "$p" 2>/dev/null || true; fi
	done
	rm -rf "$DIR"
}

kill_node() {
	local n=$1 p
	p=$(pid_of "$n") || die "node $n is not running"
	kill -KILL "$p"
	for _ in $(seq 1 40); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.05; done
	die "node $n (pid $p) did not die"
}

restart() {
	local n=$1 pos
	pid_of "$n" >/dev/null && die "node $n is running"
	pos=$(recovered "$n")
	if [ -n "$pos" ] && [ "${pos##*:}" != "-1" ]; then
		up "$n" 2 --wsrep_start_position="$pos"
	else
		up "$n" 2
	fi
}

status() {
	local n p
	for n in "${NODES[@]}"; do
		if p=$(pid_of "$n"); then
			printf 'node %d: pid %s, port %d, %s, cluster size %s\n' "$n" "$p" "$((PORT + n))" "$(wsrep_state "$n")" "$(cluster_size "$n")"
		else
			printf 'node %d: down\n' "$n"
		fi
	done
}

node_arg() {
	case "${1:-}" in 1 | 2 | 3) echo "$1" ;; *) die "want a node number 1-3, got '${1:-}'" ;; esac
}

case "${1:-}" in
start) start ;;
stop) stop ;;
kill) kill_node "$(node_arg "${2:-}")" ;;
restart) restart "$(node_arg "${2:-}")" ;;
status) status ;;
install) install ;;
dsn) n=$(node_arg "${2:-}"); echo "root@tcp(127.0.0.1:$((PORT + n)))/test?parseTime=true&loc=UTC" ;;
*) die "usage: galera.sh start|stop|kill N|restart N|status|dsn N|install" ;;
esac
