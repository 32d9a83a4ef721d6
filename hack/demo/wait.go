package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// fatalError stops a poll at once: waiting longer cannot help.
type fatalError struct{ error }

func fatal(err error) error { return fatalError{err} }

func (e fatalError) Unwrap() error { return e.error }

// poll calls check every interval until it reports done, returns a fatal error, timeout
// passes or ctx ends. A non-fatal error means "not yet"; the last one explains a timeout.
func poll(ctx context.Context, timeout, interval time.Duration, check func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	var last error
	for {
		done, err := check(ctx)
		if done {
			return nil
		}
		var fe fatalError
		if errors.As(err, &fe) {
			return fe.error
		}
		if err != nil && (last == nil || ctx.Err() == nil) {
			last = err // an error caused by the timeout itself would hide the one that explains it
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = errors.New("condition not met")
			}
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return fmt.Errorf("timed out after %s: %w", timeout, last)
			}
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-t.C:
		}
	}
}
