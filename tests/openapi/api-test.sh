#!/usr/bin/env bash
# api_openapi: the e2e stack (tests/e2e/stack.sh) with api-test.js calling
# every operation of docs/openapi.json and validating each response.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null ||
	{ echo "api_openapi: 'node' is missing: install Debian's nodejs (tests/run does)" >&2; exit 1; }
[[ -d $here/node_modules/ajv-formats ]] ||
	{ echo "api_openapi: '$here/node_modules' is missing: run 'npm ci --prefix tests/openapi' (tests/run does)" >&2; exit 1; }
# shellcheck source=../e2e/stack.sh
source "$here/../e2e/stack.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/api_openapi.XXXXXX")
trap 'ty_stack_down; rm -rf "$W"' EXIT
# a dashboard of two files, so the /ui operations answer 200 too
mkdir -p "$W/ui/assets"
echo '<!doctype html><title>t</title>' >"$W/ui/index.html"
echo 'console.log(1)' >"$W/ui/assets/app.js"
export TY_STACK_API_ARGS="--ui-dir $W/ui"
ty_stack_up "$W" || { echo "api_openapi: the stack did not come up" >&2; exit 1; }
node "$here/api-test.js"
