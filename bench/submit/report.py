#!/usr/bin/env python3
"""The report of bench/submit/run: reads the measurements it left in DIR,
prints one line per figure and writes the JSON of bench/README.md ("Results
as JSON"). DIR holds cpu.txt ("CLIENTS PGBENCH_PG_CPU_MS API_CPU_MS
API_PG_CPU_MS" per client count) and, per client count C, the output of
pgbench (pgbench-C.out), wrk (wrk-C.out) and trainyard-bench-submit
(submit-C.json), and copy.txt ("ROWS MICROSECONDS" of one COPY of the
64 clients' rows); what a tool did not print is "not measured".
    report.py DIR [--json FILE]"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import report_lib as rl  # noqa: E402

GOAL_RATE, GOAL_P99_MS, GOAL_CLIENTS = 20000, 20, 64
# issue 18: durable submissions at 64 clients at least half COPY's rate
GOAL_COPY_RATIO = 0.5


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def grab(pattern, text):
    """The first group of pattern's first match in text (multiline), or None."""
    m = re.search(pattern, text, re.M)
    return m.group(1) if m else None


def measurement(d, c, pg_cpu, api_cpu, api_pg_cpu):
    """One client count's figures from the files in d."""
    pgout = read(os.path.join(d, f"pgbench-{c}.out"))
    pg_n = rl.positive(grab(r"^number of transactions actually processed: (\d+)", pgout))
    # pgbench's tps counts only when it committed something
    pg = rl.positive(grab(r"^tps = ([0-9.]+)", pgout)) if pg_n else None
    http = rl.positive(grab(r"^Requests/sec:\s*([0-9.]+)", read(os.path.join(d, f"wrk-{c}.out"))))
    try:
        api = json.loads(read(os.path.join(d, f"submit-{c}.json")))
    except ValueError:
        api = None
    api = api if isinstance(api, dict) else {}
    jobs = rl.positive(api.get("jobs"))
    lat = api.get("latency_ms") if isinstance(api.get("latency_ms"), dict) else {}
    return {"clients": c, "submit_per_second": rl.positive(api.get("submit_per_second")),
            "pgbench_tps": pg, "wrk_rps": http,
            "p50": rl.positive(lat.get("p50")), "p99": rl.positive(lat.get("p99")),
            "cpu_ms_per_submit": {"api": rl.ratio(api_cpu, jobs),
                                  "postgres": rl.ratio(api_pg_cpu, jobs)},
            "pgbench_postgres_cpu_ms_per_insert": rl.ratio(pg_cpu, pg_n),
            "api": api or None}


def copy_rate(d):
    """Rows per second of the one COPY, or None."""
    f = read(os.path.join(d, "copy.txt")).split()
    return rl.rate(f[0], rl.num(f[1]) / 1e6) if len(f) == 2 and rl.num(f[1]) else None


def measurements(d):
    rows = []
    for line in read(os.path.join(d, "cpu.txt")).splitlines():
        f = line.split()
        if len(f) == 4:
            rows.append(measurement(d, int(f[0]), *f[1:]))
    return rows


def report(rows, json_path=None, out=sys.stdout, copy=None):
    figures = []
    for m in rows:
        c, s, pg, http = m["clients"], m["submit_per_second"], m["pgbench_tps"], m["wrk_rps"]
        cpu, base = m["cpu_ms_per_submit"], m["pgbench_postgres_cpu_ms_per_insert"]
        both = None if cpu["api"] is None or cpu["postgres"] is None else cpu["api"] + cpu["postgres"]
        goal = {}
        if c == GOAL_CLIENTS:
            goal = {"goal": GOAL_RATE, "met": None if s is None or m["p99"] is None else
                    s >= GOAL_RATE and m["p99"] <= GOAL_P99_MS}
        f = rl.figure(f"submit_per_second_{c}", f"submit/s, {c} clients", "jobs/s", s, pg,
                     "pgbench single-row insert",
                     reasons={"value": "trainyard-bench-submit reported no rate",
                              "baseline": "pgbench committed no transaction",
                              "http_ceiling": "wrk reported no requests/s",
                              "http_ratio": "no submission rate or no wrk rate",
                              "met": "no submission rate or no p99",
                              "pgbench_postgres_cpu_ms_per_insert":
                                  "pgbench committed no transaction"},
                     http_ceiling=http, http_ratio=rl.ratio(s, http),
                     latency_ms={"p50": m["p50"], "p99": m["p99"]},
                     cpu_ms_per_submit=cpu,
                     pgbench_postgres_cpu_ms_per_insert=base, **goal)
        print(f"submit/s {c:2d} clients {rl.fmt(s, '8.0f')}   pgbench insert {rl.fmt(pg, '8.0f')}"
              f"  ratio {rl.fmt(f['ratio'], '.2f')}"
              f"   GET /healthz {rl.fmt(http, '8.0f')}  ratio {rl.fmt(f['http_ratio'], '.3f')}"
              f"   p50 {rl.fmt(m['p50'], '.1f', ' ms')}  p99 {rl.fmt(m['p99'], '.1f', ' ms')}"
              f"{rl.why(f)}", file=out)
        print(f"  CPU per submission: API {rl.fmt(cpu['api'], '.3f', ' ms')}"
              f" + PostgreSQL {rl.fmt(cpu['postgres'], '.3f', ' ms')}"
              f"   pgbench insert: PostgreSQL {rl.fmt(base, '.3f', ' ms')}"
              f"  ratio {rl.fmt(rl.ratio(both, base), '.1f')}", file=out)
        figures.append(f)
    goal = next((f for f in figures if "goal" in f), None)
    if goal:
        print(f"goal at {GOAL_CLIENTS} clients: >= {GOAL_RATE}/s and p99 <= {GOAL_P99_MS} ms: "
              f"{rl.verdict(goal['met'])} ({rl.fmt(goal['value'], '.0f', '/s')},"
              f" p99 {rl.fmt(goal['latency_ms']['p99'], '.1f', ' ms')})", file=out)
    if goal or copy is not None:
        s, p99 = (goal["value"], goal["latency_ms"]["p99"]) if goal else (None, None)
        f = rl.figure(f"submit_per_second_{GOAL_CLIENTS}_vs_copy",
                      f"submit/s, {GOAL_CLIENTS} clients, against COPY", "jobs/s", s, copy,
                      "COPY of the same rows into jobs",
                      reasons={"value": "trainyard-bench-submit reported no rate",
                               "baseline": "COPY did not run",
                               "met": "no submission rate, no COPY rate or no p99"},
                      goal_ratio=GOAL_COPY_RATIO,
                      met=None if rl.ratio(s, copy) is None or p99 is None else
                      rl.ratio(s, copy) >= GOAL_COPY_RATIO and p99 <= GOAL_P99_MS)
        print(f"COPY {rl.fmt(copy, '.0f', ' rows/s')}: submit/s at {GOAL_CLIENTS} clients"
              f" ratio {rl.fmt(f['ratio'], '.2f')}; goal >= {GOAL_COPY_RATIO} and p99 <="
              f" {GOAL_P99_MS} ms: {rl.verdict(f['met'])}{rl.why(f)}", file=out)
        figures.append(f)
    if json_path:
        rl.write_json(json_path, {**rl.header("submit"), "figures": figures,
                                 "runs": [m["api"] for m in rows]})


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    report(measurements(a.dir), a.json, copy=copy_rate(a.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
