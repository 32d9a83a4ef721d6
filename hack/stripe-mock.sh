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
LOG_NAME=stripe-mock
# shellcheck source=lib/go-install-cached.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go-install-cached.sh"

go_install_cached stripe-mock github.com/stripe/stripe-mock "$STRIPE_MOCK_VERSION" "10-30s"
