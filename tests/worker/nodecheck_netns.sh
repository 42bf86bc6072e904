#!/usr/bin/env bash
# trainyard-allreduce --node-check over a real slow link: four network
# namespaces on a bridge, one address each, and node-b's veth limited to
# 20 Mbit/s by tbf on both ends (what it sends and what it receives). The
# check must name node-b and every rank must exit 5; without the limit
# nothing is slow. Needs root (namespaces, bridge, veth, tc).
#
# Needs TY_ALLREDUCE_BIN. TY_TEST_KEEP=1 keeps the work directory.
set -euo pipefail

if [[ -z ${TY_ALLREDUCE_BIN:-} ]]; then
	echo "nodecheck_netns: TY_ALLREDUCE_BIN is not set; run the tests with tests/run" >&2
	exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "nodecheck_netns: must run as root: it creates network namespaces, a bridge," \
		"veth pairs and tc qdiscs" >&2
	exit 1
fi
for t in ip tc; do
	command -v "$t" >/dev/null || {
		echo "nodecheck_netns: '$t' is not installed (iproute2)" >&2
		exit 1
	}
done
BIN=$TY_ALLREDUCE_BIN
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tw_init nodecheck_netns
CASE=setup
N=4
NAMES=(node-a node-b node-c node-d)
# names unique to this run: several runs may share the machine
ID=$$
BR=tync$((ID % 100000))
NET=10.$((200 + ID % 50)).$((ID / 50 % 250))
NS=()
VETH=()
for ((i = 0; i < N; i++)); do
	NS+=("tync$ID-$i")
	VETH+=("tync$((ID % 100000))h$i")
done

teardown() {
	local i

	for ((i = 0; i < N; i++)); do
		ip netns pids "${NS[$i]}" 2>/dev/null | xargs -r kill -KILL
		ip link del "${VETH[$i]}" 2>/dev/null # takes the namespace's end along
		ip netns del "${NS[$i]}" 2>/dev/null
	done
	ip link del "$BR" 2>/dev/null
}
tw_on_exit teardown

# ---- the network: bridge, one namespace per node -------------------------------

ip link add "$BR" type bridge || fail "cannot create bridge $BR"
ip link set "$BR" up
for ((i = 0; i < N; i++)); do
	ip netns add "${NS[$i]}" || fail "cannot create namespace ${NS[$i]}"
	ip link add "${VETH[$i]}" type veth peer name eth0 netns "${NS[$i]}" ||
		fail "cannot create veth ${VETH[$i]}"
	ip link set "${VETH[$i]}" master "$BR" up
	ip -n "${NS[$i]}" addr add "$NET.$((i + 1))/24" dev eth0
	ip -n "${NS[$i]}" link set eth0 up
	ip -n "${NS[$i]}" link set lo up
done
ok

# limit LIMITED: node LIMITED's link at 20 Mbit/s both ways (none when empty)
limit() {
	local i=$1

	tc qdisc add dev "${VETH[$i]}" root tbf rate 20mbit burst 32kbit latency 400ms ||
		fail "tc tbf on ${VETH[$i]}"
	ip netns exec "${NS[$i]}" tc qdisc add dev eth0 root tbf rate 20mbit burst 32kbit \
		latency 400ms || fail "tc tbf in ${NS[$i]}"
}

# gang NAME -- ARGS: one rank per namespace, like the executor starts them
gang() {
	local name=$1 i pids=() port=29777

	shift 2
	CASE=$name
	mkdir -p "$W/$name"
	for ((i = 0; i < N; i++)); do
		ip netns exec "${NS[$i]}" env -i PATH="$PATH" RANK=$i WORLD_SIZE=$N LOCAL_RANK=0 \
			LOCAL_WORLD_SIZE=1 NODE_RANK=$i NNODES=$N TRAINYARD_NODE_ID="${NAMES[$i]}" \
			MASTER_ADDR="$NET.1" MASTER_PORT=$port \
			${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} \
			timeout 120 "$BIN" --backend tcp --bytes 256K --timeout 30 "$@" \
			>"$W/$name/rank-$i.out" 2>"$W/$name/rank-$i.err" &
		pids+=("$!")
	done
	for ((i = 0; i < N; i++)); do
		set +e
		wait "${pids[$i]}"
		echo $? >"$W/$name/rank-$i.rc"
		set -e
	done
}

rc_of() { cat "$W/$CASE/rank-$1.rc"; }

# slow_list JSON_LIST: rank 0's verdict has exactly this slow list, 4 nodes
slow_list() {
	python3 - "$W/$CASE/rank-0.out" "$1" <<'PY' || fail "rank 0 verdict"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 2, lines
v = json.loads(lines[1])["node_check"]
assert [n["node"] for n in v["nodes"]] == ["node-a", "node-b", "node-c", "node-d"], v["nodes"]
assert v["slow"] == json.loads(sys.argv[2]), v["slow"]
assert len(v["pairs"]) == 6 and all(p["gbps"] > 0 for p in v["pairs"]), v["pairs"]
PY
	ok
}

# healthy: nothing slow (ratio 0.1: veth pairs on a busy machine vary)
gang healthy -- --node-check --node-check-bytes 1M --slow-ratio 0.1
for ((i = 0; i < N; i++)); do
	[[ $(rc_of $i) -eq 0 ]] || fail "rank $i exited $(rc_of $i)"
	ok
done
slow_list '[]'

# node-b at 20 Mbit/s both ways: 1 MiB takes 0.4 s, a bridge pair milliseconds.
# Ratio 0.1: with 4 nodes the median is the mean of two healthy scores, and
# those vary by 5x between rounds here; 20 Mbit/s is 100x below any of them.
limit 1
gang slow_link -- --node-check --node-check-bytes 1M --node-check-rounds 2 --slow-ratio 0.1
for ((i = 0; i < N; i++)); do
	[[ $(rc_of $i) -eq 5 ]] || fail "rank $i exited $(rc_of $i), expected 5"
	grep -qE "^trainyard-allreduce: rank $i: slow node\\(s\\): node-b [0-9.e-]+ GB/s, gang median [0-9.e+-]+ GB/s \\(< 0.1 x median\\)\$" \
		"$W/$CASE/rank-$i.err" || fail "rank $i: no slow-node message for node-b"
	ok
done
slow_list '["node-b"]'
# 20 Mbit/s is 0.0025 GB/s: node-b's score is at most that
python3 - "$W/$CASE/rank-0.out" <<'PY' || fail "node-b's score is above its link"
import json, sys
v = json.loads(open(sys.argv[1]).read().splitlines()[1])["node_check"]
assert v["nodes"][1]["gbps"] <= 0.0026, v["nodes"][1]
PY
ok
