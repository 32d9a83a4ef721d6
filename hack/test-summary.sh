#!/usr/bin/env bash
# Filters `go test -v` output down to what a reader of CI needs: package results, failures with
# their context, and the figures tests report (lines starting with "REPORT"). The full output is
# kept in bin/test.log.
set -uo pipefail
mkdir -p bin
tee bin/test.log | grep --line-buffered -E '^(ok|FAIL|---|panic|--- FAIL)|REPORT|\[FAIL\]|Summarizing|Ran [0-9]+ of|Passed \|' || true
