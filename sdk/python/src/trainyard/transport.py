"""One HTTP exchange with the API (urllib), its retries and its trace.

Retried with backoff: connection failures, 5xx, and 429 but for
``pending_jobs_limit`` (the team's queue is full: final). Retry-After
is honoured up to MAX_RETRY_AFTER seconds. TRAINYARD_SDK_TRACE=FILE appends
one JSON line {"method", "url"} per request sent, so tests can check every
request against docs/openapi.json.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Mapping, Optional, Union

from ._version import __version__
from .errors import ApiError, ConfigError, ConnectionError, api_error

MAX_RETRY_AFTER = 30.0
USER_AGENT = f"trainyard-python/{__version__}"
Query = Mapping[str, Union[str, int, float, bool, None]]

_trace_lock = threading.Lock()


def _trace(method: str, url: str) -> None:
    path = os.environ.get("TRAINYARD_SDK_TRACE")
    if not path:
        return
    with _trace_lock, open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"method": method, "url": url}) + "\n")


def _retry_after(headers: Any) -> Optional[float]:
    value = headers.get("Retry-After") if headers is not None else None
    if value and value.strip().isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    return None


class Transport:
    """Sends requests to one server with one token (thread-safe: it keeps no connection)."""

    def __init__(self, server: str, token: Optional[str], timeout: float = 60.0,
                 cacert: Optional[str] = None, retry_seconds: float = 30.0,
                 max_attempts: Optional[int] = None) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retry_seconds = retry_seconds
        self.max_attempts = max_attempts
        self._ctx: Optional[ssl.SSLContext] = None
        if self.server.startswith("https://"):
            try:
                self._ctx = ssl.create_default_context(cafile=cacert)
            except (ssl.SSLError, OSError) as e:
                raise ConfigError(f"cannot use the CA file '{cacert}': {e}") from None

    def url(self, path: str, query: Optional[Query] = None) -> str:
        q = {k: ("true" if v is True else "false" if v is False else str(v))
             for k, v in (query or {}).items() if v is not None}
        return self.server + path + ("?" + urllib.parse.urlencode(q) if q else "")

    def request(self, method: str, path: str, *, query: Optional[Query] = None,
                body: Any = None, headers: Optional[Mapping[str, str]] = None,
                timeout: Optional[float] = None, retry_seconds: Optional[float] = None,
                text: bool = False) -> Any:
        """The decoded JSON answer of a 2xx ({} when empty; str with text=True).

        Raises ApiError (by status) or ConnectionError once retrying is over.
        """
        url = self.url(path, query)
        data = None if body is None else json.dumps(body).encode()
        hdrs: Dict[str, str] = {"Accept": "text/plain" if text else "application/json",
                                "User-Agent": USER_AGENT}
        if self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        budget = self.retry_seconds if retry_seconds is None else retry_seconds
        deadline = time.monotonic() + budget
        delay, attempt = 0.2, 0
        while True:
            attempt += 1
            req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
            _trace(method, url)
            error: Union[ApiError, ConnectionError]
            try:
                with urllib.request.urlopen(req, timeout=timeout or self.timeout,
                                            context=self._ctx) as resp:
                    raw = resp.read()
                if text:
                    return raw.decode("utf-8", "replace")
                return json.loads(raw) if raw else {}
            except urllib.error.HTTPError as err:
                error = self._problem(method, path, err)
                if not (err.code >= 500 or (err.code == 429
                                            and error.code != "pending_jobs_limit")):
                    raise error from None
                if error.retry_after:
                    delay = max(delay, error.retry_after)
            except (urllib.error.URLError, OSError, ValueError) as err:
                reason: Any = getattr(err, "reason", err)
                if isinstance(reason, socket.timeout) or isinstance(err, socket.timeout):
                    reason = f"no answer within {timeout or self.timeout:g} s"
                elif isinstance(reason, ssl.SSLCertVerificationError):
                    reason = f"{reason} (give its CA with cacert= or JOBCTL_CACERT)"
                if isinstance(err, ValueError) and not isinstance(err, OSError):
                    reason = f"the answer is not JSON ({err})"
                error = ConnectionError(method, path, self.server, str(reason))
            if ((self.max_attempts is not None and attempt >= self.max_attempts)
                    or time.monotonic() + delay > deadline):
                raise error
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    @staticmethod
    def _problem(method: str, path: str, err: urllib.error.HTTPError) -> ApiError:
        try:
            doc = json.loads(err.read().decode("utf-8", "replace"))
        except (ValueError, OSError):
            doc = {"detail": str(err.reason)}
        return api_error(method, path, err.code, doc, err.headers.get("X-Request-Id")
                         if err.headers else None, _retry_after(err.headers))
