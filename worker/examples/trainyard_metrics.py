#!/usr/bin/env python3
"""Report trial metrics from a Trainyard job to the API (standard library only).

The executor gives every rank TRAINYARD_METRICS_URL (this job's
``/v1/jobs/<id>/metrics``) and TRAINYARD_METRICS_TOKEN (a token for this
attempt, good for this job's metrics only) when it runs with ``--api-url``.

In a training script (usually on rank 0 only)::

    import trainyard_metrics
    trainyard_metrics.report(step, val_loss=0.31, acc=0.9)

From a shell::

    python3 trainyard_metrics.py --step 10 val_loss=0.31 acc=0.9

``report`` returns False and does nothing when the variables are not set
(the job runs outside Trainyard, or the executor has no --api-url), retries
connection errors and 5xx/429 answers with backoff, and raises
``MetricsError`` for an answer that retrying cannot fix (a bad metric name,
a token for another job), with the API's own explanation.
"""

import argparse
import json
import math
import os
import sys
import time
import urllib.error
import urllib.request

__all__ = ["MetricsError", "report"]


class MetricsError(Exception):
    """The API refused a report; str() is its problem detail."""

    def __init__(self, status, detail):
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


def _detail(err):
    try:
        doc = json.loads(err.read().decode("utf-8", "replace"))
        text = doc.get("detail") or doc.get("title") or ""
        if doc.get("field"):
            text += f" (field {doc['field']})"
        return text
    except (ValueError, AttributeError, OSError):
        return err.reason if hasattr(err, "reason") else str(err)


def report(step, metrics=None, *, url=None, token=None, timeout=10.0, attempts=5, **named):
    """POST {"step": step, "metrics": {...}} for this job; True once stored.

    Metrics come as a dict, as keyword arguments, or both (keywords win).
    Values must be finite numbers.
    """
    url = url or os.environ.get("TRAINYARD_METRICS_URL")
    token = token or os.environ.get("TRAINYARD_METRICS_TOKEN")
    if not url or not token:
        return False
    values = dict(metrics or {})
    values.update(named)
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            raise ValueError(f"metric {name!r} must be a finite number, not {value!r}")
    body = json.dumps({"step": int(step), "metrics": values}).encode()
    delay = 0.2
    for attempt in range(1, attempts + 1):
        req = urllib.request.Request(url, data=body, method="POST", headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
        })
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                resp.read()
                return True
        except urllib.error.HTTPError as err:
            if err.code < 500 and err.code != 429:
                raise MetricsError(err.code, _detail(err)) from None
            last = MetricsError(err.code, _detail(err))
            retry_after = err.headers.get("Retry-After") if err.headers else None
            if retry_after and retry_after.isdigit():
                delay = max(delay, float(retry_after))
        except (urllib.error.URLError, OSError) as err:
            last = MetricsError(0, f"cannot reach {url}: {getattr(err, 'reason', err)}")
        if attempt < attempts:
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
    raise last


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
