#!/usr/bin/env bash
# Filters `go test -v` output down to what a reader of CI needs: package results, failures with
# their context, and the figures tests report (lines starting with "REPORT"). The full output is
# kept in bin/test.log (TEST_LOG overrides the path). When something failed, what failed follows
# at the end, from the log: each failed test's own output (its t.Log and t.Error lines, such as a
# golden's diff; the manager's JSON log lines left out), each failed Ginkgo spec's report, build
# errors and panics. Before that, how long each package took, slowest first (from go test's
# ok/FAIL lines), so the next slow package is seen.
set -uo pipefail
log=${TEST_LOG:-bin/test.log}
mkdir -p "$(dirname "$log")"
tee "$log" | grep --line-buffered -E '^(ok|FAIL|---|panic|--- FAIL)|REPORT|\[FAIL\]|Summarizing|Ran [0-9]+ of|Passed \|' || true

# failures prints, from a `go test -v` log, the output of what failed: at most $max lines of
# each failed test (the last ones), in plain awk (mawk or gawk).
failures() {
  awk -v max="${TEST_SUMMARY_MAX_LINES:-200}" '
    BEGIN { esc = sprintf("%c", 27) }
    function forget(name,   i) {
      for (i = 1; i <= n[name]; i++) delete out[name, i]
      n[name] = 0
    }
    function report(name,   i, from) {
      if (n[name] == 0) return   # its subtests say what failed
      from = n[name] > max ? n[name] - max + 1 : 1
      printf "\n=== output of failed test %s%s\n", name, (n[name] > max ? " (its last " max " of " n[name] " lines)" : "")
      for (i = from; i <= n[name]; i++) print out[name, i]
      forget(name)
    }
    {
      line = $0
      gsub(esc "\\[[0-9;]*m", "", line)   # Ginkgo colours
    }
    # Ginkgo: a failed spec reports itself between a "• [FAILED]" line and a line of dashes.
    line ~ /^• \[(FAILED|PANICKED|TIMEDOUT|INTERRUPTED)\]/ { spec = 1; print "\n=== failed spec"; print line; next }
    spec && line ~ /^-----------------+$/ { spec = 0; next }
    spec { print line; next }
    # A test starts, or goes on after a pause, on a === line; its output follows.
    line ~ /^=== (RUN|CONT|NAME) / { current = $3; after = ""; next }
    line ~ /^=== PAUSE / { next }
    line ~ /^ *--- FAIL: / { report($3); current = ""; after = $3; next }
    line ~ /^ *--- (PASS|SKIP): / { forget($3); current = ""; after = ""; next }
    # Build errors (a "# package" line, then file:line:col: message) and panics with their stacks.
    line ~ /^# / || line ~ /\.go:[0-9]+:[0-9]+: / { print line; next }
    line ~ /^panic: / { stack = 60; print "\n=== panic" }
    stack > 0 && line ~ /^(FAIL|ok)[ \t]/ { stack = 0 }
    stack > 0 { print line; stack--; next }
    line ~ /^\{"level":/ { next }
    current != "" { n[current]++; out[current, n[current]] = line; next }
    # Without -v, a failed test'"'"'s output is printed indented below its --- FAIL line.
    after != "" && line ~ /^    / { print line }
  ' "$1"
}

# timings prints each package's time from the ok/FAIL lines of a `go test` log, slowest first
# (cached results and packages that did not build have none).
timings() {
  awk -F'\t' '
    /^(ok|FAIL)[ \t]/ && NF >= 3 && $3 ~ /^[0-9.]+s$/ {
      result = $1; sub(/ +$/, "", result)
      pkg = $2; sub(/^github.com\/hookwarden\/hookwarden\/?/, "./", pkg)
      secs = $3; sub(/s$/, "", secs)
      printf "%s\t%s\t%s\n", secs, pkg, result
    }' "$1" | sort -t "$(printf '\t')" -k1,1 -rn |
    awk -F'\t' '{ total += $1; printf "%9.1fs  %s%s\n", $1, $2, ($3 == "FAIL" ? "  (FAIL)" : "") }
      END { if (NR) printf "%9.1fs  in all (%d packages; they run in parallel, so more than the wall time)\n", total, NR }'
}

if grep -qE '^(ok|FAIL)[[:space:]]' "$log"; then
  echo
  echo "== time per package, slowest first"
  timings "$log"
fi

if grep -qE '^(--- FAIL|FAIL)' "$log"; then
  echo
  echo "== what failed (the full output is in $log)"
  failures "$log"
fi
