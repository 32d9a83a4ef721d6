//go:build race

package main

// raceEnabled builds the binaries TestChaos starts with -race when the tests run with it: the
// build then reuses the race-instrumented packages `go test -race` just compiled, and the
// manager's own data races show up in its log.
const raceEnabled = true
