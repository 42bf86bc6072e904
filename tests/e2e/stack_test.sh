#!/usr/bin/env bash
# The stack launcher other languages' tests stand on (tests/e2e/stack.sh):
# it comes up with every node ready and its settings written, serves the API
# with the admin and member tokens it names, and stops cleanly on SIGTERM.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=stack.sh
source "$here/stack.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/stack_test.XXXXXX")
trap 'ty_stack_down; rm -rf "$W"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

ty_stack_up "$W" || fail "the stack did not come up"
for v in TY_API_URL TY_ADMIN_TOKEN TY_DB_URL TY_TEAM TY_TOKEN TY_OUTDIR TY_NODES; do
	[[ -n ${!v:-} ]] || fail "$v missing from the stack's settings"
done
[[ $TY_NODES == node-a,node-b ]] || fail "nodes are '$TY_NODES', not node-a,node-b"
nodes=$(curl -fsS -H "Authorization: Bearer $TY_ADMIN_TOKEN" "$TY_API_URL/v1/nodes?state=ready")
n=$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))' <<<"$nodes")
[[ $n == 2 ]] || fail "$n ready nodes, not 2: $nodes"
team=$(curl -fsS -H "Authorization: Bearer $TY_TOKEN" "$TY_API_URL/v1/teams/$TY_TEAM")
name=$(/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])' <<<"$team")
[[ $name == "$TY_TEAM" ]] || fail "the member token does not read its team: $team"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer nope" "$TY_API_URL/v1/jobs")
[[ $code == 401 ]] || fail "a bad token got $code, not 401"
# SIGUSR1: the API restarts on a new port, named in the settings again
old_url=$TY_API_URL
ty_stack_restart_api || fail "the API did not restart"
[[ $TY_API_URL != "$old_url" ]] || fail "the restarted API kept its URL"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TY_TOKEN" "$TY_API_URL/v1/teams/$TY_TEAM")
[[ $code == 200 ]] || fail "the restarted API answered $code, not 200, with the member token"
if curl -fsS -o /dev/null "$old_url/healthz" 2>/dev/null; then
	fail "the API still answers at its old address after the restart"
fi
pid=$TY_STACK_PID
ty_stack_down || fail "the stack exited with status $? on SIGTERM"
kill -0 "$pid" 2>/dev/null && fail "the stack is still running after SIGTERM"
if curl -fsS -o /dev/null "$TY_API_URL/healthz" 2>/dev/null; then
	fail "the API still answers after the stack stopped"
fi
echo "stack_test: passed"
