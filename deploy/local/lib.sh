# shellcheck shell=bash disable=SC2034
# Shared by deploy/local/{up,down,status,demo} and tests/run: paths, package
# installation, the build, the private PostgreSQL cluster and a generic
# daemon supervisor (pid file + log per process). Sourcing it only defines
# variables and functions.

TY_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
TY_BUILD=$TY_REPO/build
# TRAINYARD_BIN runs programs from elsewhere (e.g. another build tree)
TY_BIN=${TRAINYARD_BIN:-$TY_BUILD/bin}

TRAINYARD_HOME=${TRAINYARD_HOME:-$TY_REPO/.trainyard}
case $TRAINYARD_HOME in
/*) ;;
*) TRAINYARD_HOME=$PWD/$TRAINYARD_HOME ;;
esac
TRAINYARD_HOME=${TRAINYARD_HOME%/}
TY_RUN=$TRAINYARD_HOME/run
TY_LOG=$TRAINYARD_HOME/log
TY_PGDATA=$TRAINYARD_HOME/pg
TY_ENV_FILE=$TRAINYARD_HOME/env
TY_BOOTSTRAP_FILE=$TRAINYARD_HOME/kafka.bootstrap

# below the kernel's ephemeral range (32768-60999 by default), so that no
# outgoing connection can hold it when PostgreSQL starts
TY_PG_PORT=${TRAINYARD_PG_PORT:-25432}
TY_API_PORT=${TRAINYARD_API_PORT:-8080}
TY_DATABASE_URL=postgresql://postgres@127.0.0.1:$TY_PG_PORT/trainyard
TY_API_URL=http://127.0.0.1:$TY_API_PORT
# s3rver behind tests/s3/sigv4-gate.js, the object store of checkpoint
# tiering (with TRAINYARD_TIER=1)
TY_S3_PORT=${TRAINYARD_S3_PORT:-4569}

# Daemons in start order; down stops them in reverse. A new one (scheduler,
# executors) is a name here and a start_daemon line in up.
TY_DAEMONS=(broker api scheduler s3rver executor-a executor-b)
# the two local "nodes": id and the loopback address their ranks rendezvous on
TY_NODES=(a:127.0.0.2 b:127.0.0.3)

TY_PACKAGES=(build-essential cmake pkg-config libmicrohttpd-dev libjansson-dev libpq-dev
	librdkafka-dev libuv1-dev libcurl4-openssl-dev libssl-dev openssl postgresql postgresql-client
	curl python3-torch python3-optuna prometheus runc umoci)

TY_PROG=${TY_PROG:-$(basename "$0")}

say() { printf '%s: %s\n' "$TY_PROG" "$*"; }
warn() { printf '%s: warning: %s\n' "$TY_PROG" "$*" >&2; }
die() {
	printf '%s: error: %s\n' "$TY_PROG" "$*" >&2
	exit 1
}

# Print the last lines of a log to stderr, to explain a failure.
show_log() { # FILE [LINES]
	[[ -s $1 ]] || return 0
	printf -- '--- last lines of %s ---\n' "$1" >&2
	tail -n "${2:-40}" "$1" >&2
	printf -- '---\n' >&2
}

# One up/down at a time per TRAINYARD_HOME, held on fd 9 until the script
# exits; whatever outlives the script is started with fd 9 closed.
lock_home() {
	mkdir -p "$TY_RUN"
	exec 9>"$TY_RUN/lock"
	flock -w 120 9 || die "another deploy/local command holds $TY_RUN/lock"
}

# Run as root when we are not: apt-get and chown need it.
as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo -n "$@" </dev/null
	else
		die "need root for: $*"
	fi
}

ensure_packages() { # PACKAGE...
	local p missing=()
	for p in "$@"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	say "installing missing packages: ${missing[*]}"
	if ! { as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends "${missing[@]}"; } </dev/null >"${TMPDIR:-/tmp}/trainyard-apt.log" 2>&1; then
		show_log "${TMPDIR:-/tmp}/trainyard-apt.log" 30
		die "cannot install packages: ${missing[*]}"
	fi
}

# Configure and build quietly; on failure show the end of the build log.
build_tree() { # BUILD_DIR LOG [CMAKE_ARGS...]
	local dir=$1 log=$2
	shift 2
	if ! { cmake -S "$TY_REPO" -B "$dir" "$@" &&
		cmake --build "$dir" -j2; } </dev/null >"$log" 2>&1; then
		show_log "$log" "${TY_BUILD_LOG_LINES:-60}"
		die "build in '$dir' failed (full log: $log)"
	fi
}

# --- PostgreSQL ------------------------------------------------------------

pg_bindir() {
	local d
	if [[ -n ${TRAINYARD_PG_BIN:-} ]]; then
		echo "$TRAINYARD_PG_BIN"
		return
	fi
	d=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null |
		sort -V | tail -n 1)
	if [[ -z $d ]] && command -v pg_config >/dev/null; then
		d=$(pg_config --bindir)
	fi
	[[ -x $d/initdb ]] || die "no PostgreSQL server binaries found (install postgresql or set TRAINYARD_PG_BIN)"
	echo "$d"
}

# initdb, postgres and pg_ctl refuse to run as root.
if [[ $(id -u) -eq 0 ]]; then TY_PG_USER=postgres; else TY_PG_USER=$(id -un); fi
as_pg() {
	if [[ $(id -u) -eq 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# A directory of the PostgreSQL user's own (data directories must be 0700).
pg_own_dir() { # DIR
	mkdir -p "$1"
	[[ $TY_PG_USER == "$(id -un)" ]] || chown "$TY_PG_USER": "$1"
	chmod 700 "$1"
}
# A directory we own in which PostgreSQL may create its socket.
pg_sock_dir() { # DIR
	mkdir -p "$1"
	if [[ $TY_PG_USER != "$(id -un)" ]]; then
		chgrp "$TY_PG_USER" "$1"
		chmod 1775 "$1"
	fi
}
# Can the PostgreSQL user reach DIR (every parent traversable)?
pg_can_reach() { # DIR
	as_pg test -x "$1" 2>/dev/null
}

# Is something accepting TCP connections on 127.0.0.1:PORT?
port_busy() { # PORT
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Pid of the postmaster of DATADIR when it runs, else failure.
pg_pid() { # DATADIR
	local pid argv0
	[[ -r $1/postmaster.pid ]] || return 1
	read -r pid <"$1/postmaster.pid" || return 1
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
	argv0=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n 1) || return 1
	[[ $argv0 == *postgres || $argv0 == *postmaster ]] || return 1
	echo "$pid"
}
# Port from postmaster.pid (line 4).
pg_port_of() { # DATADIR
	sed -n 4p "$1/postmaster.pid" 2>/dev/null
}

# initdb with trust auth for 'postgres', listening on 127.0.0.1 and a unix
# socket in SOCKDIR only. Extra postgresql.conf lines come from stdin.
pg_init() { # DATADIR SOCKDIR PORT
	local data=$1 sock=$2 port=$3 log=${TY_PG_INIT_LOG:-$TY_LOG/initdb.log} bin
	bin=$(pg_bindir)
	as_pg "$bin/initdb" -D "$data" --auth=trust -U postgres -E UTF8 --locale=C.UTF-8 \
		>"$log" 2>&1 || {
		show_log "$log"
		die "initdb of '$data' failed (log: $log)"
	}
	{
		echo "# trainyard: private cluster"
		echo "listen_addresses = '127.0.0.1'"
		echo "port = $port"
		echo "unix_socket_directories = '$sock'"
		cat
	} | as_pg tee -a "$data/postgresql.conf" >/dev/null
}

# Start and wait until it accepts connections; fails quietly (see the log).
pg_try_start() { # DATADIR LOGFILE PORT
	local bin
	bin=$(pg_bindir)
	touch "$2"
	[[ $TY_PG_USER == "$(id -un)" ]] || chown "$TY_PG_USER": "$2"
	as_pg "$bin/pg_ctl" -D "$1" -l "$2" -w -t 30 -o "-p $3" start >/dev/null 2>&1 9>&-
}
pg_start() { # DATADIR LOGFILE PORT
	pg_try_start "$@" || {
		show_log "$2"
		die "PostgreSQL in '$1' did not start on port $3 (log: $2)"
	}
}

pg_stop() { # DATADIR [MODE]
	local bin
	bin=$(pg_bindir)
	as_pg "$bin/pg_ctl" -D "$1" -m "${2:-fast}" -w -t 30 stop >/dev/null
}

# --- daemons ---------------------------------------------------------------
#
# run/NAME.pid holds the pid, run/NAME.cmd the program it must be running
# (checked against /proc/PID/cmdline, so a recycled pid is not mistaken for
# ours), log/NAME.log its output.

# Does process PID run PROG (as argv[0], or argv[1] of a script's interpreter)?
pid_runs() { # PID PROG
	local argv=()
	mapfile -d '' -n 2 argv <"/proc/$1/cmdline" 2>/dev/null || return 1
	[[ ${argv[0]:-} == "$2" || ${argv[1]:-} == "$2" ]]
}

daemon_pid() { # NAME: print the pid when NAME runs, else fail
	local pid prog
	[[ -r $TY_RUN/$1.pid && -r $TY_RUN/$1.cmd ]] || return 1
	read -r pid <"$TY_RUN/$1.pid" || return 1
	read -r prog <"$TY_RUN/$1.cmd" || return 1
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
	pid_runs "$pid" "$prog" || return 1
	echo "$pid"
}

daemon_status() { # NAME: print "running PID" or "stopped"; fail when stopped
	local pid
	if pid=$(daemon_pid "$1"); then
		echo "running $pid"
	else
		echo stopped
		return 1
	fi
}

# Start CMD as daemon NAME unless it already runs: new session, stdin from
# /dev/null, output appended to log/NAME.log. CMD[0] must be an absolute path.
start_daemon() { # NAME CMD...
	local name=$1 pid i
	shift
	if pid=$(daemon_pid "$name"); then
		say "$name already running (pid $pid)"
		if [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == *" (deleted)" ]]; then
			warn "$name runs a build that has since been replaced; restart it with deploy/local/down && deploy/local/up"
		fi
		return 0
	fi
	[[ -x $1 ]] || die "cannot start $name: '$1' does not exist or is not executable (was it built?)"
	mkdir -p "$TY_RUN" "$TY_LOG"
	rm -f "$TY_RUN/$name.pid" "$TY_RUN/$name.pid.new"
	printf '%s\n' "$1" >"$TY_RUN/$name.cmd"
	printf '\n=== %s: starting %s\n' "$(date -u +%FT%TZ)" "$*" >>"$TY_LOG/$name.log"
	# the wrapper records its own pid, then becomes CMD
	# shellcheck disable=SC2016
	setsid -f /bin/sh -c 'echo $$ >"$0"; exec "$@"' "$TY_RUN/$name.pid.new" "$@" \
		</dev/null >>"$TY_LOG/$name.log" 2>&1 9>&-
	for ((i = 0; i < 100; i++)); do
		if [[ -s $TY_RUN/$name.pid.new ]]; then
			read -r pid <"$TY_RUN/$name.pid.new"
			if pid_runs "$pid" "$1"; then
				mv "$TY_RUN/$name.pid.new" "$TY_RUN/$name.pid"
				say "started $name (pid $pid, log $TY_LOG/$name.log)"
				return 0
			fi
			kill -0 "$pid" 2>/dev/null || break
		fi
		sleep 0.05
	done
	rm -f "$TY_RUN/$name.pid.new"
	show_log "$TY_LOG/$name.log"
	die "$name did not start (log: $TY_LOG/$name.log)"
}

# SIGTERM, up to TY_STOP_TIMEOUT (10) seconds, then SIGKILL.
stop_daemon() { # NAME
	local name=$1 pid i
	if ! pid=$(daemon_pid "$name"); then
		rm -f "$TY_RUN/$name.pid"
		return 0
	fi
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < ${TY_STOP_TIMEOUT:-10} * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		warn "$name (pid $pid) ignored SIGTERM for ${TY_STOP_TIMEOUT:-10}s, sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
	fi
	rm -f "$TY_RUN/$name.pid"
	say "stopped $name (pid $pid)"
}

# Fail unless daemon NAME is alive; used while waiting for it.
daemon_alive_or_die() { # NAME
	daemon_pid "$1" >/dev/null && return 0
	show_log "$TY_LOG/$1.log"
	die "$1 exited during startup (log: $TY_LOG/$1.log)"
}

wait_for_file() { # NAME FILE TIMEOUT_S
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		[[ -s $2 ]] && return 0
		daemon_alive_or_die "$1"
		sleep 0.1
	done
	show_log "$TY_LOG/$1.log"
	die "$1 did not write '$2' within $3s (log: $TY_LOG/$1.log)"
}

wait_for_http() { # NAME URL TIMEOUT_S [CURL_ARG...]
	local i
	for ((i = 0; i < $3 * 5; i++)); do
		curl -fsS -m 2 -o /dev/null "${@:4}" "$2" 2>/dev/null && return 0
		daemon_alive_or_die "$1"
		sleep 0.2
	done
	show_log "$TY_LOG/$1.log"
	die "$1 is not ready: '$2' did not succeed within $3s (log: $TY_LOG/$1.log)"
}

# A variable set by the env file, empty when there is none.
env_get() { # NAME
	[[ -r $TY_ENV_FILE ]] || return 0
	(
		# shellcheck disable=SC1090
		. "$TY_ENV_FILE" >/dev/null 2>&1
		printf '%s\n' "${!1:-}"
	)
}

# --- status ----------------------------------------------------------------

# Where daemon NAME can be reached, for people.
daemon_addr() { # NAME
	local url
	case $1 in
	broker) head -n 1 "$TY_BOOTSTRAP_FILE" 2>/dev/null || echo "-" ;;
	executor-*)
		local n
		for n in "${TY_NODES[@]}"; do
			[[ executor-${n%%:*} != "$1" ]] || echo "node-${n%%:*} on ${n#*:}"
		done
		;;
	api)
		url=$(env_get JOBCTL_SERVER)
		echo "${url:-$TY_API_URL}"
		;;
	s3rver) echo "http://127.0.0.1:$TY_S3_PORT (bucket trainyard-checkpoints)" ;;
	*) echo "-" ;;
	esac
}

# One line per component; fails when any is down (or the API is not ready).
print_status() {
	local down=0 pid port name addr note
	if pid=$(pg_pid "$TY_PGDATA"); then
		port=$(pg_port_of "$TY_PGDATA")
		printf '%-10s %-8s %s\n' postgres "$pid" \
			"postgresql://postgres@127.0.0.1:$port/trainyard (socket dir $TY_RUN)"
	else
		printf '%-10s %-8s %s\n' postgres stopped "127.0.0.1:$TY_PG_PORT"
		down=1
	fi
	for name in "${TY_DAEMONS[@]}"; do
		note=
		if pid=$(daemon_pid "$name"); then
			addr=$(daemon_addr "$name")
			if [[ $name == api ]] && ! curl -fsS -m 2 -o /dev/null "$addr/readyz" 2>/dev/null; then
				note=" (not ready: $addr/readyz fails)"
				down=1
			fi
		elif [[ $name == s3rver && -z ${TRAINYARD_TIER:-} ]]; then
			pid=off
			addr="(checkpoint tiering not configured: TRAINYARD_TIER=1)"
		else
			pid=stopped
			addr=-
			[[ $name == broker ]] || addr=$(daemon_addr "$name")
			down=1
		fi
		printf '%-10s %-8s %s%s\n' "$name" "$pid" "$addr" "$note"
	done
	return "$down"
}
