#!/usr/bin/env python3
"""A tiny deterministic "training run" with a known optimum, for HPO examples and tests.

Standard library only. The loss after step s of N is

    val_loss(s) = f + (1 + f) * 0.85**s,   f = (lr - 0.3)**2 + (x - 1)**2

so it decays towards f, every trial ranks the same at every step (a worse
final value is worse at each step: a median pruner has something to go
on), and the final value is smallest at lr = 0.3, x = 1. It sleeps
--step-seconds per step and reports val_loss with trainyard_metrics every
--report-every steps and at the last step.

Parameters, first found wins: --lr/--x, HPO_PARAMS (JSON, as
optuna_search.py passes them), TRAINYARD_PARAMS (JSON, as a sweep passes
them). Run by hand it prints the values it would report:

    python3 quadratic_trial.py --lr 0.3 --x 1 --steps 4 --step-seconds 0
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trainyard_metrics  # noqa: E402  (next to this file)

OPT_LR = 0.3
OPT_X = 1.0
DECAY = 0.85


def loss(lr, x, step):
    """val_loss after step (0 = before training)."""
    f = (lr - OPT_LR) ** 2 + (x - OPT_X) ** 2
    return f + (1.0 + f) * DECAY ** step


def _params(args):
    for var in ("HPO_PARAMS", "TRAINYARD_PARAMS"):
        text = os.environ.get(var)
        if text:
            try:
                params = json.loads(text)
            except ValueError as err:
                sys.exit(f"quadratic_trial: ${var} is not JSON: {err}")
            if not isinstance(params, dict):
                sys.exit(f"quadratic_trial: ${var} is not a JSON object")
            break
    else:
        params = {}
    out = {}
    for name in ("lr", "x"):
        value = getattr(args, name)
        if value is None:
            value = params.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            sys.exit(f"quadratic_trial: parameter '{name}' is missing or not a number "
                     f"(got {value!r}): pass --{name} or set HPO_PARAMS")
        out[name] = float(value)
    return out


def main(argv):
    ap = argparse.ArgumentParser(description="A deterministic toy training run with a known optimum.")
    ap.add_argument("--lr", type=float, help="default: from $HPO_PARAMS or $TRAINYARD_PARAMS")
    ap.add_argument("--x", type=float, help="default: from $HPO_PARAMS or $TRAINYARD_PARAMS")
    ap.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    ap.add_argument("--step-seconds", type=float, default=0.15,
                    help="sleep per step (default 0.15)")
    ap.add_argument("--report-every", type=int, default=2,
                    help="report every N steps and at the last (default 2)")
    ap.add_argument("--metric", default="val_loss", help="metric name (default val_loss)")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.report_every < 1 or args.step_seconds < 0:
        ap.error("--steps and --report-every must be at least 1, --step-seconds not negative")
    p = _params(args)
    # ranks other than 0 train too (in a real job they would) but only rank 0 reports
    reporter = os.environ.get("RANK", "0") == "0"
    for step in range(1, args.steps + 1):
        time.sleep(args.step_seconds)
        if step % args.report_every and step != args.steps:
            continue
        value = loss(p["lr"], p["x"], step)
        if not reporter:
            continue
        try:
            sent = trainyard_metrics.report(step, {args.metric: value})
        except trainyard_metrics.MetricsError as err:
            print(f"quadratic_trial: cannot report step {step}: {err}", file=sys.stderr)
            return 1
        if not sent:
            print(json.dumps({"step": step, args.metric: value}))
    print(f"quadratic_trial: lr={p['lr']!r} x={p['x']!r} {args.metric}={loss(p['lr'], p['x'], args.steps)!r}"
          f" after {args.steps} steps", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
