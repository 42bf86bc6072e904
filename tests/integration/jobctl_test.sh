#!/usr/bin/env bash
# jobctl end to end: every command against a real trainyard-api on a private
# database, asserting on output and exit codes.
#
# Needs TY_TEST_PG_URL (libpq URL of a superuser connection to the 'postgres'
# database), TY_API_BIN and TY_JOBCTL_BIN; tests/run sets them up.
# TY_TEST_KEEP=1 keeps the work directory and the database for a post-mortem.
set -euo pipefail

for v in TY_TEST_PG_URL TY_API_BIN TY_JOBCTL_BIN; do
	if [[ -z ${!v:-} ]]; then
		echo "jobctl_test: $v is not set; run the tests with tests/run" >&2
		exit 1
	fi
done
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

W=$(mktemp -d "${TMPDIR:-/tmp}/jobctl_test.XXXXXX")
DB=jobctl_test_$$
API_PID=
PASSED=0

cleanup() {
	local rc=$?

	set +e
	stop_api
	if [[ -n ${TLS_PID:-} ]]; then kill "$TLS_PID" 2>/dev/null; wait "$TLS_PID" 2>/dev/null; fi
	if [[ -n ${HANG_PID:-} ]]; then kill "$HANG_PID" 2>/dev/null; wait "$HANG_PID" 2>/dev/null; fi
	if [[ -n ${LOGSRV_PID:-} ]]; then kill "$LOGSRV_PID" 2>/dev/null; wait "$LOGSRV_PID" 2>/dev/null; fi
	if [[ -z ${TY_TEST_KEEP:-} ]]; then
		psql "$TY_TEST_PG_URL" -qAt -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
		rm -rf "$W"
	else
		echo "jobctl_test: kept $W and database $DB" >&2
	fi
	if [[ $rc -eq 0 ]]; then
		echo "jobctl_test: all $PASSED checks passed"
	elif [[ -f $W/api.log ]]; then
		echo "--- last lines of the API log" >&2
		tail -n 30 "$W/api.log" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT

# ---- helpers ----------------------------------------------------------------

fail() {
	echo "FAIL: $*" >&2
	for f in out err; do
		if [[ -s $W/$f ]]; then
			echo "--- std$f of the last command" >&2
			head -c 4000 "$W/$f" >&2
			echo >&2
		fi
	done
	exit 1
}

ok() {
	PASSED=$((PASSED + 1))
	echo "ok $PASSED - $*"
}

jc() {
	"$TY_JOBCTL_BIN" "$@"
}

# expect RC CMD ARGS...: run it with stdout in $W/out, stderr in $W/err.
expect() {
	local want=$1 rc=0
	shift
	"$@" >"$W/out" 2>"$W/err" </dev/null || rc=$?
	[[ $rc -eq $want ]] || fail "expected exit $want, got $rc from: $*"
}

out_has() { grep -q -- "$1" "$W/out" || fail "stdout lacks '$1'"; }
out_lacks() { ! grep -q -- "$1" "$W/out" || fail "stdout shows '$1'"; }
err_has() { grep -q -- "$1" "$W/err" || fail "stderr lacks '$1'"; }
err_lacks() { ! grep -q -- "$1" "$W/err" || fail "stderr shows '$1'"; }

# py EXPR: evaluate a Python expression over d, the JSON document in $W/out.
py() {
	"$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))' "$W/out" "$1"
}

# check EXPR: the Python expression over d must be true.
check() {
	[[ $(py "$1") == True ]] || fail "not true over the JSON output: $1"
}

stop_api() {
	if [[ -n $API_PID ]]; then
		kill -TERM "$API_PID" 2>/dev/null || true
		for _ in $(seq 50); do
			kill -0 "$API_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$API_PID" 2>/dev/null || true
		wait "$API_PID" 2>/dev/null || true
		API_PID=
	fi
}

# start_api [PORT]: start the server (port 0: any) and wait until it listens.
start_api() {
	rm -f "$W/port"
	"$TY_API_BIN" --database-url "$DB_URL" --listen-addr 127.0.0.1 --port "${1:-0}" \
		--port-file "$W/port" --log-key "$W/log-key.pem" >>"$W/api.log" 2>&1 &
	API_PID=$!
	for _ in $(seq 300); do
		if [[ -s $W/port ]] && PORT=$(<"$W/port") && [[ $PORT =~ ^[0-9]+$ ]]; then
			URL=http://127.0.0.1:$PORT
			return 0
		fi
		kill -0 "$API_PID" 2>/dev/null || fail "trainyard-api exited at start (see $W/api.log)"
		sleep 0.1
	done
	fail "trainyard-api did not write its port file within 30 s"
}

# submit ARGS...: submit as the current token, print the new job id.
submit() {
	expect 0 jc -o json submit "$@"
	py 'd["id"]'
}

# ---- set up: database, API, admin token --------------------------------------

DB_URL=$("$PY" -c 'import sys, urllib.parse as u
p = u.urlsplit(sys.argv[1])
print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$TY_TEST_PG_URL" "$DB")
psql "$TY_TEST_PG_URL" -v ON_ERROR_STOP=1 -qAt -c "CREATE DATABASE $DB" >/dev/null

# the key that signs the relayed log requests' credentials (docs/security.md)
openssl genpkey -algorithm ed25519 -out "$W/log-key.pem" 2>>"$W/api.log" ||
	fail "openssl genpkey -algorithm ed25519 failed"
"$TY_API_BIN" --database-url "$DB_URL" --migrate >>"$W/api.log" 2>&1 ||
	fail "trainyard-api --migrate failed (see $W/api.log)"
ADMIN=$("$TY_API_BIN" --database-url "$DB_URL" --bootstrap-token test-admin 2>>"$W/api.log")
[[ -n $ADMIN ]] || fail "--bootstrap-token printed nothing"
start_api

# nothing from the caller's settings may leak in
unset JOBCTL_SERVER JOBCTL_TOKEN JOBCTL_CONFIG JOBCTL_TIMEOUT XDG_CONFIG_HOME
export HOME=$W/home
mkdir -p "$HOME"
export JOBCTL_SERVER=$URL JOBCTL_TOKEN=$ADMIN

# ---- help, version, usage errors (no server needed) -----------------------------

expect 0 jc --help
out_has 'exit status'
out_has '7  server or connection error'
for c in submit status list queue watch cancel stop attempts checkpoints logs nodes teams quota usage tokens sweep webhooks audit version; do
	expect 0 jc "$c" --help
	out_has "usage: jobctl $c"
done
expect 0 jc help watch
out_has 'usage: jobctl watch'
expect 0 jc --help
for c in attempts checkpoints logs nodes queue quota usage sweep webhooks audit; do out_has "^  $c "; done
ok "help for jobctl and every command"

expect 0 jc version
out_has '^jobctl [0-9]'
expect 0 jc -o json version
check '"version" in d'
ok "version, text and json"

expect 2 jc
expect 2 jc frobnicate
err_has "unknown command 'frobnicate'"
expect 2 jc submit --bogus x
err_has "unknown option '--bogus'"
expect 2 jc submit --team a --nodes many -- true
err_has '--nodes must be an integer'
expect 2 jc submit --team a --label novalue -- true
expect 2 jc submit --team a --idempotency-key '' -- true
expect 2 jc submit --team a stray -- true
expect 2 jc submit -f "$W/does-not-exist.json"
expect 2 jc status
expect 2 jc status abc
expect 2 jc status 1 2
expect 2 jc list --limit 0
expect 2 jc list --limit x
expect 2 jc list --team
err_has "needs a value"
expect 2 jc -o yaml list
expect 2 jc teams frob
expect 2 jc teams create only-name
expect 2 jc teams update team-x
expect 2 jc teams create team-x --nominal-gpus lots
expect 2 jc tokens create --name x
expect 2 jc tokens revoke 0
expect 2 jc watch
expect 2 jc cancel -1
expect 2 jc --server ftp://example.com list
expect 2 jc attempts
expect 2 jc attempts x
expect 2 jc attempts 1 2
expect 2 jc checkpoints
expect 2 jc checkpoints x
err_has 'the job id'
expect 2 jc checkpoints 1 2
expect 2 jc logs
expect 2 jc logs 0
expect 2 jc logs 1 --tail 0
expect 2 jc logs 1 --tail 10001
err_has '--tail must be from 1 to 10000'
expect 2 jc logs 1 --rank -1
expect 2 jc logs 1 --rank x
expect 2 jc logs 1 --attempt 0
expect 2 jc logs 1 --bogus
expect 2 jc nodes frob
err_has "unknown nodes command 'frob'"
expect 2 jc nodes get
expect 2 jc nodes get a b
expect 2 jc nodes get a --state ready
expect 2 jc nodes list extra
expect 2 jc nodes --state
expect 2 jc queue extra
expect 2 jc queue --limit 0
expect 2 jc queue --limit 501
err_has '--limit must be from 1 to 500'
expect 2 jc queue --state pending
err_has "unknown option '--state'"
expect 2 jc quota a b
expect 2 jc quota --team a
ok "bad commands, flags and arguments exit 2"

# ---- teams ---------------------------------------------------------------------

expect 0 jc teams create team-a --nominal-gpus 16 --borrowing-limit 8 --cohort research
out_has 'created team team-a'
expect 0 jc -o json teams create team-b --nominal-gpus 8 --weight 2
check 'd["name"] == "team-b" and d["nominal_gpus"] == 8 and d["weight"] == 2'
check 'd["borrowing_limit_gpus"] is None and d["cohort"] is None'
expect 0 jc teams create team-c --nominal-gpus 64
expect 6 jc teams create team-a --nominal-gpus 1
err_has '(team_exists)'
expect 6 jc teams create Bad_Name --nominal-gpus 1
err_has 'invalid_field'
expect 6 jc teams create team-d --nominal-gpus -1
err_has 'nominal_gpus'
ok "teams create, duplicate and invalid teams"

expect 0 jc teams
out_has '^NAME'
out_has '^team-a .*16 .*8 .*research'
expect 0 jc teams list
out_has '^team-c'
expect 0 jc -o json teams list
check '[t["name"] for t in d["items"]] == ["team-a", "team-b", "team-c"]'
expect 0 jc teams get team-a
out_has 'nominal GPUs: *16'
out_has 'cohort: *research'
expect 0 jc -o json teams get team-a
check 'd["borrowing_limit_gpus"] == 8 and d["cohort"] == "research"'
expect 4 jc teams get no-such-team
err_has 'team_not_found'
# global options may come anywhere, even before a subcommand
expect 0 jc teams -o json --server "$URL" get team-b
check 'd["name"] == "team-b"'
expect 0 jc -o json --token "$ADMIN" tokens --server "$URL" list
ok "teams list and get, text and json"

expect 0 jc teams update team-a --borrowing-limit none --lending-limit 4 --weight 2.5
out_has 'updated team team-a'
expect 0 jc -o json teams get team-a
check 'd["borrowing_limit_gpus"] is None and d["lending_limit_gpus"] == 4 and d["weight"] == 2.5'
check 'd["nominal_gpus"] == 16 and d["cohort"] == "research"'
expect 0 jc -o json teams update team-a --cohort none --borrowing-limit 32
check 'd["cohort"] is None and d["borrowing_limit_gpus"] == 32'
expect 4 jc teams update no-such-team --nominal-gpus 1
expect 6 jc teams update team-a --weight 0
err_has 'weight'
ok "teams update, 'none' clears a limit"

expect 0 jc -o json teams update team-a --max-cpus 64 --max-memory-mb 131072
check 'd["max_cpus"] == 64 and d["max_memory_mb"] == 131072 and d["nominal_gpus"] == 16'
expect 0 jc teams get team-a
out_has '^max CPUs: *64$'
out_has '^max memory MiB: *131072$'
out_has '^CPUs in use: *0$'
expect 0 jc teams
out_has '^NAME .*MAX-CPUS  *MAX-MEM-MB'
out_has '^team-a .* 64  *131072  *-$'
expect 0 jc -o json teams update team-a --max-cpus none
check 'd["max_cpus"] is None and d["max_memory_mb"] == 131072'
expect 6 jc teams update team-a --max-cpus 0
err_has 'max_cpus'
expect 6 jc teams update team-a --max-memory-mb -5
err_has 'max_memory_mb'
expect 2 jc teams update team-a --max-cpus lots
err_has '--max-cpus'
expect 0 jc -o json teams update team-a --max-memory-mb none
check 'd["max_cpus"] is None and d["max_memory_mb"] is None'
expect 0 jc submit --help
out_has 'scheduled, never over-committed on a node'
ok "teams CPU and memory quotas"

expect 0 jc -o json teams get team-a
check 'd["idle_gpu_alert_seconds"] is None'
expect 0 jc teams get team-a
out_has '^idle GPU alert: *none$'
expect 0 jc -o json teams update team-a --idle-gpu-alert-seconds 3600
check 'd["idle_gpu_alert_seconds"] == 3600 and d["nominal_gpus"] == 16'
expect 0 jc teams get team-a
out_has '^idle GPU alert: *after 3600 s idle$'
expect 0 jc teams
out_has '^NAME .*MAX-MEM-MB  *IDLE-ALERT-S$'
out_has '^team-a .* 3600$'
expect 6 jc teams update team-a --idle-gpu-alert-seconds 30
err_has "'idle_gpu_alert_seconds' must be an integer from 60 to 604800"
expect 2 jc teams update team-a --idle-gpu-alert-seconds 1h
err_has '--idle-gpu-alert-seconds'
# create sends it too (refused here, so that no team is added)
expect 6 jc teams create team-idle --nominal-gpus 0 --idle-gpu-alert-seconds 604801
err_has 'idle_gpu_alert_seconds'
expect 0 jc -o json teams update team-a --idle-gpu-alert-seconds none
check 'd["idle_gpu_alert_seconds"] is None'
expect 0 jc teams --help
out_has '--idle-gpu-alert-seconds S'
ok "teams: the idle GPU alert is set, shown and cleared"

expect 0 jc teams get team-a
out_has '^budget: *none$'
expect 0 jc -o json teams update team-a --budget 1000/month
check 'd["budget"]["amount"] == 1000 and d["budget"]["period"] == "month" and d["budget"]["spent"] == 0'
expect 0 jc teams get team-a
out_has '^budget: *1000.00 per month .0.00 spent since [0-9-]*T00:00:00'
expect 6 jc teams update team-a --budget 1000/year
err_has "'budget.period' must be one of 'day', 'week', 'month'"
expect 6 jc teams update team-a --budget -5/day
err_has "'budget.amount' must be a number from 0"
expect 2 jc teams update team-a --budget 1000
err_has '--budget must be AMOUNT/PERIOD'
expect 0 jc -o json teams update team-a --budget none
check 'd["budget"] is None'
ok "teams: a money budget is set, shown, refused when malformed and lifted"

# ---- tokens --------------------------------------------------------------------

MEMBER_A=$(jc tokens create --name a-member --role member --team team-a 2>"$W/err")
grep -q 'shown only this once' "$W/err" || fail "tokens create did not say the token is shown once"
[[ $MEMBER_A =~ ^[[:graph:]]+$ ]] || fail "tokens create printed '$MEMBER_A', not a token"
VIEWER_A=$(jc tokens create --name a-viewer --role viewer --team team-a 2>/dev/null)
MEMBER_B=$(jc tokens create --name b-member --role member --team team-b 2>/dev/null)
expect 0 jc -o json tokens create --name doomed --role member --team team-b
check 'd["name"] == "doomed" and d["role"] == "member" and d["team"] == "team-b"'
check 'isinstance(d["id"], int) and len(d["token"]) > 10'
DOOMED_ID=$(py 'd["id"]')
DOOMED=$(py 'd["token"]')
expect 6 jc tokens create --name x --role member --team no-such-team
err_has 'unknown_team'
expect 6 jc tokens create --name x --role emperor
expect 0 jc tokens list
out_has '^ID  *NAME'
out_has 'a-viewer  *viewer  *team-a'
expect 0 jc -o json tokens list
check 'sorted(t["name"] for t in d["items"]) == ["a-member", "a-viewer", "b-member", "doomed", "test-admin"]'
check 'all(t["revoked_at"] is None for t in d["items"])'
check 'all("token" not in t for t in d["items"])'
expect 0 env JOBCTL_TOKEN="$DOOMED" "$TY_JOBCTL_BIN" teams
expect 0 jc tokens revoke "$DOOMED_ID"
out_has "revoked token $DOOMED_ID"
expect 5 env JOBCTL_TOKEN="$DOOMED" "$TY_JOBCTL_BIN" teams
err_has 'unauthenticated'
err_lacks "$DOOMED"
expect 4 jc tokens revoke 999999
err_has 'token_not_found'
expect 0 jc -o json tokens list
check '[t for t in d["items"] if t["name"] == "doomed"][0]["revoked_at"] is not None'
ok "tokens create, list and revoke; a revoked token stops working"

# ---- submit --------------------------------------------------------------------

expect 0 jc submit --team team-a --name flags-job --nodes 2 --gpus-per-node 4 \
	--cpus-per-node 8 --memory-mb 4096 --priority-class high --priority 5 --max-runtime 600 \
	--label exp=one --label owner=ana --env FOO=bar --env EMPTY= --launch per_node \
	--topology block -- python3 train.py --lr 0.1 'two words'
out_has '^submitted job [0-9][0-9]* (pending)$'
J1=$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' "$W/out")
expect 0 jc -o json status "$J1"
check 'd["id"] == '"$J1"' and d["team"] == "team-a" and d["name"] == "flags-job"'
check 'd["state"] == "pending" and d["attempt"] == 0 and d["failure_class"] is None'
check 'd["spec"]["command"] == ["python3", "train.py", "--lr", "0.1", "two words"]'
check 'd["spec"]["resources"] == {"nodes": 2, "gpus_per_node": 4, "cpus_per_node": 8, "memory_mb_per_node": 4096}'
check 'd["spec"]["priority_class"] == "high" and d["spec"]["priority"] == 5'
check 'd["spec"]["max_runtime_seconds"] == 600 and d["spec"]["launch"] == "per_node"'
check 'd["spec"]["labels"] == {"exp": "one", "owner": "ana"}'
check 'd["spec"]["env"] == {"FOO": "bar", "EMPTY": ""}'
check 'd["spec"]["topology"] == {"required": "block"}'
expect 6 jc submit --team team-a --topology galaxy -- true
err_has 'topology.required'
ok "submit with flags"

cat >"$W/job.json" <<'EOF'
{"team": "team-a", "name": "file-job", "command": ["bash", "-c", "echo hi"],
 "resources": {"nodes": 1, "gpus_per_node": 2}, "labels": {"exp": "two"},
 "retry": {"system": 1}, "priority": 1}
EOF
expect 0 jc -o json submit -f "$W/job.json"
check 'd["name"] == "file-job" and d["spec"]["command"] == ["bash", "-c", "echo hi"]'
check 'd["spec"]["retry"]["system"] == 1 and d["spec"]["resources"]["gpus_per_node"] == 2'
check 'd["spec"]["resources"]["cpus_per_node"] == 1'
J2=$(py 'd["id"]')
# flags override the file's fields and add to its labels; '--' replaces the command
expect 0 jc -o json submit -f "$W/job.json" --name override --gpus-per-node 1 --label more=yes \
	-- sleep 1
check 'd["name"] == "override" and d["spec"]["command"] == ["sleep", "1"]'
check 'd["spec"]["resources"] == {"nodes": 1, "gpus_per_node": 1, "cpus_per_node": 1, "memory_mb_per_node": 1024}'
check 'd["spec"]["labels"] == {"exp": "two", "more": "yes"} and d["spec"]["priority"] == 1'
# -f - reads stdin
rc=0
jc submit -f - --name from-stdin <"$W/job.json" >"$W/out" 2>"$W/err" || rc=$?
[[ $rc -eq 0 ]] || fail "submit -f - exited $rc"
out_has '^submitted job [0-9]* (pending)$'
J3=$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' "$W/out")
expect 0 jc -o json status "$J3"
check 'd["name"] == "from-stdin" and d["spec"]["command"] == ["bash", "-c", "echo hi"]'
ok "submit -f FILE and -f -, flags override the file"

expect 0 jc -o json submit --team team-a --idempotency-key key-1 -- echo once
K1=$(py 'd["id"]')
expect 0 jc submit --team team-a --idempotency-key key-1 -- echo once
out_has "^job $K1 was already submitted with this idempotency key"
expect 0 jc -o json submit --team team-a --idempotency-key key-1 -- echo once
check 'd["id"] == '"$K1"
expect 6 jc submit --team team-a --idempotency-key key-1 -- echo twice
err_has '(idempotency_conflict)'
# keys are scoped to the team: team-b may use the same key
expect 0 jc -o json submit --team team-b --idempotency-key key-1 -- echo once
check 'd["id"] != '"$K1"
ok "idempotency key: a replay returns the same job, another body conflicts"

expect 6 jc submit --team team-a --nodes 0 -- true
err_has 'resources.nodes'
err_has '(invalid_field'
expect 6 jc submit --team team-a --env RANK=3 -- true
err_has 'reserved_env'
expect 6 jc submit --team no-such-team -- true
err_has 'unknown_team'
expect 6 jc submit --team team-a --priority-class urgent -- true
err_has 'priority_class'
expect 6 jc submit --team team-a
err_has 'command'
expect 6 jc submit --team team-a --nodes 3 --gpus-per-node 64 -- true
err_has 'exceeds_quota'
echo '{"team": "team-a", "command": ["x"], "colour": "blue"}' >"$W/unknown.json"
expect 6 jc submit -f "$W/unknown.json"
err_has 'unknown_field'
err_has 'colour'
echo '{"team": "team-a", "command": ["x"],' >"$W/broken.json"
expect 6 jc submit -f "$W/broken.json"
err_has 'invalid JSON'
echo '["not", "an", "object"]' >"$W/array.json"
expect 6 jc submit -f "$W/array.json"
ok "invalid specs exit 6 and name the field"

# ---- status --------------------------------------------------------------------

expect 0 jc status "$J1"
out_has "^id: *$J1\$"
out_has '^team: *team-a$'
out_has '^state: *pending$'
out_has '^attempt: *0$'
out_has '^failure class: *-$'
out_has '^resources: *2 node(s) x 4 GPU(s), 8 CPU(s), 4096 MiB per node$'
out_has "^command: *python3 train.py --lr 0.1 'two words'$"
out_has '^labels: *exp=one, owner=ana$'
out_has '^created: *20[0-9-]*T.* ago)$'
expect 4 jc status 999999
err_has 'job_not_found'
ok "status, text and json; unknown job exits 4"

# ---- list ----------------------------------------------------------------------

for i in 1 2 3 4 5 6 7; do
	lab=()
	((i <= 3)) && lab=(--label batch=x)
	C[i]=$(submit --team team-c --name "c$i" --nodes 1 --gpus-per-node 8 "${lab[@]}" -- true)
done
expect 0 jc list --team team-c --limit 3
[[ $(wc -l <"$W/out") -eq 4 ]] || fail "list --limit 3 printed $(wc -l <"$W/out") lines, not 1 + 3"
out_has '^ID  *TEAM  *NAME  *STATE  *NODESxGPUS  *AGE$'
out_has "^${C[7]}  *team-c  *c7  *pending  *1x8  *[0-9]*s\$"
err_has 'more jobs'
expect 0 jc list --team team-c --limit 3 --all
[[ $(wc -l <"$W/out") -eq 8 ]] || fail "list --all printed $(wc -l <"$W/out") lines, not 1 + 7"
expect 0 jc -o json list --team team-c --limit 3 --all
check 'len(d["items"]) == 7 and d["next_cursor"] is None'
check '[j["id"] for j in d["items"]] == sorted({j["id"] for j in d["items"]}, reverse=True)'
check '[j["name"] for j in d["items"]] == ["c7", "c6", "c5", "c4", "c3", "c2", "c1"]'
expect 0 jc -o json list --team team-c --limit 2
check 'len(d["items"]) == 2 and isinstance(d["next_cursor"], str)'
expect 0 jc -o json list --team team-c --label batch=x --all
check 'sorted(j["name"] for j in d["items"]) == ["c1", "c2", "c3"]'
expect 0 jc cancel "${C[1]}"
expect 0 jc cancel "${C[2]}"
expect 0 jc -o json list --team team-c --state cancelled
check 'sorted(j["name"] for j in d["items"]) == ["c1", "c2"]'
expect 0 jc -o json list --team team-c --state pending,cancelled --all
check 'len(d["items"]) == 7'
expect 0 jc -o json list --all
check '{j["team"] for j in d["items"]} == {"team-a", "team-b", "team-c"}'
expect 6 jc list --state bogus
err_has 'invalid_parameter'
ok "list: filters, --limit, --all across pages, json"

# ---- cancel --------------------------------------------------------------------

expect 0 jc cancel "$J2"
out_has "^cancelled job $J2\$"
expect 0 jc -o json status "$J2"
check 'd["state"] == "cancelled" and d["finished_at"] is not None'
expect 6 jc cancel "$J2"
err_has '(job_finished)'
expect 4 jc cancel 999999
expect 0 jc -o json cancel "$J3"
check 'd["state"] == "cancelled"'
ok "cancel; a finished job cannot be cancelled again"

# ---- stop ----------------------------------------------------------------------

JS=$(submit --team team-a --name pruned -- sleep 100)
expect 0 jc stop "$JS"
out_has "^stopped job $JS\$"
expect 0 jc -o json status "$JS"
check 'd["state"] == "stopped" and d["finished_at"] is not None'
expect 6 jc stop "$JS"
err_has '(job_finished)'
expect 6 jc cancel "$JS"
err_has '(job_finished)'
expect 6 jc stop "$J2"
err_has 'already cancelled'
expect 4 jc stop 999999
expect 2 jc stop -1
expect 0 timeout 60 "$TY_JOBCTL_BIN" watch "$JS"
out_has "^job $JS stopped\$"
JS2=$(submit --team team-a --name pruned-json -- sleep 100)
expect 0 jc -o json stop "$JS2"
check 'd["state"] == "stopped"'
ok "stop: a pending job ends stopped at once; a finished one cannot be stopped; watch exits 0"

# ---- watch ---------------------------------------------------------------------

expect 3 timeout 60 "$TY_JOBCTL_BIN" watch "$J2"
out_has ' submitted '
out_has "^job $J2 cancelled\$"
expect 3 timeout 60 "$TY_JOBCTL_BIN" -o json watch "$J2"
"$PY" -c 'import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
assert evs and evs[0]["seq"] == 1 and evs[-1]["state"] == "cancelled", evs
assert [e["seq"] for e in evs] == sorted({e["seq"] for e in evs}), evs' "$W/out" ||
	fail "watch -o json did not print the events as JSON lines"
expect 4 timeout 60 "$TY_JOBCTL_BIN" watch 999999
ok "watch of a finished job prints its events and exits 3"

# a watcher in the background, the cancel from another process
JW=$(submit --team team-a --name watched -- sleep 100)
timeout 60 "$TY_JOBCTL_BIN" watch "$JW" >"$W/watch.out" 2>"$W/watch.err" &
WPID=$!
sleep 1
kill -0 "$WPID" 2>/dev/null || fail "watch of a pending job ended at once"
expect 0 jc cancel "$JW"
wrc=0
wait "$WPID" || wrc=$?
cp "$W/watch.out" "$W/out"
cp "$W/watch.err" "$W/err"
[[ $wrc -eq 3 ]] || fail "watch of a job cancelled elsewhere exited $wrc, not 3"
out_has ' submitted '
out_has "^job $JW cancelled\$"
ok "watch of a job cancelled by another process exits 3"

# the server restarts while a watch waits: the watch rides it out
JR=$(submit --team team-a --name restart-watched -- sleep 100)
timeout 90 "$TY_JOBCTL_BIN" watch "$JR" >"$W/watch.out" 2>"$W/watch.err" &
WPID=$!
sleep 1
OLD_PORT=$PORT
stop_api
sleep 2
start_api "$OLD_PORT"
sleep 1
expect 0 jc cancel "$JR"
wrc=0
wait "$WPID" || wrc=$?
cp "$W/watch.out" "$W/out"
cp "$W/watch.err" "$W/err"
[[ $wrc -eq 3 ]] || fail "watch across a server restart exited $wrc, not 3"
err_has 'retrying'
out_has "^job $JR cancelled\$"
ok "watch survives a server restart"

# ---- roles and teams -----------------------------------------------------------

JB=$(submit --team team-b --name b-job -- true)
JA=$(JOBCTL_TOKEN=$MEMBER_A submit --team team-a --name a-job -- true)
export JOBCTL_TOKEN=$MEMBER_A
expect 4 jc status "$JB"
err_has 'job_not_found'
expect 4 jc cancel "$JB"
expect 4 jc watch "$JB"
expect 0 jc -o json list --all
check 'len(d["items"]) > 0 and {j["team"] for j in d["items"]} == {"team-a"}'
expect 5 jc submit --team team-b -- true
expect 5 jc teams create team-z --nominal-gpus 1
err_has '(forbidden)'
expect 5 jc tokens list
expect 0 jc -o json teams
check '[t["name"] for t in d["items"]] == ["team-a"]'
expect 4 jc teams get team-b
export JOBCTL_TOKEN=$VIEWER_A
expect 5 jc submit --team team-a -- true
err_has '(forbidden)'
expect 0 jc status "$JA"
expect 5 jc cancel "$JA"
expect 4 jc status "$JB"
export JOBCTL_TOKEN=$MEMBER_B
expect 0 jc cancel "$JB"
expect 4 jc status "$JA"
export JOBCTL_TOKEN=ty_not_a_real_token_0123456789
expect 5 jc list
err_has 'unauthenticated'
err_lacks 'ty_not_a_real_token_0123456789'
expect 5 env -u JOBCTL_TOKEN "$TY_JOBCTL_BIN" list
err_has 'no token is set'
err_has 'token-file'
export JOBCTL_TOKEN=$ADMIN
ok "member sees only its team (404 for others), viewer cannot submit (5), bad token (5)"

# a token file keeps the token off the command line (ps, /proc): flag, env and config
printf '%s\n' "$MEMBER_B" >"$W/token-b"
printf '%s  \r\nsecond line ignored\n' "$ADMIN" >"$W/token-admin"
: >"$W/token-empty"
expect 0 env -u JOBCTL_TOKEN "$TY_JOBCTL_BIN" --token-file "$W/token-b" status "$JB"
expect 4 env -u JOBCTL_TOKEN "$TY_JOBCTL_BIN" --token-file "$W/token-b" status "$JA"
expect 0 env -u JOBCTL_TOKEN JOBCTL_TOKEN_FILE="$W/token-admin" "$TY_JOBCTL_BIN" status "$JA"
printf 'token_file = %s\n' "$W/token-b" >"$W/token-file.conf"
expect 4 env -u JOBCTL_TOKEN JOBCTL_CONFIG="$W/token-file.conf" "$TY_JOBCTL_BIN" status "$JA"
# the higher source wins: a flag file over JOBCTL_TOKEN, JOBCTL_TOKEN over a config file
expect 4 jc --token-file "$W/token-b" status "$JA"
expect 0 env JOBCTL_CONFIG="$W/token-file.conf" "$TY_JOBCTL_BIN" status "$JA"
expect 2 jc --token "$ADMIN" --token-file "$W/token-b" status "$JA"
err_has 'a token and a token file both come from the command line: give one'
err_lacks "$ADMIN"
expect 2 jc --token-file "$W/no-such-token" status "$JA"
err_has "cannot read the token file '$W/no-such-token' (from flag)"
expect 2 jc --token-file "$W/token-empty" status "$JA"
err_has "the token file '$W/token-empty' (from flag) is empty"
printf 'bad token\n' >"$W/token-bad"
expect 2 jc --token-file "$W/token-bad" status "$JA"
err_has 'the token (from the token file) contains invalid characters'
err_lacks 'bad token'
expect 0 jc --help
out_has 'other users of this machine can read a'
out_has '^  --token-file FILE'
ok "token file: --token-file, JOBCTL_TOKEN_FILE, token_file =; precedence, refusals"

# ---- sweeps ----------------------------------------------------------------------

cat >"$W/sweep.json" <<'JSON'
{"team":"team-b","name":"from-file","template":{"command":["python","t.py"],"resources":{"nodes":1}},
 "grid":{"lr":[0.1,0.01],"batch":[32,64]},"max_concurrent":2,
 "objective":{"metric":"val_loss","direction":"minimize"}}
JSON
expect 0 jc sweep submit -f "$W/sweep.json" --team team-a --name lr-search
out_has '^sweep [0-9]*: 4 trials, jobs [0-9]* to [0-9]*$'
SW=$(sed -E 's/^sweep ([0-9]+):.*/\1/' "$W/out")
expect 0 jc -o json sweep status "$SW"
check 'd["team"] == "team-a" and d["name"] == "lr-search" and d["trial_count"] == 4'
check '[t["params"] for t in d["trials"]] == [{"batch":32,"lr":0.1},{"batch":32,"lr":0.01},{"batch":64,"lr":0.1},{"batch":64,"lr":0.01}]'
T0=$(py 'd["trials"][0]["job_id"]')
expect 0 jc -o json status "$T0"
check 'd["spec"]["env"]["TRAINYARD_PARAMS"] == "{\"batch\":32,\"lr\":0.1}" and d["spec"]["env"]["TRAINYARD_PARAM_LR"] == "0.1"'
expect 0 jc sweep status "$SW"
out_has 'max concurrent: *2'
out_has 'objective: *minimize val_loss'
out_has '^3  *[0-9][0-9]*  *pending  *batch=64 lr=0.01'
expect 0 jc sweep submit -f "$W/sweep.json" --team team-a --idempotency-key sw-1
out_lacks 'already submitted'
SW2=$(sed -E 's/^sweep ([0-9]+):.*/\1/' "$W/out")
expect 0 jc sweep submit -f "$W/sweep.json" --team team-a --idempotency-key sw-1
out_has "^sweep $SW2: 4 trials.*(already submitted with this key)"
expect 0 jc sweep list --team team-a
out_has "^$SW  *team-a  *lr-search  *active  *4 "
expect 0 jc -o json sweep list --team team-a --limit 1 --all
check 'len(d["items"]) == 2 and d["next_cursor"] is None'
expect 0 jc sweep cancel "$SW"
out_has "^cancelled sweep $SW: 4 trials cancelled, 0 stopping\$"
expect 0 jc -o json sweep status "$SW"
check 'd["state"] == "cancelled" and d["trial_states"] == {"cancelled": 4}'
printf '{"team":"team-a","template":{"command":["x"],"resources":{}},"trials":[{"a":[1]}]}' >"$W/bad.json"
expect 6 jc sweep submit -f "$W/bad.json"
err_has 'trials\[0\]'
printf '[1]' >"$W/bad.json"
expect 6 jc sweep submit -f "$W/bad.json"
err_has 'must be a JSON object'
expect 2 jc sweep submit
err_has 'needs -f FILE'
expect 2 jc sweep
expect 2 jc sweep bogus
err_has 'unknown sweep command'
expect 2 jc sweep status
expect 2 jc sweep status x
expect 2 jc sweep cancel 1 --limit 3
expect 4 jc sweep status 999999
expect 0 jc sweep --help
out_has 'usage: jobctl sweep submit'
JOBCTL_TOKEN=$MEMBER_B expect 4 jc sweep status "$SW"
JOBCTL_TOKEN=$MEMBER_B expect 4 jc sweep cancel "$SW"
JOBCTL_TOKEN=$VIEWER_A expect 5 jc sweep submit -f "$W/sweep.json" --team team-a
JOBCTL_TOKEN=$VIEWER_A expect 0 jc sweep status "$SW"
ok "sweep: submit from a file with flags, status, idempotent retry, list, cancel, errors, roles"

# ---- webhooks --------------------------------------------------------------------
# The URL is a closed port: the first attempt fails at once and is listed.

printf 'jobctl-test-secret-0001\n' >"$W/hook.secret"
JOBCTL_TOKEN=$MEMBER_A expect 0 jc webhooks create --team team-a --url http://127.0.0.1:9/hook \
	--event job.succeeded --event job.failed --secret-file "$W/hook.secret"
out_has '^webhook [0-9]*: http://127.0.0.1:9/hook for team team-a$'
WH=$(sed -E 's/^webhook ([0-9]+):.*/\1/' "$W/out")
out_lacks 'jobctl-test-secret'
expect 0 jc -o json webhooks list --team team-a
check 'd["items"][0]["id"] == '"$WH"' and d["items"][0]["events"] == ["job.succeeded", "job.failed"] and "secret" not in d["items"][0]'
out_lacks 'jobctl-test-secret'
JOBCTL_TOKEN=$VIEWER_A expect 0 jc webhooks list
out_has "^$WH  *team-a  *http://127.0.0.1:9/hook  *job.succeeded,job.failed  *yes "
JOBCTL_TOKEN=$MEMBER_A expect 0 jc webhooks ping "$WH"
out_has '^ping queued: delivery [0-9]*$'
for _ in $(seq 100); do
	expect 0 jc -o json webhooks deliveries "$WH"
	[[ $(py 'len(d["items"][0]["attempts"])') -ge 1 ]] && break
	sleep 0.1
done
check 'd["items"][0]["event"] == "ping" and d["items"][0]["attempts"][0]["http_status"] is None'
expect 0 jc webhooks deliveries "$WH" --state pending
out_has '^[0-9][0-9]*  *ping  *pending  *[0-9][0-9]*  *.*onnect'
JOBCTL_TOKEN=$MEMBER_B expect 4 jc webhooks deliveries "$WH"
JOBCTL_TOKEN=$MEMBER_B expect 4 jc webhooks delete "$WH"
JOBCTL_TOKEN=$VIEWER_A expect 5 jc webhooks delete "$WH"
printf 'short\n' >"$W/short.secret"
expect 6 jc webhooks create --team team-a --url http://127.0.0.1:9/x --secret-file "$W/short.secret"
err_has 'secret'
expect 6 jc webhooks create --team team-a --url ftp://127.0.0.1/x --secret-file "$W/hook.secret"
err_has 'http or https'
expect 6 jc webhooks create --team team-a --url http://h/x --event job.exploded --secret-file "$W/hook.secret"
err_has 'job.exploded'
expect 2 jc webhooks create --team team-a --url http://h/x
err_has 'needs --team, --url and --secret-file'
expect 2 jc webhooks
expect 2 jc webhooks bogus
err_has 'unknown webhooks command'
expect 2 jc webhooks delete x
expect 2 jc webhooks list --state pending
JOBCTL_TOKEN=$MEMBER_A expect 0 jc webhooks delete "$WH"
out_has "^deleted webhook $WH: pending deliveries cancelled\$"
expect 0 jc -o json webhooks deliveries "$WH"
check 'd["items"][0]["state"] == "cancelled"'
expect 4 jc webhooks ping 999999
ok "webhooks: create from a secret file, list, ping, deliveries, delete, errors, roles"

# ---- audit -------------------------------------------------------------------------
# The webhook section above left a-member's requests: the 201 create, the 202
# ping, the 200 delete, and the refused 403 delete of a-viewer.

expect 0 jc -o json audit --principal a-member --path-prefix /v1/webhooks --method POST --status 201
check 'len(d["items"]) == 1 and d["items"][0]["route"] == "/v1/webhooks" and d["items"][0]["team"] == "team-a" and d["items"][0]["created_id"] == '"$WH"
expect 0 jc audit --principal a-viewer --status 403
out_has '^ID  *TIME  *WHO  *TEAM  *REQUEST  *STATUS  *PEER'
out_has "a-viewer ([0-9]*)  *team-a  *DELETE /v1/webhooks/$WH  *403 forbidden  *127.0.0.1\$"
out_lacks 'jobctl-test-secret'
expect 0 jc -o json audit --team team-a --path-prefix /v1/webhooks --limit 1 --all
check 'len(d["items"]) >= 4 and d["next_cursor"] is None and all(i["team"] == "team-a" for i in d["items"])'
expect 0 jc audit --team team-a --path-prefix /v1/webhooks --limit 1
err_has 'more records'
JOBCTL_TOKEN=$MEMBER_A expect 5 jc audit
expect 2 jc audit --method GET
expect 2 jc audit --status 99
expect 2 jc audit --token-id x
expect 2 jc audit stray
expect 6 jc audit --since yesterday
err_has 'since'
ok "audit: filters, table, all pages, admins only, usage errors"

# ---- nodes, attempts and logs ----------------------------------------------------
# No executors here: the rows the scheduler and executors would write are
# inserted directly, and python's http.server plays node-a's log endpoint
# (serving logs/<job>/<attempt>/<rank>; it ignores the ?tail= the API adds).
# node-b's log_url is a closed port.

JL=$(submit --team team-a --name with-attempts -- python3 train.py)
mkdir -p "$W/logsrv/logs/$JL/1" "$W/logsrv/logs/$JL/2"
printf 'attempt 1, rank 1\nTraceback (most recent call last):\n  boom\n' >"$W/logsrv/logs/$JL/1/1"
printf 'attempt 2, rank 0\nstep 1 loss 2.5\nno newline at the end' >"$W/logsrv/logs/$JL/2/0"
"$PY" -u -m http.server 0 --bind 127.0.0.1 --directory "$W/logsrv" >"$W/logsrv.log" 2>&1 &
LOGSRV_PID=$!
LOGSRV_PORT=
for _ in $(seq 100); do
	LOGSRV_PORT=$(sed -n 's/^Serving HTTP on .* port \([0-9][0-9]*\) .*/\1/p' "$W/logsrv.log")
	[[ -n $LOGSRV_PORT ]] && break
	kill -0 "$LOGSRV_PID" 2>/dev/null || fail "python3 -m http.server exited: $(cat "$W/logsrv.log")"
	sleep 0.1
done
[[ -n $LOGSRV_PORT ]] || fail "python3 -m http.server did not say its port within 10 s"

psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -v job="$JL" -v up="http://127.0.0.1:$LOGSRV_PORT" \
	>/dev/null <<'SQL' || fail "seeding nodes and attempts failed"
INSERT INTO nodes (id, address, gpus, boot_id, log_url, labels) VALUES
	('node-a', '10.0.0.1', 8, 'boot-a', :'up', '{"rack": "r1"}'),
	('node-b', '10.0.0.2', 8, 'boot-b', 'http://127.0.0.1:1', '{}'),
	('node-c', '10.0.0.3', 4, 'boot-c', '', '{}');
UPDATE nodes SET state = 'lost' WHERE id = 'node-c';
INSERT INTO attempts (job_id, attempt, state, epoch, master_node, master_addr, master_port,
		      nnodes, world_size, launch, created_at, running_at, ended_at, exit_code,
		      failure_class, message)
	VALUES (:job, 1, 'failed', 1, 'node-a', '10.0.0.1', 29500, 2, 4, '{}',
		now() - interval '10 minutes', now() - interval '9 minutes',
		now() - interval '8 minutes', 1, 'user', 'rank 1 exited with 1');
INSERT INTO attempts (job_id, attempt, state, epoch, master_node, master_addr, master_port,
		      nnodes, world_size, launch, running_at)
	VALUES (:job, 2, 'running', 1, 'node-a', '10.0.0.1', 29500, 2, 4, '{}', now());
INSERT INTO allocations (job_id, attempt, node_id, node_rank, first_rank, local_ranks, gpus,
			 released_at, exit_code, failure_class) VALUES
	(:job, 1, 'node-a', 0, 0, 2, '{0,1}', now(), 1, 'user'),
	(:job, 1, 'node-b', 1, 2, 2, '{0,1}', now(), 143, 'cancelled'),
	(:job, 2, 'node-a', 0, 0, 2, '{2,3}', NULL, NULL, NULL),
	(:job, 2, 'node-b', 1, 2, 2, '{2,3}', NULL, NULL, NULL);
INSERT INTO ranks (job_id, attempt, rank, node_id, local_rank, pid, exit_code, signal) VALUES
	(:job, 1, 0, 'node-a', 0, 100, 0, 0), (:job, 1, 1, 'node-a', 1, 101, 1, 0),
	(:job, 1, 2, 'node-b', 0, 200, NULL, 15), (:job, 1, 3, 'node-b', 1, 201, NULL, 15),
	(:job, 2, 0, 'node-a', 0, 300, NULL, NULL), (:job, 2, 1, 'node-a', 1, 301, NULL, NULL),
	(:job, 2, 2, 'node-b', 0, 400, NULL, NULL), (:job, 2, 3, 'node-b', 1, 401, NULL, NULL);
UPDATE jobs SET state = 'running', attempt = 2, failure_class = 'user' WHERE id = :job;
UPDATE attempts SET evidence = 'ZeroDivisionError: division by zero'
	WHERE job_id = :job AND attempt = 1;
UPDATE nodes SET inventory = '{"gpus": [], "hcas": [
	{"name": "mlx5_0", "ports": [{"port": 1, "state": "ACTIVE"}]},
	{"name": "mlx5_1", "ports": [{"port": 1, "state": "DOWN"}, {"port": 2, "state": "ACTIVE"}]}]}'
	WHERE id = 'node-a';
INSERT INTO node_failures (node_id, job_id, attempt, failure_class, evidence) VALUES
	('node-b', :job, 1, 'system', 'NCCL WARN'), ('node-b', :job, 0, 'hardware', 'Xid 79');
SQL

expect 0 jc status "$JL"
out_has '^state: *running$'
out_has '^attempt: *2$'
out_has '^failure class: *user$'
out_has '^attempts:$'
out_has '^  1  *failed  *node-a,node-b  *2m00s  *user  *ZeroDivisionError: division by zero$'
out_has '^  2  *running  *node-a,node-b  *[0-9]*s  *-  *-$'
expect 0 jc -o json status "$JL"
check 'd["attempt"] == 2 and d["failure_class"] == "user"'
expect 0 jc status "$J1"
out_lacks '^attempts:'
ok "status shows the attempts (nodes, duration, class, evidence) and the last failure class"

# nodes are registered now: what none of them can hold is refused, unless asked to queue it
expect 6 jc submit --team team-a --gpus-per-node 9 -- true
err_has 'unschedulable'
err_has 'no node can hold 9 GPUs: the largest node has 8 (node-a, node-b)'
JU=$(submit --team team-a --gpus-per-node 9 --queue-if-unschedulable -- true)
expect 0 jc -o json status "$JU"
check 'd["spec"]["queue_if_unschedulable"] is True and d["state"] == "pending"'
expect 0 jc cancel "$JU"
ok "submit: an unschedulable job is refused, --queue-if-unschedulable queues it"

expect 0 jc node-pools put big --gpus-per-node 16 --max-nodes 2 --label pool=big
out_has '^node pool big: up to 2 nodes of 16 GPUs$'
expect 0 jc node-pools
out_has '^big  *16  *-  *-  *2  *pool=big$'
expect 0 jc -o json node-pools
check 'd["items"][0]["name"] == "big" and d["items"][0]["cpus_per_node"] is None'
# a shape only the pool can hold is accepted now
JP=$(submit --team team-a --gpus-per-node 16 -- true)
expect 0 jc cancel "$JP"
expect 2 jc node-pools put big --max-nodes 2
err_has 'needs --gpus-per-node and --max-nodes'
expect 2 jc node-pools put big --gpus-per-node 65 --max-nodes 2
err_has 'gpus-per-node'
expect 2 jc node-pools --max-nodes 2
err_has "are for 'node-pools put'"
JOBCTL_TOKEN=$MEMBER_A expect 5 jc node-pools delete big
expect 0 jc node-pools delete big
out_has '^deleted node pool big$'
expect 4 jc node-pools delete big
err_has 'node_pool_not_found'
expect 6 jc submit --team team-a --gpus-per-node 16 -- true
err_has 'unschedulable'
ok "node-pools: put, list, delete; a declared pool makes a shape acceptable"

expect 0 jc attempts "$JL"
[[ $(wc -l <"$W/out") -eq 3 ]] || fail "attempts printed $(wc -l <"$W/out") lines, not 1 + 2"
out_has '^ATTEMPT  *STATE  *NODES  *WORLD  *EXIT  *CLASS  *RESUMED  *UTIL  *MEM  *STARTED  *ENDED$'
out_has '^1  *failed  *node-a,node-b  *4  *1  *user  *-  *-  *-  *10m ago  *8m ago$'
out_has '^2  *running  *node-a,node-b  *4  *-  *-  *-  *-  *-  *[0-9]*s ago  *-$'
# UTIL and MEM: the GPU telemetry the nodes reported when the attempt ended
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -c "UPDATE attempts SET gpu_telemetry = '{\"util_mean\": 59.6, \"util_peak\": 99, \"memory_used_peak_mb\": 70000, \"power_mean_w\": 300, \"power_peak_w\": 650, \"idle_gpu_seconds\": 12, \"samples\": 150, \"nodes_reported\": 2}' WHERE job_id = $JL AND attempt = 1" >/dev/null
expect 0 jc attempts "$JL"
out_has '^1  *failed  *node-a,node-b  *4  *1  *user  *-  *60/99%  *68.4GiB  *10m ago  *8m ago$'
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -c "UPDATE attempts SET gpu_telemetry = '{\"util_mean\": null, \"util_peak\": 40, \"memory_used_peak_mb\": null, \"nodes_reported\": 1}' WHERE job_id = $JL AND attempt = 1" >/dev/null
expect 0 jc attempts "$JL"
out_has '^1  *failed  *node-a,node-b  *4  *1  *user  *-  *-/40%  *-  *10m ago  *8m ago$'
expect 0 jc -o json attempts "$JL"
check 'd["items"][0]["gpu_telemetry"]["util_peak"] == 40 and d["items"][1]["gpu_telemetry"] is None'
# RESUMED: the checkpoint step the attempt resumed from, or scratch
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -c "UPDATE attempts SET resume_from = '/ckpt/s40', resume_step = 40, resume_skipped = '[]' WHERE job_id = $JL AND attempt = 2" >/dev/null
expect 0 jc attempts "$JL"
out_has '^2  *running  *node-a,node-b  *4  *-  *-  *step 40  *-  *-  *[0-9]*s ago  *-$'
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -c "UPDATE attempts SET resume_from = NULL, resume_step = NULL WHERE job_id = $JL AND attempt = 2" >/dev/null
expect 0 jc attempts "$JL"
out_has '^2  *running  *node-a,node-b  *4  *-  *-  *scratch  *-  *-  *[0-9]*s ago  *-$'
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -c "UPDATE attempts SET resume_skipped = NULL WHERE job_id = $JL AND attempt = 2" >/dev/null
# progress and stragglers: a line each in status, members of the attempt in json
expect 0 jc status "$JL"
out_lacks '^progress:'
out_lacks '^straggler:'
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt >/dev/null <<SQL || fail "seeding progress failed"
UPDATE allocations SET progress = '[{"rank": 0, "step": 400, "steps_per_second": 2.0, "samples_per_second": 64.5, "step_at": 1764000000000, "below": 0}, {"rank": 1, "step": 398, "steps_per_second": 1.9, "samples_per_second": null, "step_at": 1764000000000, "below": 0}]' WHERE job_id = $JL AND attempt = 2 AND node_id = 'node-a';
UPDATE allocations SET progress = '[{"rank": 2, "step": 80, "steps_per_second": 0.4, "step_at": 1764000000000, "below": 3}, {"rank": 3, "step": 399, "steps_per_second": null, "step_at": 1764000000000, "below": 0}]' WHERE job_id = $JL AND attempt = 2 AND node_id = 'node-b';
UPDATE attempts SET stragglers = '[{"rank": 2, "node": "node-b", "steps_per_second": 0.4, "median": 1.9, "attempt": 2, "at": "2026-01-01T00:00:00.000Z"}]' WHERE job_id = $JL AND attempt = 2;
SQL
expect 0 jc status "$JL"
out_has '^progress: *attempt 2: steps 80-400 on 4 rank(s), 0.4-2 steps/s, slowest rank 2 on node-b$'
out_has "^straggler: *attempt 2: rank 2 on node-b at 0.4 steps/s against the gang's median 1.9$"
expect 0 jc -o json attempts "$JL"
check '[(p["rank"], p["node"], p["step"]) for p in d["items"][1]["progress"]] == [(0, "node-a", 400), (1, "node-a", 398), (2, "node-b", 80), (3, "node-b", 399)]'
check '"below" not in d["items"][1]["progress"][0] and d["items"][0]["progress"] is None'
check 'd["items"][1]["stragglers"][0]["node"] == "node-b" and d["items"][0]["stragglers"] is None'
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -c "UPDATE allocations SET progress = NULL WHERE job_id = $JL; UPDATE attempts SET stragglers = NULL WHERE job_id = $JL" >/dev/null
expect 0 jc -o json attempts "$JL"
check '[a["attempt"] for a in d["items"]] == [1, 2]'
check '[a["state"] for a in d["items"]] == ["failed", "running"]'
check 'd["items"][0]["exit_code"] == 1 and d["items"][0]["message"] == "rank 1 exited with 1"'
check '[n["node"] for n in d["items"][0]["nodes"]] == ["node-a", "node-b"]'
check 'd["items"][0]["nodes"][1]["failure_class"] == "cancelled"'
check '[k["rank"] for k in d["items"][1]["ranks"]] == [0, 1, 2, 3]'
check 'd["items"][0]["ranks"][2]["signal"] == 15 and d["items"][1]["ended_at"] is None'
expect 0 jc attempts "$J1"
[[ $(wc -l <"$W/out") -eq 1 ]] || fail "attempts of a pending job printed more than the header"
expect 0 jc -o json attempts "$J1"
check 'd["items"] == []'
expect 4 jc attempts 999999
err_has 'job_not_found'
JOBCTL_TOKEN=$MEMBER_B expect 4 jc attempts "$JL"
err_has 'job_not_found'
JOBCTL_TOKEN=$VIEWER_A expect 0 jc attempts "$JL"
ok "attempts: table, json, pending job, another team's job exits 4"

expect 0 jc checkpoints "$JL"
out_has '^no resume point: no valid checkpoint, or the job has ended$'
[[ $(wc -l <"$W/out") -eq 1 ]] || fail "checkpoints of a job without any printed a table"
D1=$(printf 'a%.0s' $(seq 64))
D2=$(printf 'b%.0s' $(seq 64))
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -v job="$JL" -v d1="$D1" -v d2="$D2" >/dev/null <<'SQL' || fail "seeding checkpoints failed"
INSERT INTO checkpoints (job_id, step, path, digest, bytes, files, node_id, attempt, verified_at,
			 status, reason) VALUES
	(:job, 100, '/ckpt/step-100', :'d1', 1610612736, 3, 'node-a', 1, now() - interval '9 minutes',
	 'valid', NULL),
	(:job, 200, '/ckpt/step-200', :'d2', 2048, 3, 'node-a', 1, now() - interval '8 minutes',
	 'rejected', 'MANIFEST.json has SHA-256 cc, the launch names bb'),
	(:job, 300, '/ckpt/step-300', NULL, 0, 0, 'node-a', 2, now(), 'torn',
	 'no MANIFEST.json (torn)');
SQL
expect 0 jc checkpoints "$JL"
[[ $(wc -l <"$W/out") -eq 5 ]] || fail "checkpoints printed $(wc -l <"$W/out") lines, not 1 + 1 + 3"
out_has '^next attempt resumes from step 100$'
out_has '^STEP  *STATUS  *DIGEST  *SIZE  *FILES  *NODE  *ATTEMPT  *VERIFIED  *NEXT  *REASON$'
out_has '^300  *torn  *-  *0B  *0  *node-a  *2  *[0-9]*s ago  *no MANIFEST.json (torn)$'
out_has '^200  *rejected  *bbbbbbbbbbbb  *2.0KiB  *3  *node-a  *1  *8m ago  *MANIFEST.json has SHA-256 cc, the launch names bb$'
out_has '^100  *valid  *aaaaaaaaaaaa  *1.5GiB  *3  *node-a  *1  *9m ago  *\*  *-$'
expect 0 jc -o json checkpoints "$JL"
check 'd["resume_step"] == 100 and [c["step"] for c in d["items"]] == [300, 200, 100]'
check 'd["items"][2]["digest"] == "'"$D1"'" and d["items"][2]["resume"] is True'
expect 4 jc checkpoints 999999
err_has 'job_not_found'
JOBCTL_TOKEN=$MEMBER_B expect 4 jc checkpoints "$JL"
err_has 'job_not_found'
JOBCTL_TOKEN=$VIEWER_A expect 0 jc checkpoints "$JL"
ok "checkpoints: table, next resume point, json, another team's job exits 4"

expect 0 jc logs "$JL"
cmp -s "$W/out" "$W/logsrv/logs/$JL/2/0" || fail "logs did not print rank 0 of attempt 2 as is"
expect 0 jc logs "$JL" --attempt 1 --rank 1 --tail 5
cmp -s "$W/out" "$W/logsrv/logs/$JL/1/1" || fail "logs --attempt 1 --rank 1 printed the wrong log"
expect 0 jc -o json logs --tail 10000 "$JL"
cmp -s "$W/out" "$W/logsrv/logs/$JL/2/0" || fail "logs -o json did not print the text as is"
JOBCTL_TOKEN=$VIEWER_A expect 0 jc logs "$JL" --rank 0
grep -q "GET /logs/$JL/2/0?tail=100 " "$W/logsrv.log" || fail "the node was not asked for /logs/$JL/2/0?tail=100"
grep -q "GET /logs/$JL/1/1?tail=5 " "$W/logsrv.log" || fail "the node was not asked for /logs/$JL/1/1?tail=5"
grep -q "GET /logs/$JL/2/0?tail=10000 " "$W/logsrv.log" || fail "the node was not asked with tail=10000"
expect 4 jc logs "$JL" --rank 9
err_has 'rank_not_found'
expect 4 jc logs "$JL" --attempt 5
err_has 'rank_not_found'
expect 4 jc logs "$J1"
err_has 'rank_not_found'
expect 4 jc logs 999999
err_has 'job_not_found'
JOBCTL_TOKEN=$MEMBER_B expect 4 jc logs "$JL"
err_has 'job_not_found'
expect 7 jc logs "$JL" --rank 2
err_has '(logs_unavailable)'
ok "logs: relayed as is, --rank/--attempt/--tail, 4 for no such rank or job, 7 when the node fails"

expect 0 jc nodes
[[ $(wc -l <"$W/out") -eq 4 ]] || fail "nodes printed $(wc -l <"$W/out") lines, not 1 + 3"
out_has '^ID  *STATE  *ADDRESS  *FREE/TOTAL  *HCAS  *LABELS  *FAILURES  *CONDITIONS  *JOBS  *HEARTBEAT$'
out_has "^node-a  *ready  *10.0.0.1  *6/8  *mlx5_0:1/1,mlx5_1:1/2  *rack=r1  *0  *-  *$JL  *[0-9]*s ago\$"
out_has "^node-b  *ready  *10.0.0.2  *6/8  *-  *-  *2 (1 job)  *-  *$JL  *[0-9]*s ago\$"
out_has '^node-c  *lost  *10.0.0.3  *4/4  *-  *-  *0  *-  *-  *[0-9]*s ago$'
expect 0 jc nodes list --state lost
[[ $(wc -l <"$W/out") -eq 2 ]] || fail "nodes --state lost printed $(wc -l <"$W/out") lines, not 1 + 1"
out_has '^node-c  *lost'
expect 0 jc -o json nodes --state ready
check '[n["id"] for n in d["items"]] == ["node-a", "node-b"]'
check 'd["items"][0]["gpus_free"] == 6 and d["items"][0]["gpus_total"] == 8'
check 'd["items"][0]["running"] == [{"job": '"$JL"', "attempt": 2}]'
expect 6 jc nodes --state sleeping
err_has 'invalid_parameter'
expect 0 jc nodes get node-a
out_has '^id: *node-a$'
out_has '^GPUs: *6 free of 8$'
out_has "^running: *job $JL (attempt 2)\$"
out_has '^labels: *rack=r1$'
out_has '^last heartbeat: *20[0-9-]*T.* ago)$'
expect 0 jc -o json nodes get node-c
check 'd["id"] == "node-c" and d["state"] == "lost" and d["running"] == []'
expect 4 jc nodes get no-such-node
err_has 'node_not_found'
JOBCTL_TOKEN=$VIEWER_A expect 0 jc nodes
expect 0 jc nodes get node-b
out_has '^HCAs: *-$'
out_has '^failures: *2 (1 job)$'
out_lacks '^drain reason:'
ok "nodes: table, --state, get, json; unknown node exits 4"

# drain and undrain: admin only; node-b holds JL's attempt 2, node-c is lost
expect 0 jc nodes drain node-b
out_has '^node node-b: draining (takes no new work; drained once its work ends)$'
expect 0 jc nodes drain node-b
out_has '^node node-b: draining'
expect 0 jc nodes get node-b
out_has '^state: *draining$'
out_has '^drain reason: *drained by an admin$'
expect 0 jc nodes list --state draining
[[ $(wc -l <"$W/out") -eq 2 ]] || fail "nodes --state draining printed $(wc -l <"$W/out") lines, not 1 + 1"
expect 0 jc nodes drain node-c
out_has '^node node-c: lost (not heard from; drained when it returns)$'
expect 0 jc -o json nodes drain node-c
check 'd["state"] == "lost" and d["drain_reason"] == "drained by an admin"'
JOBCTL_TOKEN=$MEMBER_A expect 5 jc nodes drain node-a
err_has 'forbidden'
JOBCTL_TOKEN=$VIEWER_A expect 5 jc nodes undrain node-b
err_has 'forbidden'
expect 4 jc nodes drain no-such-node
err_has 'node_not_found'
expect 2 jc nodes drain
expect 2 jc nodes undrain a b
expect 2 jc nodes drain node-a --state ready
expect 0 jc nodes undrain node-b
out_has '^node node-b: ready$'
expect 0 jc nodes get node-b
out_has '^failures: *0$'
out_lacks '^drain reason:'
expect 0 jc nodes undrain node-c
out_has '^node node-c: lost (not heard from; ready when it returns)$'
[[ $(psql "$DB_URL" -qAt -c "SELECT string_agg(action || ' ' || object, ',' ORDER BY id) FROM audit_log WHERE action LIKE 'node.%'") == \
	"node.drain node-b,node.drain node-b,node.drain node-c,node.drain node-c,node.undrain node-b,node.undrain node-c" ]] ||
	fail "drain/undrain audit rows are not the expected ones"
ok "nodes drain/undrain: states, reasons, idempotent, admin only (5), unknown node (4), audited"

# node conditions, as the scheduler records them from heartbeats: node-b has a fatal
# Xid (it was drained for it), a degraded port and one cleared; node-c has five
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt >/dev/null <<'SQL' || fail "seeding node conditions failed"
UPDATE nodes SET state = 'drained', drain_reason = 'hardware: Xid 79 on GPU 0 (GPU-0): fallen off the bus' WHERE id = 'node-b';
INSERT INTO node_conditions (node_id, boot_id, kind, severity, gpu, gpu_uuid, port, code, evidence, first_seen, last_seen, cleared_at) VALUES
	('node-b', 'boot-b', 'port_down', 'degraded', NULL, NULL, 'mlx5_1/1', NULL, 'mlx5_1/1 is DOWN', '2026-03-01 10:00:00+00', now(), NULL),
	('node-b', 'boot-b', 'xid', 'fatal', 0, 'GPU-0', NULL, 79, 'Xid 79 on GPU 0 (GPU-0): fallen off the bus', '2026-03-01 11:00:00+00', now(), NULL),
	('node-b', 'boot-b', 'thermal_slowdown', 'degraded', 1, 'GPU-1', NULL, NULL, 'GPU 1 clocks down', '2026-03-01 09:00:00+00', now(), now()),
	('node-c', 'boot-c', 'xid', 'fatal', 0, 'GPU-0', NULL, 48, 'Xid 48 on GPU 0', '2026-03-01 09:00:00+00', now(), NULL),
	('node-c', 'boot-c', 'xid', 'fatal', 1, 'GPU-1', NULL, 48, 'Xid 48 on GPU 1', '2026-03-01 09:00:01+00', now(), NULL),
	('node-c', 'boot-c', 'ecc_dbe', 'fatal', 2, 'GPU-2', NULL, NULL, 'DBE on GPU 2', '2026-03-01 09:00:02+00', now(), NULL),
	('node-c', 'boot-c', 'port_down', 'degraded', NULL, NULL, 'mlx5_0/1', NULL, 'mlx5_0/1 is DOWN', '2026-03-01 09:00:00+00', now(), NULL),
	('node-c', 'boot-c', 'gpu_lost', 'fatal', 3, 'GPU-3', NULL, NULL, 'GPU 3 is lost', '2026-03-01 09:00:03+00', now(), NULL);
SQL
expect 0 jc nodes
out_has "^node-a  *ready  .*  *0  *-  *$JL  *[0-9]*s ago\$"
out_has "^node-b  *drained  .*  *0  *xid79!,port_down  *$JL  *[0-9]*s ago\$"
out_has '^node-c  *lost  .*  *0  *xid48!,xid48!,ecc_dbe!,+2  *-  *[0-9]*s ago$'
expect 0 jc nodes show node-b
out_has '^drain reason: *hardware: Xid 79 on GPU 0 (GPU-0): fallen off the bus$'
out_has '^conditions: *fatal xid 79 on GPU 0 (GPU-0) since 2026-03-01T11:00:00.000Z ([0-9a-z]* ago): Xid 79 on GPU 0 (GPU-0): fallen off the bus$'
out_has '^  *degraded port_down on mlx5_1/1 since 2026-03-01T10:00:00.000Z ([0-9a-z]* ago): mlx5_1/1 is DOWN$'
out_lacks 'thermal_slowdown'
expect 0 jc nodes get node-a
out_has '^conditions: *-$'
expect 0 jc -o json nodes show node-b
check '[c["kind"] for c in d["conditions"]] == ["xid", "port_down"]'
check 'd["conditions"][0] == {"kind": "xid", "severity": "fatal", "gpu": 0, "gpu_uuid": "GPU-0", "port": None, "code": 79, "evidence": "Xid 79 on GPU 0 (GPU-0): fallen off the bus", "first_seen": "2026-03-01T11:00:00.000Z", "last_seen": d["conditions"][0]["last_seen"]}'
# after the repair an admin undrains it; what the executor lists no longer drains it
expect 0 jc nodes undrain node-b
out_has '^node node-b: ready$'
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -c "UPDATE node_conditions SET cleared_at = now() WHERE cleared_at IS NULL" >/dev/null
expect 0 jc nodes
out_has "^node-b  *ready  .*  *0  *-  *$JL  *[0-9]*s ago\$"
ok "nodes: conditions, compact in the list (fatal marked !), each in show, json"

# preempt: the local spot trigger, admin only; undrain ends it
expect 0 jc nodes preempt node-a --deadline 45
out_has '^node node-a: preempting (takes no new work; its jobs checkpoint and are requeued elsewhere)$'
expect 0 jc nodes get node-a
out_has '^state: *preempting$'
out_has '^preempt deadline: *20[0-9-]*T'
out_has '^spot notice: *local POST /v1/nodes/{id}/preempt$'
[[ $(psql "$DB_URL" -qAt -c "SELECT abs(extract(epoch FROM preempt_deadline - now()) - 45) < 10 FROM nodes WHERE id = 'node-a'") == t ]] ||
	fail "nodes preempt --deadline 45 did not set the deadline 45 s ahead"
expect 0 jc -o json nodes preempt node-a
check 'd["state"] == "preempting" and d["preempt"]["notice"]["provider"] == "local"'
expect 0 jc nodes list --state preempting
[[ $(wc -l <"$W/out") -eq 2 ]] || fail "nodes --state preempting printed $(wc -l <"$W/out") lines, not 1 + 1"
JOBCTL_TOKEN=$MEMBER_A expect 5 jc nodes preempt node-a
err_has 'forbidden'
expect 4 jc nodes preempt no-such-node
err_has 'node_not_found'
expect 2 jc nodes preempt node-a --deadline 3601
err_has 'deadline'
expect 2 jc nodes preempt node-a --deadline soon
expect 2 jc nodes drain node-a --deadline 5
expect 0 jc nodes undrain node-a
out_has '^node node-a: ready$'
[[ $(psql "$DB_URL" -qAt -c "SELECT count(*) FROM audit_log WHERE action = 'node.preempt' AND object = 'node-a'") == 2 ]] ||
	fail "nodes preempt did not write one audit row per call"
ok "nodes preempt: preempting with a deadline, json, --state, admin only (5), unknown node (4), bad deadline (2)"

# a fault in its executor's register (what the scheduler writes): not_ready, and why
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -c "UPDATE nodes SET fault = 'found 7 of 8 expected GPUs; GPU 3: nvmlDeviceGetUUID: GPU is lost (error 15)', expected_gpus = 8 WHERE id = 'node-b'" >/dev/null
expect 0 jc nodes
out_has "^node-b  *not_ready  *10.0.0.2  *"
out_has "^node-a  *ready  *10.0.0.1  *"
expect 0 jc nodes get node-b
out_has '^state: *not_ready$'
out_has '^expected GPUs: *8$'
out_has '^fault: *found 7 of 8 expected GPUs; GPU 3: nvmlDeviceGetUUID: GPU is lost (error 15) (no new work until its executor registers without one)$'
expect 0 jc nodes get node-a
out_lacks '^fault:'
out_lacks '^expected GPUs:'
expect 0 jc nodes list --state not_ready
[[ $(wc -l <"$W/out") -eq 2 ]] || fail "nodes --state not_ready printed $(wc -l <"$W/out") lines, not 1 + 1"
out_has '^node-b  *not_ready'
expect 0 jc -o json nodes get node-b
check 'd["state"] == "not_ready" and d["expected_gpus"] == 8 and d["fault"].startswith("found 7 of 8")'
# an undrain is no cure: the executor must register without the fault
expect 0 jc nodes undrain node-b
out_has '^node node-b: not_ready (takes no new work until its executor registers without its fault)$'
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -c "UPDATE nodes SET fault = NULL, expected_gpus = NULL WHERE id = 'node-b'" >/dev/null
expect 0 jc nodes get node-b
out_has '^state: *ready$'
out_lacks '^fault:'
ok "nodes: a node with a fault is not_ready, get shows the fault and the expected GPUs"

kill "$LOGSRV_PID" 2>/dev/null || true
wait "$LOGSRV_PID" 2>/dev/null || true
LOGSRV_PID=

# ---- queue, quota and a pending job's place ---------------------------------------
# No scheduler here either: what it publishes each cycle (the jobs' queue
# columns, team_usage) is written with psql. The queue starts empty.

psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -c \
	"UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE state = 'pending'" \
	>/dev/null || fail "emptying the queue failed"
QA1=$(submit --team team-a --name qa-one --nodes 2 --gpus-per-node 4 --priority-class high -- true)
QB1=$(submit --team team-b --name qb-secret --gpus-per-node 2 -- true)
QA2=$(submit --team team-a --name qa-two -- true)
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -v a1="$QA1" -v b1="$QB1" >/dev/null <<'SQL' ||
UPDATE jobs SET queue_position = 1, pending_reason = 'preempting job 4242 of team-a'
	WHERE id = :b1;
UPDATE jobs SET queue_position = 2, pending_reason = 'waiting for 2 x 4 GPUs in one block',
	reserved_until = now() + interval '1 hour', estimated_start = '2031-01-02T14:02:00Z',
	estimate_basis = jsonb_build_object('kind', 'estimated', 'waits_for',
		jsonb_build_array(:b1), 'waits_for_count', 1, 'runtime_source', 'history')
	WHERE id = :a1;
UPDATE jobs SET estimate_basis = '{"kind": "never"}' WHERE id = :b1;
INSERT INTO team_usage (team_id, fair_share, decayed_gpu_seconds, gpus_in_use, gpus_borrowed,
			gpus_lent, pending_jobs)
	SELECT id, 0.71, 5400, 8, 2, 0, 2 FROM teams WHERE name = 'team-a';
INSERT INTO team_usage (team_id, fair_share, decayed_gpu_seconds, gpus_in_use, gpus_borrowed,
			gpus_lent, pending_jobs)
	SELECT id, 0.25, 90000, 0, 0, 3, 1 FROM teams WHERE name = 'team-b';
SQL
	fail "seeding the queue failed"

expect 0 jc queue
[[ $(wc -l <"$W/out") -eq 4 ]] || fail "queue printed $(wc -l <"$W/out") lines, not 1 + 3"
out_has '^POS  *JOB  *TEAM  *CLASS  *GPUS  *AGE  *FAIR-SHARE  *ESTIMATED START  *REASON$'
out_has "^1  *$QB1  *team-b  *normal  *2 (1x2)  *[0-9]*[smhd]  *0.25  *never  *preempting job 4242 of team-a\$"
out_has "^2  *$QA1  *team-a  *high  *8 (2x4)  *[0-9]*[smhd]  *0.71  *2031-01-02 14:02 UTC  *waiting for 2 x 4 GPUs in one block\$"
out_has "^-  *$QA2  *team-a  *normal  *0 (1x0)  *[0-9]*[smhd]  *0.71  *-  *not yet considered by the scheduler\$"
expect 0 jc -o json queue
check '[e["job"] for e in d["items"]] == ['"$QB1, $QA1, $QA2"'] and d["next_cursor"] is None'
check '[e["position"] for e in d["items"]] == [1, 2, None]'
check 'd["items"][1]["name"] == "qa-one" and d["items"][1]["gpus"] == 8 and d["items"][1]["reserved_until"] is not None'
expect 0 jc -o json queue --limit 1
check 'len(d["items"]) == 1 and isinstance(d["next_cursor"], str)'
expect 0 jc queue --limit 2
[[ $(wc -l <"$W/out") -eq 3 ]] || fail "queue --limit 2 printed $(wc -l <"$W/out") lines, not 1 + 2"
err_has 'more entries'
expect 0 jc -o json queue --limit 1 --all
check '[e["job"] for e in d["items"]] == ['"$QB1, $QA1, $QA2"'] and d["next_cursor"] is None'
expect 0 jc -o json queue --team team-a
check '[(e["position"], e["job"]) for e in d["items"]] == [(2, '"$QA1"'), (None, '"$QA2"')]'
expect 0 jc -o json queue --team no-such-team
check 'd["items"] == []'
expect 0 jc status "$QA1"
out_has "^estimated start:  *2031-01-02 14:02 UTC (after job $QB1 ends; runtimes from history)\$"
expect 0 jc status "$QB1"
out_has '^estimated start:  *never: it fits no registered node (see the reason)$'
expect 0 jc status "$QA2"
out_has '^estimated start:  *not estimated yet$'
ok "queue: order, table, --limit, --all, --team, json"

for tok in "$MEMBER_A" "$VIEWER_A"; do
	JOBCTL_TOKEN=$tok expect 0 jc queue
	out_has '^1  *-  *team-b  *normal  *2 (1x2)  *[0-9]*[smhd]  *0.25  *never  *-$'
	out_has "^2  *$QA1  *team-a  *high .*waiting for 2 x 4 GPUs in one block\$"
	grep -q 'qb-secret\|4242' "$W/out" && fail "a team-a token sees what team-b's job is"
	JOBCTL_TOKEN=$tok expect 0 jc status "$QA1"
	out_has '^estimated start:  *2031-01-02 14:02 UTC (after job (another team.s) ends; runtimes from history)$'
	JOBCTL_TOKEN=$tok expect 0 jc -o json queue --all
	check 'd["items"][0]["job"] is None and d["items"][0]["name"] is None and d["items"][0]["reason"] is None'
	check 'd["items"][1]["job"] == '"$QA1"' and d["items"][1]["name"] == "qa-one"'
	grep -q 'qb-secret\|4242' "$W/out" && fail "a team-a token sees what team-b's job is"
done
JOBCTL_TOKEN=$MEMBER_B expect 0 jc -o json queue
check 'd["items"][0]["job"] == '"$QB1"' and d["items"][1]["job"] is None'
ok "queue: other teams' jobs without id, name or reason"

expect 0 jc status "$QA1"
out_has '^state: *pending$'
out_has '^reason: *waiting for 2 x 4 GPUs in one block$'
out_has '^queue position: *2$'
out_has '^reserved from: *20[0-9-]*T[0-9:.]*Z$'
expect 0 jc status "$QA2"
out_has '^reason: *not yet considered by the scheduler$'
out_has '^queue position: *- (not placed yet)$'
grep -q '^reserved from:' "$W/out" && fail "status shows a reservation the job does not have"
expect 0 jc -o json status "$QA1"
check 'd["queue_position"] == 2 and d["pending_reason"] == "waiting for 2 x 4 GPUs in one block"'
check 'd["reserved_until"] is not None and d["preemptions"] == 0'
expect 0 jc status "$JL"
grep -q '^queue position:\|^reason:' "$W/out" && fail "status of a running job shows queue fields"
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -c "UPDATE jobs SET preemptions = 2 WHERE id = $QA1" \
	>/dev/null || fail "setting preemptions failed"
expect 0 jc status "$QA1"
out_has '^preemptions: *2$'
ok "status of a pending job: reason, queue position, reservation, preemptions"

expect 0 jc quota team-a
out_has '^team: *team-a$'
out_has '^nominal GPUs: *16$'
out_has '^borrowing limit: *32$'
out_has '^lending limit: *4$'
out_has '^cohort: *none$'
out_has '^weight: *2.5$'
out_has '^GPUs in use: *8$'
out_has '^borrowed: *2$'
out_has '^lent: *0$'
out_has '^pending jobs: *2$'
out_has '^fair share: *0.71$'
out_has '^decayed GPU-hours: *1.5$'
out_has '^as of: *20[0-9-]*T.* ago)$'
expect 0 jc quota team-c
out_has '^borrowing limit: *none$'
out_has '^fair share: *1$'
out_has '^decayed GPU-hours: *0.0$'
out_has '^as of: *- (the scheduler has not published it yet)$'
expect 0 jc quota
[[ $(wc -l <"$W/out") -eq 4 ]] || fail "quota printed $(wc -l <"$W/out") lines, not 1 + 3"
out_has '^TEAM  *NOMINAL  *BORROW-LIMIT  *LEND-LIMIT  *COHORT  *WEIGHT  *IN-USE  *BORROWED  *LENT  *PENDING  *FAIR-SHARE  *GPU-HOURS$'
out_has '^team-a  *16  *32  *4  *none  *2.5  *8  *2  *0  *2  *0.71  *1.5$'
out_has '^team-b  *8  *none  *none  *none  *2  *0  *0  *3  *1  *0.25  *25.0$'
out_has '^team-c  *64  *none  *none  *none  *1  *0  *0  *0  *0  *1  *0.0$'
expect 0 jc -o json quota
check '[t["name"] for t in d["items"]] == ["team-a", "team-b", "team-c"]'
check 'd["items"][1]["usage"] == {"gpus_in_use": 0, "gpus_borrowed": 0, "gpus_lent": 3, "cpus_in_use": 0, "memory_mb_in_use": 0, "pending_jobs": 1, "decayed_gpu_hours": 25, "fair_share": 0.25, "updated_at": d["items"][1]["usage"]["updated_at"]}'
check 'd["items"][2]["usage"]["updated_at"] is None and d["items"][2]["usage"]["fair_share"] == 1'
expect 0 jc -o json quota team-b
check 'd["name"] == "team-b" and d["usage"]["fair_share"] == 0.25'
expect 0 jc -o json teams get team-a
check 'd["usage"]["gpus_in_use"] == 8 and d["usage"]["decayed_gpu_hours"] == 1.5'
JOBCTL_TOKEN=$MEMBER_A expect 0 jc -o json quota
check '[t["name"] for t in d["items"]] == ["team-a"]'
JOBCTL_TOKEN=$VIEWER_A expect 0 jc quota team-a
out_has '^fair share: *0.71$'
JOBCTL_TOKEN=$MEMBER_A expect 4 jc quota team-b
err_has 'team_not_found'
expect 4 jc quota no-such-team
err_has 'team_not_found'
ok "quota: one team, every team, json; others' teams exit 4"

# ---- usage: the ledger per team, job, pool and day ---------------------------------
# No scheduler: ledger rows are written with psql. team-a: 2 spot GPUs for an
# hour on 2025-01-01 (failed, the last half hour lost, 2.5 per GPU-hour) and
# 4 on-demand GPUs over midnight (succeeded, 4 per GPU-hour); team-b: 8 GPUs
# for an hour. 30 min of team-a's on-demand attempt had all 4 GPUs idle.

psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt >/dev/null <<'SQL' ||
INSERT INTO usage_ledger (team_id, job_id, attempt, node_id, pool, gpu_model, gpus, started_at,
			  ended_at, outcome, gpu_seconds, lost_gpu_seconds, rate_per_gpu_hour, cost,
			  idle_gpu_seconds)
SELECT t.id, v.job, v.attempt, v.node, v.pool, 'H100', v.gpus, v.s, v.e, v.outcome,
	v.gpus * extract(epoch FROM v.e - v.s), v.lost, v.rate,
	v.gpus * extract(epoch FROM v.e - v.s) / 3600 * v.rate, v.idle
FROM (VALUES
	('team-a', 9001, 1, 'n1', 'spot', 2, timestamptz '2025-01-01T00:00:00Z',
	 timestamptz '2025-01-01T01:00:00Z', 'failed', 3600.0, 2.5, NULL::float8),
	('team-a', 9001, 2, 'n2', 'on-demand, reserved', 4, '2025-01-01T23:00:00Z',
	 '2025-01-02T01:00:00Z', 'succeeded', 0, 4, 7200),
	('team-b', 9002, 1, 'n3', 'spot', 8, '2025-01-01T00:00:00Z', '2025-01-01T01:00:00Z',
	 'succeeded', 0, 1, 0))
	AS v(team, job, attempt, node, pool, gpus, s, e, outcome, lost, rate, idle)
JOIN teams t ON t.name = v.team;
SQL
	fail "seeding the ledger failed"
R=(--from 2025-01-01T00:00:00Z --to 2025-01-03T00:00:00Z)

expect 0 jc usage "${R[@]}"
out_has '^2025-01-01T00:00:00.000Z .. 2025-01-03T00:00:00.000Z$'
out_has '^TEAM  *GPU-HOURS  *IDLE-GPU-HOURS  *COST  *LOST-GPU-HOURS  *ATTEMPTS  *RUNNING'
out_has '^team-a  *10.00  *2.00  *37.00  *1.00  *2  *0$'
out_has '^team-b  *8.00  *0.00  *8.00  *0.00  *1  *0$'
out_has '^TOTAL  *18.00  *2.00  *45.00  *1.00  *3  *0$'
expect 0 jc usage "${R[@]}" --team team-a --group-by day
out_has '^DAY '
out_has '^2025-01-01  *6.00  *1.00  *21.00  *1.00  *2  *0$'
out_has '^2025-01-02  *4.00  *1.00  *16.00  *0.00  *1  *0$'
expect 0 jc usage "${R[@]}" --group-by job --team team-a
out_has '^JOB  *TEAM  *GPU-HOURS  *IDLE-GPU-HOURS'
out_has '^9001  *team-a  *10.00  *2.00  *37.00  *1.00  *2  *0$'
expect 0 jc -o json usage "${R[@]}" --group-by pool
check 'd["group_by"] == "pool" and [i["pool"] for i in d["items"]] == ["on-demand, reserved", "spot"]'
check 'd["items"][1]["gpu_seconds"] == 36000 and d["items"][1]["lost_gpu_seconds"] == 3600'
check 'd["items"][0]["idle_gpu_seconds"] == 7200 and d["items"][0]["idle_gpu_hours"] == 2'
check 'd["totals"]["cost"] == 45 and d["totals"]["attempts"] == 3'
expect 0 jc -o csv usage "${R[@]}" --group-by pool
[[ $(head -n 1 "$W/out") == "pool,gpu_seconds,gpu_hours,cost,lost_gpu_seconds,attempts,running_attempts,idle_gpu_seconds" ]] ||
	fail "csv header is '$(head -n 1 "$W/out")'"
out_has '^"on-demand, reserved",28800.000000,8.000000,32.000000,0.000000,1,0,7200.000000$'
out_has '^spot,36000.000000,10.000000,13.000000,3600.000000,2,0,0.000000$'
[[ $(wc -l <"$W/out") -eq 3 ]] || fail "csv printed $(wc -l <"$W/out") lines, not 1 + 2"
ok "usage: per team, day, job and pool, idle GPU-hours; table, json and csv"

JOBCTL_TOKEN=$MEMBER_A expect 0 jc -o json usage "${R[@]}"
check '[i["team"] for i in d["items"]] == ["team-a"]'
JOBCTL_TOKEN=$VIEWER_A expect 0 jc -o json usage "${R[@]}" --team team-a
check 'd["totals"]["gpu_hours"] == 10'
JOBCTL_TOKEN=$MEMBER_A expect 5 jc usage --team team-b
err_has 'forbidden'
expect 4 jc usage --team no-such-team
err_has 'team_not_found'
expect 6 jc usage --from yesterday
err_has "'from' must be an RFC 3339 time"
expect 6 jc usage --from 2025-01-02T00:00:00Z --to 2025-01-01T00:00:00Z
err_has 'invalid_parameter'
expect 2 jc usage --group-by week
err_has 'group-by must be team, job, pool or day'
expect 2 jc usage extra
expect 2 jc -o yaml usage
err_has "'json', 'text' or 'csv'"
ok "usage: members see their team only; bad teams, times and groups"

# ---- usage --goodput and the job's goodput ------------------------------------------
# One ledger row as the scheduler writes it, for job J1 of team-a: 2 spot GPUs
# for an hour at 2.5, preempted; 1 GPU-hour useful, 0.2 writing checkpoints,
# 0.8 lost to the preemption, 0.1 GPU-hours queued. The rows above, written
# without categories (as an older scheduler would), are not in the split.
psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt -v job="$J1" >/dev/null <<'SQL' ||
INSERT INTO usage_ledger (team_id, job_id, attempt, node_id, pool, gpu_model, gpus, started_at,
			  ended_at, outcome, failure_class, gpu_seconds, lost_gpu_seconds,
			  rate_per_gpu_hour, cost, gpu_ms, useful_gpu_ms, checkpoint_gpu_ms, idle_gpu_ms,
			  lost_preemption_gpu_ms, lost_user_gpu_ms, lost_infra_gpu_ms, hang_gpu_ms,
			  queue_wait_gpu_ms)
SELECT t.id, :job, 1, 'n1', 'spot', 'H100', 2, '2025-01-02T03:00:00Z', '2025-01-02T04:00:00Z',
	'failed', 'preempted', 7200, 2880, 2.5, 5, 7200000, 3600000, 720000, 0, 2880000, 0, 0, 0,
	360000
FROM teams t WHERE t.name = 'team-a';
SQL
	fail "seeding the goodput row failed"
expect 0 jc usage "${R[@]}" --goodput
out_has '^2025-01-01T00:00:00.000Z .. 2025-01-03T00:00:00.000Z (GPU-hours)$'
out_has '^TEAM  *POOL  *GPU-HOURS  *USEFUL  *CHECKPOINT  *IDLE  *LOST-PREEMPTION  *LOST-USER  *LOST-INFRA  *HANG  *STRAGGLER  *QUEUE-WAIT  *COST$'
out_has '^team-a  *spot  *2.00  *1.00  *0.20  *0.00  *0.80  *0.00  *0.00  *0.00  *0.00  *0.10  *5.00$'
out_has '^TOTAL  *2.00  *1.00  *0.20  *0.00  *0.80  *0.00  *0.00  *0.00  *0.00  *0.10  *5.00$'
expect 0 jc -o json usage "${R[@]}" --goodput --team team-a
check 'd["split"] == "goodput" and d["items"][0]["lost_preemption_gpu_hours"] == 0.8'
check 'd["totals"]["useful_cost"] == 2.5 and d["totals"]["attempts"] == 1'
expect 0 jc -o csv usage "${R[@]}" --goodput
[[ $(head -n 1 "$W/out" | tr -d '\r') == "team,pool,gpu_hours,cost,useful_gpu_hours,useful_cost,checkpoint_gpu_hours,checkpoint_cost,idle_gpu_hours,idle_cost,lost_preemption_gpu_hours,lost_preemption_cost,lost_user_gpu_hours,lost_user_cost,lost_infra_gpu_hours,lost_infra_cost,hang_gpu_hours,hang_cost,straggler_gpu_hours,straggler_cost,queue_wait_gpu_hours,attempts" ]] ||
	fail "goodput csv header is '$(head -n 1 "$W/out")'"
out_has '^team-a,spot,2.000000,5.000000,1.000000,2.500000,0.200000,0.500000,0.000000,0.000000,0.800000,2.000000,0.000000,0.000000,0.000000,0.000000,0.000000,0.000000,0.000000,0.000000,0.100000,1'
[[ $(wc -l <"$W/out") -eq 2 ]] || fail "goodput csv printed $(wc -l <"$W/out") lines, not 1 + 1"
expect 2 jc usage --goodput --group-by job
err_has 'leave --group-by out'
expect 0 jc status "$J1"
out_has '^goodput: *50.0% (useful 1800 s of 3600 s since the first start)$'
expect 0 jc -o json status "$J1"
check 'd["goodput"]["ratio"] == 0.5 and d["goodput"]["gpu_seconds"]["lost_preemption"] == 2880'
ok "usage --goodput: table, json and csv; the job's goodput in status"

# ---- unreachable and unresponsive servers ----------------------------------------

expect 7 jc --server http://127.0.0.1:1 --token secret-in-flag list
err_has 'cannot reach http://127.0.0.1:1'
err_lacks 'secret-in-flag'
err_lacks "$ADMIN"
expect 7 jc list --server http://127.0.0.1:1
expect 7 jc --server http://127.0.0.1:1 watch 1
# a server that accepts connections but never answers
"$PY" -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
time.sleep(120)' "$W/hang.port" &
HANG_PID=$!
for _ in $(seq 50); do [[ -s $W/hang.port ]] && break; sleep 0.1; done
start=$SECONDS
expect 7 jc --server "http://127.0.0.1:$(<"$W/hang.port")" --timeout 2 list
((SECONDS - start <= 10)) || fail "a 2 s timeout took $((SECONDS - start)) s"
err_has 'no answer'
kill "$HANG_PID" 2>/dev/null || true
wait "$HANG_PID" 2>/dev/null || true
HANG_PID=
ok "unreachable or hung server exits 7, the token never printed"

# ---- settings: flag > environment > config file ----------------------------------

CONF=$HOME/.config/jobctl/config
mkdir -p "$(dirname "$CONF")"
printf '# written by jobctl_test\nserver = %s\ntoken = %s\n' "$URL" "$VIEWER_A" >"$CONF"
unset JOBCTL_SERVER JOBCTL_TOKEN
expect 0 jc -o json teams
check '[t["name"] for t in d["items"]] == ["team-a"]'
expect 5 jc submit --team team-a -- true
JOBCTL_TOKEN=$ADMIN expect 0 jc -o json teams
check 'len(d["items"]) == 3'
JOBCTL_TOKEN=$ADMIN expect 5 jc --token "$VIEWER_A" teams create team-y --nominal-gpus 1
JOBCTL_SERVER=http://127.0.0.1:1 expect 7 jc teams
JOBCTL_SERVER=http://127.0.0.1:1 expect 0 jc --server "$URL" teams
ok "settings: config file, then environment, then flags win"

export XDG_CONFIG_HOME=$W/xdg
mkdir -p "$XDG_CONFIG_HOME/jobctl"
printf 'server = http://127.0.0.1:1\n' >"$XDG_CONFIG_HOME/jobctl/config"
expect 7 jc teams
printf 'server = %s\ntoken = %s\ntimeout = 5\n' "$URL" "$ADMIN" >"$XDG_CONFIG_HOME/jobctl/config"
expect 0 jc -o json teams
check 'len(d["items"]) == 3'
printf 'server = %s\nbogus = 1\n' "$URL" >"$W/other.conf"
JOBCTL_CONFIG=$W/other.conf expect 2 jc teams
err_has 'bogus'
printf 'server = %s\ntoken = %s\n' "$URL" "$MEMBER_B" >"$W/other.conf"
JOBCTL_CONFIG=$W/other.conf expect 0 jc -o json teams
check '[t["name"] for t in d["items"]] == ["team-b"]'
JOBCTL_CONFIG=$W/missing.conf expect 2 jc teams
unset XDG_CONFIG_HOME
ok "settings: XDG_CONFIG_HOME and JOBCTL_CONFIG name the file"

# ---- HTTPS: --cacert, JOBCTL_CACERT and 'cacert =' verify the server -------------

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1,DNS:localhost \
	-keyout "$W/tls.key" -out "$W/tls.crt" >/dev/null 2>&1 || fail "openssl req failed"
rm -f "$W/tls.port"
"$TY_API_BIN" --database-url "$DB_URL" --listen-addr 127.0.0.1 --port 0 \
	--port-file "$W/tls.port" --tls-cert "$W/tls.crt" --tls-key "$W/tls.key" \
	--log-key "$W/log-key.pem" >>"$W/api-tls.log" 2>&1 &
TLS_PID=$!
for _ in $(seq 300); do
	[[ -s $W/tls.port ]] && break
	kill -0 "$TLS_PID" 2>/dev/null || fail "trainyard-api with TLS exited at start (see $W/api-tls.log)"
	sleep 0.1
done
TLS_URL=https://127.0.0.1:$(<"$W/tls.port")
expect 0 jc -o json --server "$TLS_URL" --token "$ADMIN" --cacert "$W/tls.crt" teams
check '"team-a" in [t["name"] for t in d["items"]]'
JOBCTL_CACERT=$W/tls.crt expect 0 jc -o json --server "$TLS_URL" --token "$ADMIN" teams
check '"team-a" in [t["name"] for t in d["items"]]'
expect 7 jc --server "$TLS_URL" --token "$ADMIN" teams
err_has 'cannot verify'
err_has 'cacert'
expect 2 jc --server "$TLS_URL" --cacert "$W/no-such.crt" teams
err_has "cannot read the CA file '$W/no-such.crt'"
printf 'server = %s\ntoken = %s\ncacert = %s\n' "$TLS_URL" "$ADMIN" "$W/tls.crt" >"$W/tls.conf"
expect 0 env -u JOBCTL_SERVER -u JOBCTL_TOKEN JOBCTL_CONFIG="$W/tls.conf" "$TY_JOBCTL_BIN" -o json teams
check '"team-a" in [t["name"] for t in d["items"]]'
kill -TERM "$TLS_PID"
wait "$TLS_PID" || fail "trainyard-api with TLS did not stop cleanly"
TLS_PID=
ok "https: --cacert, JOBCTL_CACERT and the config file's cacert verify the server"

# ---- a server that goes away for good: the watch gives up after about 30 s ----

export JOBCTL_SERVER=$URL JOBCTL_TOKEN=$ADMIN
JG=$(submit --team team-a --name abandoned -- sleep 100)
timeout 90 "$TY_JOBCTL_BIN" watch "$JG" >"$W/watch.out" 2>"$W/watch.err" &
WPID=$!
sleep 1
stop_api
start=$SECONDS
wrc=0
wait "$WPID" || wrc=$?
cp "$W/watch.out" "$W/out"
cp "$W/watch.err" "$W/err"
[[ $wrc -eq 7 ]] || fail "watch of a server gone for good exited $wrc, not 7"
((SECONDS - start >= 20 && SECONDS - start <= 60)) ||
	fail "watch gave up after $((SECONDS - start)) s, not about 30 s"
err_has 'retrying'
ok "watch gives up with exit 7 when the server stays away"
