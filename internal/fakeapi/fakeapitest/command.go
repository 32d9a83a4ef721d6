// Package fakeapitest starts a fake binary's run function in a test.
package fakeapitest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
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

// GetJSON decodes the JSON answer of GET u into v.
func GetJSON(t testing.TB, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", u, err)
	}
}
