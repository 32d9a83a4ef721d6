package main_test

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// The receiver logs through controller-runtime's zap with the flags serve binds. docs/receiver.md
// states what that does to a burst of one error message (the store path under an outage):
// production mode keeps the first 100 per second and every 100th after; a verbosity of 2 keeps
// every one. The requests_total counter carries the true number either way.
func TestStoreErrorLogSampling(t *testing.T) {
	const burst = 1000
	for _, tc := range []struct {
		flags    []string
		min, max int
	}{
		// 109 within one second; a stalled machine (a new second mid-burst) lets more through.
		{nil, 100 + (burst-100)/100, burst / 2},
		{[]string{"--zap-log-level=2"}, burst, burst},
		{[]string{"--zap-devel"}, burst, burst},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		opts := zap.Options{}
		opts.BindFlags(fs)
		if err := fs.Parse(tc.flags); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		opts.DestWriter = &out
		log := zap.New(zap.UseFlagOptions(&opts))
		for range burst {
			log.Error(errors.New("store: claim: connection refused"), "recording the delivery failed")
		}
		if got := strings.Count(out.String(), "recording the delivery failed"); got < tc.min || got > tc.max {
			t.Errorf("flags %v: %d of %d error entries written, want %d to %d", tc.flags, got, burst, tc.min, tc.max)
		}
	}
}
