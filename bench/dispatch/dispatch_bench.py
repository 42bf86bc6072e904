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
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import report_lib as rl  # noqa: E402

GOAL_GANGS_PER_S, GOAL_P99_MS, GOAL_IDLE_RSS_MIB = 2000, 100, 10
# per node of a gang: launch, rank_started, attempt_running, rank_exited, attempt_exited
MSGS_PER_NODE = 1 + 4


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


def posint(s):
    """argparse type: a positive integer."""
    try:
        v = int(s)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"'{s}' is not a positive integer")
    return v


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
    return [{"id": int(row[0]), "created": float(row[1]), "scheduled": rl.num(row[2]),
             "running": rl.num(row[3]), "nodes": int(row[4] or 1), "state": row[5]}
            for row in rows]


def span_rate(times, first=None):
    """Events/s from `first` (default: the earliest) to the last event, or None."""
    t = rl.finite(times)
    if not t:
        return None
    return rl.rate(len(t), max(t) - (min(t) if first is None else first))


def sustained(times):
    """Events/s between 10 % and 90 % of the events, or None (fewer than 10)."""
    t = sorted(rl.finite(times))
    if len(t) < 10:
        return None
    return rl.rate(len(t) * 8 // 10, t[(len(t) * 9) // 10] - t[len(t) // 10])


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
    return rl.rate(messages, dt)


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
    ap.add_argument("--nodes", type=posint, default=2000)
    ap.add_argument("--jobs", type=posint, default=20000)
    ap.add_argument("--latency-jobs", type=posint, default=100)
    ap.add_argument("--clients", type=posint, default=16)
    ap.add_argument("--per-process", type=posint, default=1000,
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
    # the simulated nodes register only after the submissions: declared as
    # a pool, as an operator of a cluster that scales would, they may be
    # asked for before they exist (docs/scheduling.md, "Cannot run")
    api.call("PUT", "/v1/node-pools/bench-sim", {"gpus_per_node": 8, "max_nodes": a.nodes})
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
    log(f"submitted in {submit_s:.1f} s ({rl.fmt(rl.rate(a.jobs, submit_s))}/s); starting "
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
    try:
        with open(stats[0]) as f:
            simstats = dict(kv.split("=", 1) for kv in f.read().split() if "=" in kv)
    except OSError:
        simstats = {}
    idle = None
    if idle0:
        rss, cpu = proc_usage(a.idle_executor_pid)
        idle = {"rss_kb": rss, "cpu_percent": rl.ratio(100 * (cpu - idle0[1]),
                                                     time.monotonic() - t_idle0),
                **proc_memory(a.idle_executor_pid)}

    # the transport's ceiling: the same number of messages through the broker;
    # enough messages to dwarf kcat's start-up, small enough for the embedded
    # broker's ~5 MiB per partition (DESIGN.md §5)
    ceiling_msgs = kcat_ceiling(a.bootstrap, 20000, 200)
    report({"jobs": a.jobs, "nodes": a.nodes, "node_launches": gangs_nodes,
            "submit_seconds": submit_s, "t_start": t_start, "scheduled": sched, "running": run,
            "latency_ms": lat, "kafka_ceiling_msgs_per_s": ceiling_msgs, "top": top,
            "simexec_nodes": min(a.per_process, a.nodes), "simexec_processes": len(sims),
            "simstats": simstats, "idle_executor": idle},
           {"nodes": a.nodes, "jobs": a.jobs, "latency_jobs": a.latency_jobs,
            "clients": a.clients, "per_process": a.per_process, "seed": a.seed}, a.json)
    return 0


def report(m, params, json_path=None, out=sys.stdout):
    """Prints the figures and writes the JSON from the raw measurements m:
    jobs, node_launches, submit_seconds, t_start and the scheduled and running
    event times (epoch s), latency_ms per job, kafka_ceiling_msgs_per_s, top
    (pg_stat_statements rows), simstats (trainyard-simexec's stats file),
    idle_executor (or None)."""
    jobs, launches, top = m["jobs"], m["node_launches"], m["top"]
    sched, run, lat, simstats, idle = (m["scheduled"], m["running"], m["latency_ms"],
                                       m["simstats"], m["idle_executor"])
    first = rl.minimum(sched)
    placed_rate, running_rate = span_rate(sched, first), span_rate(run, first)
    sustained_running = sustained(run)
    # a gang of the run's mean size in messages through the broker
    ceiling_gangs = rl.ratio(rl.positive(m["kafka_ceiling_msgs_per_s"]),
                             MSGS_PER_NODE * launches / jobs)
    calls = sum(int(row[0]) for row in top)
    sim = {k: rl.num(simstats.get(k)) for k in ("rss_kb", "cpu_ms", "launches")}
    res = {
        "statements_per_gang": rl.ratio(calls, jobs) if top else None,
        "top_statements": [{"calls": int(row[0]), "total_ms": int(row[1]), "query": row[2][:300]}
                           for row in top[:25]],
        "nodes": m["nodes"], "jobs": jobs, "node_launches": launches,
        "submit_per_s": rl.rate(jobs, m["submit_seconds"]),
        "placed_per_s": placed_rate, "running_per_s": running_rate,
        "running_per_s_sustained": sustained_running,
        "first_placement_s": None if first is None else first - m["t_start"],
        "latency_ms_p50": rl.pct(lat, 50), "latency_ms_p99": rl.pct(lat, 99),
        "latency_jobs": len(rl.finite(lat)),
        "kafka_ceiling_msgs_per_s": m["kafka_ceiling_msgs_per_s"],
        "kafka_ceiling_gangs_per_s": ceiling_gangs,
        "simexec_nodes": m["simexec_nodes"], "simexec_processes": m["simexec_processes"],
        "simexec_rss_kb": sim["rss_kb"], "simexec_cpu_ms": sim["cpu_ms"],
        "simexec_launches": sim["launches"],
        "idle_executor": idle,
    }
    ceiling = "broker ceiling (kcat)"
    why = {"value": "no job placed", "baseline": "kcat measured no rate"}
    figures = [
        rl.figure("gangs_running_per_second", "gangs running/s", "gangs/s", running_rate,
                 ceiling_gangs, ceiling, GOAL_GANGS_PER_S,
                 reasons={**why, "value": "no job ran after the first placement"}),
        rl.figure("gangs_placed_per_second", "gangs placed/s", "gangs/s", placed_rate,
                 ceiling_gangs, ceiling, GOAL_GANGS_PER_S, reasons=why),
        rl.figure("submit_to_running_p99_ms", "submit -> running p99 (simulated nodes)", "ms",
                 res["latency_ms_p99"], res["latency_ms_p50"], "p50", GOAL_P99_MS,
                 at_most=True, reasons={"value": "no latency job ran",
                                        "baseline": "no latency job ran"}),
    ]
    if idle:
        figures.append(rl.figure("idle_executor_rss_mib", "idle executor RSS", "MiB",
                                rl.ratio(idle["rss_kb"], 1024), GOAL_IDLE_RSS_MIB, "goal",
                                GOAL_IDLE_RSS_MIB, at_most=True,
                                reasons={"value": "no RSS read from /proc"}))
    run_f, placed_f, lat_f = figures[:3]
    print(f"gangs running/s      {rl.fmt(running_rate, '8.0f')}   broker ceiling"
          f" {rl.fmt(ceiling_gangs, '8.0f')}   ratio {rl.fmt(run_f['ratio'], '.3f')}"
          f"   (goal {GOAL_GANGS_PER_S}; sustained 10-90 %: {rl.fmt(sustained_running, '.0f', '/s')})"
          f"{rl.why(run_f)}", file=out)
    print(f"gangs placed/s       {rl.fmt(placed_rate, '8.0f')}   broker ceiling"
          f" {rl.fmt(ceiling_gangs, '8.0f')}   ratio {rl.fmt(placed_f['ratio'], '.3f')}"
          f"{rl.why(placed_f)}", file=out)
    print(f"submit->running p50  {rl.fmt(lat_f['baseline'], '8.1f', ' ms')}"
          f"  p99 {rl.fmt(lat_f['value'], '.1f', ' ms')}"
          f"  ({res['latency_jobs']} jobs, 1-8 simulated nodes, idle cluster){rl.why(lat_f)}",
          file=out)
    print(f"simexec {m['simexec_nodes']} nodes: max RSS {rl.fmt(rl.ratio(sim['rss_kb'], 1024), '.1f', ' MiB')}, "
          f"CPU {rl.fmt(rl.ratio(sim['cpu_ms'], 1000), '.1f', ' s')} for"
          f" {rl.fmt(sim['launches'], '.0f')} launches", file=out)
    if idle:
        rss_f = figures[3]
        print(f"idle executor RSS    {rl.fmt(rss_f['value'], '8.1f', ' MiB')}"
              f"   goal {GOAL_IDLE_RSS_MIB} MiB   ratio {rl.fmt(rss_f['ratio'], '.2f')}"
              f"   (CPU {rl.fmt(idle['cpu_percent'], '.2f', ' %')} while idle,"
              f" heartbeating every 2 s)", file=out)
        print(f"  of which shared library pages {idle['shared_clean_kb'] / 1024:.1f} MiB;"
              f" its own memory (USS) {idle['uss_kb'] / 1024:.1f} MiB,"
              f" PSS {idle['pss_kb'] / 1024:.1f} MiB", file=out)
    if top:
        print(f"statements per gang  {rl.fmt(res['statements_per_gang'], '8.1f')}   ({calls}"
              f" statements for {jobs} gangs of {launches / jobs:.1f} nodes; most called:)",
              file=out)
        for row in top[:12]:
            print(f"  {int(row[0]) / jobs:7.2f}/gang {int(row[1]):7d} ms  {row[2][:110]}",
                  file=out)
    if json_path:
        rl.write_json(json_path, {**rl.header("dispatch"), "params": params,
                                 "figures": figures, "runs": res})


if __name__ == "__main__":
    sys.exit(main())
