#!/usr/bin/env bash
# run-node-tests.sh LABEL FILE…: node's test runner with its usual report, then one closing line
# "LABEL: N passed, M failed" (counted from a TAP copy of the report). Exits like the runner.
set -uo pipefail
label=$1; shift
tap=$(mktemp)
trap 'rm -f "$tap"' EXIT
node --test --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$tap" "$@"
status=$?
echo "$label: $(sed -n 's/^# pass //p' "$tap") passed, $(sed -n 's/^# fail //p' "$tap") failed"
exit $status
