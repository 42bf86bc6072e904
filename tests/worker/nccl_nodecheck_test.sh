#!/usr/bin/env bash
# trainyard-allreduce --node-check with the NCCL backend, against the
# stand-in libnccl/libcudart (tests/worker/fake_nccl.c) on loopback "nodes":
# the pairs are measured by two-rank NCCL all-reduces between node leaders
# (measured "nccl"), a slow node is named from them, the gang's all-reduce is
# compared with the floor of the fabric its NCCL environment names (IB, RoCE,
# TCP sockets), and a gang below it fails with exit 6 naming measured vs
# floor and fabric.
#
# Timing: FAKE_NCCL_GBPS paces a rank's all-reduces (never faster than that
# rate); unpaced, the stand-in is bounded by its own work (a sum on the CPU
# under the sanitizers, about 0.1 GB/s here). A slow rank is paced 100x and
# more below that, so a loaded machine cannot turn a verdict around: slow
# figures are upper bounds, and healthy ones would have to drop 10x.
#
# Needs TY_ALLREDUCE_BIN and TY_FAKE_GPU_DIR (tests/worker.cmake).
set -euo pipefail

if [[ -z ${TY_ALLREDUCE_BIN:-} || -z ${TY_FAKE_GPU_DIR:-} ]]; then
	echo "nccl_nodecheck_test: TY_ALLREDUCE_BIN and TY_FAKE_GPU_DIR are not set; run with tests/run" >&2
	exit 1
fi
BIN=$TY_ALLREDUCE_BIN
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tw_init nccl_nodecheck_test

NAMES=(node-a node-b node-c node-d)

# gang NAME WORLD PER_NODE FABRIC_ENV -- ARGS...: every rank of a WORLD-rank
# NCCL job, PER_NODE ranks (and visible stand-in GPUs) per loopback node
# 127.0.0.(2 + node), with FABRIC_ENV (NAME=value words, as the executor's
# NCCL environment) on every rank; the ranks of node $SLOW (if set) are paced
# at $SLOW_GBPS, every rank at $ALL_GBPS (if set). Waits for all of them;
# each rank's exit status, output and stand-in call log in $W/NAME.
gang() {
	local name=$1 world=$2 per=$3 fabric=$4 port r node pace pids=()

	shift 5
	CASE=$name
	mkdir -p "$W/$name"
	port=$(free_port)
	for ((r = 0; r < world; r++)); do
		node=$((r / per))
		pace=${ALL_GBPS:-}
		if [[ -n ${SLOW:-} && $node -eq $SLOW ]]; then pace=$SLOW_GBPS; fi
		# shellcheck disable=SC2086 # $fabric is a list of NAME=value words
		env -i PATH="$PATH" LD_LIBRARY_PATH="$TY_FAKE_GPU_DIR" RANK="$r" WORLD_SIZE="$world" \
			LOCAL_RANK=$((r % per)) LOCAL_WORLD_SIZE="$per" NODE_RANK="$node" \
			NNODES=$((world / per)) TRAINYARD_NODE_ID="${NAMES[$node]}" \
			MASTER_ADDR=127.0.0.2 MASTER_PORT="$port" FAKE_CUDA_DEVICES="$per" \
			FAKE_NCCL_LOG="$W/$name/calls-$r" ${pace:+FAKE_NCCL_GBPS=$pace} $fabric \
			${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} \
			timeout 120 "$BIN" --backend nccl --listen-addr "127.0.0.$((2 + node))" \
			--timeout 30 --node-check "$@" \
			>"$W/$name/rank-$r.out" 2>"$W/$name/rank-$r.err" &
		pids+=("$!")
	done
	for ((r = 0; r < world; r++)); do
		set +e
		wait "${pids[$r]}"
		echo $? >"$W/$name/rank-$r.rc"
		set -e
	done
}

rc_of() { cat "$W/$CASE/rank-$1.rc"; }

# verdict WANT: rank 0's second stdout line is the verdict; WANT (a Python
# dict literal) gives "nodes" (names), "slow", "npairs", "bytes" and the
# allreduce fields "fabric", "floor_gbps", "below_floor", "floor_note".
# Every measured figure is a positive number; the pairs are NCCL's.
verdict() {
	python3 - "$W/$CASE/rank-0.out" "$1" <<'PY' || fail "rank 0 verdict JSON"
import ast, json, sys
lines = open(sys.argv[1]).read().splitlines()
want = ast.literal_eval(sys.argv[2])
assert len(lines) == 2, f"expected the all-reduce line and the verdict, got {lines}"
first = json.loads(lines[0])
assert first["ok"] is True and first["backend"] == "nccl", lines[0]
v = json.loads(lines[1])["node_check"]
assert [n["node"] for n in v["nodes"]] == want["nodes"], v["nodes"]
assert v["slow"] == want["slow"], f'slow {v["slow"]} != {want["slow"]}'
assert len(v["pairs"]) == want["npairs"], v["pairs"]
assert v["bytes"] == want["bytes"], v["bytes"]
# the pairs are two-rank NCCL all-reduces, after the gang's NCCL all-reduce
assert v["measured"] == "nccl", v["measured"]
a = v["allreduce"]
assert a["backend"] == "nccl", a
assert isinstance(a["busbw_gbps"], (int, float)), a
for k in ("fabric", "floor_gbps", "below_floor", "floor_note"):
    assert a[k] == want[k], f"allreduce {k}: {a[k]!r} != {want[k]!r} in {a}"
if a["floor_gbps"] is not None:
    assert a["below_floor"] == (a["busbw_gbps"] < a["floor_gbps"]), a
for n in v["nodes"]:
    assert n["fabric"] == (want["fabric"] or "unknown"), n
    if want["npairs"]:
        assert isinstance(n["gbps"], float) and n["gbps"] > 0, n
for p in v["pairs"]:
    assert isinstance(p["gbps"], float) and p["gbps"] > 0, p
PY
	ok
}

# all_exit WORLD RC REGEX: every rank exited RC; with REGEX, its stderr is the
# one line "trainyard-allreduce: rank R: REGEX", else empty
all_exit() {
	local r

	for ((r = 0; r < $1; r++)); do
		[[ $(rc_of $r) -eq $2 ]] || fail "rank $r exited $(rc_of $r), expected $2"
		if [[ -n ${3:-} ]]; then
			grep -qE "^trainyard-allreduce: rank $r: $3\$" "$W/$CASE/rank-$r.err" ||
				fail "rank $r: stderr does not match '$3'"
			[[ $(wc -l <"$W/$CASE/rank-$r.err") -eq 1 ]] || fail "rank $r: stderr is not one line"
		else
			[[ ! -s $W/$CASE/rank-$r.err ]] || fail "rank $r wrote to stderr"
		fi
		ok
	done
}

# inits RANK: communicators the rank made (its gang's, then one per pair)
inits() { grep -c '^init' "$W/$CASE/calls-$1" || true; }

NUM='[0-9.e+-]+'

# ---- a healthy gang on InfiniBand passes -----------------------------------------

# 3 nodes of 2 GPUs: the leaders (local rank 0) measure, the others wait. The
# unpaced stand-in is far below a real fabric, hence the explicit floor.
gang ib_gang_passes 6 2 "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1 NCCL_SOCKET_IFNAME==lo" -- \
	--bytes 1M --iters 2 --node-check-bytes 1M --node-check-rounds 2 --slow-ratio 0.1 \
	--floor-ib 0.001
all_exit 6 0
verdict "{'nodes': ['node-a', 'node-b', 'node-c'], 'slow': [], 'npairs': 3, 'bytes': 1048576,
  'fabric': 'ib', 'floor_gbps': 0.001, 'below_floor': False, 'floor_note': None}"
# each leader: the gang's communicator and one per pair it is in (2 of 3);
# the others only the gang's
for r in 0 2 4; do
	[[ $(inits $r) -eq 3 ]] || fail "leader rank $r made $(inits $r) communicators, expected 3"
done
for r in 1 3 5; do
	[[ $(inits $r) -eq 1 ]] || fail "rank $r made $(inits $r) communicators, expected 1"
done
ok

# ---- a slow node is named from the NCCL pairs ------------------------------------

# node-b's GPUs at 0.0007 GB/s: 1.5 s per all-reduce, 100x below the others;
# NCCL over TCP sockets with --floor-tcp 0, so only the pairs judge
SLOW=1 SLOW_GBPS=0.0007 gang slow_node_named 6 2 "NCCL_IB_DISABLE=1" -- \
	--bytes 1M --iters 1 --warmup 0 --node-check-bytes 1M --node-check-rounds 1 --floor-tcp 0
all_exit 6 5 "slow node\\(s\\): node-b $NUM GB/s, gang median $NUM GB/s \\(< 0\\.5 x median\\)"
verdict "{'nodes': ['node-a', 'node-b', 'node-c'], 'slow': ['node-b'], 'npairs': 3, 'bytes': 1048576,
  'fabric': 'tcp', 'floor_gbps': None, 'below_floor': False,
  'floor_note': 'no floor for tcp (--floor-tcp 0)'}"

# ---- a gang below its fabric's floor fails, naming nobody -------------------------

# every GPU at 0.001 GB/s on RoCE (a GID index set): the default RoCE floor of
# 1.5 GB/s is 1000x above; all nodes alike, so none is slow
ALL_GBPS=0.001 gang gang_below_floor 3 1 "NCCL_IB_HCA==mlx5_0:1 NCCL_IB_GID_INDEX=3" -- \
	--bytes 256K --iters 1 --warmup 0 --node-check-bytes 256K --node-check-rounds 1 \
	--slow-ratio 0.1
all_exit 3 6 "gang all-reduce $NUM GB/s is below the roce floor of 1\\.5 GB/s \\(nccl bus bandwidth, 3 nodes\\)"
verdict "{'nodes': ['node-a', 'node-b', 'node-c'], 'slow': [], 'npairs': 3, 'bytes': 262144,
  'fabric': 'roce', 'floor_gbps': 1.5, 'below_floor': True, 'floor_note': None}"

# a slow node that also drags the gang below the floor: named (exit 5), and the
# floor is in the same message
SLOW=2 SLOW_GBPS=0.001 gang slow_node_and_floor 3 1 "NCCL_IB_DISABLE=1" -- \
	--bytes 1M --iters 1 --warmup 0 --node-check-bytes 1M --node-check-rounds 1 --floor-tcp 0.05
all_exit 3 5 "slow node\\(s\\): node-c $NUM GB/s, gang median $NUM GB/s \\(< 0\\.5 x median\\); gang all-reduce $NUM GB/s is below the tcp floor of 0\\.05 GB/s \\(nccl bus bandwidth, 3 nodes\\)"
verdict "{'nodes': ['node-a', 'node-b', 'node-c'], 'slow': ['node-c'], 'npairs': 3, 'bytes': 1048576,
  'fabric': 'tcp', 'floor_gbps': 0.05, 'below_floor': True, 'floor_note': None}"

# ---- nothing to compare ------------------------------------------------------------

# one node: the all-reduce never crossed a fabric, whatever its speed
ALL_GBPS=0.001 gang one_node 2 2 "NCCL_IB_HCA==mlx5_0:1" -- --bytes 64K --iters 1 --warmup 0
all_exit 2 0
verdict "{'nodes': ['node-a'], 'slow': [], 'npairs': 0, 'bytes': 8388608,
  'fabric': 'ib', 'floor_gbps': None, 'below_floor': False,
  'floor_note': '1 node: the all-reduce did not cross the fabric'}"

# no NCCL_IB_* variables (not run by an executor): the fabric is not known
ALL_GBPS=0.001 gang fabric_unknown 3 1 "" -- --bytes 64K --iters 1 --warmup 0 \
	--node-check-bytes 64K --node-check-rounds 1 --slow-ratio 0.1
all_exit 3 0
verdict "{'nodes': ['node-a', 'node-b', 'node-c'], 'slow': [], 'npairs': 3, 'bytes': 65536,
  'fabric': None, 'floor_gbps': None, 'below_floor': False,
  'floor_note': 'fabric unknown on node-a (neither NCCL_IB_DISABLE nor NCCL_IB_HCA is set): no floor'}"

# ---- bad floors: exit 2 ------------------------------------------------------------

for bad in "--floor-ib -1" "--floor-roce x" "--floor-tcp ''"; do
	CASE="bad_floor: $bad"
	set +e
	out=$(eval env -i PATH="$PATH" RANK=0 WORLD_SIZE=1 timeout 30 "$BIN" --node-check "$bad" 2>&1)
	rc=$?
	set -e
	[[ $rc -eq 2 ]] || fail "exited $rc, expected 2: $out"
	[[ $out == *"expected GB/s from 0 (no floor) to 1e6"* ]] || fail "message: $out"
	ok
done
