#!/usr/bin/env bash
# The NCCL module of trainyard-allreduce (worker/nccl.c) against a stand-in
# for libnccl and libcudart (tests/worker/fake_nccl.c, no GPU here): a
# communicator that never forms or an all-reduce that never ends is aborted
# at --timeout, a peer's error is aborted at once, two local ranks never
# share a GPU, and a good run reports and destroys its communicator.
#
# Needs TY_ALLREDUCE_BIN and TY_FAKE_GPU_DIR (tests/worker.cmake).
set -euo pipefail

if [[ -z ${TY_ALLREDUCE_BIN:-} || -z ${TY_FAKE_GPU_DIR:-} ]]; then
	echo "nccl_module_test: TY_ALLREDUCE_BIN and TY_FAKE_GPU_DIR are not set; run with tests/run" >&2
	exit 1
fi
BIN=$TY_ALLREDUCE_BIN
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tw_init nccl_module_test

# one NAME MODE DEVICES LOCAL_WORLD -- ARGS...: rank 0 of a world of one with
# the stand-in in MODE; its exit status, output and the stand-in's call log
# in $W/NAME
one() {
	local name=$1 mode=$2 devices=$3 local_world=$4

	shift 5
	CASE=$name
	mkdir -p "$W/$name"
	set +e
	env -i PATH="$PATH" LD_LIBRARY_PATH="$TY_FAKE_GPU_DIR" RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 \
		LOCAL_WORLD_SIZE="$local_world" FAKE_NCCL="$mode" FAKE_CUDA_DEVICES="$devices" \
		FAKE_NCCL_LOG="$W/$name/calls" \
		${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} \
		timeout 60 "$BIN" --backend nccl --bytes 4K --iters 2 "$@" \
		>"$W/$name/rank-0.out" 2>"$W/$name/rank-0.err"
	echo $? >"$W/$name/rc"
	set -e
}

rc() { cat "$W/$CASE/rc"; }
calls() { cat "$W/$CASE/calls" 2>/dev/null || true; }

# a good run: non-blocking init, the sums right, the communicator destroyed
one good ok 1 1 --
[[ $(rc) -eq 0 ]] || fail "exited $(rc)"
grep -q '"backend":"nccl"' "$W/$CASE/rank-0.out" || fail "no nccl report"
grep -q '"ok":true' "$W/$CASE/rank-0.out" || fail "not ok"
ok
calls | grep -qx 'init blocking=0' || fail "the communicator was not made non-blocking: $(calls)"
calls | grep -qx destroy || fail "not destroyed: $(calls)"
! calls | grep -qx abort || fail "aborted a good communicator"
[[ $(calls | grep -cx allreduce) -eq 3 ]] || fail "expected 3 all-reduces (1 warm-up, 2 timed)"
ok

# the init never finishes: aborted at the timeout, exit 3 with the reason
one init_hang init_hang 1 1 -- --timeout 1
[[ $(rc) -eq 3 ]] || fail "exited $(rc), expected 3"
grep -q 'nccl: ncclCommInitRankConfig: not done within the 1 s timeout; communicator aborted' \
	"$W/$CASE/rank-0.err" || fail "stderr: $(cat "$W/$CASE/rank-0.err")"
calls | grep -qx abort || fail "not aborted: $(calls)"
! calls | grep -qx destroy || fail "destroyed a hung communicator"
ok

# an all-reduce that never ends: the same
one allreduce_hang hang 1 1 -- --timeout 1
[[ $(rc) -eq 3 ]] || fail "exited $(rc), expected 3"
grep -q 'nccl: ncclAllReduce: not done within the 1 s timeout; communicator aborted' \
	"$W/$CASE/rank-0.err" || fail "stderr: $(cat "$W/$CASE/rank-0.err")"
calls | grep -qx abort || fail "not aborted: $(calls)"
ok

# a peer fails mid all-reduce: its error, at once (not at the 60 s timeout)
start=$SECONDS
one remote_error remote_error 1 1 -- --timeout 60
[[ $(rc) -eq 3 ]] || fail "exited $(rc), expected 3"
grep -q 'nccl: ncclAllReduce: remote process exited or there was a network error; communicator aborted' \
	"$W/$CASE/rank-0.err" || fail "stderr: $(cat "$W/$CASE/rank-0.err")"
((SECONDS - start < 50)) || fail "waited for the timeout instead of the error"
calls | grep -qx abort || fail "not aborted: $(calls)"
ok

# three local ranks on two visible GPUs: refused before any communicator
# (a world of three with rank 0 alone would wait for the others: one rank,
# LOCAL_WORLD_SIZE 3 needs WORLD_SIZE >= 3, so the check runs in a gang)
CASE=two_ranks_one_gpu
mkdir -p "$W/$CASE"
port=$(free_port)
pids=()
for r in 0 1 2; do
	env -i PATH="$PATH" LD_LIBRARY_PATH="$TY_FAKE_GPU_DIR" RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r \
		LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" FAKE_CUDA_DEVICES=2 \
		FAKE_NCCL_LOG="$W/$CASE/calls" ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} \
		timeout 60 "$BIN" --backend nccl --bytes 4K --timeout 20 --listen-addr 127.0.0.1 \
		>"$W/$CASE/rank-$r.out" 2>"$W/$CASE/rank-$r.err" &
	pids+=($!)
done
for r in 0 1 2; do
	set +e
	wait "${pids[$r]}"
	echo $? >"$W/$CASE/rank-$r.rc"
	set -e
done
for r in 0 1 2; do
	[[ $(cat "$W/$CASE/rank-$r.rc") -eq 3 ]] || fail "rank $r exited $(cat "$W/$CASE/rank-$r.rc")"
	grep -q 'nccl: 3 local ranks on 2 visible GPUs would put two ranks on one GPU' \
		"$W/$CASE/rank-$r.err" || fail "rank $r stderr: $(cat "$W/$CASE/rank-$r.err")"
done
! calls | grep -q '^init' || fail "a communicator was made: $(calls)"
ok
