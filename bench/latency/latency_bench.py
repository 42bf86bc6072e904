#!/usr/bin/env python3
"""Submit -> running for one real 2-node job on an idle local stack
(bench/README.md, "bench/latency"): the stack's two executors run real
processes; jobs go one at a time, each waited for until it ends, so the
cluster is idle for the next. Times come from PostgreSQL (the job's
created_at and its `running` event), the baseline is the submit call's own
round trip in the same run (a job cannot run before its submission
returned). With --plain-after CMD the same jobs run again after CMD
restarted the executors without containers: the isolation's cost, measured
in the same run. Prints one line per figure and writes JSON in
bench/results' layout."""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "dispatch"), os.path.join(HERE, "..")]
from dispatch_bench import Api, posint, psql  # noqa: E402
import report_lib as rl  # noqa: E402

GOAL_MS = 100
ISOLATION_GOAL_MS = 50  # containers may add at most this much to the p99


def report(lat, submit_ms, stage_rows, jobs, json_path=None, out=sys.stdout, plain=None):
    """Prints the figures and writes the JSON: lat and submit_ms in ms, one
    per job (executors with containers); stage_rows (submit->scheduled ms,
    scheduled->running ms) per job; plain: the latencies of the same jobs
    with executors without containers (None: not run)."""
    stages = {}
    for name, col in (("submit->scheduled", 0), ("scheduled->running", 1)):
        v = rl.finite(row[col] for row in stage_rows)
        stages[name] = {"p50": rl.pct(v, 50), "p99": rl.pct(v, 99), "max": rl.maximum(v)}
        print(f"  stage {name:24s} p50 {rl.fmt(stages[name]['p50'], '7.1f', ' ms')}"
              f"   p99 {rl.fmt(stages[name]['p99'], '7.1f', ' ms')}"
              f"   max {rl.fmt(stages[name]['max'], '7.1f', ' ms')}", file=out)
    why = {"value": "no job with a running event", "baseline": "no submit call timed"}
    figures = [
        rl.figure("submit_to_running_p50_ms", "submit -> running p50", "ms", rl.pct(lat, 50),
                 rl.pct(submit_ms, 50), "submit call p50", reasons=why),
        rl.figure("submit_to_running_p99_ms", "submit -> running p99", "ms", rl.pct(lat, 99),
                 rl.pct(submit_ms, 99), "submit call p99", GOAL_MS, at_most=True, reasons=why)]
    plain_p99 = rl.pct(plain or [], 99)
    figures.append(rl.figure(
        "isolation_submit_to_running_p99_ms", "submit -> running p99 in containers", "ms",
        rl.pct(lat, 99), plain_p99, "p99 without containers",
        plain_p99 + ISOLATION_GOAL_MS if plain_p99 else None, at_most=True,
        reasons={"value": "no job with a running event",
                 "baseline": "no run without containers" if plain is None
                 else "no job without containers with a running event"}))
    p50, p99, iso = figures
    print(f"submit->running p50  {rl.fmt(p50['value'], '7.1f', ' ms')}"
          f"   submit call p50 {rl.fmt(p50['baseline'], '6.1f', ' ms')}"
          f"   ratio {rl.fmt(p50['ratio'], '.1f', 'x')}{rl.why(p50)}", file=out)
    print(f"submit->running p99  {rl.fmt(p99['value'], '7.1f', ' ms')}   goal {GOAL_MS} ms"
          f"   {rl.verdict(p99['met'])}   ({len(rl.finite(lat))} real 2-node jobs, one at a time)"
          f"{rl.why(p99)}", file=out)
    print(f"in containers p99    {rl.fmt(iso['value'], '7.1f', ' ms')}"
          f"   without {rl.fmt(iso['baseline'], '7.1f', ' ms')}"
          f"   goal at most +{ISOLATION_GOAL_MS} ms   {rl.verdict(iso.get('met'))}{rl.why(iso)}",
          file=out)
    if json_path:
        rl.write_json(json_path, {**rl.header("latency"),
                                 "params": {"jobs": jobs, "nodes": 2, "gpus_per_node": 1},
                                 "figures": figures, "stages_ms": stages,
                                 "runs": {"latency_ms": list(lat), "submit_ms": list(submit_ms),
                                          "plain_latency_ms": list(plain or [])}})


def run_one(api, c, team):
    """One job, waited for to its end; its id and its submit call's ms."""
    t0 = time.monotonic()
    j = api.call("POST", "/v1/jobs", {
        "team": team, "command": ["true"], "max_runtime_seconds": 60,
        "resources": {"nodes": 2, "gpus_per_node": 1}}, conn=c)
    ms = (time.monotonic() - t0) * 1000
    # wait for its end with the events long-poll, so the next finds the cluster idle
    after = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ev = api.call("GET", f"/v1/jobs/{j['id']}/events?after={after}&wait=5", conn=c)
        after = ev["next_after"]
        if ev["state"] in ("succeeded", "failed", "cancelled", "stopped"):
            break
    else:
        raise RuntimeError(f"job {j['id']} did not end within 60 s")
    if ev["state"] != "succeeded":
        raise RuntimeError(f"job {j['id']} ended {ev['state']}")
    return j["id"], ms


def measure(api, db, team, jobs):
    """jobs jobs after one unmeasured (nodes that just started register and
    warm up): submit->running ms, submit call ms and stage rows of each."""
    c = api.conn()
    run_one(api, c, team)
    ids, submit_ms = [], []
    for _ in range(jobs):
        i, ms = run_one(api, c, team)
        ids.append(i)
        submit_ms.append(ms)
    c.close()
    rows = psql(db, f"""
        SELECT extract(epoch FROM min(e.created_at) FILTER (WHERE e.type = 'running')
                                - j.created_at) * 1000
        FROM jobs j JOIN job_events e ON e.job_id = j.id
        WHERE j.id IN ({','.join(map(str, ids))}) GROUP BY j.id""")
    lat = [float(row[0]) for row in rows if row[0]]
    if len(lat) != len(ids):
        raise RuntimeError(f"{len(ids) - len(lat)} jobs have no running event")
    # where the time goes: submit -> the cycle's 'scheduled' event (its
    # transaction's start) -> the 'running' event the scheduler applied from
    # the executors' reports (relay, broker, executors, fork, and back)
    stage_rows = psql(db, f"""
        SELECT extract(epoch FROM s.t - j.created_at) * 1000,
               extract(epoch FROM r.t - s.t) * 1000
        FROM jobs j
        CROSS JOIN LATERAL (SELECT min(created_at) t FROM job_events
                            WHERE job_id = j.id AND type = 'scheduled') s
        CROSS JOIN LATERAL (SELECT min(created_at) t FROM job_events
                            WHERE job_id = j.id AND type = 'running') r
        WHERE j.id IN ({','.join(map(str, ids))})""")
    return lat, submit_ms, [[rl.num(x) for x in row] for row in stage_rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--jobs", type=posint, default=100)
    ap.add_argument("--json")
    ap.add_argument("--plain-after", help="a command that restarts the executors without "
                    "containers; then the same jobs again")
    a = ap.parse_args()
    api = Api(a.api, a.token)
    team = f"latency-{int(time.time())}"
    api.call("POST", "/v1/teams", {"name": team, "nominal_gpus": 4})
    lat, submit_ms, stage_rows = measure(api, a.db, team, a.jobs)
    plain = None
    if a.plain_after:
        subprocess.run(a.plain_after, shell=True, check=True)
        plain = measure(api, a.db, team, a.jobs)[0]
    report(lat, submit_ms, stage_rows, a.jobs, a.json, plain=plain)
    return 0


if __name__ == "__main__":
    sys.exit(main())
