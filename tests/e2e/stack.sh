# Sourced by tests in other languages: start and stop the e2e stack
# (tests/e2e/stack.c, $TY_STACK_BIN) from bash.
#
#   source tests/e2e/stack.sh
#   ty_stack_up "$WORKDIR"     # exports TY_API_URL, TY_ADMIN_TOKEN, TY_TEAM, ...
#   ...
#   ty_stack_restart_api       # SIGUSR1: the API stopped and started again
#                              # (a new port): TY_API_URL re-exported
#   ty_stack_down              # also from an EXIT trap; safe to call twice
#
# TY_STACK_API_ARGS adds arguments to the API. The stack's own output goes
# to $WORKDIR/stack.log, shown (its last lines) when it fails to come up.

TY_STACK_PID=

ty_stack_up() {
	local dir=$1 env i

	if [[ -z ${TY_STACK_BIN:-} || ! -x $TY_STACK_BIN ]]; then
		echo "stack.sh: TY_STACK_BIN is not set or not executable; run the tests with tests/run" >&2
		return 1
	fi
	env=$dir/stack.env
	rm -f "$env"
	TY_STACK_ENV_FILE=$env "$TY_STACK_BIN" serve >"$dir/stack.log" 2>&1 &
	TY_STACK_PID=$!
	export TY_STACK_PID TY_STACK_ENV_FILE=$env
	for ((i = 0; i < 1200; i++)); do # 120 s: a busy machine builds nothing here, but starts slowly
		[[ -s $env ]] && break
		if ! kill -0 "$TY_STACK_PID" 2>/dev/null; then
			echo "stack.sh: the stack exited before it was up; last lines of $dir/stack.log:" >&2
			tail -n 40 "$dir/stack.log" >&2
			TY_STACK_PID=
			return 1
		fi
		sleep 0.1
	done
	if [[ ! -s $env ]]; then
		echo "stack.sh: the stack was not up within 120 s; last lines of $dir/stack.log:" >&2
		tail -n 40 "$dir/stack.log" >&2
		return 1
	fi
	set -a
	# shellcheck disable=SC1090 # written by the launcher
	source "$env"
	set +a
}

ty_stack_restart_api() {
	local old=$TY_API_URL i

	kill -USR1 "$TY_STACK_PID" || return 1
	for ((i = 0; i < 600; i++)); do
		# shellcheck disable=SC1090 # written by the launcher
		[[ -s $TY_STACK_ENV_FILE ]] && { set -a; source "$TY_STACK_ENV_FILE"; set +a; }
		[[ $TY_API_URL != "$old" ]] && return 0
		sleep 0.1
	done
	echo "stack.sh: the API did not come back within 60 s" >&2
	return 1
}

ty_stack_down() {
	local i

	[[ -n $TY_STACK_PID ]] || return 0
	kill -TERM "$TY_STACK_PID" 2>/dev/null
	for ((i = 0; i < 600; i++)); do # 60 s: each daemon may take its 5 s
		kill -0 "$TY_STACK_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$TY_STACK_PID" 2>/dev/null
	wait "$TY_STACK_PID" 2>/dev/null
	local rc=$?
	TY_STACK_PID=
	return $rc
}
