package providers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBackoffStep(t *testing.T) {
	const s = time.Second
	cases := []struct {
		reason string
		b      Backoff
		steps  int
		want   []time.Duration
	}{
		{"doubles from first up to max, then stays", Backoff{First: s, Factor: 2, Max: 30 * s}, 7,
			[]time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s}},
		{"factor 1 waits the same every time", Backoff{First: 5 * s, Factor: 1, Max: time.Minute}, 3,
			[]time.Duration{5 * s, 5 * s, 5 * s}},
		{"a factor below 1 never shrinks a wait", Backoff{First: 5 * s, Factor: 0.5, Max: time.Minute}, 2,
			[]time.Duration{5 * s, 5 * s}},
		{"a max below first is first", Backoff{First: time.Minute, Factor: 2, Max: s}, 2,
			[]time.Duration{time.Minute, time.Minute}},
		{"a fractional factor", Backoff{First: 10 * s, Factor: 1.5, Max: time.Minute}, 6,
			[]time.Duration{10 * s, 15 * s, 22500 * time.Millisecond, 33750 * time.Millisecond, 50625 * time.Millisecond, time.Minute}},
	}
	for _, c := range cases {
		var got []time.Duration
		for n := range c.steps {
			got = append(got, c.b.Step(n))
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("%s: -want +got\n%s", c.reason, d)
		}
	}
	// A long streak saturates at the cap instead of overflowing a Duration.
	b := Backoff{First: time.Minute, Factor: 10, Max: 15 * time.Minute}
	for _, n := range []int{30, 1000, 1 << 20} {
		if got := b.Step(n); got != 15*time.Minute {
			t.Errorf("Step(%d) = %s; want the cap, 15m", n, got)
		}
	}
}
