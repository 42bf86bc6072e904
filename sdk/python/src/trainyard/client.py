"""trainyard.Client: the REST API (docs/api.md) as Python calls returning plain dicts."""

from __future__ import annotations

import time
import urllib.parse
import uuid
from typing import Any, Dict, Iterator, List, Mapping, Optional, Union

from .errors import ApiError, ConnectionError
from .settings import resolve
from .transport import Query, Transport

Json = Dict[str, Any]
# proto/lifecycle.h PROTO_JOB_STATES: the states a job never leaves
TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "stopped"})


def _seg(value: Union[str, int]) -> str:
    return urllib.parse.quote(str(value), safe="")


def _csv(value: Union[None, str, List[str], tuple]) -> Optional[str]:
    return ",".join(value) if isinstance(value, (list, tuple)) else value


class Client:
    """A client of one Trainyard API with one token.

    Settings as jobctl's (trainyard.settings): arguments, else JOBCTL_*,
    else the jobctl config file. ``timeout`` bounds every request (seconds;
    a long poll adds its wait), ``retry_seconds`` how long connection
    errors, 5xx and rate limits are retried before the error is raised.
    """

    def __init__(self, server: Optional[str] = None, token: Optional[str] = None, *,
                 token_file: Optional[str] = None, timeout: Optional[float] = None,
                 cacert: Optional[str] = None, retry_seconds: float = 30.0) -> None:
        s = resolve(server=server, token=token, token_file=token_file, timeout=timeout,
                    cacert=cacert)
        self.settings = s
        self.server = s.server
        self._t = Transport(s.server, s.token, timeout=s.timeout, cacert=s.cacert,
                            retry_seconds=retry_seconds)

    def __repr__(self) -> str:
        return f"trainyard.Client({self.server!r})"

    def request(self, method: str, path: str, *, query: Optional[Query] = None,
                body: Any = None, headers: Optional[Mapping[str, str]] = None,
                timeout: Optional[float] = None, text: bool = False) -> Any:
        """Any documented operation: the decoded answer, or ApiError/ConnectionError."""
        return self._t.request(method, path, query=query, body=body, headers=headers,
                               timeout=timeout, text=text)

    def _pages(self, path: str, query: Query) -> Iterator[Json]:
        q = dict(query)
        while True:
            page = self.request("GET", path, query=q)
            yield from page.get("items", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return
            q["cursor"] = cursor

    # who am I

    def whoami(self) -> Json:
        """{"token", "role", "team"} of this client's token."""
        return self.request("GET", "/v1/whoami")

    # jobs

    def submit(self, spec: Optional[Mapping[str, Any]] = None, *,
               idempotency_key: Optional[str] = None, **fields: Any) -> Json:
        """Submit a job (spec as a dict and/or keyword fields; keywords win): the job.

        Without an idempotency key one is made up, so a retry after a lost
        answer returns the same job instead of submitting it twice.
        """
        body = dict(spec or {})
        body.update(fields)
        key = idempotency_key or f"trainyard-python/{uuid.uuid4()}"
        return self.request("POST", "/v1/jobs", body=body, headers={"Idempotency-Key": key})

    def what_if(self, spec: Optional[Mapping[str, Any]] = None, *, wait: int = 30,
                **fields: Any) -> Json:
        """When the scheduler would start this job if it were submitted now, and the
        alternatives that would start sooner (``alternatives``, each with a
        ``spec_patch``); submits nothing. UnavailableError when no scheduler answered
        within ``wait`` seconds (1 to 60)."""
        body = dict(spec or {})
        body.update(fields)
        return self.request("POST", "/v1/queue/what-if", query={"wait": wait}, body=body,
                            timeout=self._t.timeout + wait)

    def get(self, job: int) -> Json:
        """The job (with its goodput); NotFoundError for a job this token may not see."""
        return self.request("GET", f"/v1/jobs/{_seg(job)}")

    def list(self, *, team: Optional[str] = None,
             state: Union[None, str, List[str]] = None, label: Optional[str] = None,
             q: Optional[str] = None, page_size: int = 50) -> Iterator[Json]:
        """Every job matching the filters, newest first, fetched a page at a time."""
        return self._pages("/v1/jobs", {"team": team, "state": _csv(state), "label": label,
                                        "q": q, "limit": page_size})

    def cancel(self, job: int) -> Json:
        """Cancel (ends ``cancelled``); ConflictError ``job_finished`` if it is over."""
        return self.request("POST", f"/v1/jobs/{_seg(job)}/cancel")

    def stop(self, job: int) -> Json:
        """Stop early (ends ``stopped``); ConflictError ``job_finished`` if it is over."""
        return self.request("POST", f"/v1/jobs/{_seg(job)}/stop")

    def events(self, job: int, after: int = 0, *, wait: int = 0,
               limit: Optional[int] = None) -> Json:
        """One page: {"events": [...], "next_after": seq, "state": job state}."""
        return self.request("GET", f"/v1/jobs/{_seg(job)}/events",
                            query={"after": after, "wait": wait or None, "limit": limit},
                            timeout=self._t.timeout + wait)

    def watch(self, job: int, after: int = 0, *, wait: int = 25,
              retry_seconds: float = 300.0) -> Iterator[Json]:
        """The job's events after ``after`` as they happen, long-polling; ends after the
        event of its terminal state.

        A connection error or a 5xx (an API restart) is retried from the last
        event seen with backoff for up to ``retry_seconds`` in a row.
        """
        if not 0 <= wait <= 60:
            raise ValueError(f"wait must be 0 to 60 seconds, not {wait!r}")
        while True:
            page = self._poll(f"/v1/jobs/{_seg(job)}/events", {"after": after, "wait": wait},
                              wait, retry_seconds)
            ended = False
            for ev in page.get("events", []):
                after = ev["seq"]
                yield ev
                ended = ev.get("state") in TERMINAL_STATES
            if ended or (not page.get("events") and page.get("state") in TERMINAL_STATES):
                return
            after = page.get("next_after", after)

    def feed(self, after: Optional[str] = None, *, team: Optional[str] = None, wait: int = 25,
             retry_seconds: float = 300.0) -> Iterator[Json]:
        """Every visible job's events after ``after`` (an opaque cursor; None: from this
        call on), in commit order, forever; each event carries its ``job`` and ``team``.

        Like watch, it resumes from its cursor after a connection error or a 5xx.
        """
        if not 0 <= wait <= 60:
            raise ValueError(f"wait must be 0 to 60 seconds, not {wait!r}")
        if after is None:  # now, not at the first next()
            after = self.request("GET", "/v1/events", query={"team": team})["next_after"]
        return self._feed(after, team, wait, retry_seconds)

    def _feed(self, after: str, team: Optional[str], wait: int,
              retry_seconds: float) -> Iterator[Json]:
        while True:
            page = self._poll("/v1/events", {"after": after, "team": team, "wait": wait},
                              wait, retry_seconds)
            yield from page.get("events", [])
            after = page.get("next_after", after)

    def _poll(self, path: str, query: Query, wait: int, retry_seconds: float) -> Json:
        """One long poll, retried across connection errors, 5xx and 429 for retry_seconds."""
        failing_since: Optional[float] = None
        delay = 0.2
        while True:
            try:
                return self._t.request("GET", path, query=query,
                                       timeout=self._t.timeout + wait, retry_seconds=0)
            except (ConnectionError, ApiError) as err:
                if isinstance(err, ApiError) and not (err.status >= 500 or err.status == 429):
                    raise
                now = time.monotonic()
                failing_since = failing_since or now
                if now - failing_since > retry_seconds:
                    raise
                time.sleep(max(delay, getattr(err, "retry_after", None) or 0))
                delay = min(delay * 2, 5.0)

    def attempts(self, job: int) -> List[Json]:
        """The job's attempts, oldest first."""
        return self.request("GET", f"/v1/jobs/{_seg(job)}/attempts")["items"]

    def logs(self, job: int, rank: int = 0, attempt: Optional[int] = None,
             tail: int = 100) -> str:
        """The last ``tail`` lines of a rank's output (default: the current attempt)."""
        return self.request("GET", f"/v1/jobs/{_seg(job)}/logs",
                            query={"rank": rank, "attempt": attempt, "tail": tail}, text=True)

    def checkpoints(self, job: int) -> Json:
        """{"resume_step", "items": [checkpoint...]}."""
        return self.request("GET", f"/v1/jobs/{_seg(job)}/checkpoints")

    # trial metrics

    def metrics(self, job: int, *, name: Optional[str] = None,
                after_step: Optional[int] = None, limit: Optional[int] = None) -> Json:
        """One page of a job's trial metrics: {"items", "next_after_step", "latest"}."""
        return self.request("GET", f"/v1/jobs/{_seg(job)}/metrics",
                            query={"name": name, "after_step": after_step, "limit": limit})

    def report_metrics(self, job: int, step: int, metrics: Mapping[str, float]) -> Json:
        """Store a step's metrics (from outside the job; ranks use trainyard.job.report)."""
        return self.request("POST", f"/v1/jobs/{_seg(job)}/metrics",
                            body={"step": step, "metrics": dict(metrics)})

    # queue, usage, teams, nodes

    def queue(self, *, team: Optional[str] = None, page_size: int = 50) -> Iterator[Json]:
        """The pending jobs in the scheduler's order, a page at a time."""
        return self._pages("/v1/queue", {"team": team, "limit": page_size})

    def usage(self, *, team: Optional[str] = None, start: Optional[str] = None,
              end: Optional[str] = None, group_by: Optional[str] = None,
              split: Optional[str] = None, format: Optional[str] = None) -> Any:
        """GPU time over [start, end) (RFC 3339): a dict, or the CSV text with format="csv"."""
        return self.request("GET", "/v1/usage",
                            query={"team": team, "from": start, "to": end,
                                   "group_by": group_by, "split": split, "format": format},
                            text=format == "csv")

    def team(self, name: str) -> Json:
        return self.request("GET", f"/v1/teams/{_seg(name)}")

    def teams(self) -> List[Json]:
        return self.request("GET", "/v1/teams")["items"]

    def nodes(self, *, state: Optional[str] = None) -> List[Json]:
        return self.request("GET", "/v1/nodes", query={"state": state})["items"]

    def node(self, node_id: str) -> Json:
        return self.request("GET", f"/v1/nodes/{_seg(node_id)}")

    # sweeps

    def create_sweep(self, spec: Mapping[str, Any], *,
                     idempotency_key: Optional[str] = None) -> Json:
        """Create a sweep (docs/api.md "Sweeps"); a key is made up when none is given."""
        key = idempotency_key or f"trainyard-python/{uuid.uuid4()}"
        return self.request("POST", "/v1/sweeps", body=dict(spec),
                            headers={"Idempotency-Key": key})

    def sweep(self, sweep_id: int) -> Json:
        return self.request("GET", f"/v1/sweeps/{_seg(sweep_id)}")

    def sweeps(self, *, team: Optional[str] = None, page_size: int = 50) -> Iterator[Json]:
        return self._pages("/v1/sweeps", {"team": team, "limit": page_size})

    def cancel_sweep(self, sweep_id: int) -> Json:
        return self.request("POST", f"/v1/sweeps/{_seg(sweep_id)}/cancel")
