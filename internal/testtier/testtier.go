// Package testtier sorts the tests into two tiers. make unit runs `go test -short ./...`: every
// test that needs no control plane, database server, broker, stripe-mock or child binary. make
// test never passes -short, so there every test runs and nothing is skipped.
package testtier

import (
	"fmt"
	"os"
	"testing"
)

// Short reports whether only the fast tier runs (go test -short, make unit). In a TestMain it
// is only meaningful after flag.Parse.
func Short() bool { return testing.Short() }

// RequiresServers skips tb under -short and says why: it needs what (a control plane, a
// PostgreSQL, a Redis, a NATS server, stripe-mock, a built binary). Without -short it does
// nothing: such a test runs, and fails when what it needs is missing.
func RequiresServers(tb testing.TB, what string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("-short (make unit): needs %s; make test runs it", what)
	}
}

// SkippingSetup prints, from a TestMain under -short, that the package's shared servers are not
// started: its tests that need them skip themselves with RequiresServers.
func SkippingSetup(pkg, what string) {
	fmt.Fprintf(os.Stderr, "%s: -short (make unit): %s not started; the tests that need it skip\n", pkg, what)
}
