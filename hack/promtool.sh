#!/usr/bin/env bash
# Prints the path of promtool (checks and unit-tests the alert rules), installing Debian's
# prometheus package when it is missing and we are root. Without it the alert tests fail.
set -euo pipefail
if p=$(command -v promtool); then echo "$p"; exit 0; fi
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "[promtool] installing Debian's prometheus package (for promtool)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1 ||
    { apt-get update >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >/dev/null; }
  command -v promtool && exit 0
fi
echo "promtool not found: install Debian's prometheus package (apt-get install prometheus)" >&2
exit 1
