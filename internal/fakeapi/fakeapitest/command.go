// Package fakeapitest starts a fake binary's run function in a test.
package fakeapitest

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
)

// Start runs a fake binary's run with args on a free port until ctx ends, and returns its
// base URL (from its "NAME listening on URL" line) and the channel run's result arrives on.
func Start(ctx context.Context, t testing.TB, name string, run fakeapi.RunFunc, args ...string) (string, <-chan error) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), pw)
		pw.Close() // unblocks the reader below if run fails before logging
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the log line: %v (run: %v)", err, <-done)
	}
	base, ok := strings.CutPrefix(strings.TrimSpace(line), name+" listening on ")
	if !ok {
		t.Fatalf("log line %q", line)
	}
	return base, done
}
