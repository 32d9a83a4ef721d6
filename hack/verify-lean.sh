#!/usr/bin/env bash
# Fails when git tracks a file over 1 MiB outside the allow-list of test data: build outputs
# (a 56 MB binary once went in) never belong in the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((1024 * 1024))
# Paths (extended regular expressions) allowed to hold large test data.
allow='(^|/)testdata/'
bad=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  size=$(stat -c %s "$f")
  if [ "$size" -gt "$limit" ] && ! [[ "$f" =~ $allow ]]; then
    echo "tracked file over 1 MiB: $f ($size bytes); build outputs belong in bin/ (ignored), test data under testdata/"
    bad=1
  fi
done < <(git ls-files -z)
[ $bad -eq 0 ] && echo "no tracked file over 1 MiB outside testdata/"
exit $bad
