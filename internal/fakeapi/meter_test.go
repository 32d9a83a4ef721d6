package fakeapi

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMeter(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	m := NewMeter(MeterOptions{Rate: 2, Burst: 2, Latency: 20 * time.Millisecond, Now: clock})
	list, create := Route{"GET", "/things"}, Route{"POST", "/things"}
	limited := func(wait time.Duration) *failure { return &failure{Status: 429 + int(wait/time.Millisecond)} }

	steps := []struct {
		reason     string
		credential string
		route      Route
		fault      *failure
		advance    time.Duration
		want       Taken[failure]
	}{
		{reason: "within the burst: only the latency", credential: "a", route: list, want: Taken[failure]{Latency: 20 * time.Millisecond}},
		{reason: "the burst's second request", credential: "a", route: create, want: Taken[failure]{Latency: 20 * time.Millisecond}},
		{reason: "beyond the burst: refused, told to wait for half a second (rate 2/s)", credential: "a", route: create, want: Taken[failure]{Latency: 20 * time.Millisecond, Fail: &failure{Status: 429 + 500}}},
		{reason: "another credential has its own bucket", credential: "b", route: list, want: Taken[failure]{Latency: 20 * time.Millisecond}},
		{reason: "no credential is never limited", credential: "", route: list, want: Taken[failure]{Latency: 20 * time.Millisecond}},
		{reason: "a token has come back after 0.5 s", credential: "a", route: list, advance: 500 * time.Millisecond, want: Taken[failure]{Latency: 20 * time.Millisecond}},
		{reason: "an injected fault wins over the rate limit, and the request still spends rate", credential: "a", route: list, fault: &failure{Status: 503}, want: Taken[failure]{Latency: 20 * time.Millisecond, Fail: &failure{Status: 503}}},
	}
	for i, s := range steps {
		advance(s.advance)
		got := Metered(m, Taken[failure]{Fail: s.fault}, s.credential, s.route, limited)
		if d := cmp.Diff(s.want, got); d != "" {
			t.Errorf("step %d (%s): -want +got\n%s", i, s.reason, d)
		}
	}
	want := []RouteCount{{Route: list, Requests: 5, Limited: 1}, {Route: create, Requests: 2, Limited: 1}}
	if d := cmp.Diff(want, m.Counts()); d != "" {
		t.Errorf("counts: -want +got\n%s", d)
	}
}

// GitLab limits hook creation on its own (5 a minute per project) and not the lists: a meter
// given Routes refuses only those, and the others neither wait for nor spend the rate.
func TestMeterRoutes(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	list, create := Route{"GET", "/things"}, Route{"POST", "/things"}
	m := NewMeter(MeterOptions{Rate: 1.0 / 60, Burst: 2, Now: func() time.Time { return now }, Routes: []Route{create}})
	limited := func(time.Duration) *failure { return &failure{429} }
	var got []bool
	for _, rt := range []Route{list, list, list, create, list, create, create, list} {
		got = append(got, Metered(m, Taken[failure]{}, "a", rt, limited).Fail != nil)
	}
	want := []bool{false, false, false, false, false, false, true, false}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("refused, request by request: -want +got\n%s", d)
	}
	wantCounts := []RouteCount{{Route: list, Requests: 5}, {Route: create, Requests: 3, Limited: 1}}
	if d := cmp.Diff(wantCounts, m.Counts()); d != "" {
		t.Errorf("counts: -want +got\n%s", d)
	}
}

func TestNilMeterMetersNothing(t *testing.T) {
	var m *Meter
	in := Taken[failure]{Latency: time.Second}
	if got := Metered(m, in, "a", Route{"GET", "/"}, func(time.Duration) *failure { return &failure{429} }); got != in {
		t.Errorf("a nil meter changed the faults: %+v", got)
	}
	if m.Counts() != nil {
		t.Error("a nil meter counted something")
	}
}

func TestMeterObserve(t *testing.T) {
	type seen struct {
		Credential string
		Route      Route
		At         time.Time
		Limited    bool
	}
	at := time.Unix(1_700_000_000, 0)
	var got []seen
	m := NewMeter(MeterOptions{Rate: 1, Now: func() time.Time { return at }, Observe: func(credential string, rt Route, at time.Time, limited bool) {
		got = append(got, seen{credential, rt, at, limited})
	}})
	list := Route{"GET", "/things"}
	limited := func(time.Duration) *failure { return &failure{429} }
	for _, credential := range []string{"a", "a", ""} {
		Metered(m, Taken[failure]{}, credential, list, limited)
	}
	want := []seen{{"a", list, at, false}, {"a", list, at, true}, {"", list, at, false}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("observed: -want +got\n%s", d)
	}
}
