# shellcheck shell=bash
# What the worker test scripts share: a work directory per run, counted
# checks, a failure report showing every rank's output of the case, a free
# port. Source it, then call `tw_init NAME`; a script with more to undo at
# exit (processes, namespaces) names a function with `tw_on_exit FUNC`,
# run before the work directory goes. TY_TEST_KEEP=1 keeps the directory.

TW_NAME=
TW_ON_EXIT=()
W=
PASSED=0
CASE=

tw_cleanup() {
	local rc=$? f

	set +e
	for f in "${TW_ON_EXIT[@]}"; do "$f"; done
	if [[ -z ${TY_TEST_KEEP:-} ]]; then rm -rf "$W"; else echo "$TW_NAME: kept $W" >&2; fi
	if [[ $rc -eq 0 ]]; then echo "$TW_NAME: all $PASSED checks passed"; fi
	exit "$rc"
}

tw_init() { # NAME
	TW_NAME=$1
	W=$(mktemp -d "${TMPDIR:-/tmp}/$TW_NAME.XXXXXX")
	trap tw_cleanup EXIT
}

tw_on_exit() { TW_ON_EXIT+=("$1"); }

# fail MESSAGE: end the run, showing the case's rank outputs (3000 bytes each)
fail() {
	local f

	echo "FAIL [$CASE]: $*" >&2
	for f in "$W/$CASE"/rank-*.{out,err}; do
		[[ -s $f ]] || continue
		echo "--- $f" >&2
		tail -c 3000 "$f" >&2
	done
	exit 1
}

ok() { PASSED=$((PASSED + 1)); }

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
