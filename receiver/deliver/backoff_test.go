package deliver

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBackoffDelay(t *testing.T) {
	highest := func(n int64) int64 { return n - 1 }
	lowest := func(int64) int64 { return 0 }

	cases := []struct {
		reason     string
		b          Backoff
		attempt    int
		retryAfter time.Duration
		want       time.Duration
		wantRandN  int64 // the bound passed to Rand; 0 when Rand must not be called
	}{
		{
			reason:  "first attempt waits at most Base (upper bound inclusive)",
			b:       Backoff{Rand: highest},
			attempt: 1, want: time.Second, wantRandN: int64(time.Second) + 1,
		},
		{
			reason:  "full jitter reaches zero",
			b:       Backoff{Rand: lowest},
			attempt: 1, want: 0, wantRandN: int64(time.Second) + 1,
		},
		{
			reason:  "the ceiling doubles per attempt: attempt 4 waits at most 8 Base",
			b:       Backoff{Base: 100 * time.Millisecond, Rand: highest},
			attempt: 4, want: 800 * time.Millisecond, wantRandN: int64(800*time.Millisecond) + 1,
		},
		{
			reason:  "the ceiling is capped by Max",
			b:       Backoff{Base: time.Second, Max: time.Minute, Rand: highest},
			attempt: 10, want: time.Minute, wantRandN: int64(time.Minute) + 1,
		},
		{
			reason:  "the default cap is an hour",
			b:       Backoff{Rand: highest},
			attempt: 20, want: time.Hour, wantRandN: int64(time.Hour) + 1,
		},
		{
			reason:  "huge attempt numbers do not overflow the shift",
			b:       Backoff{Rand: highest},
			attempt: 1000, want: time.Hour, wantRandN: int64(time.Hour) + 1,
		},
		{
			reason:  "attempt 0 is treated as the first",
			b:       Backoff{Rand: highest},
			attempt: 0, want: time.Second, wantRandN: int64(time.Second) + 1,
		},
		{
			reason:  "Retry-After is a floor under the jitter",
			b:       Backoff{Rand: lowest},
			attempt: 1, retryAfter: 30 * time.Second,
			want: 30 * time.Second, wantRandN: int64(time.Second) + 1,
		},
		{
			reason:  "a jittered wait longer than Retry-After stands",
			b:       Backoff{Base: time.Minute, Rand: highest},
			attempt: 2, retryAfter: 30 * time.Second,
			want: 2 * time.Minute, wantRandN: int64(2*time.Minute) + 1,
		},
		{
			reason:  "Retry-After is capped by Max",
			b:       Backoff{Max: time.Hour, Rand: lowest},
			attempt: 1, retryAfter: 3 * time.Hour,
			want: time.Hour, wantRandN: int64(time.Second) + 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			var gotRandN int64
			rnd := tc.b.Rand
			tc.b.Rand = func(n int64) int64 { gotRandN = n; return rnd(n) }
			got := tc.b.Delay(tc.attempt, tc.retryAfter)
			if diff := cmp.Diff(
				[2]int64{int64(tc.want), tc.wantRandN},
				[2]int64{int64(got), gotRandN},
			); diff != "" {
				t.Errorf("Delay(%d, %s) [delay, rand bound] (-want +got):\n%s", tc.attempt, tc.retryAfter, diff)
			}
		})
	}
}

// The default random source stays within the documented bounds and is safe to share.
func TestBackoffDefaultRandBounds(t *testing.T) {
	b := Backoff{Base: 10 * time.Millisecond, Max: time.Second}
	var wg sync.WaitGroup
	for attempt := 1; attempt <= 12; attempt++ {
		wg.Go(func() {
			ceiling := min(time.Second, 10*time.Millisecond<<(attempt-1))
			for range 200 {
				if d := b.Delay(attempt, 0); d < 0 || d > ceiling {
					t.Errorf("Delay(%d) = %s, want within [0, %s]", attempt, d, ceiling)
					return
				}
			}
		})
	}
	wg.Wait()
}
