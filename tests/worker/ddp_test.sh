#!/usr/bin/env bash
# worker/examples/ddp_train.py as a real 2-rank gloo job on this machine:
# trains below the target loss, checkpoints by the manifest protocol, resumes
# at the saved step, checkpoints and exits on SIGUSR1, refuses a corrupt
# checkpoint. Needs /usr/bin/python3 with torch (python3-torch).
#
# Needs TY_WORKER_EXAMPLES (worker/examples). TY_TEST_KEEP=1 keeps the work
# directory.
set -euo pipefail

if [[ -z ${TY_WORKER_EXAMPLES:-} ]]; then
	echo "ddp_test: TY_WORKER_EXAMPLES is not set; run the tests with tests/run" >&2
	exit 1
fi
PY=/usr/bin/python3
if ! "$PY" -c 'import torch, torch.distributed' 2>/dev/null; then
	echo "ddp_test: $PY cannot import torch; install python3-torch" \
		"(apt-get install python3-torch; deploy/local/lib.sh lists it in TY_PACKAGES)" >&2
	exit 1
fi
EX=$TY_WORKER_EXAMPLES
PIDS=()
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tw_init ddp_test
kill_ranks() {
	local p

	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
}
tw_on_exit kill_ranks

# start NAME "EXTRA ENV" ARGS...: both ranks of a 2-rank job in the background
start() {
	local name=$1 extra=$2 port r

	shift 2
	CASE=$name
	mkdir -p "$W/$name"
	port=$(free_port)
	PIDS=()
	for r in 0 1; do
		# shellcheck disable=SC2086 # extra is a list of NAME=value words
		env -i PATH="$PATH" HOME="$W" PYTHONDONTWRITEBYTECODE=1 RANK=$r WORLD_SIZE=2 \
			LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 NODE_RANK=0 NNODES=1 MASTER_ADDR=127.0.0.1 \
			MASTER_PORT="$port" TRAINYARD_CHECKPOINT_DIR="$W/ckpt" \
			TRAINYARD_PROGRESS_FILE="$W/$name/progress-$r" $extra \
			"$PY" "$EX/ddp_train.py" --timeout 60 "$@" \
			>"$W/$name/rank-$r.out" 2>"$W/$name/rank-$r.err" &
		PIDS+=("$!")
	done
}

# finish: wait for both ranks (at most 240 s), recording their exit status
finish() {
	local r deadline=$((SECONDS + 240))

	for r in 0 1; do
		while kill -0 "${PIDS[$r]}" 2>/dev/null; do
			((SECONDS < deadline)) || fail "rank $r still running after 240 s"
			sleep 0.2
		done
		set +e
		wait "${PIDS[$r]}"
		echo $? >"$W/$CASE/rank-$r.rc"
		set -e
	done
	PIDS=()
}

# expect RANK STATUS: exit status of a rank
expect_rc() {
	local got

	got=$(cat "$W/$CASE/rank-$1.rc")
	[[ $got -eq $2 ]] || fail "rank $1 exited $got, expected $2"
	ok
}

# event RANK PYTHON-CONDITION: some JSON line e of the rank's stdout satisfies it
event() {
	"$PY" - "$W/$CASE/rank-$1.out" "$2" <<'PY' || fail "rank $1: no line with $2"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if any(eval(sys.argv[2], {}, {"e": e}) for e in lines) else 1)
PY
	ok
}

# field RANK EVENT KEY: the value of KEY in the rank's last EVENT line
field() {
	"$PY" - "$W/$CASE/rank-$1.out" "$2" "$3" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print([e for e in lines if e.get("event") == sys.argv[2]][-1][sys.argv[3]])
PY
}

verify() {
	"$PY" "$EX/trainyard_ckpt.py" verify "$W/ckpt/step-$1" >/dev/null ||
		fail "checkpoint step-$1 does not verify"
	ok
}

# ---- trains below the target, checkpointing on the way ----------------------

start train "" --steps 60 --checkpoint-every 20 --target-loss 0.01
finish
for r in 0 1; do
	expect_rc $r 0
	event $r "e['event'] == 'done' and e['ok'] and e['loss'] < 0.01 and e['start_step'] == 0 \
and e['steps'] == 60 and e['world_size'] == 2 and e['backend'] == 'gloo' and e['rank'] == $r"
	[[ -f $W/train/progress-$r ]] || fail "rank $r never touched TRAINYARD_PROGRESS_FILE"
	ok
done
for s in 20 40 60; do
	event 0 "e == {'event': 'checkpoint', 'rank': 0, 'step': $s, 'path': '$W/ckpt/step-$s'}"
	verify $s
done

# ---- resumes at the saved step ---------------------------------------------

start resume "TRAINYARD_RESUME_FROM=$W/ckpt/step-40" --steps 80 --checkpoint-every 20
finish
for r in 0 1; do
	expect_rc $r 0
	event $r "e == {'event': 'resumed', 'rank': $r, 'step': 40, 'path': '$W/ckpt/step-40'}"
	event $r "e['event'] == 'done' and e['ok'] and e['start_step'] == 40 and e['steps'] == 80"
done
event 0 "e['event'] == 'checkpoint' and e['step'] == 80"
verify 80

# a corrupt newest checkpoint is passed over by the helper's reader too
printf 'garbage' >>"$W/ckpt/step-80/state.pt"
CASE=newest_skips_corrupt
got=$("$PY" "$EX/trainyard_ckpt.py" newest "$W/ckpt" 2>"$W/newest.err") || fail "no newest: $got"
[[ $got == "{\"path\": \"$W/ckpt/step-60\", \"step\": 60}" ]] || fail "newest: $got"
grep -q "step-80: corrupt: 'state.pt' has the wrong size" "$W/newest.err" || fail "no skip report"
ok

# ---- a corrupt checkpoint is refused, not half-loaded -------------------------

start corrupt_resume "TRAINYARD_RESUME_FROM=$W/ckpt/step-80" --steps 90
finish
for r in 0 1; do
	expect_rc $r 2
	grep -q "ddp_train: rank $r: cannot resume: $W/ckpt/step-80: corrupt" "$W/$CASE/rank-$r.err" ||
		fail "rank $r: no 'cannot resume' message"
	ok
done

# ---- misses the target: exit 1 ----------------------------------------------

start not_converged "TRAINYARD_CHECKPOINT_DIR=$W/ckpt-short" --steps 2 --target-loss 1e-9
finish
for r in 0 1; do
	expect_rc $r 1
	event $r "e['event'] == 'done' and not e['ok'] and e['loss'] >= 1e-9 and e['steps'] == 2"
done

# ---- SIGUSR1 to one rank: the gang checkpoints, exits 75, resumes there ----

rm -rf "$W/ckpt"
start signal "" --steps 1000000 --checkpoint-every 0 --step-sleep 0.05
for ((i = 0; i < 1200; i++)); do
	[[ -f $W/signal/progress-1 ]] && break
	sleep 0.1
done
[[ -f $W/signal/progress-1 ]] || fail "rank 1 never made progress"
kill -USR1 "${PIDS[1]}"
finish
for r in 0 1; do
	expect_rc $r 75
done
step=$(field 0 stopped step)
[[ $step =~ ^[0-9]+$ && $step -ge 1 ]] || fail "stopped at '$step'"
[[ $(field 1 stopped step) == "$step" ]] || fail "the ranks stopped at different steps"
ok
event 0 "e == {'event': 'checkpoint', 'rank': 0, 'step': $step, 'path': '$W/ckpt/step-$step'}"
verify "$step"

start signal_resume "TRAINYARD_RESUME_FROM=$W/ckpt/step-$step" --steps $((step + 5)) --target-loss 1e9
finish
for r in 0 1; do
	expect_rc $r 0
	event $r "e['event'] == 'resumed' and e['step'] == $step"
	event $r "e['event'] == 'done' and e['start_step'] == $step and e['steps'] == $((step + 5))"
done

# saving a step that already verifies keeps it (a job signalled right after
# resuming has nothing newer; rewriting would tear its only good checkpoint),
# while a corrupt one is written afresh
CASE=resave
mkdir -p "$W/resave"
"$PY" - "$EX" "$W/resave" <<'PY' || fail "trainyard_ckpt.save rewrote a valid step or kept a corrupt one"
import os, sys
sys.path.insert(0, sys.argv[1])
import trainyard_ckpt as c
d = sys.argv[2]
p = c.save(5, {"w": b"one"}, d)
m = os.stat(os.path.join(p, "MANIFEST.json")).st_mtime_ns
assert c.save(5, {"w": b"two"}, d) == p
assert os.stat(os.path.join(p, "MANIFEST.json")).st_mtime_ns == m
assert open(os.path.join(p, "w"), "rb").read() == b"one"
open(os.path.join(p, "w"), "wb").write(b"bad")
c.save(5, {"w": b"three"}, d)
c.verify(p)
assert open(os.path.join(p, "w"), "rb").read() == b"three"
PY
ok
