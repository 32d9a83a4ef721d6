package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The trace context recorded with an event comes back with every job of it, on every store,
// so an attempt hours later on another replica is still a child of the event's trace; an
// event recorded without one comes back without.
func TestTraceContextKeptWithTheEvent(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		traced := sinkEvent("ns/a", "traced", t0, "a", "b")
		traced.Trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\nhw=1"
		plain := event("ns/a", "plain", t0)
		mustClaim(t, e.s, traced, plain)
		got := map[string]string{}
		for _, j := range mustLease(t, e.s, 10, t0.Add(time.Second), time.Minute) {
			got[j.Event.EventID+"→"+j.Sink] = j.Event.Trace
		}
		want := map[string]string{"traced→a": traced.Trace, "traced→b": traced.Trace, "plain→" + DefaultSink: ""}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("trace context of the leased jobs (-want +got):\n%s", diff)
		}
	})
}
