# Sourced by the hack/*.sh scripts that build a tool from the Go module proxy into a cache folder
# (golangci-lint.sh, stripe-mock.sh, control-plane.sh): the cache root, the progress lines, one
# build at a time, and a cached `go install`. The caller sets LOG_NAME, the progress prefix.
#
#   HOOKWARDEN_CACHE  cache root (default: $XDG_CACHE_HOME/hookwarden or ~/.cache/hookwarden)

CACHE=${HOOKWARDEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hookwarden}

# log prints a progress line on stderr; stdout is the caller's answer (a path).
log() { printf '[%s] %s\n' "$LOG_NAME" "$*" >&2; }

# build_lock <lock file> <what>: one build at a time. A second caller waits for the first and can
# then use what it built. Returns 1 without flock (nothing is locked then).
build_lock() {
  command -v flock >/dev/null || return 1
  exec 9>"$1"
  if ! flock -n 9; then
    log "another build of $2 is running; waiting for it to finish"
    flock 9
  fi
}

# go_install_cached <binary> <package> <version> <cold time>: installs <package>@<version> as
# $CACHE/<binary>-<version>/<binary> and prints that path on stdout. Idempotent: when the binary
# exists it only prints the path.
go_install_cached() {
  local name=$1 pkg=$2 version=$3 cold=$4
  local dest="$CACHE/$name-$version"
  local bin="$dest/$name"

  if [[ -x "$bin" ]]; then
    log "ready: $bin"
    echo "$bin"
    return 0
  fi

  command -v go >/dev/null || { log "go is not on PATH"; return 1; }

  mkdir -p "$dest"
  if build_lock "$dest/.build.lock" "$name" && [[ -x "$bin" ]]; then
    echo "$bin"
    return 0
  fi

  # go install runs in a scratch folder outside any module, so the caller's go.mod or go.work
  # cannot influence the build. It installs into a staging folder beside the binary, which is
  # then renamed into place, so an interrupted install never leaves a half-written binary.
  local scratch staging start=$SECONDS
  scratch=$(mktemp -d)
  staging=$(mktemp -d "$dest/install.XXXXXX")
  # shellcheck disable=SC2064 # expanded now: the locals are gone when the script exits
  trap "rm -rf '$scratch' '$staging'" EXIT

  log "installing $pkg@$version (cold: $cold)"
  if ! (cd "$scratch" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 GOBIN="$staging" \
    go install "$pkg@$version"); then
    log "go install failed after $((SECONDS - start))s"
    return 1
  fi
  mv -f "$staging/$name" "$bin"
  log "installed $bin in $((SECONDS - start))s"
  echo "$bin"
}
