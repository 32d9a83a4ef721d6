package fakeapi

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestChaosDecide(t *testing.T) {
	decide := func(c *Chaos, n int) []Decision {
		out := make([]Decision, n)
		for i := range out {
			out[i] = c.Decide()
		}
		return out
	}
	c1, err := NewChaos(ChaosOptions{Rate: 0.2, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := NewChaos(ChaosOptions{Rate: 0.2, Seed: 7})
	a, b := decide(c1, 5000), decide(c2, 5000)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("the same seed decided differently (-first +second):\n%s", diff)
	}

	counts := c1.Counts()
	if counts.Requests != 5000 {
		t.Errorf("Requests = %d, want 5000", counts.Requests)
	}
	// 1,000 expected; 850..1150 is more than 5 standard deviations (~28) either side.
	if n := counts.Total(); n < 850 || n > 1150 {
		t.Errorf("%d of 5000 requests failed at rate 0.2", n)
	}
	for _, k := range []string{"429 before apply", "500 before apply", "500 after apply", "502 before apply", "502 after apply", "503 before apply", "503 after apply", "timeout before apply", "timeout after apply"} {
		if counts.Injected[k] == 0 {
			t.Errorf("no %q in 5000 requests: %v", k, counts.Injected)
		}
	}
	if n := counts.Injected["429 after apply"]; n != 0 {
		t.Errorf("%d rate limits after apply: a rate limiter answers before the request runs", n)
	}
	for _, d := range a {
		if d.Kind != "" && d.Hold != 30*time.Second {
			t.Fatalf("default hold %s, want 30s", d.Hold)
		}
	}

	var none *Chaos
	if d := none.Decide(); d != (Decision{}) {
		t.Errorf("nil Chaos decided %+v", d)
	}
	if _, err := NewChaos(ChaosOptions{Rate: 1.5}); err == nil {
		t.Error("rate 1.5 accepted")
	}
}

func TestServeChaos(t *testing.T) {
	type outcome struct {
		Applied bool
		Res     string
		OK      bool
	}
	run := func(ctx context.Context, d Decision) outcome {
		var o outcome
		o.Res, o.OK = ServeChaos(ctx, d, func() string { o.Applied = true; return "applied" }, func(d Decision) string { return "failed " + string(d.Kind) })
		return o
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name, reason string
		ctx          context.Context
		d            Decision
		want         outcome
	}{
		{"none", "no decision just applies", context.Background(), Decision{}, outcome{true, "applied", true}},
		{"before", "a failure before apply leaves the state alone", context.Background(), Decision{Kind: ChaosUnavailable}, outcome{false, "failed 503", true}},
		{"after", "a failure after apply changed the state: the answer is lost", context.Background(), Decision{Kind: ChaosInternal, AfterApply: true}, outcome{true, "failed 500", true}},
		{"timeout before, client gone", "the client gave up: nothing applied, no answer", gone, Decision{Kind: ChaosTimeout, Hold: time.Hour}, outcome{false, "", false}},
		{"timeout after, client gone", "applied, then held until the client gave up", gone, Decision{Kind: ChaosTimeout, AfterApply: true, Hold: time.Hour}, outcome{true, "applied", false}},
		{"timeout outlives its hold", "a client that waits longer than the hold gets the failure (a gateway's 504)", context.Background(), Decision{Kind: ChaosTimeout, Hold: time.Millisecond}, outcome{false, "failed timeout", true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, run(tc.ctx, tc.d)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
