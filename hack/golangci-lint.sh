#!/usr/bin/env bash
# Installs golangci-lint from the Go module proxy into a cache folder and prints the binary's path
# on stdout. Idempotent: when the binary exists it only prints the path. Progress goes to stderr.
# Usage: hack/golangci-lint.sh
#
#   HOOKWARDEN_CACHE  cache root (default: $XDG_CACHE_HOME/hookwarden or ~/.cache/hookwarden)
#
# v2.15.0 is pinned: the configuration in .golangci.yml is written for v2 (version: "2"), and a
# linter release can add findings on its own; the cold build takes about five minutes.
set -euo pipefail

GOLANGCI_LINT_VERSION=v2.15.0
CACHE=${HOOKWARDEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hookwarden}
DEST="$CACHE/golangci-lint-${GOLANGCI_LINT_VERSION}"
BIN="$DEST/golangci-lint"

log() { printf '[golangci-lint] %s\n' "$*" >&2; }

if [[ -x "$BIN" ]]; then
  log "ready: $BIN"
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || { log "go is not on PATH"; exit 1; }

mkdir -p "$DEST"
# One build at a time: a second caller waits for the first and then uses what it built.
if command -v flock >/dev/null; then
  exec 9>"$DEST/.build.lock"
  if ! flock -n 9; then
    log "another build of golangci-lint is running; waiting for it to finish"
    flock 9
  fi
  if [[ -x "$BIN" ]]; then echo "$BIN"; exit 0; fi
fi

# go install runs in a scratch folder outside any module, so the caller's go.mod or go.work cannot
# influence the build. It installs into a staging folder beside $BIN and the binary is renamed
# into place, so an interrupted install never leaves a half-written $BIN.
scratch=$(mktemp -d)
staging=$(mktemp -d "$DEST/install.XXXXXX")
trap 'rm -rf "$scratch" "$staging"' EXIT
start=$SECONDS

log "installing github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION} (cold: about 5 min)"
if ! (cd "$scratch" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 GOBIN="$staging" \
  go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION}"); then
  log "go install failed after $((SECONDS - start))s"
  exit 1
fi
mv -f "$staging/golangci-lint" "$BIN"
log "installed $BIN in $((SECONDS - start))s"
echo "$BIN"
