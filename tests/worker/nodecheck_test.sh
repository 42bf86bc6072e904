#!/usr/bin/env bash
# trainyard-allreduce --node-check as real processes on loopback "nodes"
# (127.0.0.2, 127.0.0.3, ...): the verdict JSON of rank 0, every rank's exit
# status and message, a slow node made with the TY_ALLREDUCE_THROTTLE_BPS
# seam (a node leader that moves at most that many bytes per second, both
# ways), and the failures that must end the check instead of hanging.
#
# Loopback bandwidth on a shared machine varies by 2x and more between two
# measurements, so the cases without a slow node pass --slow-ratio 0.1; a
# throttled node is 100x and more below any loopback pair.
#
# Needs TY_ALLREDUCE_BIN. TY_TEST_KEEP=1 keeps the work directory.
set -euo pipefail

if [[ -z ${TY_ALLREDUCE_BIN:-} ]]; then
	echo "nodecheck_test: TY_ALLREDUCE_BIN is not set; run the tests with tests/run" >&2
	exit 1
fi
BIN=$TY_ALLREDUCE_BIN
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tw_init nodecheck_test

NAMES=(node-a node-b node-c node-d)

# start NAME WORLD PER_NODE -- ARGS...: start every rank of a WORLD-rank job,
# PER_NODE ranks per loopback node 127.0.0.(2 + node), node k named
# ${NAMES[k]}, with NODE_RANK and NNODES like the executor sets them. Extra
# environment per rank: EXTRA_ENV_<rank>. The node leader of node $SLOW (if
# set) is throttled to $THROTTLE bytes/s. Every rank runs under `timeout 120`.
start() {
	local name=$1 world=$2 per=$3 port r node extra

	shift 4
	CASE=$name
	mkdir -p "$W/$name"
	port=$(free_port)
	PIDS=()
	for ((r = 0; r < world; r++)); do
		node=$((r / per))
		extra="EXTRA_ENV_$r"
		extra=${!extra:-}
		if [[ -n ${SLOW:-} && $node -eq $SLOW && $((r % per)) -eq 0 ]]; then
			extra+=" TY_ALLREDUCE_THROTTLE_BPS=$THROTTLE"
		fi
		# shellcheck disable=SC2086 # $extra is a list of NAME=value words
		env -i PATH="$PATH" RANK="$r" WORLD_SIZE="$world" LOCAL_RANK=$((r % per)) \
			LOCAL_WORLD_SIZE="$per" NODE_RANK="$node" NNODES=$((world / per)) \
			TRAINYARD_NODE_ID="${NAMES[$node]}" MASTER_ADDR=127.0.0.2 MASTER_PORT="$port" \
			${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} $extra \
			timeout 120 "$BIN" --listen-addr "127.0.0.$((2 + node))" --backend tcp \
			--bytes 64K --timeout 20 "$@" \
			>"$W/$name/rank-$r.out" 2>"$W/$name/rank-$r.err" &
		PIDS+=("$!")
	done
}

# wait for the ranks start launched; record their exit status
finish() {
	local r

	for ((r = 0; r < ${#PIDS[@]}; r++)); do
		set +e
		wait "${PIDS[$r]}"
		echo $? >"$W/$CASE/rank-$r.rc"
		set -e
	done
}

gang() {
	start "$@"
	finish
}

rc_of() { cat "$W/$CASE/rank-$1.rc"; }

# verdict WANT_JSON: rank 0's second stdout line is the node_check verdict;
# WANT_JSON (a Python dict literal) lists exact fields: "nodes" as names,
# "slow", "ratio", "note", "npairs", "bytes". Every gbps of a node and a
# pair is a positive number (null for nodes when nothing was measured).
verdict() {
	python3 - "$W/$CASE/rank-0.out" "$1" <<'PY' || fail "rank 0 verdict JSON"
import ast, json, sys
lines = open(sys.argv[1]).read().splitlines()
want = ast.literal_eval(sys.argv[2])
assert len(lines) == 2, f"expected the all-reduce line and the verdict, got {lines}"
assert json.loads(lines[0])["ok"] is True, lines[0]
j = json.loads(lines[1])
assert list(j) == ["node_check"], list(j)
v = j["node_check"]
assert [n["node"] for n in v["nodes"]] == want["nodes"], v["nodes"]
assert [n["node_rank"] for n in v["nodes"]] == list(range(len(want["nodes"]))), v["nodes"]
assert v["slow"] == want["slow"], f'slow {v["slow"]} != {want["slow"]}'
assert v["ratio"] == want["ratio"], v["ratio"]
assert v["note"] == want["note"], v["note"]
assert v["bytes"] == want["bytes"], v["bytes"]
assert len(v["pairs"]) == want["npairs"], v["pairs"]
# what it measured: the pairs over TCP, after the gang's all-reduce (TCP here)
assert v["measured"] == "tcp", v["measured"]
assert v["allreduce"]["backend"] == "tcp", v["allreduce"]
assert isinstance(v["allreduce"]["busbw_gbps"], (int, float)) and v["allreduce"]["busbw_gbps"] >= 0, v["allreduce"]
measured = want["npairs"] > 0
for n in v["nodes"]:
    if measured:
        assert isinstance(n["gbps"], float) and n["gbps"] > 0, n
    else:
        assert n["gbps"] is None, n
for p in v["pairs"]:
    assert isinstance(p["gbps"], float) and p["gbps"] > 0, p
    a, b = p["nodes"]
    assert 0 <= a < b < len(v["nodes"]), p
    # a node's score is its best pair
    for k in (a, b):
        assert v["nodes"][k]["gbps"] >= p["gbps"], (k, p)
if measured:
    scores = sorted(n["gbps"] for n in v["nodes"])
    m = len(scores)
    med = scores[m // 2] if m % 2 else (scores[m // 2 - 1] + scores[m // 2]) / 2
    assert abs(v["median_gbps"] - med) <= 1e-5, (v["median_gbps"], med)
    slow = [n["node"] for n in v["nodes"] if m >= 3 and n["gbps"] < v["ratio"] * v["median_gbps"]]
    assert slow == v["slow"], (slow, v["slow"])
else:
    assert v["median_gbps"] is None, v
PY
	ok
}

# all_ok WORLD: every rank exited 0 with an empty stderr; ranks but 0
# printed only their all-reduce line
all_ok() {
	local r

	for ((r = 0; r < $1; r++)); do
		[[ $(rc_of $r) -eq 0 ]] || fail "rank $r exited $(rc_of $r)"
		[[ ! -s $W/$CASE/rank-$r.err ]] || fail "rank $r wrote to stderr"
		if [[ $r -gt 0 ]]; then
			[[ $(wc -l <"$W/$CASE/rank-$r.out") -eq 1 ]] || fail "rank $r: not one line"
		fi
		ok
	done
}

# all_slow WORLD TEXT [RATIO]: every rank exited 5 with one stderr line
# "trainyard-allreduce: rank R: slow node(s): TEXT, gang median X GB/s (< RATIO x median)"
all_slow() {
	local r

	for ((r = 0; r < $1; r++)); do
		[[ $(rc_of $r) -eq 5 ]] || fail "rank $r exited $(rc_of $r), expected 5"
		grep -qE "^trainyard-allreduce: rank $r: slow node\\(s\\): $2, gang median [0-9.e+-]+ GB/s \\(< ${3:-0.5} x median\\)\$" \
			"$W/$CASE/rank-$r.err" || fail "rank $r: no slow-node message for '$2'"
		[[ $(wc -l <"$W/$CASE/rank-$r.err") -eq 1 ]] || fail "rank $r: stderr is not one line"
		ok
	done
}

# check_err RANK RC TEXT: the rank exited RC and its stderr holds TEXT
check_err() {
	[[ $(rc_of "$1") -eq $2 ]] || fail "rank $1 exited $(rc_of "$1"), expected $2"
	grep -qF -- "$3" "$W/$CASE/rank-$1.err" || fail "rank $1 stderr lacks '$3'"
	ok
}

NOTE3="3 nodes, 3 pairs measured one at a time; a node's score is its best pair"
NOTE4="4 nodes, 6 pairs measured one at a time; a node's score is its best pair"

# ---- healthy gangs -----------------------------------------------------------

gang three_nodes 3 1 -- --node-check --node-check-bytes 1M --slow-ratio 0.1
all_ok 3
verdict "{'nodes': ['node-a', 'node-b', 'node-c'], 'slow': [], 'ratio': 0.1, 'note': \"$NOTE3\", 'npairs': 3, 'bytes': 1048576}"

gang three_nodes_two_ranks 6 2 -- --node-check --node-check-bytes 1M --slow-ratio 0.1
all_ok 6
verdict "{'nodes': ['node-a', 'node-b', 'node-c'], 'slow': [], 'ratio': 0.1, 'note': \"$NOTE3\", 'npairs': 3, 'bytes': 1048576}"

gang four_nodes_two_ranks 8 2 -- --node-check --node-check-bytes 1M --slow-ratio 0.1
all_ok 8
verdict "{'nodes': ['node-a', 'node-b', 'node-c', 'node-d'], 'slow': [], 'ratio': 0.1, 'note': \"$NOTE4\", 'npairs': 6, 'bytes': 1048576}"

# two nodes: measured, but a slow pair cannot say which end is slow
gang two_nodes 4 2 -- --node-check --node-check-bytes 256K
all_ok 4
verdict "{'nodes': ['node-a', 'node-b'], 'slow': [], 'ratio': 0.5, 'note': '2 nodes: a slow link cannot be attributed', 'npairs': 1, 'bytes': 262144}"

# a throttled node among two is not blamed either
SLOW=1 THROTTLE=1M gang two_nodes_one_throttled 2 1 -- --node-check --node-check-bytes 128K \
	--node-check-rounds 1
all_ok 2
verdict "{'nodes': ['node-a', 'node-b'], 'slow': [], 'ratio': 0.5, 'note': '2 nodes: a slow link cannot be attributed', 'npairs': 1, 'bytes': 131072}"

gang one_node_two_ranks 2 2 -- --node-check
all_ok 2
verdict "{'nodes': ['node-a'], 'slow': [], 'ratio': 0.5, 'note': '1 node: nothing to measure', 'npairs': 0, 'bytes': 8388608}"

gang world_one 1 1 -- --node-check --node-check-bytes 4K
all_ok 1
verdict "{'nodes': ['node-a'], 'slow': [], 'ratio': 0.5, 'note': '1 node: nothing to measure', 'npairs': 0, 'bytes': 4096}"

# without TRAINYARD_NODE_ID a node is node-<NODE_RANK>
CASE=default_names
mkdir -p "$W/$CASE"
port=$(free_port)
PIDS=()
for r in 0 1 2; do
	env -i PATH="$PATH" RANK=$r WORLD_SIZE=3 NODE_RANK=$r NNODES=3 MASTER_ADDR=127.0.0.2 \
		MASTER_PORT="$port" ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} \
		timeout 120 "$BIN" --listen-addr "127.0.0.$((2 + r))" --bytes 64K --timeout 20 \
		--node-check --node-check-bytes 64K --slow-ratio 0.1 \
		>"$W/$CASE/rank-$r.out" 2>"$W/$CASE/rank-$r.err" &
	PIDS+=("$!")
done
finish
all_ok 3
verdict "{'nodes': ['node-0', 'node-1', 'node-2'], 'slow': [], 'ratio': 0.1, 'note': \"$NOTE3\", 'npairs': 3, 'bytes': 65536}"

# ---- a slow node is named, by every rank, exit 5 ------------------------------

SLOW=1 THROTTLE=1M gang slow_node_of_three 3 1 -- --node-check --node-check-bytes 128K \
	--node-check-rounds 1
all_slow 3 "node-b [0-9.e-]+ GB/s"
verdict "{'nodes': ['node-a', 'node-b', 'node-c'], 'slow': ['node-b'], 'ratio': 0.5, 'note': \"$NOTE3\", 'npairs': 3, 'bytes': 131072}"

# rank 0's own node is the slow one
SLOW=0 THROTTLE=1M gang slow_master_node 3 1 -- --node-check --node-check-bytes 128K \
	--node-check-rounds 1
all_slow 3 "node-a [0-9.e-]+ GB/s"
verdict "{'nodes': ['node-a', 'node-b', 'node-c'], 'slow': ['node-a'], 'ratio': 0.5, 'note': \"$NOTE3\", 'npairs': 3, 'bytes': 131072}"

# with 4 nodes the median is the mean of two healthy scores, which vary by
# 2x and more on loopback here: ratio 0.1, still far above 1 MB/s
SLOW=2 THROTTLE=1M gang slow_node_of_four 8 2 -- --node-check --node-check-bytes 128K \
	--node-check-rounds 2 --slow-ratio 0.1
all_slow 8 "node-c [0-9.e-]+ GB/s" 0.1
verdict "{'nodes': ['node-a', 'node-b', 'node-c', 'node-d'], 'slow': ['node-c'], 'ratio': 0.1, 'note': \"$NOTE4\", 'npairs': 6, 'bytes': 131072}"

# ---- no check after a wrong sum ----------------------------------------------

gang wrong_sum 3 1 -- --node-check --poison-index 3
for r in 0 1 2; do
	check_err $r 4 "rank $r: element 3 is"
	[[ $(wc -l <"$W/$CASE/rank-$r.out") -eq 1 ]] || fail "rank $r printed more than the all-reduce line"
	ok
done

# ---- a layout rank 0 cannot judge: everyone exits 3 ----------------------------

EXTRA_ENV_1="NNODES=2" gang nnodes_mismatch 3 1 -- --node-check --timeout 5
check_err 0 3 "rank 0: rank 1 has NNODES=2 but rank 0 has NNODES=3"
check_err 1 3 "rank 1: rank 0 ended the node check: rank 1 has NNODES=2 but rank 0 has NNODES=3"
check_err 2 3 "rank 2: rank 0 ended the node check: rank 1 has NNODES=2 but rank 0 has NNODES=3"

EXTRA_ENV_1="NODE_RANK=0" gang two_leaders_one_node 3 1 -- --node-check --timeout 5
check_err 0 3 "rank 0: ranks 0 and 1 both have LOCAL_RANK 0 on NODE_RANK 0"
check_err 1 3 "rank 0 ended the node check: ranks 0 and 1 both have LOCAL_RANK 0 on NODE_RANK 0"
check_err 2 3 "rank 0 ended the node check: ranks 0 and 1 both have LOCAL_RANK 0 on NODE_RANK 0"

EXTRA_ENV_1="LOCAL_RANK=1 LOCAL_WORLD_SIZE=2" gang node_without_leader 2 1 -- --node-check --timeout 5
check_err 0 3 "rank 0: NODE_RANK 1 has no rank with LOCAL_RANK 0"
check_err 1 3 "rank 0 ended the node check: NODE_RANK 1 has no rank with LOCAL_RANK 0"

EXTRA_ENV_2="TRAINYARD_NODE_ID=node-a" gang same_name_twice 3 1 -- --node-check --timeout 5
check_err 0 3 "rank 0: NODE_RANK 0 and 2 are both named 'node-a'"
check_err 2 3 "rank 0 ended the node check: NODE_RANK 0 and 2 are both named 'node-a'"
unset EXTRA_ENV_1 EXTRA_ENV_2

# ---- a leader that dies during the check ends it, never hangs ------------------

# node-c moves 128 KiB/s: its first pair ({1,2}, after the quick {0,1}) takes
# seconds; it is killed once it has printed its all-reduce line
SLOW=2 THROTTLE=128K start leader_dies 3 1 -- --node-check --node-check-bytes 1M \
	--node-check-rounds 1
for ((i = 0; i < 600; i++)); do
	[[ -s $W/$CASE/rank-2.out ]] && break
	sleep 0.1
done
[[ -s $W/$CASE/rank-2.out ]] || fail "rank 2 never finished its all-reduce"
sleep 0.5
kill -TERM "${PIDS[2]}" # timeout(1) passes it on to the worker
finish
check_err 0 3 "rank 0: rank 2 (node node-c) closed its connection during the node check"
check_err 1 3 "rank 1: rank 0 ended the node check: rank 2 (node node-c) closed its connection"
[[ $(wc -l <"$W/$CASE/rank-0.out") -eq 1 ]] || fail "rank 0 printed a verdict"
ok

# ---- bad options and environment: exit 2 naming the problem ----------------------

# ENV (space-separated NAME=value) | args | message
while IFS='|' read -r envs args msg; do
	[[ -n $envs ]] || continue
	CASE=bad_input
	mkdir -p "$W/$CASE"
	set +e
	# shellcheck disable=SC2086 # word splitting of the table's fields is intended
	env -i PATH="$PATH" $envs timeout 60 "$BIN" $args >"$W/$CASE/rank-0.out" 2>"$W/$CASE/rank-0.err"
	echo $? >"$W/$CASE/rank-0.rc"
	set -e
	CASE="bad_input: $envs $args"
	[[ $(cat "$W/bad_input/rank-0.rc") -eq 2 ]] ||
		fail "exited $(cat "$W/bad_input/rank-0.rc"), expected 2; stderr: $(cat "$W/bad_input/rank-0.err")"
	grep -qF -- "$msg" "$W/bad_input/rank-0.err" ||
		fail "stderr '$(cat "$W/bad_input/rank-0.err")' lacks '$msg'"
	[[ $(wc -l <"$W/bad_input/rank-0.err") -eq 1 ]] || fail "stderr is not one line"
	[[ ! -s $W/bad_input/rank-0.out ]] || fail "stdout is not empty"
	ok
done <<'TABLE'
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1|--node-check|NNODES is not set
RANK=0 WORLD_SIZE=2 NNODES=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1|--node-check|NODE_RANK is not set
RANK=0 WORLD_SIZE=2 NNODES=3 NODE_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=1|--node-check|NNODES='3' is not an integer in [1, 2]
RANK=0 WORLD_SIZE=2 NNODES=2 NODE_RANK=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1|--node-check|NODE_RANK=2 is not below NNODES=2
RANK=0 WORLD_SIZE=1 TRAINYARD_NODE_ID=-x|--node-check|TRAINYARD_NODE_ID='-x' is not a node name
RANK=0 WORLD_SIZE=1 TRAINYARD_NODE_ID=a/b|--node-check|TRAINYARD_NODE_ID='a/b' is not a node name
RANK=0 WORLD_SIZE=1 TY_ALLREDUCE_THROTTLE_BPS=fast|--node-check|TY_ALLREDUCE_THROTTLE_BPS='fast': expected bytes per second
RANK=0 WORLD_SIZE=1 TY_ALLREDUCE_THROTTLE_BPS=0|--node-check|TY_ALLREDUCE_THROTTLE_BPS='0': expected bytes per second
RANK=0 WORLD_SIZE=1|--node-check --node-check-bytes 0|--node-check-bytes '0': expected a size from 1 to 1G
RANK=0 WORLD_SIZE=1|--node-check --node-check-bytes 2G|--node-check-bytes '2G': expected a size from 1 to 1G
RANK=0 WORLD_SIZE=1|--node-check --slow-ratio 1|--slow-ratio '1': expected a number in (0, 1)
RANK=0 WORLD_SIZE=1|--node-check --slow-ratio 0|--slow-ratio '0': expected a number in (0, 1)
RANK=0 WORLD_SIZE=1|--node-check --slow-ratio x|--slow-ratio 'x': expected a number in (0, 1)
RANK=0 WORLD_SIZE=1|--node-check --node-check-rounds 0|--node-check-rounds '0': expected 1 to 100
TABLE
