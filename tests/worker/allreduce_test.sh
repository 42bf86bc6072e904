#!/usr/bin/env bash
# trainyard-allreduce as real processes on this machine: gangs of ranks with
# the torchrun-style environment on loopback "nodes" (127.0.0.2, 127.0.0.3),
# checking every rank's JSON line, exit status and error message.
#
# Needs TY_ALLREDUCE_BIN; TY_HAVE_NCCL=ON when the NCCL module was built.
# TY_TEST_KEEP=1 keeps the work directory.
set -euo pipefail

if [[ -z ${TY_ALLREDUCE_BIN:-} ]]; then
	echo "allreduce_test: TY_ALLREDUCE_BIN is not set; run the tests with tests/run" >&2
	exit 1
fi
BIN=$TY_ALLREDUCE_BIN
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tw_init allreduce_test

# gang NAME WORLD PER_NODE RANKS -- ARGS...: start the listed ranks (e.g.
# "0 1 2") of a WORLD-rank job, PER_NODE ranks per loopback node, each with
# --listen-addr of its node, and wait for them. Every rank runs under
# `timeout 120`, so a hang fails the case instead of the suite.
gang() {
	local name=$1 world=$2 per=$3 ranks=$4 _

	shift 5
	CASE=$name
	mkdir -p "$W/$name"
	# a free port may be taken by another test before rank 0 binds it: once more
	for _ in 1 2; do
		gang_once "$@"
		grep -qs 'cannot listen for the rendezvous.*Address already in use' \
			"$W/$name/rank-0.err" || break
	done
}

gang_once() {
	local r node pids=() port p

	port=$(free_port)
	for r in $ranks; do
		node=$((2 + r / per))
		env -i PATH="$PATH" RANK="$r" WORLD_SIZE="$world" LOCAL_RANK=$((r % per)) \
			LOCAL_WORLD_SIZE="$per" MASTER_ADDR=127.0.0.2 MASTER_PORT="$port" \
			${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} \
			timeout 120 "$BIN" --listen-addr "127.0.0.$node" "$@" \
			>"$W/$name/rank-$r.out" 2>"$W/$name/rank-$r.err" &
		pids+=("$!:$r")
	done
	for p in "${pids[@]}"; do
		set +e
		wait "${p%%:*}"
		echo $? >"$W/$name/rank-${p##*:}.rc"
		set -e
	done
}

rc_of() { cat "$W/$CASE/rank-$1.rc"; }

# check_ok WORLD BYTES DTYPE: every rank exited 0 and printed one JSON line
# with its rank, the world size, backend tcp, the bytes and ok true
check_ok() {
	local world=$1 bytes=$2 dtype=$3 r

	for ((r = 0; r < world; r++)); do
		[[ $(rc_of $r) -eq 0 ]] || fail "rank $r exited $(rc_of $r)"
		python3 - "$W/$CASE/rank-$r.out" "$r" "$world" "$bytes" "$dtype" <<'PY' || fail "rank $r JSON line"
import json, sys
path, rank, world, nbytes, dtype = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5]
lines = open(path).read().splitlines()
assert len(lines) == 1, f"expected one line, got {lines}"
j = json.loads(lines[0])
want = {"rank": rank, "world_size": world, "backend": "tcp", "bytes": nbytes, "dtype": dtype,
        "ok": True}
for k, v in want.items():
    assert j[k] == v, f"{k}: {j[k]!r} != {v!r}"
for k in ("time_s", "algbw_gbps", "busbw_gbps", "iters", "local_rank"):
    assert isinstance(j[k], (int, float)) and j[k] >= 0, f"{k}: {j.get(k)!r}"
if world == 1:
    assert j["busbw_gbps"] == 0, "busbw of one rank"
PY
		ok
	done
}

# check_err RANK RC TEXT: the rank exited RC and its stderr holds TEXT
check_err() {
	[[ $(rc_of "$1") -eq $2 ]] || fail "rank $1 exited $(rc_of "$1"), expected $2"
	grep -qF -- "$3" "$W/$CASE/rank-$1.err" || fail "rank $1 stderr lacks '$3'"
	ok
}

# ---- sums that must come out right -------------------------------------------

gang two_nodes_two_ranks 4 2 "0 1 2 3" -- --backend tcp --bytes 8M --iters 3 --timeout 30
check_ok 4 $((8 << 20)) float

gang world_one 1 1 "0" -- --bytes 1M
check_ok 1 $((1 << 20)) float

gang odd_world_three 3 1 "0 1 2" -- --bytes 3M --dtype double --timeout 30
check_ok 3 $((3 << 20)) double

# 1001 floats over 3 ranks: chunks of 334, 334 and 333
gang not_divisible 3 2 "0 1 2" -- --bytes 4004 --timeout 30
check_ok 3 4004 float

# 2 floats over 4 ranks: two chunks are empty
gang fewer_elements_than_ranks 4 2 "0 1 2 3" -- --bytes 8 --timeout 30
check_ok 4 8 float

gang auto_without_gpu 2 1 "0 1" -- --backend auto --bytes 64K --timeout 30
check_ok 2 $((64 << 10)) float

# a node without the NCCL module (or without CUDA libraries) still runs over TCP
gang auto_without_module 2 1 "0 1" -- --nccl-module /nonexistent/module.so --bytes 64K
check_ok 2 $((64 << 10)) float

# ---- a wrong sum is caught ---------------------------------------------------

gang wrong_sum 2 1 "0 1" -- --bytes 4K --poison-index 5 --timeout 30
for r in 0 1; do
	check_err $r 4 "rank $r: element 5 is"
	grep -q '"ok":false,"error":"element 5 is' "$W/$CASE/rank-$r.out" || fail "rank $r JSON ok:false"
	ok
done

# ---- missing and broken peers end the run, never hang ------------------------

gang missing_rank 3 1 "0 1" -- --bytes 4K --timeout 2
check_err 0 3 "rendezvous timed out after 2 s: 2 of 3 ranks joined, missing rank(s) 2"
check_err 1 3 "rendezvous timed out"

gang no_master 2 1 "1" -- --bytes 4K --timeout 1
check_err 1 3 "cannot reach the master at 127.0.0.2:"

# rank 1 is a fake that joins, connects the ring and then closes everything
CASE=peer_closed
mkdir -p "$W/$CASE"
port=$(free_port)
env -i PATH="$PATH" RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
	timeout 120 "$BIN" --bytes 64M --timeout 30 >"$W/$CASE/rank-0.out" 2>"$W/$CASE/rank-0.err" &
r0=$!
python3 - "$port" <<'PY' || fail "the fake rank failed"
import socket, struct, sys, time
port = int(sys.argv[1])
ring = socket.socket(); ring.bind(("127.0.0.1", 0)); ring.listen(1)
for _ in range(300):
    try:
        m = socket.create_connection(("127.0.0.1", port)); break
    except ConnectionRefusedError:
        time.sleep(0.05)
m.sendall(b"TYAR1 1 2 tcp %d\n" % ring.getsockname()[1])
f = m.makefile("rb")
assert f.readline() == b"OK\n"
r0 = f.readline().split()
f.readline()
nxt = socket.create_connection((r0[1].decode(), int(r0[2])))
nxt.sendall(struct.pack("=i", 1))
prev, _ = ring.accept()
prev.recv(4)
for s in (nxt, prev, m, ring):
    s.close()
PY
set +e
wait $r0
echo $? >"$W/$CASE/rank-0.rc"
set -e
check_err 0 3 "rank 0: rank 1 (127.0.0.1) closed the ring connection"

CASE=world_size_mismatch
mkdir -p "$W/$CASE"
port=$(free_port)
env -i PATH="$PATH" RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
	timeout 120 "$BIN" --bytes 4K --timeout 30 >"$W/$CASE/rank-0.out" 2>"$W/$CASE/rank-0.err" &
r0=$!
set +e
env -i PATH="$PATH" RANK=1 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
	timeout 120 "$BIN" --bytes 4K --timeout 30 >"$W/$CASE/rank-1.out" 2>"$W/$CASE/rank-1.err"
echo $? >"$W/$CASE/rank-1.rc"
wait $r0
echo $? >"$W/$CASE/rank-0.rc"
set -e
check_err 0 3 "rank 1 has WORLD_SIZE=3 but rank 0 has WORLD_SIZE=2"
check_err 1 3 "the master ended the rendezvous: rank 1 has WORLD_SIZE=3 but rank 0 has WORLD_SIZE=2"

# ---- bad environment and options: exit 2 naming the problem -----------------

# one process each: ENV (space-separated NAME=value, "-" for none) | args | status | message
while IFS='|' read -r envs args want msg; do
	[[ -n $envs ]] || continue
	CASE=bad_input
	mkdir -p "$W/$CASE"
	[[ $envs == - ]] && envs=
	set +e
	# shellcheck disable=SC2086 # word splitting of the table's fields is intended
	env -i PATH="$PATH" $envs timeout 60 "$BIN" $args >"$W/$CASE/rank-0.out" 2>"$W/$CASE/rank-0.err"
	echo $? >"$W/$CASE/rank-0.rc"
	set -e
	CASE="bad_input: $envs $args"
	[[ $(cat "$W/bad_input/rank-0.rc") -eq $want ]] ||
		fail "exited $(cat "$W/bad_input/rank-0.rc"), expected $want; stderr: $(cat "$W/bad_input/rank-0.err")"
	grep -qF -- "$msg" "$W/bad_input/rank-0.err" ||
		fail "stderr '$(cat "$W/bad_input/rank-0.err")' lacks '$msg'"
	[[ $(wc -l <"$W/bad_input/rank-0.err") -eq 1 ]] || fail "stderr is not one line"
	[[ ! -s $W/bad_input/rank-0.out ]] || fail "stdout is not empty"
	ok
done <<'TABLE'
-| |2|WORLD_SIZE is not set (run under torchrun or trainyard-executor)
WORLD_SIZE=2| |2|RANK is not set
RANK=2 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1| |2|RANK=2 is not below WORLD_SIZE=2
RANK=-1 WORLD_SIZE=2| |2|RANK='-1' is not an integer in [0,
RANK=x WORLD_SIZE=2| |2|RANK='x' is not an integer
RANK=0 WORLD_SIZE=0| |2|WORLD_SIZE='0' is not an integer in [1,
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=abc| |2|MASTER_PORT='abc' is not a port number (1-65535)
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=70000| |2|MASTER_PORT='70000' is not a port number (1-65535)
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1| |2|MASTER_PORT is not set
RANK=0 WORLD_SIZE=2 MASTER_PORT=29500| |2|MASTER_ADDR is not set
RANK=0 WORLD_SIZE=2 LOCAL_RANK=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1| |2|LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2
RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=3| |2|LOCAL_WORLD_SIZE='3' is not an integer in [1, 2]
RANK=1 WORLD_SIZE=2 MASTER_ADDR=no-such-host.invalid MASTER_PORT=29500|--timeout 2|3|cannot resolve the master address 'no-such-host.invalid'
RANK=0 WORLD_SIZE=1|--bytes 6|2|--bytes 6 is not a multiple of the 4-byte float
RANK=0 WORLD_SIZE=1|--bytes 12 --dtype double|2|--bytes 12 is not a multiple of the 8-byte double
RANK=0 WORLD_SIZE=1|--bytes 0|2|--bytes '0': expected a positive size
RANK=0 WORLD_SIZE=1|--bytes 3X|2|--bytes '3X': expected a positive size
RANK=0 WORLD_SIZE=1|--backend mpi|2|--backend 'mpi': expected auto, tcp or nccl
RANK=0 WORLD_SIZE=1|--dtype half|2|--dtype 'half': expected float or double
RANK=0 WORLD_SIZE=1|--timeout 0|2|--timeout '0': expected seconds
RANK=0 WORLD_SIZE=1|--iters 0|2|--iters '0': expected an integer from 1
RANK=0 WORLD_SIZE=1|--bytes 4K --poison-index 1024|2|--poison-index 1024 is past the last element 1023
RANK=0 WORLD_SIZE=1|extra|2|unexpected argument 'extra'
RANK=0 WORLD_SIZE=1|--backend nccl --nccl-module /nonexistent/module.so|2|rank 0: backend nccl unavailable: cannot load the NCCL backend: /nonexistent/module.so
TABLE

# ---- NCCL: built here, refused cleanly without a GPU -------------------------

CASE=nccl_refuses
bindir=$(dirname "$BIN")
if readelf -d "$BIN" | grep -E 'NEEDED.*(cudart|nccl)'; then
	fail "the program links CUDA or NCCL directly; it must start without them"
fi
ok
if [[ ${TY_HAVE_NCCL:-} == ON ]]; then
	[[ -f $bindir/trainyard-allreduce-nccl.so ]] || fail "the NCCL module was not built"
	readelf -d "$bindir/trainyard-allreduce-nccl.so" | grep -q 'NEEDED.*libnccl' ||
		fail "the NCCL module does not link libnccl"
	# the CUDA runtime's own words: no driver, or a driver without devices
	want_msg="rank 0: backend nccl unavailable: (cudaGetDeviceCount: .* \\(CUDA error [0-9]+\\)|no GPU is visible)"
else
	want_msg="rank 0: backend nccl unavailable: cannot load the NCCL backend: "
fi
ok
mkdir -p "$W/$CASE"
for cvd in unset "" 0; do
	set +e
	if [[ $cvd == unset ]]; then
		env -i PATH="$PATH" RANK=0 WORLD_SIZE=1 timeout 60 "$BIN" --backend nccl \
			>"$W/$CASE/rank-0.out" 2>"$W/$CASE/rank-0.err"
	else
		env -i PATH="$PATH" RANK=0 WORLD_SIZE=1 CUDA_VISIBLE_DEVICES="$cvd" timeout 60 "$BIN" \
			--backend nccl >"$W/$CASE/rank-0.out" 2>"$W/$CASE/rank-0.err"
	fi
	echo $? >"$W/$CASE/rank-0.rc"
	set -e
	CASE="nccl_refuses CUDA_VISIBLE_DEVICES=$cvd"
	rc=$(cat "$W/nccl_refuses/rank-0.rc")
	[[ $rc -eq 2 ]] || fail "exited $rc, expected 2: $(cat "$W/nccl_refuses/rank-0.err")"
	[[ $(wc -l <"$W/nccl_refuses/rank-0.err") -eq 1 ]] ||
		fail "expected one line: $(cat "$W/nccl_refuses/rank-0.err")"
	grep -qE -- "$want_msg" "$W/nccl_refuses/rank-0.err" ||
		fail "stderr '$(cat "$W/nccl_refuses/rank-0.err")' lacks '$want_msg'"
	[[ ! -s $W/nccl_refuses/rank-0.out ]] || fail "stdout is not empty"
	ok
	CASE=nccl_refuses
done
