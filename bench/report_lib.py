#!/usr/bin/env python3
"""What the benchmarks' reports share (bench/README.md, "Not measured"):
rates, ratios, percentiles and goals over measurements that may be missing,
their printed form, and the JSON of bench/results with its check.

A measurement that is missing (an empty sample, a tool that printed no
rate, a zero count or elapsed time) is None here; everything computed from
it is None too, never a division by zero. A figure prints "not measured"
in its place and its JSON field is null, named with the reason in the
figure's "not_measured" object.

    python3 bench/report_lib.py check FILE...   # the smoke tests' check
"""
import json
import math
import os
import subprocess
import sys
import time

NOT_MEASURED = "not measured"


def num(x):
    """x as a finite float, or None (None, "", "-", NaN, inf, not a number)."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def positive(x):
    """x as a float when it is a finite number > 0, else None."""
    v = num(x)
    return v if v is not None and v > 0 else None


def rate(count, seconds):
    """count / seconds, or None unless both are positive."""
    c, s = positive(count), positive(seconds)
    return c / s if c is not None and s is not None else None


def ratio(a, b):
    """a / b, or None when either is missing or b is not positive."""
    a, b = num(a), positive(b)
    return a / b if a is not None and b is not None else None


def finite(values):
    return [v for v in map(num, values or []) if v is not None]


def pct(values, p):
    """Nearest-rank percentile (p in 0..100) of the measured values, or None."""
    v = sorted(finite(values))
    if not v:
        return None
    k = max(1, math.ceil(len(v) * p / 100))
    return v[k - 1]


def median(values):
    v = sorted(finite(values))
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def maximum(values):
    v = finite(values)
    return max(v) if v else None


def minimum(values):
    v = finite(values)
    return min(v) if v else None


def rounded(x, digits):
    x = num(x)
    return round(x, digits) if x is not None else None


def meets(value, goal, at_most=False):
    """True or False against the goal (value <= goal with at_most), None when unmeasured."""
    value = num(value)
    if value is None:
        return None
    return value <= goal if at_most else value >= goal


def fmt(x, spec=".0f", suffix=""):
    """The printed form of a measurement: formatted, or "not measured"."""
    x = num(x)
    return NOT_MEASURED if x is None else f"{x:{spec}}{suffix}"


def verdict(met):
    return NOT_MEASURED if met is None else "MET" if met else "MISSED"


# the reason a derived field is null, when the caller gives none
DERIVED = {"ratio": "no value or no positive baseline to divide by",
           "met": "no value to compare with the goal"}


def mark(fig, reasons=None):
    """Names every null field of a figure in fig["not_measured"] with its
    reason (reasons[field], else a default); returns fig."""
    reasons = reasons or {}
    nm = {k: reasons.get(k) or DERIVED.get(k, "no measurement")
          for k, v in fig.items() if v is None and k != "not_measured"}
    if nm:
        fig["not_measured"] = nm
    else:
        fig.pop("not_measured", None)
    return fig


def figure(name, label, unit, value, baseline, baseline_name, goal=None, at_most=False,
           reasons=None, **extra):
    """One entry of a JSON document's "figures" (bench/README.md, "Results as
    JSON"); a value or baseline that is not positive was not measured."""
    value, baseline = positive(value), positive(baseline)
    f = {"name": name, "label": label, "unit": unit, "value": value,
         "baseline": baseline, "baseline_name": baseline_name,
         "ratio": ratio(value, baseline), **extra}
    if goal is not None:
        f["goal"] = goal
        f["met"] = meets(value, goal, at_most)
    return mark(f, reasons)


def why(fig):
    """The printed reasons of a figure's unmeasured fields, once each ("" when
    none); a ratio's or goal's reason is its inputs', left out."""
    seen = []
    for k, v in (fig.get("not_measured") or {}).items():
        if k != "met" and "ratio" not in k and v not in seen:
            seen.append(v)
    return f"   ({NOT_MEASURED}: {'; '.join(seen)})" if seen else ""


def header(benchmark):
    """The fields every document starts with: benchmark, time, commit, machine."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        rev = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip() or None
    except OSError:
        rev = None
    return {"benchmark": benchmark, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commit": rev, "machine": {"nproc": os.cpu_count(), "load": os.getloadavg()}}


def clean(x):
    """x with every non-finite float (NaN, inf) replaced by None: strict JSON."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    return x


def write_json(path, doc, indent=2):
    """Writes doc as strict JSON (no NaN) to path, replacing it whole."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(clean(doc), f, indent=indent, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def check(doc):
    """The problems of a results document (an empty list when it is well formed):
    figures exist; each figure's value, baseline and ratio is a positive number
    or null named in not_measured with a reason; met is a bool or likewise null."""
    figs = doc.get("figures") if isinstance(doc, dict) else None
    if not isinstance(figs, list) or not figs:
        return ["no figures"]
    out = []
    for i, f in enumerate(figs):
        name = f.get("name") if isinstance(f, dict) else None
        if not isinstance(name, str) or not name:
            out.append(f"figure {i}: no name")
            continue
        nm = f.get("not_measured") or {}
        if not isinstance(nm, dict):
            out.append(f"figure '{name}': not_measured is not an object")
            nm = {}
        for k, v in f.items():
            if v is None and not (isinstance(nm.get(k), str) and nm[k]):
                out.append(f"figure '{name}': '{k}' is null without a not_measured reason")
        for k in ("value", "baseline", "ratio"):
            if k not in f:
                out.append(f"figure '{name}': no '{k}'")
            elif f[k] is not None and (positive(f[k]) is None or isinstance(f[k], bool)):
                out.append(f"figure '{name}': '{k}' is {f[k]!r}, not a positive number")
        if "met" in f and f["met"] is not None and not isinstance(f["met"], bool):
            out.append(f"figure '{name}': 'met' is {f['met']!r}, not true, false or null")
        for k in nm:
            if f.get(k, 0) is not None:
                out.append(f"figure '{name}': not_measured names '{k}', which is not null")
    return out


def check_file(path):
    def no_constant(c):
        raise ValueError(f"{c} is not JSON")
    try:
        with open(path) as f:
            doc = json.load(f, parse_constant=no_constant)
    except (OSError, ValueError) as e:
        return [str(e)]
    return check(doc)


def main(argv):
    if len(argv) < 2 or argv[0] != "check":
        print("usage: bench/report_lib.py check FILE...", file=sys.stderr)
        return 2
    bad = 0
    for path in argv[1:]:
        for p in check_file(path):
            print(f"bench/report_lib.py: '{path}': {p}", file=sys.stderr)
            bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
