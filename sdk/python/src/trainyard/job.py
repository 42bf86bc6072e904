"""From inside a job: the rank's environment, trial metrics, the progress file.

The executor gives every rank (docs/dispatch.md, "Rank environment"):
RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, NNODES,
TRAINYARD_JOB_ID, TRAINYARD_ATTEMPT, TRAINYARD_NODE_ID,
TRAINYARD_CHECKPOINT_DIR, TRAINYARD_RESUME_FROM (when a checkpoint
verifies), TRAINYARD_PROGRESS_FILE, and with its --api-url
TRAINYARD_METRICS_URL and TRAINYARD_METRICS_TOKEN (this attempt's token,
good for this job's metrics only). A sweep's trial also gets
TRAINYARD_PARAMS (docs/hpo.md).
"""

from __future__ import annotations

import json
import math
import os
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

from .transport import Transport


def _int(env: Mapping[str, str], name: str, default: Optional[int]) -> Optional[int]:
    value = env.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an integer") from None


@dataclass(frozen=True)
class JobEnv:
    """This rank's place in the job; outside Trainyard, a single rank with nothing set."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    node_rank: int = 0
    nnodes: int = 1
    job_id: Optional[int] = None
    attempt: Optional[int] = None
    node_id: Optional[str] = None
    checkpoint_dir: Optional[str] = None
    resume_from: Optional[str] = None
    progress_file: Optional[str] = None
    metrics_url: Optional[str] = None
    metrics_token: Optional[str] = field(default=None, repr=False)
    params: Dict[str, Any] = field(default_factory=dict)

    @property
    def in_trainyard(self) -> bool:
        return self.job_id is not None


def env(environ: Optional[Mapping[str, str]] = None) -> JobEnv:
    """The rank's environment; ValueError naming a variable that is malformed."""
    e = os.environ if environ is None else environ
    params: Dict[str, Any] = {}
    if e.get("TRAINYARD_PARAMS"):
        try:
            params = json.loads(e["TRAINYARD_PARAMS"])
        except ValueError:
            raise ValueError("TRAINYARD_PARAMS is not JSON") from None
    return JobEnv(rank=_int(e, "RANK", 0) or 0, world_size=_int(e, "WORLD_SIZE", 1) or 1,
                  local_rank=_int(e, "LOCAL_RANK", 0) or 0,
                  local_world_size=_int(e, "LOCAL_WORLD_SIZE", 1) or 1,
                  node_rank=_int(e, "NODE_RANK", 0) or 0, nnodes=_int(e, "NNODES", 1) or 1,
                  job_id=_int(e, "TRAINYARD_JOB_ID", None),
                  attempt=_int(e, "TRAINYARD_ATTEMPT", None),
                  node_id=e.get("TRAINYARD_NODE_ID") or None,
                  checkpoint_dir=e.get("TRAINYARD_CHECKPOINT_DIR") or None,
                  resume_from=e.get("TRAINYARD_RESUME_FROM") or None,
                  progress_file=e.get("TRAINYARD_PROGRESS_FILE") or None,
                  metrics_url=e.get("TRAINYARD_METRICS_URL") or None,
                  metrics_token=e.get("TRAINYARD_METRICS_TOKEN") or None,
                  params=params if isinstance(params, dict) else {})


def check_metrics(values: Mapping[str, Any]) -> Dict[str, float]:
    """The metrics as a dict; ValueError for a value that is not a finite number."""
    out: Dict[str, float] = {}
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            raise ValueError(f"metric {name!r} must be a finite number, not {value!r}")
        out[name] = value
    return out


def report(step: int, metrics: Optional[Mapping[str, float]] = None, *,
           all_ranks: bool = False, url: Optional[str] = None, token: Optional[str] = None,
           timeout: float = 10.0, attempts: int = 5, **named: float) -> bool:
    """POST {"step", "metrics"} to this job's trial metrics with the attempt's token.

    Metrics come as a dict, keywords, or both (keywords win). Returns True once
    stored; False, sending nothing, on ranks other than 0 (unless all_ranks)
    or without TRAINYARD_METRICS_URL/_TOKEN (outside Trainyard, or an
    executor without --api-url). Connection errors, 5xx and rate limits are
    retried up to ``attempts`` times; anything else raises ApiError with the
    API's detail (a bad metric name, a token for another job).
    """
    e = env()
    url = url or e.metrics_url
    token = token or e.metrics_token
    if not url or not token or (e.rank != 0 and not all_ranks):
        return False
    values = dict(metrics or {})
    values.update(named)
    body = {"step": int(step), "metrics": check_metrics(values)}
    parts = urllib.parse.urlsplit(url)
    t = Transport(f"{parts.scheme}://{parts.netloc}", token, timeout=timeout,
                  retry_seconds=3600.0, max_attempts=attempts)
    t.request("POST", parts.path, body=body)
    return True


def progress(step: Optional[int] = None, samples_per_second: Optional[float] = None, *,
             path: Optional[str] = None) -> bool:
    """Tell the executor how far this rank got: rewrite TRAINYARD_PROGRESS_FILE.

    The file is one JSON object, {"time", "step", "samples_per_second"}
    (docs/dispatch.md, "Progress"), written to a temporary file and renamed
    over, so the executor never reads half of it. Once a rank has given a
    step, only a new step counts as its liveness for the hang timeout, and
    the step, its rate and the samples/s are reported to the scheduler. A
    call without a step only shows the rank is alive. False without the
    variable; ValueError for a negative step or throughput.
    """
    path = path or env().progress_file
    if not path:
        return False
    doc: Dict[str, Any] = {"time": round(time.time(), 3)}
    if step is not None:
        if int(step) < 0:
            raise ValueError("step must be a non-negative integer")
        doc["step"] = int(step)
    if samples_per_second is not None:
        sps = float(samples_per_second)
        if not math.isfinite(sps) or sps < 0:
            raise ValueError("samples_per_second must be a non-negative number")
        doc["samples_per_second"] = sps
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(doc) + "\n")
    os.replace(tmp, path)
    return True
