"""The exceptions the SDK raises: the API's problem documents, unreachable servers, bad settings."""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class TrainyardError(Exception):
    """Base of every error this package raises."""


class ConfigError(TrainyardError):
    """The settings are missing or wrong; str() names the setting and where it came from.

    ``missing`` is the name of the setting that is absent ("token"), else None.
    """

    def __init__(self, message: str, missing: Optional[str] = None) -> None:
        super().__init__(message)
        self.missing = missing


class ApiError(TrainyardError):
    """The API answered with an error (a problem document, RFC 9457).

    ``code`` is the stable machine-readable code (``job_not_found``),
    ``detail`` the explanation for people, ``field`` the field at fault or
    None, ``request_id`` the reply's X-Request-Id.
    """

    def __init__(self, method: str, path: str, status: int, code: str, title: str,
                 detail: str, field: Optional[str] = None, request_id: Optional[str] = None,
                 retry_after: Optional[float] = None) -> None:
        self.method, self.path = method, path
        self.status, self.code, self.title, self.detail = status, code, title, detail
        self.field, self.request_id, self.retry_after = field, request_id, retry_after
        where = f" (field {field})" if field and field not in (detail or "") else ""
        super().__init__(f"{method} {path}: HTTP {status} {code}: {detail}{where}")


class BadRequestError(ApiError):
    """400: malformed JSON, an unknown field, a bad query parameter."""


class UnauthenticatedError(ApiError):
    """401: no token, or an unknown, expired or revoked one."""


class ForbiddenError(ApiError):
    """403: the token's role may not do this."""


class NotFoundError(ApiError):
    """404: no such object visible to this token (another team's job is "not found")."""


class ConflictError(ApiError):
    """409: e.g. ``job_finished``, ``idempotency_conflict``, ``team_exists``."""


class UnprocessableError(ApiError):
    """422: the body is well-formed but a field is missing or invalid."""


class RateLimitedError(ApiError):
    """429: over the rate limit (``retry_after`` seconds) or the team's pending-jobs limit."""


class UnavailableError(ApiError):
    """503: the API cannot serve now (database down, a node's logs unreachable)."""


_BY_STATUS: Dict[int, Type[ApiError]] = {
    400: BadRequestError, 401: UnauthenticatedError, 403: ForbiddenError, 404: NotFoundError,
    409: ConflictError, 422: UnprocessableError, 429: RateLimitedError, 503: UnavailableError,
}


def api_error(method: str, path: str, status: int, doc: Any, request_id: Optional[str],
              retry_after: Optional[float] = None) -> ApiError:
    """The ApiError (subclass by status) for a reply's problem document (anything JSON, or None)."""
    doc = doc if isinstance(doc, dict) else {}
    code = doc.get("code") if isinstance(doc.get("code"), str) else "http_%d" % status
    title = doc.get("title") if isinstance(doc.get("title"), str) else ""
    detail = doc.get("detail") if isinstance(doc.get("detail"), str) else (title or "")
    field = doc.get("field") if isinstance(doc.get("field"), str) else None
    cls = _BY_STATUS.get(status, ApiError)
    return cls(method, path, status, code, title, detail, field, request_id, retry_after)


class ConnectionError(TrainyardError):  # noqa: A001 (the name the users expect)
    """The API could not be reached, or did not answer in time; str() names the URL."""

    def __init__(self, method: str, path: str, url: str, reason: str) -> None:
        self.method, self.path, self.url, self.reason = method, path, url, reason
        super().__init__(f"{method} {path}: connection failed: {url}: {reason}")
