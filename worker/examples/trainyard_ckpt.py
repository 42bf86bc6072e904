"""Trainyard checkpoint protocol (DESIGN.md §7) for training code.

A checkpoint is a directory ``step-<N>`` under ``TRAINYARD_CHECKPOINT_DIR``
that becomes complete when ``MANIFEST.json`` appears in it, written last by
an atomic rename::

    {"step": N, "files": [{"path": "model.pt", "size": 123, "sha256": "<hex>"}]}

Before a restart the executor verifies manifests newest first and sets
``TRAINYARD_RESUME_FROM`` to the newest good checkpoint.

    import trainyard_ckpt as ck

    ck.save(step, {"model.pt": lambda f: torch.save(model.state_dict(), f)})
    path = ck.resume_from()            # None on a fresh start
    if path:
        step = ck.verify(path)["step"]
        state = torch.load(os.path.join(path, "model.pt"))

Only the standard library is used. As a program:
``trainyard_ckpt.py verify PATH`` and ``trainyard_ckpt.py newest DIR``.
"""

import hashlib
import json
import os
import re
import sys

MANIFEST = "MANIFEST.json"
_STEP_RE = re.compile(r"^step-([0-9]+)$")


class CheckpointError(Exception):
    """A checkpoint is torn (no manifest) or corrupt; str() says why."""

    def __init__(self, path, status, reason):
        super().__init__(f"{path}: {status}: {reason}")
        self.path, self.status, self.reason = path, status, reason


def checkpoint_dir(directory=None):
    """The job's checkpoint directory: the argument or TRAINYARD_CHECKPOINT_DIR."""
    d = directory or os.environ.get("TRAINYARD_CHECKPOINT_DIR")
    if not d:
        raise RuntimeError("TRAINYARD_CHECKPOINT_DIR is not set and no directory was given")
    return d


def resume_from():
    """The checkpoint to resume from (TRAINYARD_RESUME_FROM), or None."""
    return os.environ.get("TRAINYARD_RESUME_FROM") or None


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(step, files, directory=None):
    """Write checkpoint step-<step> and return its path.

    files maps a relative path to bytes or to a callable that writes the
    content into the binary file object it is given. A step-<step> that
    already verifies is kept as it is (a job asked to checkpoint again right
    after resuming from it has nothing newer, and rewriting would leave the
    only good checkpoint torn meanwhile). Otherwise any manifest in it is
    removed first, so a crash halfway leaves a torn checkpoint that readers
    skip, never a complete-looking wrong one.
    """
    if not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be a non-negative int, not {step!r}")
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
        if not _path_ok(rel):
            raise ValueError(f"checkpoint file path {rel!r} must be relative and inside")
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
    with open(tmp, "w") as f:
        json.dump({"step": step, "files": entries}, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(ckpt, MANIFEST))
    _fsync_dir(ckpt)
    return ckpt


def _path_ok(rel):
    return bool(rel) and not rel.startswith("/") and ".." not in rel.split("/")


def verify(path):
    """Check the checkpoint at path and return its manifest (a dict).

    Raises CheckpointError (status "torn" or "corrupt") naming the fault.
    """
    mpath = os.path.join(path, MANIFEST)
    if not os.path.exists(mpath):
        raise CheckpointError(path, "torn", f"no {MANIFEST}")
    try:
        with open(mpath) as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError(path, "corrupt", f"{MANIFEST}: {e}") from None
    if (not isinstance(m, dict) or not isinstance(m.get("step"), int) or m["step"] < 0
            or not isinstance(m.get("files"), list)):
        raise CheckpointError(path, "corrupt", f"{MANIFEST} needs a step and a files array")
    root = os.path.realpath(path)
    for i, e in enumerate(m["files"]):
        rel = e.get("path") if isinstance(e, dict) else None
        if not isinstance(rel, str) or not _path_ok(rel):
            raise CheckpointError(path, "corrupt", f"files[{i}] path {rel!r} is not inside")
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


def newest(directory=None):
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
            print(f"trainyard_ckpt: skipping {e}", file=sys.stderr)
    return None, None


def _main(argv):
    if len(argv) == 3 and argv[1] == "verify":
        try:
            print(json.dumps({"path": argv[2], "step": verify(argv[2])["step"]}))
            return 0
        except CheckpointError as e:
            print(f"trainyard_ckpt: {e}", file=sys.stderr)
            return 1
    if len(argv) == 3 and argv[1] == "newest":
        path, m = newest(argv[2])
        print(json.dumps({"path": path, "step": m["step"] if m else None}))
        return 0 if path else 1
    print("usage: trainyard_ckpt.py verify PATH | newest DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
