#!/usr/bin/env bash
# openapi_lint: Redocly CLI's lint of docs/openapi.json with redocly.yaml
# beside this file; any error or warning fails (the accepted ones are in
# .redocly.lint-ignore.yaml, each with its reason).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
doc=$here/../../docs/openapi.json
command -v node >/dev/null ||
	{ echo "openapi_lint: 'node' is missing: install Debian's nodejs (tests/run does)" >&2; exit 1; }
redocly=$here/node_modules/.bin/redocly
[[ -x $redocly ]] ||
	{ echo "openapi_lint: '$redocly' is missing: run 'npm ci --prefix tests/openapi' (tests/run does)" >&2; exit 1; }
# no telemetry or update check: the test machines reach no such service
out=$(cd "$here" && REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_COLOR=1 \
	"$redocly" lint --config redocly.yaml --format stylish "$doc" 2>&1)
rc=$?
# the findings, without Redocly's banners
grep -Ev '^\s*[║╔╚]|^\s*$' <<<"$out"
if ((rc != 0)) || grep -Eq '^\s+[0-9]+:[0-9]+\s+(error|warning)\s' <<<"$out"; then
	echo "openapi_lint: docs/openapi.json has the problems above" >&2
	exit 1
fi
echo "openapi_lint: passed"
