package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden/internal/childproc"
)

// proc is a child process the demo started and must stop: the manager, the receiver or the
// fake Stripe. The demo's own part is waiting for its HTTP readiness.
type proc struct{ *childproc.Proc }

// startProc starts bin with args and env, appending its stdout and stderr to logPath, in its
// own process group (childproc.Start).
func startProc(name, logPath string, env []string, bin string, args ...string) (*proc, error) {
	p, err := childproc.Start(name, logPath, env, bin, args...)
	if err != nil {
		return nil, err
	}
	return &proc{p}, nil
}

// waitReady polls GET path on api until it answers 200, giving up at once if the process exits.
func (p *proc) waitReady(ctx context.Context, timeout time.Duration, api fakeAPI, path string) error {
	err := poll(ctx, timeout, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := p.Exited(); err != nil {
			return false, fatal(err)
		}
		return api.ok(ctx, path)
	})
	if err != nil {
		return fmt.Errorf("waiting for the %s's GET %s: %w", p.Name, path, err)
	}
	return nil
}
