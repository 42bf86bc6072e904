#!/usr/bin/env python3
"""Report trial metrics from a Trainyard job: a command-line shim over the SDK.

The client is ``trainyard.job.report`` (sdk/python, docs/sdk.md); this file
keeps the older import name and the command line for shell scripts::

    python3 trainyard_metrics.py --step 10 val_loss=0.31 acc=0.9

Exit status: 0 stored, 1 refused, 2 bad arguments, 3 TRAINYARD_METRICS_URL
or TRAINYARD_METRICS_TOKEN not set (nothing sent). Unlike
``trainyard.job.report``, ``report`` here sends from every rank.
"""

import argparse
import os
import sys

_SDK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python", "src")
if os.path.isdir(_SDK):
    sys.path.insert(0, _SDK)
import trainyard  # noqa: E402

__all__ = ["MetricsError", "report"]


class MetricsError(Exception):
    """The API refused a report (or could not be reached: status 0)."""

    def __init__(self, status, detail):
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


def report(step, metrics=None, *, url=None, token=None, timeout=10.0, attempts=5, **named):
    """trainyard.job.report from any rank, its errors as MetricsError; True once stored."""
    try:
        return trainyard.job.report(step, metrics, all_ranks=True, url=url, token=token,
                                    timeout=timeout, attempts=attempts, **named)
    except trainyard.ApiError as err:
        text = err.detail + (f" (field {err.field})" if err.field else "")
        raise MetricsError(err.status, text) from None
    except trainyard.ConnectionError as err:
        raise MetricsError(0, f"cannot reach {url or os.environ.get('TRAINYARD_METRICS_URL')}:"
                           f" {err.reason}") from None


def _main(argv):
    ap = argparse.ArgumentParser(description="Report trial metrics to Trainyard.")
    ap.add_argument("--step", type=int, required=True, help="training step (>= 0)")
    ap.add_argument("--url", help="default: $TRAINYARD_METRICS_URL")
    ap.add_argument("--token", help="default: $TRAINYARD_METRICS_TOKEN")
    ap.add_argument("metrics", nargs="+", metavar="NAME=VALUE")
    args = ap.parse_args(argv)
    values = {}
    for item in args.metrics:
        name, sep, value = item.partition("=")
        try:
            values[name] = float(value) if sep else None
        except ValueError:
            values[name] = None
        if values[name] is None:
            ap.error(f"{item!r} is not NAME=NUMBER")
    try:
        if not report(args.step, values, url=args.url, token=args.token):
            print("trainyard_metrics: TRAINYARD_METRICS_URL/_TOKEN are not set; nothing sent",
                  file=sys.stderr)
            return 3
    except (MetricsError, ValueError) as err:
        print(f"trainyard_metrics: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
