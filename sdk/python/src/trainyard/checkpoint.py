"""The checkpoint protocol (DESIGN.md §7, docs/dispatch.md "Checkpoints") for training code.

A checkpoint is a directory ``step-<N>`` under TRAINYARD_CHECKPOINT_DIR that
is complete once ``MANIFEST.json`` appears in it, written last through a
rename::

    {"step": N, "files": [{"path": "model.pt", "size": 123, "sha256": "<hex>"}]}

The executor verifies manifests newest first (executor/ckpt.c) and names
the newest good one in TRAINYARD_RESUME_FROM. ``verify`` checks what the
executor checks.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from typing import IO, Any, Callable, Dict, Mapping, Optional, Tuple, Union

MANIFEST = "MANIFEST.json"
_STEP_RE = re.compile(r"^step-([0-9]+)$")
Content = Union[bytes, Callable[[IO[bytes]], Any]]
Manifest = Dict[str, Any]


class CheckpointError(Exception):
    """A checkpoint is ``torn`` (no manifest) or ``corrupt``; str() says why."""

    def __init__(self, path: str, status: str, reason: str) -> None:
        super().__init__(f"{path}: {status}: {reason}")
        self.path, self.status, self.reason = path, status, reason


def checkpoint_dir(directory: Optional[str] = None) -> str:
    """The job's checkpoint directory: the argument, else TRAINYARD_CHECKPOINT_DIR."""
    d = directory or os.environ.get("TRAINYARD_CHECKPOINT_DIR")
    if not d:
        raise RuntimeError("TRAINYARD_CHECKPOINT_DIR is not set and no directory was given")
    return d


def resume_from() -> Optional[str]:
    """The checkpoint the executor says to resume from (TRAINYARD_RESUME_FROM), or None."""
    return os.environ.get("TRAINYARD_RESUME_FROM") or None


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _path_ok(rel: Any) -> bool:
    return (isinstance(rel, str) and bool(rel) and not rel.startswith("/")
            and ".." not in rel.split("/"))


def save(step: int, files: Mapping[str, Content], directory: Optional[str] = None) -> str:
    """Write checkpoint step-<step> and return its path.

    ``files`` maps a relative path to bytes or to a callable that writes the
    content into the binary file it is given. A step-<step> that already
    verifies is kept as it is (right after resuming from it there is
    nothing newer, and rewriting would leave the only good checkpoint torn
    meanwhile). Otherwise any manifest in it is removed first, each file is
    fsynced, and the manifest goes in last by rename: a crash halfway leaves
    a torn checkpoint that readers skip, never a complete-looking wrong one.
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be a non-negative int, not {step!r}")
    for rel in files:
        if not _path_ok(rel) or rel in (MANIFEST, MANIFEST + ".tmp"):
            raise ValueError(f"checkpoint file path {rel!r} must be relative and inside, "
                             f"and not {MANIFEST}")
    ckpt = os.path.join(checkpoint_dir(directory), f"step-{step}")
    try:
        if verify(ckpt).get("step") == step:
            return ckpt
    except (CheckpointError, OSError, ValueError):
        pass  # absent, torn or corrupt: write it afresh
    os.makedirs(ckpt, exist_ok=True)
    try:
        os.unlink(os.path.join(ckpt, MANIFEST))
    except FileNotFoundError:
        pass
    entries = []
    for rel, content in files.items():
        full = os.path.join(ckpt, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            if callable(content):
                content(f)
            else:
                f.write(content)
            f.flush()
            os.fsync(f.fileno())
        entries.append({"path": rel, "size": os.path.getsize(full), "sha256": _sha256(full)})
    tmp = os.path.join(ckpt, MANIFEST + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"step": step, "files": entries}, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(ckpt, MANIFEST))
    _fsync_dir(ckpt)
    return ckpt


def verify(path: str) -> Manifest:
    """Check the checkpoint at path as the executor does and return its manifest.

    Raises CheckpointError (status "torn" or "corrupt") naming the fault.
    """
    mpath = os.path.join(path, MANIFEST)
    if not os.path.exists(mpath):
        raise CheckpointError(path, "torn", f"no {MANIFEST}")
    try:
        with open(mpath, encoding="utf-8") as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError(path, "corrupt", f"{MANIFEST}: {e}") from None
    if (not isinstance(m, dict) or not isinstance(m.get("step"), int)
            or isinstance(m.get("step"), bool) or m["step"] < 0
            or not isinstance(m.get("files"), list)):
        raise CheckpointError(path, "corrupt", f"{MANIFEST} needs a step and a files array")
    root = os.path.realpath(path)
    for i, e in enumerate(m["files"]):
        rel = e.get("path") if isinstance(e, dict) else None
        if not _path_ok(rel):
            raise CheckpointError(path, "corrupt", f"files[{i}] path {rel!r} is not inside")
        assert isinstance(rel, str) and isinstance(e, dict)
        full = os.path.realpath(os.path.join(path, rel))
        if not full.startswith(root + "/"):
            raise CheckpointError(path, "corrupt", f"{rel!r} leads outside the checkpoint")
        if not os.path.isfile(full):
            raise CheckpointError(path, "corrupt", f"{rel!r} is missing")
        if os.path.getsize(full) != e.get("size"):
            raise CheckpointError(path, "corrupt", f"{rel!r} has the wrong size")
        if _sha256(full) != str(e.get("sha256", "")).lower():
            raise CheckpointError(path, "corrupt", f"{rel!r} has the wrong SHA-256")
    return m


def _report_skip(err: CheckpointError) -> None:
    print(f"trainyard.checkpoint: skipping {err}", file=sys.stderr)


def newest(directory: Optional[str] = None,
           on_skip: Callable[[CheckpointError], None] = _report_skip
           ) -> Tuple[Optional[str], Optional[Manifest]]:
    """(path, manifest) of the newest checkpoint that verifies, or (None, None)."""
    d = checkpoint_dir(directory)
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return None, None
    steps = sorted(((int(m.group(1)), n) for n in names if (m := _STEP_RE.match(n))
                    and os.path.isdir(os.path.join(d, n))), reverse=True)
    for _, name in steps:
        path = os.path.join(d, name)
        try:
            return path, verify(path)
        except CheckpointError as e:
            on_skip(e)
    return None, None


def resume() -> Tuple[Optional[str], Optional[Manifest]]:
    """(path, manifest) of TRAINYARD_RESUME_FROM verified, or (None, None) on a fresh start.

    Raises CheckpointError when the named checkpoint no longer verifies.
    """
    path = resume_from()
    return (path, verify(path)) if path else (None, None)
