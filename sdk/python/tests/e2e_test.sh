#!/usr/bin/env bash
# The SDK against the whole stack (tests/e2e/stack.sh): e2e_test.py, then every
# request it made (TRAINYARD_SDK_TRACE) checked against docs/openapi.json.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
# shellcheck source=../../../tests/e2e/stack.sh
source "$root/tests/e2e/stack.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/sdk_e2e.XXXXXX")
# the stack's own exit status is not the verdict: it may take longer than
# stack.sh waits to stop (then SIGKILL, 137); its failed checks are (below)
trap 'ty_stack_down || true; [[ -n ${TY_TEST_KEEP:-} ]] || rm -rf "$W"' EXIT

ty_stack_up "$W" || { echo "FAIL: the stack did not come up" >&2; exit 1; }
export TRAINYARD_SDK_TRACE=$W/trace.jsonl PYTHONPATH=$root/sdk/python/src
# only the stack's settings: none of the caller's jobctl configuration
unset JOBCTL_SERVER JOBCTL_TOKEN JOBCTL_TOKEN_FILE JOBCTL_CONFIG JOBCTL_TIMEOUT JOBCTL_CACERT
export HOME=$W
# TY_SDK_E2E_ONLY=E2E.test_x runs one case (while working on it)
/usr/bin/python3 "$here/e2e_test.py" -v ${TY_SDK_E2E_ONLY:-}
# every request the SDK made is a documented operation (tests/openapi)
node "$root/tests/openapi/check-requests.js" "$TRAINYARD_SDK_TRACE"
ty_stack_down || true
if grep -q '^FAIL ' "$W/stack.log"; then
	tail -n 40 "$W/stack.log" >&2
	echo "FAIL: the stack failed a check of its own (its log above)" >&2
	exit 1
fi
echo "sdk e2e: passed"
