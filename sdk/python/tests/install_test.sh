#!/usr/bin/env bash
# The SDK installs from its pyproject.toml with Debian's pip, offline (no build
# isolation: Debian's setuptools builds it), and the installed copy is typed and
# importable from outside the source tree.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/sdk_install.XXXXXX")
trap 'rm -rf "$W"' EXIT
cp -r "$src" "$W/src" # pip builds in place: keep build/ and *.egg-info out of the tree
/usr/bin/python3 -m pip install --quiet --no-index --no-build-isolation --no-deps \
	--break-system-packages --target "$W/site" "$W/src" >"$W/pip.log" 2>&1 ||
	{ cat "$W/pip.log" >&2; echo "FAIL: pip install" >&2; exit 1; }
cd "$W"
PYTHONPATH="$W/site" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 - "$W/site" <<'PY'
import os, sys
import trainyard
site = sys.argv[1]
assert trainyard.__file__.startswith(site), trainyard.__file__
assert os.path.exists(os.path.join(os.path.dirname(trainyard.__file__), "py.typed"))
assert trainyard.Client and trainyard.job.report and trainyard.checkpoint.save
import importlib.metadata
assert importlib.metadata.version("trainyard") == trainyard.__version__
print("sdk install: passed,", trainyard.__version__)
PY
