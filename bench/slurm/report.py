#!/usr/bin/env python3
"""The report of bench/slurm/run: reads its measurements (one JSON object per
line and measurement), prints one line per figure (Trainyard, its Slurm
baseline, the ratio, the goal), then Markdown for bench/RESULTS.md, and
writes the JSON layout of bench/README.md ("Results as JSON") to --json."""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

# (key, label, Trainyard method, Slurm method, the rate's field, goal ratio)
FIGURES = [
    ("submit_per_second_process", "submit/s, process per job",
     "jobctl", "sbatch", "submit", 10.0),
    ("submit_per_second_api", "submit/s, API",
     "api", "libslurm", "submit", 10.0),
    ("completed_per_second", "completed/s",
     "api", "libslurm", "complete", 5.0),
]


def rate(m, kind):
    """jobs/s of one measurement: 'submit' or 'complete'."""
    if "result" in m:
        return m["result"][f"{kind}_per_second"]
    return m["jobs"] / m["submit_seconds"]


def machine():
    cpu = ""
    mem = 0.0
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
        with open("/proc/meminfo") as f:
            mem = next(int(l.split()[1]) for l in f if l.startswith("MemTotal")) / 1048576
    except (OSError, StopIteration):
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "memory_gib": round(mem, 1),
            "kernel": platform.release()}


def commit():
    repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    try:
        return subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--measurements", required=True)
    ap.add_argument("--jobs", type=int, required=True)
    ap.add_argument("--reps", type=int, required=True)
    ap.add_argument("--clients", type=int, required=True)
    ap.add_argument("--slurm-conf", required=True)
    ap.add_argument("--slurm-version", default="")
    ap.add_argument("--scheduler", default="")
    ap.add_argument("--json")
    a = ap.parse_args()

    with open(a.measurements) as f:
        runs = [json.loads(l) for l in f if l.strip()]
    by = {}
    for m in runs:
        by.setdefault((m["rep"], m["method"]), m)
    reps = sorted({m["rep"] for m in runs})
    if not reps:
        sys.exit("bench/slurm/report.py: no measurements")

    figures = []
    for key, label, ty, sl, kind, goal in FIGURES:
        tv = [rate(by[(r, ty)], kind) for r in reps if (r, ty) in by]
        sv = [rate(by[(r, sl)], kind) for r in reps if (r, sl) in by]
        if len(tv) != len(reps) or len(sv) != len(reps):
            sys.exit(f"bench/slurm/report.py: {key}: a measurement is missing")
        # the ratio is the median of the per-repetition ratios: each is
        # measured back to back, so the machine's load drifts less within it
        per_rep = [t / s for t, s in zip(tv, sv)]
        value, base = statistics.median(tv), statistics.median(sv)
        ratio = statistics.median(per_rep)
        figures.append({
            "name": key, "label": label, "unit": "jobs/s",
            "value": round(value, 1), "name_value": ty,
            "baseline": round(base, 1), "baseline_name": sl,
            "ratio": round(ratio, 2), "ratio_per_rep": [round(x, 2) for x in per_rep],
            "ratio_of_medians": round(value / base, 2),
            "values": [round(x, 1) for x in tv], "baselines": [round(x, 1) for x in sv],
            "goal_ratio": goal, "met": ratio >= goal,
        })

    # the smoke test's check (tests/bench.cmake, bench/run --quick): numbers, not speed
    for f in figures:
        if not (f["value"] > 0 and f["baseline"] > 0):
            sys.exit(f"bench/slurm/report.py: {f['name']}: no positive rate")

    # CPU of one submitting process (user + system), where measured
    cpu_ms = {}
    for meth in ("sbatch", "jobctl"):
        v = [by[(r, meth)]["client_cpu_seconds"] * 1e3 / by[(r, meth)]["jobs"]
             for r in reps if "client_cpu_seconds" in by.get((r, meth), {})]
        if v:
            cpu_ms[meth] = round(statistics.median(v), 2)

    # the lines
    names = {"jobctl": "jobctl", "sbatch": "sbatch", "api": "trainyard",
             "libslurm": "libslurm"}
    for f in figures:
        extra = f"{a.clients} clients, " if f["name"] == "submit_per_second_api" else ""
        verdict = "MET" if f["met"] else f"MISSED by {f['goal_ratio'] / f['ratio']:.1f}x"
        print(f"{f['label']:<27} {names[f['name_value']]} {f['value']:.0f}  "
              f"{'slurm' if f['name'] == 'completed_per_second' else names[f['baseline_name']]} "
              f"{f['baseline']:.0f}  ratio {f['ratio']:.2f}x  "
              f"({extra}goal >= {f['goal_ratio']:.0f}x {verdict})")

    # the Markdown
    loads = [m["load"] for m in runs]
    print()
    print(f"{a.slurm_version} (private slurmctld + slurmd + munged on tmpfs, one node with "
          f"64 CPUs declared, the high-throughput slurm.conf of bench/slurm/run) against "
          f"a private Trainyard stack (deploy/local/up; scheduler `{a.scheduler}`); "
          f"{a.jobs} jobs (`true`, 1 node, no GPU) each way, {len(reps)} repetition(s); "
          f"rates are medians, ratios the median of the per-repetition ratios; "
          f"1-minute load average at the start of each measurement "
          f"{min(loads):.2f}–{max(loads):.2f}.")
    print()
    print("| rep | sbatch/s | jobctl/s | ratio | libslurm submit/s | API submit/s | ratio "
          "| Slurm completed/s | Trainyard completed/s | ratio | API p50/p99 ms (Slurm; Trainyard) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for i, r in enumerate(reps):
        ls, ta = by[(r, "libslurm")]["result"], by[(r, "api")]["result"]
        print(f"| {r} | {figures[0]['baselines'][i]:.0f} | {figures[0]['values'][i]:.0f} "
              f"| {figures[0]['ratio_per_rep'][i]:.2f}x "
              f"| {figures[1]['baselines'][i]:.0f} | {figures[1]['values'][i]:.0f} "
              f"| {figures[1]['ratio_per_rep'][i]:.2f}x "
              f"| {figures[2]['baselines'][i]:.1f} | {figures[2]['values'][i]:.1f} "
              f"| {figures[2]['ratio_per_rep'][i]:.2f}x "
              f"| {ls['latency_ms']['p50']:.1f}/{ls['latency_ms']['p99']:.1f}; "
              f"{ta['latency_ms']['p50']:.1f}/{ta['latency_ms']['p99']:.1f} |")
    print()
    for f in figures:
        verdict = ("MET" if f["met"] else
                   f"MISSED (needs {f['goal_ratio'] / f['ratio']:.1f}x more)")
        print(f"- {f['label']}: Trainyard {f['value']:.1f}, Slurm {f['baseline']:.1f}, "
              f"ratio {f['ratio']:.2f}x (of the medians: {f['ratio_of_medians']:.2f}x); "
              f"goal >= {f['goal_ratio']:.0f}x {verdict}.")

    if len(cpu_ms) == 2:
        print(f"- CPU per submitting process (user + system, median): sbatch "
              f"{cpu_ms['sbatch']:.2f} ms, jobctl {cpu_ms['jobctl']:.2f} ms — what a process "
              f"per job costs whatever the machine's load.")

    if a.json:
        doc = {
            "benchmark": "slurm",
            "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": commit(),
            "machine": machine(),
            "load": {"min": min(loads), "max": max(loads)},
            "params": {"jobs": a.jobs, "reps": len(reps), "clients": a.clients,
                       "slurm": a.slurm_version, "scheduler": a.scheduler},
            "figures": figures,
            "client_cpu_ms_per_job": cpu_ms,
            "runs": runs,
        }
        tmp = a.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, a.json)


if __name__ == "__main__":
    main()
