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
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dispatch"))
from dispatch_bench import Api, pct, psql  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--jobs", type=int, default=100)
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
    lat = [float(r[0]) for r in rows if r[0]]
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
    stages = {}
    for name, col in (("submit->scheduled", 0), ("scheduled->running", 1)):
        v = [float(r[col]) for r in stage_rows if r[col]]
        if v:
            stages[name] = {"p50": pct(v, 50), "p99": pct(v, 99), "max": max(v)}
            print(f"  stage {name:24s} p50 {stages[name]['p50']:7.1f} ms"
                  f"   p99 {stages[name]['p99']:7.1f} ms   max {stages[name]['max']:7.1f} ms")
    p50, p99, s50 = pct(lat, 50), pct(lat, 99), pct(submit_ms, 50)
    print(f"submit->running p50  {p50:7.1f} ms   submit call p50 {s50:6.1f} ms   ratio {p50 / s50:.1f}x")
    print(f"submit->running p99  {p99:7.1f} ms   goal 100 ms   {'MET' if p99 <= 100 else 'MISSED'}"
          f"   ({len(lat)} real 2-node jobs, one at a time)")
    if a.json:
        fig = lambda name, label, v, b, bname, goal=None: dict(
            name=name, label=label, unit="ms", value=v, baseline=b, baseline_name=bname,
            ratio=v / b if b else None, **({"goal": goal, "met": v <= goal} if goal else {}))
        doc = {"benchmark": "latency",
               "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "commit": subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)),
                                         "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True).stdout.strip() or None,
               "machine": {"nproc": os.cpu_count(), "load": os.getloadavg()},
               "params": {"jobs": a.jobs, "nodes": 2, "gpus_per_node": 1},
               "figures": [fig("submit_to_running_p50_ms", "submit -> running p50", p50, s50,
                               "submit call p50"),
                           fig("submit_to_running_p99_ms", "submit -> running p99", p99,
                               pct(submit_ms, 99), "submit call p99", 100)],
               "stages_ms": stages,
               "runs": {"latency_ms": lat, "submit_ms": submit_ms}}
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
