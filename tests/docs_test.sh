#!/usr/bin/env bash
# docs/configuration.md must match what the programs say in --help.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:?usage: docs_test.sh BINDIR}
if ! diff -u "$here/docs/configuration.md" <("$here/tools/gen-configuration" "$bin"); then
	echo "docs/configuration.md is stale: run tools/gen-configuration $bin > docs/configuration.md" >&2
	exit 1
fi
echo "1 passed, 0 failed"
