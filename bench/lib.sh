# shellcheck shell=bash
# What the stack benchmarks (bench/dispatch, bench/latency, bench/submit)
# share: messages, building their programs, and a private local stack.
# Source it after setting TY_PROG, REPO and BUILD.

say() { printf '%s: %s\n' "$TY_PROG" "$*" >&2; }
die() {
	printf '%s: error: %s\n' "$TY_PROG" "$*" >&2
	exit 1
}

# bench_build YES PROG...: with YES non-empty, configure BUILD (RelWithDebInfo)
# if needed and build the programs; either way, check they are there.
bench_build() {
	local yes=$1 log
	shift
	log=$BUILD/bench-${TY_PROG//\//-}-build.log
	if [[ -n $yes ]]; then
		say "building $* in $BUILD"
		mkdir -p "$BUILD"
		[[ -f $BUILD/CMakeCache.txt ]] ||
			cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTY_WERROR=ON \
				>"$BUILD/bench-cmake.log" 2>&1 || {
			tail -n 40 "$BUILD/bench-cmake.log" >&2
			die "cmake failed (log $BUILD/bench-cmake.log)"
		}
		cmake --build "$BUILD" -j"$(nproc)" --target "$@" >"$log" 2>&1 || {
			tail -n 60 "$log" >&2
			die "build failed (log $log)"
		}
	fi
	local p
	for p in "$@"; do
		[[ -x $BUILD/bin/$p ]] || die "no $BUILD/bin/$p: build it (or drop --no-build)"
	done
}

# a free TCP port on 127.0.0.1 (the kernel's choice)
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# bench_stack NAME: a private deploy/local stack of BUILD's programs on free
# ports (the scheduler's metrics port too: benchmarks may run side by side),
# removed at exit unless TY_BENCH_KEEP is set. Sets home and sources its env.
bench_stack() {
	# postgres (run as its own user when we are root) must reach the state dir
	home=$(mktemp -d "/var/tmp/trainyard-bench-$1.XXXXXX")
	chmod 755 "$home"
	export TRAINYARD_HOME=$home TRAINYARD_BIN=$BUILD/bin
	TRAINYARD_PG_PORT=$(free_port)
	TRAINYARD_API_PORT=$(free_port)
	TRAINYARD_METRICS_PORT=$(free_port)
	export TRAINYARD_PG_PORT TRAINYARD_API_PORT TRAINYARD_METRICS_PORT
	BENCH_NAME=$1
	trap bench_stack_down EXIT
	say "starting a private stack in $home (PostgreSQL :$TRAINYARD_PG_PORT, API :$TRAINYARD_API_PORT)"
	"$REPO/deploy/local/up" --no-build >"$home/up.log" 2>&1 || {
		tail -n 40 "$home/up.log" >&2
		die "deploy/local/up failed"
	}
	# shellcheck disable=SC1091
	. "$home/env"
}

bench_stack_down() {
	[[ -z ${TY_BENCH_KEEP:-} ]] || { say "TY_BENCH_KEEP: the stack in $home still runs"; return; }
	"$REPO/deploy/local/down" --purge >"${TMPDIR:-/tmp}/trainyard-bench-$BENCH_NAME-down.log" 2>&1 ||
		say "deploy/local/down --purge failed for $home"
}
