"""Python client of the Trainyard API, and helpers for code running inside a job.

    import trainyard
    c = trainyard.Client()          # settings as jobctl finds them
    job = c.submit(team="ml", command=["/bin/sh", "-c", "echo hi"],
                   resources={"nodes": 1, "gpus_per_node": 1})
    for ev in c.watch(job["id"]):
        print(ev["type"], ev["state"])

Inside a job: ``trainyard.job.report(step, val_loss=0.3)``,
``trainyard.job.progress(step)``, ``trainyard.checkpoint.save(step, {...})``.
See docs/sdk.md.
"""

from . import checkpoint, job
from .client import TERMINAL_STATES, Client
from .errors import (ApiError, BadRequestError, ConfigError, ConflictError, ConnectionError,
                     ForbiddenError, NotFoundError, RateLimitedError, TrainyardError,
                     UnauthenticatedError, UnavailableError, UnprocessableError)
from ._version import __version__
from .settings import Settings, resolve

__all__ = ["__version__", "ApiError", "BadRequestError", "Client", "ConfigError", "ConflictError",
           "ConnectionError", "ForbiddenError", "NotFoundError", "RateLimitedError",
           "Settings", "TERMINAL_STATES", "TrainyardError", "UnauthenticatedError",
           "UnavailableError", "UnprocessableError", "checkpoint", "job", "resolve"]
