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
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import report_lib as rl  # noqa: E402

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
    """jobs/s of one measurement ('submit' or 'complete'), None when it has none."""
    if m is None:
        return None
    if "result" in m:
        res = m["result"] if isinstance(m["result"], dict) else {}
        return rl.positive(res.get(f"{kind}_per_second"))
    return rl.rate(m.get("jobs"), m.get("submit_seconds"))


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
        runs = [json.loads(line) for line in f if line.strip()]
    report(runs, a)


def report(runs, a, out=sys.stdout):
    """Prints the figures and the Markdown and writes a.json from the
    measurements of a.reps repetitions (any of them may be missing)."""
    by = {}
    for m in runs:
        by.setdefault((m["rep"], m["method"]), m)
    reps = list(range(1, a.reps + 1))

    figures = []
    for key, label, ty, sl, kind, goal in FIGURES:
        tv = [rate(by.get((rep, ty)), kind) for rep in reps]
        sv = [rate(by.get((rep, sl)), kind) for rep in reps]
        # the ratio is the median of the per-repetition ratios: each is
        # measured back to back, so the machine's load drifts less within it
        per_rep = [rl.ratio(t, b) for t, b in zip(tv, sv)]
        value, base, ratio = rl.median(tv), rl.median(sv), rl.median(per_rep)
        figures.append(rl.mark({
            "name": key, "label": label, "unit": "jobs/s",
            "value": rl.rounded(value, 1), "name_value": ty,
            "baseline": rl.rounded(base, 1), "baseline_name": sl,
            "ratio": rl.rounded(ratio, 2), "ratio_per_rep": [rl.rounded(x, 2) for x in per_rep],
            "ratio_of_medians": rl.rounded(rl.ratio(value, base), 2),
            "values": [rl.rounded(x, 1) for x in tv], "baselines": [rl.rounded(x, 1) for x in sv],
            "goal_ratio": goal, "met": rl.meets(ratio, goal),
        }, {"value": f"no {ty} rate measured", "baseline": f"no {sl} rate measured",
            "ratio": "no repetition measured both", "ratio_of_medians": "no value or baseline",
            "met": "no ratio"}))

    # CPU of one submitting process (user + system), where measured
    cpu_ms = {}
    for meth in ("sbatch", "jobctl"):
        v = [rl.ratio(by[(rep, meth)]["client_cpu_seconds"], by[(rep, meth)]["jobs"] / 1e3)
             for rep in reps if "client_cpu_seconds" in by.get((rep, meth), {})]
        if rl.median(v) is not None:
            cpu_ms[meth] = round(rl.median(v), 2)

    # the lines
    names = {"jobctl": "jobctl", "sbatch": "sbatch", "api": "trainyard",
             "libslurm": "libslurm"}
    for f in figures:
        extra = f"{a.clients} clients, " if f["name"] == "submit_per_second_api" else ""
        verdict = (f"MISSED by {rl.fmt(rl.ratio(f['goal_ratio'], f['ratio']), '.1f', 'x')}"
                   if f["met"] is False else rl.verdict(f["met"]))
        print(f"{f['label']:<27} {names[f['name_value']]} {rl.fmt(f['value'])}  "
              f"{'slurm' if f['name'] == 'completed_per_second' else names[f['baseline_name']]} "
              f"{rl.fmt(f['baseline'])}  ratio {rl.fmt(f['ratio'], '.2f', 'x')}  "
              f"({extra}goal >= {f['goal_ratio']:.0f}x {verdict}){rl.why(f)}", file=out)

    # the Markdown
    loads = [m.get("load") for m in runs]
    print(file=out)
    print(f"{a.slurm_version} (private slurmctld + slurmd + munged on tmpfs, one node with "
          f"64 CPUs declared, the high-throughput slurm.conf of bench/slurm/run) against "
          f"a private Trainyard stack (deploy/local/up; scheduler `{a.scheduler}`); "
          f"{a.jobs} jobs (`true`, 1 node, no GPU) each way, {len(reps)} repetition(s); "
          f"rates are medians, ratios the median of the per-repetition ratios; "
          f"1-minute load average at the start of each measurement "
          f"{rl.fmt(rl.minimum(loads), '.2f')}–{rl.fmt(rl.maximum(loads), '.2f')}.", file=out)
    print(file=out)
    print("| rep | sbatch/s | jobctl/s | ratio | libslurm submit/s | API submit/s | ratio "
          "| Slurm completed/s | Trainyard completed/s | ratio | API p50/p99 ms (Slurm; Trainyard) |",
          file=out)
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|", file=out)

    def lat(rep, meth):
        res = (by.get((rep, meth)) or {}).get("result")
        lm = res.get("latency_ms") if isinstance(res, dict) else None
        lm = lm if isinstance(lm, dict) else {}
        return f"{rl.fmt(lm.get('p50'), '.1f')}/{rl.fmt(lm.get('p99'), '.1f')}"

    for i, rep in enumerate(reps):
        f0, f1, f2 = figures
        print(f"| {rep} | {rl.fmt(f0['baselines'][i])} | {rl.fmt(f0['values'][i])} "
              f"| {rl.fmt(f0['ratio_per_rep'][i], '.2f', 'x')} "
              f"| {rl.fmt(f1['baselines'][i])} | {rl.fmt(f1['values'][i])} "
              f"| {rl.fmt(f1['ratio_per_rep'][i], '.2f', 'x')} "
              f"| {rl.fmt(f2['baselines'][i], '.1f')} | {rl.fmt(f2['values'][i], '.1f')} "
              f"| {rl.fmt(f2['ratio_per_rep'][i], '.2f', 'x')} "
              f"| {lat(rep, 'libslurm')}; {lat(rep, 'api')} |", file=out)
    print(file=out)
    for f in figures:
        verdict = (f"MISSED (needs {rl.fmt(rl.ratio(f['goal_ratio'], f['ratio']), '.1f', 'x')} more)"
                   if f["met"] is False else rl.verdict(f["met"]))
        print(f"- {f['label']}: Trainyard {rl.fmt(f['value'], '.1f')}, Slurm {rl.fmt(f['baseline'], '.1f')}, "
              f"ratio {rl.fmt(f['ratio'], '.2f', 'x')} (of the medians: "
              f"{rl.fmt(f['ratio_of_medians'], '.2f', 'x')}); goal >= {f['goal_ratio']:.0f}x {verdict}.",
              file=out)

    if len(cpu_ms) == 2:
        print(f"- CPU per submitting process (user + system, median): sbatch "
              f"{cpu_ms['sbatch']:.2f} ms, jobctl {cpu_ms['jobctl']:.2f} ms — what a process "
              f"per job costs whatever the machine's load.", file=out)

    if a.json:
        rl.write_json(a.json, {
            "benchmark": "slurm",
            "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": commit(),
            "machine": machine(),
            "load": {"min": rl.minimum(loads), "max": rl.maximum(loads)},
            "params": {"jobs": a.jobs, "reps": len(reps), "clients": a.clients,
                       "slurm": a.slurm_version, "scheduler": a.scheduler},
            "figures": figures,
            "client_cpu_ms_per_job": cpu_ms,
            "runs": runs,
        }, indent=1)

if __name__ == "__main__":
    main()
