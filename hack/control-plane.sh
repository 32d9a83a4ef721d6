#!/usr/bin/env bash
# Builds kube-apiserver, kubectl and etcd from the Go module proxy into a cache folder, so that
# envtest and `make demo` need nothing but Go. Idempotent: when the binaries exist it only prints
# their folder. Usage: hack/control-plane.sh [--print-dir]
#
#   HOOKWARDEN_CACHE  cache root (default: $XDG_CACHE_HOME/hookwarden or ~/.cache/hookwarden)
#   K8S_VERSION       Kubernetes release to build (default 1.37.2)
#   ETCD_VERSION      etcd release to build (default 3.7.3)
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.37.2}
ETCD_VERSION=${ETCD_VERSION:-3.7.3}
LOG_NAME=control-plane
# shellcheck source=lib/go-install-cached.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go-install-cached.sh"
DEST="$CACHE/control-plane/k8s-v${K8S_VERSION}-etcd-v${ETCD_VERSION}"

ready() {
  [[ -x "$DEST/kube-apiserver" && -x "$DEST/kubectl" && -x "$DEST/etcd" ]] || return 1
  [[ "${1:-}" == "--print-dir" ]] || log "binaries ready in $DEST"
  echo "$DEST"
}
ready "${1:-}" && exit 0

# One build at a time: a second caller (another make test, make demo, a tool asking for
# --print-dir) waits for the first and then uses what it built, instead of racing it on the
# same temporary files.
mkdir -p "$CACHE/control-plane"
if build_lock "$CACHE/control-plane/.build.lock" "the control plane"; then
  ready "${1:-}" && exit 0
fi

export GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod
mkdir -p "$DEST"
work=$(mktemp -d "$CACHE/control-plane/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$SECONDS

# heartbeat prints a line while a long build runs, so nobody thinks it hangs.
heartbeat() {
  local what=$1 pid=$2
  while kill -0 "$pid" 2>/dev/null; do
    sleep 30
    kill -0 "$pid" 2>/dev/null && log "  still building $what ($((SECONDS - start))s elapsed)"
  done
}

build() { # build <what> <dir> <go build args...>
  local what=$1 dir=$2; shift 2
  log "building $what (cold: several minutes on 2 cores)"
  (cd "$dir" && go build "$@") &
  local pid=$!
  heartbeat "$what" "$pid" &
  local hb=$!
  if ! wait "$pid"; then kill "$hb" 2>/dev/null; log "building $what failed"; exit 1; fi
  kill "$hb" 2>/dev/null || true
  log "built $what ($((SECONDS - start))s elapsed)"
}

# --- Kubernetes: a wrapper module that requires k8s.io/kubernetes and replaces every staging
# module (./staging/src/k8s.io/...) with its published v0.x release.
k8s="$work/k8s"
mkdir -p "$k8s"
log "resolving k8s.io/kubernetes v${K8S_VERSION} from the module proxy"
(
  cd "$k8s"
  go mod init hookwarden.local/controlplane-k8s >/dev/null 2>&1
  go mod edit -require="k8s.io/kubernetes@v${K8S_VERSION}"
  modfile=$(go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  staging_version="v0.${K8S_VERSION#1.}"
  grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$modfile" | awk '{print $1}' | sort -u | while read -r m; do
    go mod edit -replace="$m=$m@$staging_version"
  done
  printf 'package tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kubectl"\n)\n' > tools.go
  sed -i '1i //go:build tools\n' tools.go
  go mod tidy >/dev/null 2>&1 || go get k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl >/dev/null
)
# -X ldflags make /version report the release instead of v0.0.0-master.
minor=$(echo "$K8S_VERSION" | cut -d. -f2)
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitVersion=v${K8S_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor}"
  ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
build kube-apiserver "$k8s" -trimpath -ldflags "$ldflags" -o "$DEST/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
build kubectl "$k8s" -trimpath -ldflags "$ldflags" -o "$DEST/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl

# --- etcd
etcd="$work/etcd"
mkdir -p "$etcd"
log "resolving go.etcd.io/etcd/server/v3 v${ETCD_VERSION}"
(
  cd "$etcd"
  go mod init hookwarden.local/controlplane-etcd >/dev/null 2>&1
  go get "go.etcd.io/etcd/server/v3@v${ETCD_VERSION}" >/dev/null 2>&1
)
build etcd "$etcd" -trimpath -ldflags "-s -w" -o "$DEST/etcd.tmp" go.etcd.io/etcd/server/v3

for b in kube-apiserver kubectl etcd; do mv "$DEST/$b.tmp" "$DEST/$b"; done
log "done in $((SECONDS - start))s: $("$DEST/kube-apiserver" --version 2>/dev/null), etcd $("$DEST/etcd" --version 2>/dev/null | head -1)"
echo "$DEST"
