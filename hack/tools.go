//go:build tools

// Package hack pins the versions of the code generators in go.mod, so `go run` builds exactly
// the controller-gen every developer and CI use.
package hack

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
