"""The checkpoint protocol for training code: a shim over the SDK's trainyard.checkpoint.

``save``, ``verify``, ``newest``, ``resume_from`` and ``CheckpointError`` are
the SDK's (sdk/python, docs/sdk.md); this file keeps the older import name
and the command line::

    trainyard_ckpt.py verify PATH      # {"path": ..., "step": N}, exit 1 if it does not verify
    trainyard_ckpt.py newest DIR       # the newest that verifies, exit 1 if none
"""

import json
import os
import sys

_SDK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python", "src")
if os.path.isdir(_SDK):
    sys.path.insert(0, _SDK)
from trainyard.checkpoint import (MANIFEST, CheckpointError, checkpoint_dir,  # noqa: E402,F401
                                  newest, resume_from, save, verify)

__all__ = ["MANIFEST", "CheckpointError", "checkpoint_dir", "newest", "resume_from", "save",
           "verify"]


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
