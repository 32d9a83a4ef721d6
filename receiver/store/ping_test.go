package store

import "testing"

// TestPingAnswersUntilClosed is the receiver's readiness check on every store: Ping succeeds
// while the store is open and fails once it is closed.
func TestPingAnswersUntilClosed(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		s := e.open(t)
		if err := s.Ping(testCtx(t)); err != nil {
			t.Fatalf("Ping on an open store: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Ping(testCtx(t)); err == nil {
			t.Error("Ping on a closed store succeeded")
		}
	})
}
