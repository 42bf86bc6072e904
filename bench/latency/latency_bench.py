#!/usr/bin/env python3
"""Submit -> running for one real 2-node job on an idle local stack
(bench/README.md, "bench/latency"): the stack's two executors run real
processes; jobs go one at a time, each waited for until it ends, so the
cluster is idle for the next. Times come from PostgreSQL (the job's
created_at and its `running` event), the baseline is the submit call's own
round trip in the same run (a job cannot run before its submission
returned). Prints one line per figure and writes JSON in bench/results'
layout."""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "dispatch"), os.path.join(HERE, "..")]
from dispatch_bench import Api, posint, psql  # noqa: E402
import report_lib as rl  # noqa: E402

GOAL_MS = 100


def report(lat, submit_ms, stage_rows, jobs, json_path=None, out=sys.stdout):
    """Prints the figures and writes the JSON: lat and submit_ms in ms, one
    per job; stage_rows (submit->scheduled ms, scheduled->running ms) per job."""
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
    p50, p99 = figures
    print(f"submit->running p50  {rl.fmt(p50['value'], '7.1f', ' ms')}"
          f"   submit call p50 {rl.fmt(p50['baseline'], '6.1f', ' ms')}"
          f"   ratio {rl.fmt(p50['ratio'], '.1f', 'x')}{rl.why(p50)}", file=out)
    print(f"submit->running p99  {rl.fmt(p99['value'], '7.1f', ' ms')}   goal {GOAL_MS} ms"
          f"   {rl.verdict(p99['met'])}   ({len(rl.finite(lat))} real 2-node jobs, one at a time)"
          f"{rl.why(p99)}", file=out)
    if json_path:
        rl.write_json(json_path, {**rl.header("latency"),
                                 "params": {"jobs": jobs, "nodes": 2, "gpus_per_node": 1},
                                 "figures": figures, "stages_ms": stages,
                                 "runs": {"latency_ms": list(lat), "submit_ms": list(submit_ms)}})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--jobs", type=posint, default=100)
    ap.add_argument("--json")
    a = ap.parse_args()
    api = Api(a.api, a.token)
    team = f"latency-{int(time.time())}"
    api.call("POST", "/v1/teams", {"name": team, "nominal_gpus": 4})
    c = api.conn()
    ids, submit_ms = [], []
    for _ in range(a.jobs):
        t0 = time.monotonic()
        j = api.call("POST", "/v1/jobs", {
            "team": team, "command": ["true"], "max_runtime_seconds": 60,
            "resources": {"nodes": 2, "gpus_per_node": 1}}, conn=c)
        submit_ms.append((time.monotonic() - t0) * 1000)
        ids.append(j["id"])
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
    c.close()
    rows = psql(a.db, f"""
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
    stage_rows = psql(a.db, f"""
        SELECT extract(epoch FROM s.t - j.created_at) * 1000,
               extract(epoch FROM r.t - s.t) * 1000
        FROM jobs j
        CROSS JOIN LATERAL (SELECT min(created_at) t FROM job_events
                            WHERE job_id = j.id AND type = 'scheduled') s
        CROSS JOIN LATERAL (SELECT min(created_at) t FROM job_events
                            WHERE job_id = j.id AND type = 'running') r
        WHERE j.id IN ({','.join(map(str, ids))})""")
    report(lat, submit_ms, [[rl.num(x) for x in row] for row in stage_rows], a.jobs, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
