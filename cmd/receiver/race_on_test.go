//go:build race

package main_test

// raceEnabled builds the receiver under test with -race when the tests run with it: the build
// then reuses the race-instrumented packages `go test -race` just compiled, and the receiver's
// own data races show up in its log.
const raceEnabled = true
