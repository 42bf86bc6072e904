#!/usr/bin/env python3
"""The measuring part of bench/spot (which starts the stack and runs this).

Against a running Trainyard stack with two spot nodes, node-a and node-b
(API at --server, admin token in JOBCTL_TOKEN):

1. baseline: --reps times, submit a 1-GPU job and take the time from its
   `submitted` event to its `running` event (both written server-side), then
   cancel it;
2. spot: one job running bench/spot_worker.py; --reps times, send a spot
   notice for the node it runs on (POST /v1/nodes/{id}/preempt, deadline
   --deadline), and take the time from the notice (the node's preempt
   deadline less --deadline: the API's clock when it recorded the notice) to
   the `running` event of the job's next attempt, on the other node; less the
   worker's own checkpoint write (its t_written - t_signal). Then undrain the
   noticed node, so the next repetition moves the job back.

Prints a Markdown section: per-repetition rows (--verbose), p50/p90/p99/max,
the goal (p99 <= 1 s) and the ratio against the baseline. Exit 0 when it
measured (goal met or not), 1 when the stack misbehaved. Standard library only.
"""

import argparse
import datetime
import json
import os
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_lib as rl  # noqa: E402

GOAL_S = 1.0
SETTLE_S = 0.5  # the worker steps every 100 ms


class BenchError(Exception):
    pass


class Api:
    def __init__(self, server, token):
        self.server = server.rstrip("/")
        self.token = token

    def call(self, method, path, body=None, timeout=70):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.token)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            raise BenchError(f"{method} {path}: HTTP {e.code}: {e.read()[:300]!r}") from None
        except (urllib.error.URLError, OSError) as e:
            raise BenchError(f"{method} {path}: {e}") from None


def ts(s):
    """Seconds since the epoch of an API time ("2026-11-22T12:00:00.123Z")."""
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


class Watch:
    """Follows one job's events with long polls."""

    def __init__(self, api, job):
        self.api, self.job, self.after, self.events = api, job, 0, []

    def until(self, pred, timeout, what):
        end = time.time() + timeout
        while True:
            for e in self.events:
                if pred(e):
                    return e
            left = end - time.time()
            if left <= 0:
                last = self.events[-1]["message"] if self.events else "no events"
                raise BenchError(f"job {self.job}: no {what} within {timeout:.0f} s "
                                 f"(last event: {last})")
            r = self.api.call("GET", f"/v1/jobs/{self.job}/events?after={self.after}"
                              f"&wait={max(1, min(30, int(left)))}&limit=1000")
            self.events += r["events"]
            self.after = r["next_after"] or self.after


def running_event(attempt):
    return lambda e: e["type"] == "running" and e["data"].get("attempt") == attempt


def submit(api, team, name, command, env=None):
    spec = {"team": team, "name": name, "command": command, "env": env or {},
            "resources": {"nodes": 1, "gpus_per_node": 1},
            "spot": {"allowed": True, "max_preemptions": 1000, "fallback": "none"},
            "checkpoint": {"grace_seconds": 60}, "max_runtime_seconds": 3600}
    return api.call("POST", "/v1/jobs", spec)["id"]


def wait_nodes_ready(api, ids, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        nodes = {n["id"]: n for n in api.call("GET", "/v1/nodes")["items"]}
        if all(i in nodes and nodes[i]["state"] == "ready" for i in ids):
            return nodes
        time.sleep(0.1)
    raise BenchError(f"nodes {', '.join(ids)} are not all ready after {timeout} s")


def wait_terminal(api, job, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if api.call("GET", f"/v1/jobs/{job}")["state"] in ("succeeded", "failed", "cancelled"):
            return
        time.sleep(0.05)
    raise BenchError(f"job {job} did not end within {timeout} s of its cancel")


def worker_lines(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def wait_worker(path, pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        for line in worker_lines(path):
            if pred(line):
                return line
        time.sleep(0.02)
    raise BenchError(f"the worker did not report {what} within {timeout} s ({path})")


def baseline(api, team, reps):
    lat = []
    for i in range(reps):
        job = submit(api, team, f"baseline-{i + 1}", ["/bin/sleep", "600"])
        w = Watch(api, job)
        sub = w.until(lambda e: e["type"] == "submitted", 10, "submitted event")
        run = w.until(running_event(1), 30, "running event")
        lat.append(ts(run["time"]) - ts(sub["time"]))
        api.call("POST", f"/v1/jobs/{job}/cancel", {})
        wait_terminal(api, job)
    return lat


def spot(api, team, reps, deadline, worker, times, out, verbose):
    nodes = wait_nodes_ready(api, ["node-a", "node-b"])
    for n in ("node-a", "node-b"):
        if nodes[n]["labels"].get("pool") != "spot":
            raise BenchError(f"{n} is not a spot node (labels {nodes[n]['labels']})")
    if os.path.exists(times):
        os.unlink(times)
    job = submit(api, team, "spot-bench", ["/usr/bin/python3", worker],
                 {"BENCH_TIMES": times})
    w = Watch(api, job)
    attempt = 1
    w.until(running_event(attempt), 30, "first running event")
    wait_worker(times, lambda l: l["event"] == "start" and l["attempt"] == attempt, 30,
                "the start of attempt 1")
    rows, phases = [], []
    for i in range(reps):
        # a few steps past the one it resumed from: the handshake waits for a
        # checkpoint newer than every one at signal time
        time.sleep(SETTLE_S)
        a = api.call("GET", f"/v1/jobs/{job}/attempts")["items"][-1]
        if a["attempt"] != attempt:
            raise BenchError(f"job {job}: expected attempt {attempt}, the newest is {a['attempt']}")
        where = sorted({r["node"] for r in a.get("nodes") or []})
        node = where[0] if len(where) == 1 else None
        if node not in ("node-a", "node-b"):
            raise BenchError(f"job {job} attempt {attempt}: cannot tell its node from {a}")
        other = "node-b" if node == "node-a" else "node-a"
        seq0 = w.after
        n = api.call("POST", f"/v1/nodes/{node}/preempt", {"deadline_seconds": deadline})
        t_notice = ts(n["preempt"]["deadline"]) - deadline
        run = w.until(running_event(attempt + 1), deadline + 30,
                      f"running event of attempt {attempt + 1}")
        t_running = ts(run["time"])
        ck = wait_worker(times, lambda l: l["event"] == "checkpoint" and l["attempt"] == attempt,
                         10, f"the checkpoint of attempt {attempt}")
        st = wait_worker(times,
                         lambda l: l["event"] == "start" and l["attempt"] == attempt + 1, 30,
                         f"the start of attempt {attempt + 1}")
        if st["resumed_step"] != ck["step"]:
            raise BenchError(f"attempt {attempt + 1} resumed from step {st['resumed_step']}, "
                             f"not from the checkpoint at step {ck['step']}")
        b = api.call("GET", f"/v1/jobs/{job}/attempts")["items"][-1]
        moved = sorted({r["node"] for r in b.get("nodes") or []})
        if moved != [other]:
            raise BenchError(f"attempt {attempt + 1} runs on {moved}, not on {other}")
        ckpt_s = ck["t_written"] - ck["t_signal"]
        # the server-side phases: the cycle that applied the notice, the
        # handshake and stop (the worker's checkpoint write is in here), the
        # placement, the launch on the other node
        seen = [e for e in w.events if e["seq"] > seq0]
        t_pre = ts(first(seen, "preempting", attempt)["time"])
        t_req = ts(first(seen, "requeued", attempt)["time"])
        t_sch = ts(first(seen, "scheduled", attempt + 1)["time"])
        phases.append((t_pre - t_notice, t_req - t_pre - ckpt_s, t_sch - t_req,
                       t_running - t_sch))
        row = {"rep": i + 1, "from": node, "to": other, "total": t_running - t_notice,
               "ckpt": ckpt_s, "control": t_running - t_notice - ckpt_s,
               "startup": st["startup_s"], "to_worker": st["t"] - t_notice - ckpt_s}
        rows.append(row)
        if verbose:
            print(f"| {row['rep']} | {node} → {other} | {row['total'] * 1000:.0f} | "
                  f"{ckpt_s * 1000:.0f} | **{row['control'] * 1000:.0f}** | "
                  f"{row['startup'] * 1000:.0f} | {row['to_worker'] * 1000:.0f} |", file=out)
        api.call("POST", f"/v1/nodes/{node}/undrain", {})
        wait_nodes_ready(api, [node])
        attempt += 1
    api.call("POST", f"/v1/jobs/{job}/cancel", {})
    wait_terminal(api, job)
    return rows, phases


def first(events, etype, attempt):
    """The first event of a type about an attempt (`requeued`: the attempt that ended)."""
    for e in events:
        if e["type"] == etype and e["data"].get("attempt") == attempt:
            return e
    raise BenchError(f"no {etype} event for attempt {attempt}")


def ms(x, suffix=""):
    """Seconds as printed milliseconds, or "not measured"."""
    return rl.fmt(None if rl.num(x) is None else x * 1000, ".0f", suffix)


def summary(rows, phases, base, out):
    """Prints the percentiles, the phases, the goal and the ratio to the
    baseline of the repetitions' rows and phases and the baseline times (s)."""
    cp = [row["control"] for row in rows]
    print(file=out)
    print("| series (ms) | n | p50 | p90 | p99 | max |", file=out)
    print("|---|---:|---:|---:|---:|---:|", file=out)
    for name, xs in (("control plane: notice → running elsewhere, less the worker's "
                      "checkpoint write", cp),
                     ("notice → running elsewhere (everything)", [row["total"] for row in rows]),
                     ("worker's checkpoint write (excluded)", [row["ckpt"] for row in rows]),
                     ("worker start-up (after `running`; not in the path)",
                      [row["startup"] for row in rows]),
                     ("baseline: submitted → running, fresh job", base)):
        print(f"| {name} | {len(xs)} | {ms(rl.pct(xs, 50))} | {ms(rl.pct(xs, 90))} | "
              f"{ms(rl.pct(xs, 99))} | {ms(rl.maximum(xs))} |", file=out)
    print(file=out)
    print("Where the control-plane time goes (server-side event times; p50 / p99 ms): "
          + "; ".join(f"{name} {ms(rl.pct([ph[k] for ph in phases], 50))} / "
                      f"{ms(rl.pct([ph[k] for ph in phases], 99))}"
                      for k, name in enumerate((
                          "notice → `preempting` (the cycle that applies it)",
                          "`preempting` → `requeued` (checkpoint signal relayed, handshake, "
                          "stop, exit reported; less the worker's write)",
                          "`requeued` → `scheduled` on the other node",
                          "`scheduled` → `running` (launch relayed, spawn, reported)")))
          + ".", file=out)
    p99 = rl.pct(cp, 99)
    met = rl.meets(p99, GOAL_S, at_most=True)
    print(file=out)
    print(f"Goal: control plane p99 <= {GOAL_S * 1000:.0f} ms: "
          + (rl.NOT_MEASURED if met is None else f"{ms(p99)} ms {rl.verdict(met)}"
             + (f" by {ms(p99 - GOAL_S)} ms" if met is False else "")) + ".", file=out)
    print(f"Control plane / baseline (p50): "
          f"{rl.fmt(rl.ratio(rl.pct(cp, 50), rl.pct(base, 50)), '.1f', 'x')}; "
          f"(p99): {rl.fmt(rl.ratio(p99, rl.pct(base, 99)), '.1f', 'x')}.", file=out)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default=os.environ.get("JOBCTL_SERVER", "http://127.0.0.1:8080"))
    p.add_argument("--reps", type=int, default=20, help="repetitions (at least 1)")
    p.add_argument("--deadline", type=int, default=30)
    p.add_argument("--team", default="bench")
    p.add_argument("--times", required=True, help="file the worker appends its lines to")
    p.add_argument("--verbose", action="store_true", help="print every repetition")
    a = p.parse_args(argv)
    token = os.environ.get("JOBCTL_TOKEN")
    if not token:
        print("spot_bench: JOBCTL_TOKEN is not set", file=sys.stderr)
        return 2
    api = Api(a.server, token)
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spot_worker.py")
    out = sys.stdout
    try:
        teams = [t["name"] for t in api.call("GET", "/v1/teams")["items"]]
        if a.team not in teams:
            api.call("POST", "/v1/teams", {"name": a.team, "nominal_gpus": 4})
        wait_nodes_ready(api, ["node-a", "node-b"])
        base = baseline(api, a.team, a.reps)
        if a.verbose:
            print("| rep | move | notice → running ms | worker checkpoint write ms | "
                  "**control plane ms** | worker start-up ms | notice → worker main() ms "
                  "(less its checkpoint write) |", file=out)
            print("|---:|---|---:|---:|---:|---:|---:|", file=out)
        rows, phases = spot(api, a.team, a.reps, a.deadline, worker, a.times, out, a.verbose)
    except BenchError as e:
        print(f"spot_bench: error: {e}", file=sys.stderr)
        return 1
    summary(rows, phases, base, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
