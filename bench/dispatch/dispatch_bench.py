#!/usr/bin/env python3
"""Dispatch at scale (bench/README.md, "bench/dispatch"): gangs placed,
dispatched over Kafka and acknowledged as running per second, with
simulated nodes (trainyard-simexec), on a private local stack that
bench/dispatch/run started. Standard library only; PostgreSQL through psql.

Phases, all in this run:
  ceiling    the broker alone: kcat produces and consumes as many messages
             of launch size as the gangs below need, and the rate is turned
             into gangs/s (the transport's ceiling for this pipeline);
  throughput N gang jobs (1-8 nodes x 1-8 GPUs, seeded) are submitted while
             no node can run them, then the simulated nodes register: from
             the first placement to the last gang running;
  latency    on the idle cluster, jobs one at a time: submit -> running.
Prints one line per figure (figure, baseline, ratio) and writes JSON.
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import time
import urllib.parse


def log(msg):
    print(f"dispatch_bench: {msg}", file=sys.stderr, flush=True)


class Api:
    def __init__(self, url, token):
        u = urllib.parse.urlsplit(url)
        self.host, self.port, self.token = u.hostname, u.port, token

    def conn(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=60)

    def call(self, method, path, body=None, conn=None):
        c = conn or self.conn()
        hdr = {"Authorization": f"Bearer {self.token}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            hdr["Content-Type"] = "application/json"
        c.request(method, path, body=data, headers=hdr)
        r = c.getresponse()
        text = r.read()
        if conn is None:
            c.close()
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: HTTP {r.status}: {text[:300]!r}")
        return json.loads(text) if text else None


def psql(db, sql):
    out = subprocess.run(["psql", "-XAtq", "-F", "\t", db, "-c", sql], check=True,
                         capture_output=True, text=True).stdout
    return [line.split("\t") for line in out.splitlines() if line]


def pct(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1)))))
    return v[k]


def gang_specs(n, seed, max_nodes, max_gpus):
    rng = random.Random(seed)
    return [(rng.randint(1, max_nodes), rng.randint(1, max_gpus)) for _ in range(n)]


def submit_all(api, team, specs, clients, tag):
    """Submit every (nodes, gpus) spec with `clients` keep-alive connections."""
    chunks = [specs[i::clients] for i in range(clients)]

    def worker(chunk):
        c = api.conn()
        for nodes, gpus in chunk:
            # a declared runtime, as on any backfilling scheduler: without it
            # a job counts as holding its GPUs for the default 24 hours
            api.call("POST", "/v1/jobs", {
                "team": team, "name": tag, "command": ["true"], "max_runtime_seconds": 60,
                "resources": {"nodes": nodes, "gpus_per_node": gpus}}, conn=c)
        c.close()

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(clients) as ex:
        for f in [ex.submit(worker, ch) for ch in chunks]:
            f.result()
    return time.monotonic() - t0


def wait_done(db, team_id, n, timeout, what):
    deadline = time.monotonic() + timeout
    last = -1
    while time.monotonic() < deadline:
        done = int(psql(db, "SELECT count(*) FROM jobs WHERE team_id = "
                            f"{team_id} AND state IN ('succeeded', 'failed', 'cancelled')")[0][0])
        if done >= n:
            return
        if done != last:
            last = done
        time.sleep(0.5)
    raise RuntimeError(f"{what}: only {last} of {n} jobs ended within {timeout} s")


def event_times(db, team_id):
    """Per job: created, scheduled, running (epoch seconds), nodes."""
    rows = psql(db, f"""
        SELECT j.id, extract(epoch FROM j.created_at),
               extract(epoch FROM min(e.created_at) FILTER (WHERE e.type = 'scheduled')),
               extract(epoch FROM min(e.created_at) FILTER (WHERE e.type = 'running')),
               (j.spec->'resources'->>'nodes')::int, j.state
        FROM jobs j JOIN job_events e ON e.job_id = j.id
        WHERE j.team_id = {team_id} GROUP BY j.id""")
    out = []
    for r in rows:
        out.append({"id": int(r[0]), "created": float(r[1]),
                    "scheduled": float(r[2]) if r[2] else None,
                    "running": float(r[3]) if r[3] else None,
                    "nodes": int(r[4] or 1), "state": r[5]})
    return out


def sustained(times):
    """Gangs/s between 10 % and 90 % of the events (sorted times)."""
    t = sorted(times)
    if len(t) < 10:
        return float("nan")
    a, b = t[len(t) // 10], t[(len(t) * 9) // 10]
    return (len(t) * 8 // 10) / (b - a) if b > a else float("inf")


def kcat_ceiling(bootstrap, messages, size):
    """Messages/s the broker carries, produced and then consumed with kcat
    (one producer and one consumer process, all partitions of a new topic)."""
    topic = f"bench.ceiling.{os.getpid()}.{int(time.time())}"
    payload = ("x" * (size - 1) + "\n") * messages
    t0 = time.monotonic()
    subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-X", "linger.ms=5"],
                   input=payload.encode(), check=True, capture_output=True)
    got = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning",
                          "-c", str(messages), "-e", "-q"],
                         check=True, capture_output=True).stdout.count(b"\n")
    dt = time.monotonic() - t0
    if got < messages:
        raise RuntimeError(f"kcat consumed {got} of {messages} messages")
    return messages / dt


def proc_usage(pid):
    """(RSS KiB, CPU seconds) of a process from /proc."""
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return rss, (int(fields[11]) + int(fields[12])) / ticks


def proc_memory(pid):
    """Of the RSS (KiB): what only this process holds (USS, Private_*), its
    proportional share (PSS), and library pages shared with other processes."""
    m = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            k, _, v = line.partition(":")
            if v.strip().endswith("kB"):
                m[k] = int(v.split()[0])
    return {"uss_kb": m.get("Private_Clean", 0) + m.get("Private_Dirty", 0),
            "pss_kb": m.get("Pss", 0),
            "shared_clean_kb": m.get("Shared_Clean", 0)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--bootstrap", required=True, help="host:port,... of the broker")
    ap.add_argument("--simexec", required=True, help="the trainyard-simexec program")
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--latency-jobs", type=int, default=100)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--per-process", type=int, default=1000,
                    help="simulated nodes per trainyard-simexec process")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--idle-executor-pid", type=int,
                    help="a real trainyard-executor with nothing to run, for its footprint")
    a = ap.parse_args()
    api = Api(a.api, a.token)

    # real executors of the local stack stay out of it
    for n in api.call("GET", "/v1/nodes")["items"]:
        if not n["id"].startswith("sim-") and n["state"] != "drained":
            api.call("POST", f"/v1/nodes/{n['id']}/drain")
    team = f"dispatch-{int(time.time())}"
    api.call("POST", "/v1/teams", {"name": team, "nominal_gpus": a.nodes * 8})
    team_id = int(psql(a.db, f"SELECT id FROM teams WHERE name = '{team}'")[0][0])

    stmts = bool(psql(a.db, "SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'"))
    idle0 = proc_usage(a.idle_executor_pid) if a.idle_executor_pid else None
    t_idle0 = time.monotonic()
    specs = gang_specs(a.jobs, a.seed, 8, 8)
    gangs_nodes = sum(n for n, _ in specs)
    log(f"submitting {a.jobs} gang jobs ({gangs_nodes} node launches) with no node up")
    submit_s = submit_all(api, team, specs, a.clients, "throughput")
    if stmts:
        psql(a.db, "SELECT pg_stat_statements_reset()")
    log(f"submitted in {submit_s:.1f} s ({a.jobs / submit_s:.0f}/s); starting "
        f"{a.nodes} simulated nodes")

    # simulated executors of at most --per-process nodes each
    sims, stats = [], []
    for first in range(0, a.nodes, a.per_process):
        n = min(a.per_process, a.nodes - first)
        stats.append(os.path.join(a.workdir, f"simexec-{first}.stats"))
        out = open(os.path.join(a.workdir, f"simexec-{first}.log"), "w")
        sims.append((subprocess.Popen(
            [a.simexec, "--kafka-bootstrap", a.bootstrap, "--nodes", str(n), "--first-index",
             str(first), "--gpus", "8", "--run-ms", "0", "--stats-file", stats[-1]],
            stdout=out, stderr=subprocess.STDOUT), out))
    try:
        t_start = time.time()
        wait_done(a.db, team_id, a.jobs, a.timeout, "throughput")
        t_all = time.time() - t_start
        ev = event_times(a.db, team_id)
        sched = [e["scheduled"] for e in ev if e["scheduled"]]
        run = [e["running"] for e in ev if e["running"]]
        first = min(sched)
        placed_rate = len(sched) / (max(sched) - first)
        running_rate = len(run) / (max(run) - first)
        sustained_running = sustained(run)
        log(f"all {a.jobs} ended {t_all:.1f} s after the nodes started")
        top = []
        if stmts:
            # the scheduler's statements while the gangs ran (the API was idle)
            top = psql(a.db, """
                SELECT calls, round(total_exec_time)::bigint, regexp_replace(query, '\\s+', ' ', 'g')
                FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'
                ORDER BY calls DESC""")

        # latency: one job at a time on the idle cluster
        lat_specs = gang_specs(a.latency_jobs, a.seed + 1, 8, 8)
        lat_team = team + "-lat"
        api.call("POST", "/v1/teams", {"name": lat_team, "nominal_gpus": a.nodes * 8})
        lat_id = int(psql(a.db, f"SELECT id FROM teams WHERE name = '{lat_team}'")[0][0])
        c = api.conn()
        for nodes, gpus in lat_specs:
            j = api.call("POST", "/v1/jobs", {
                "team": lat_team, "command": ["true"], "max_runtime_seconds": 60,
                "resources": {"nodes": nodes, "gpus_per_node": gpus}}, conn=c)
            api.call("GET", f"/v1/jobs/{j['id']}/events?after=0&wait=0", conn=c)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if api.call("GET", f"/v1/jobs/{j['id']}", conn=c)["state"] in (
                        "running", "succeeded", "failed"):
                    break
                time.sleep(0.005)
        c.close()
        wait_done(a.db, lat_id, a.latency_jobs, 120, "latency")
        lev = event_times(a.db, lat_id)
        lat = [(e["running"] - e["created"]) * 1000 for e in lev if e["running"]]
    finally:
        for proc, out in sims:
            proc.terminate()
            proc.wait(timeout=30)
            out.close()
    # the first process simulates the most nodes: its footprint is the one shown
    simstats = dict(kv.split("=") for kv in open(stats[0]).read().split())
    sim_nodes = min(a.per_process, a.nodes)
    idle = None
    if idle0:
        rss, cpu = proc_usage(a.idle_executor_pid)
        idle = {"rss_kb": rss, "cpu_percent": 100 * (cpu - idle0[1]) / (time.monotonic() - t_idle0),
                **proc_memory(a.idle_executor_pid)}

    # the transport's ceiling: the same number of messages through the broker
    per_gang = 1 + 4  # per node: launch, rank_started, attempt_running, rank_exited, attempt_exited
    # enough messages to dwarf kcat's start-up, small enough for the embedded
    # broker's ~5 MiB per partition (DESIGN.md §5)
    msgs = 20000
    ceiling_msgs = kcat_ceiling(a.bootstrap, msgs, 200)
    ceiling_gangs = ceiling_msgs / (per_gang * gangs_nodes / a.jobs)

    calls = sum(int(r[0]) for r in top)
    res = {
        "statements_per_gang": calls / a.jobs if top else None,
        "top_statements": [{"calls": int(r[0]), "total_ms": int(r[1]), "query": r[2][:300]}
                           for r in top[:25]],
        "nodes": a.nodes, "jobs": a.jobs, "node_launches": gangs_nodes,
        "submit_per_s": a.jobs / submit_s,
        "placed_per_s": placed_rate, "running_per_s": running_rate,
        "running_per_s_sustained": sustained_running,
        "first_placement_s": first - t_start,
        "latency_ms_p50": pct(lat, 50), "latency_ms_p99": pct(lat, 99),
        "latency_jobs": len(lat),
        "kafka_ceiling_msgs_per_s": ceiling_msgs, "kafka_ceiling_gangs_per_s": ceiling_gangs,
        "simexec_nodes": sim_nodes, "simexec_processes": len(sims),
        "simexec_rss_kb": int(simstats["rss_kb"]), "simexec_cpu_ms": int(simstats["cpu_ms"]),
        "simexec_launches": int(simstats["launches"]),
        "idle_executor": idle,
    }
    print(f"gangs running/s      {running_rate:8.0f}   broker ceiling {ceiling_gangs:8.0f}"
          f"   ratio {running_rate / ceiling_gangs:.3f}   (goal 2000; sustained 10-90 %:"
          f" {sustained_running:.0f}/s)")
    print(f"gangs placed/s       {placed_rate:8.0f}   broker ceiling {ceiling_gangs:8.0f}"
          f"   ratio {placed_rate / ceiling_gangs:.3f}")
    print(f"submit->running p50  {pct(lat, 50):8.1f} ms  p99 {pct(lat, 99):.1f} ms"
          f"  ({len(lat)} jobs, 1-8 simulated nodes, idle cluster)")
    print(f"simexec {sim_nodes} nodes: max RSS {int(simstats['rss_kb']) / 1024:.1f} MiB, "
          f"CPU {int(simstats['cpu_ms']) / 1000:.1f} s for {simstats['launches']} launches")
    if idle:
        print(f"idle executor RSS    {idle['rss_kb'] / 1024:8.1f} MiB   goal 10 MiB   ratio"
              f" {idle['rss_kb'] / 1024 / 10:.2f}   (CPU {idle['cpu_percent']:.2f} % while idle,"
              f" heartbeating every 2 s)")
        print(f"  of which shared library pages {idle['shared_clean_kb'] / 1024:.1f} MiB;"
              f" its own memory (USS) {idle['uss_kb'] / 1024:.1f} MiB, PSS {idle['pss_kb'] / 1024:.1f} MiB")
    if top:
        print(f"statements per gang  {calls / a.jobs:8.1f}   ({calls} statements for {a.jobs}"
              f" gangs of {gangs_nodes / a.jobs:.1f} nodes; most called:)")
        for r in top[:12]:
            print(f"  {int(r[0]) / a.jobs:7.2f}/gang {int(r[1]):7d} ms  {r[2][:110]}")
    if a.json:
        def fig(name, label, unit, value, baseline, baseline_name, goal=None, goal_ratio=None):
            ratio = value / baseline if baseline else None
            f = {"name": name, "label": label, "unit": unit, "value": value,
                 "baseline": baseline, "baseline_name": baseline_name, "ratio": ratio}
            if goal is not None:
                f["goal"] = goal
                f["met"] = value >= goal if goal_ratio is None else value <= goal
            return f
        figures = [
            fig("gangs_running_per_second", "gangs running/s", "gangs/s", running_rate,
                ceiling_gangs, "broker ceiling (kcat)", 2000),
            fig("gangs_placed_per_second", "gangs placed/s", "gangs/s", placed_rate,
                ceiling_gangs, "broker ceiling (kcat)", 2000),
            fig("submit_to_running_p99_ms", "submit -> running p99 (simulated nodes)", "ms",
                pct(lat, 99), pct(lat, 50), "p50", 100, goal_ratio=True),
        ]
        if idle:
            figures.append(fig("idle_executor_rss_mib", "idle executor RSS", "MiB",
                               idle["rss_kb"] / 1024, 10, "goal", 10, goal_ratio=True))
        doc = {"benchmark": "dispatch",
               "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "commit": subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)),
                                         "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True).stdout.strip() or None,
               "machine": {"nproc": os.cpu_count(), "load": os.getloadavg()},
               "params": {"nodes": a.nodes, "jobs": a.jobs, "latency_jobs": a.latency_jobs,
                          "clients": a.clients, "per_process": a.per_process, "seed": a.seed},
               "figures": figures, "runs": res}
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
