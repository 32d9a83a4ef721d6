#!/usr/bin/env bash
# Installs stripe-mock from the Go module proxy into a cache folder and prints the binary's path on
# stdout. Idempotent: when the binary exists it only prints the path. Progress goes to stderr.
# Usage: hack/stripe-mock.sh
#
#   HOOKWARDEN_CACHE  cache root (default: $XDG_CACHE_HOME/hookwarden or ~/.cache/hookwarden)
#
# v0.183.0 is pinned on purpose: it bundles Stripe's OpenAPI spec for API version 2023-10-16, the
# version stripe-go v76 sends, so `stripe-mock -strict-version-check` accepts our requests. Newer
# releases bundle newer specs and reject every call under that flag.
set -euo pipefail

STRIPE_MOCK_VERSION=v0.183.0
CACHE=${HOOKWARDEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hookwarden}
DEST="$CACHE/stripe-mock-${STRIPE_MOCK_VERSION}"
BIN="$DEST/stripe-mock"

log() { printf '[stripe-mock] %s\n' "$*" >&2; }

if [[ -x "$BIN" ]]; then
  log "ready: $BIN"
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || { log "go is not on PATH"; exit 1; }

mkdir -p "$DEST"
# go install runs in a scratch folder outside any module, so the caller's go.mod or go.work cannot
# influence the build. It installs into a staging folder beside $BIN and the binary is renamed
# into place, so an interrupted or concurrent install never leaves a half-written $BIN.
scratch=$(mktemp -d)
staging=$(mktemp -d "$DEST/install.XXXXXX")
trap 'rm -rf "$scratch" "$staging"' EXIT
start=$SECONDS

log "installing github.com/stripe/stripe-mock@${STRIPE_MOCK_VERSION} (cold: 10-30s)"
if ! (cd "$scratch" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 GOBIN="$staging" \
  go install "github.com/stripe/stripe-mock@${STRIPE_MOCK_VERSION}"); then
  log "go install failed after $((SECONDS - start))s"
  exit 1
fi
mv -f "$staging/stripe-mock" "$BIN"
log "installed $BIN in $((SECONDS - start))s"
echo "$BIN"
