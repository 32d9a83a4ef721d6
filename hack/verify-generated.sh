#!/usr/bin/env bash
# Fails when the generated files (CRDs, RBAC, deepcopy; the API reference docs/api.md) differ
# from what controller-gen and crd-ref-docs make from the current types and markers. Works in a
# dirty tree: it compares against a snapshot, not git.
set -euo pipefail
cd "$(dirname "$0")/.."
files=(config/crd/bases config/rbac/role.yaml api/v1alpha1/zz_generated.deepcopy.go docs/api.md)
snap=$(mktemp -d)
trap 'rm -rf "$snap"' EXIT
for f in "${files[@]}"; do mkdir -p "$snap/$(dirname "$f")"; cp -r "$f" "$snap/$f"; done
make -s manifests generate api-docs >/dev/null
stale=0
for f in "${files[@]}"; do
  if ! diff -ru "$snap/$f" "$f" >/dev/null; then
    echo "stale generated file: $f (it is now regenerated; commit it)"; diff -ru "$snap/$f" "$f" | head -20; stale=1
  fi
done
[ $stale -eq 0 ] && echo "generated files are up to date"
exit $stale
