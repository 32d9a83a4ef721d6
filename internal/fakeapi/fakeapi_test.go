package fakeapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type failure struct{ Status int }

func TestFaultsTake(t *testing.T) {
	cases := []struct {
		name   string
		reason string
		fold   bool
		inject []struct {
			rule Rule
			fail *failure
		}
		requests [][2]string
		want     []Taken[failure]
	}{
		{
			name:   "times",
			reason: "a fault with Times applies that often and is then gone",
			inject: []struct {
				rule Rule
				fail *failure
			}{{Rule{Method: "GET", Times: 2}, &failure{500}}},
			requests: [][2]string{{"get", "/a"}, {"GET", "/b"}, {"GET", "/c"}},
			want:     []Taken[failure]{{Fail: &failure{500}}, {Fail: &failure{500}}, {}},
		},
		{
			name:   "earliest failure wins",
			reason: "the first matching failure answers with its latency and every latency-only fault's; a later failure is not used up",
			inject: []struct {
				rule Rule
				fail *failure
			}{
				{Rule{Latency: time.Second}, nil},
				{Rule{PathPrefix: "/x", AfterApply: true}, &failure{502}},
				{Rule{PathPrefix: "/x", Latency: 2 * time.Second}, &failure{503}},
			},
			requests: [][2]string{{"POST", "/x/1"}, {"POST", "/y"}},
			want: []Taken[failure]{
				{Latency: time.Second, Fail: &failure{502}, AfterApply: true},
				{Latency: time.Second},
			},
		},
		{
			name:   "case-sensitive by default",
			reason: "Stripe's paths are case-sensitive",
			inject: []struct {
				rule Rule
				fail *failure
			}{{Rule{PathPrefix: "/Repos/A"}, &failure{500}}},
			requests: [][2]string{{"GET", "/repos/a/hooks"}},
			want:     []Taken[failure]{{}},
		},
		{
			name:   "fold case",
			reason: "GitHub's paths are not",
			fold:   true,
			inject: []struct {
				rule Rule
				fail *failure
			}{{Rule{PathPrefix: "/Repos/A"}, &failure{500}}},
			requests: [][2]string{{"GET", "/repos/a/hooks"}},
			want:     []Taken[failure]{{Fail: &failure{500}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := &Faults[failure]{FoldCase: tc.fold}
			for _, in := range tc.inject {
				fs.Inject(in.rule, in.fail)
			}
			var got []Taken[failure]
			for _, r := range tc.requests {
				got = append(got, fs.Take(r[0], r[1]))
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("%s: Take (-want +got):\n%s", tc.reason, d)
			}
		})
	}
}

func TestFaultsRemoveAndClear(t *testing.T) {
	var fs Faults[failure]
	remove := fs.Inject(Rule{}, &failure{500})
	fs.Inject(Rule{PathPrefix: "/b"}, &failure{429})
	remove()
	remove() // safe twice
	if got := fs.Take("GET", "/a"); got.Fail != nil {
		t.Errorf("removed fault still applies: %+v", got)
	}
	fs.Clear()
	if got := fs.Take("GET", "/b"); got.Fail != nil {
		t.Errorf("cleared fault still applies: %+v", got)
	}
}

func TestServe(t *testing.T) {
	applied := 0
	apply := func() int { applied++; return 200 }
	fail := func(f *failure) int { return f.Status }

	if res, ok := Serve(context.Background(), Taken[failure]{Fail: &failure{500}}, apply, fail); !ok || res != 500 || applied != 0 {
		t.Errorf("before apply: res %d ok %v applied %d, want 500 true 0", res, ok, applied)
	}
	if res, ok := Serve(context.Background(), Taken[failure]{Fail: &failure{502}, AfterApply: true}, apply, fail); !ok || res != 502 || applied != 1 {
		t.Errorf("after apply: res %d ok %v applied %d, want 502 true 1", res, ok, applied)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := Serve(ctx, Taken[failure]{Latency: time.Hour}, apply, fail); ok || applied != 1 {
		t.Errorf("client gone during latency: ok %v applied %d, want false 1", ok, applied)
	}
}

func TestLabelHidesCredential(t *testing.T) {
	const cred = "ghp_leakcanary0123456789"
	l := Label("tok_", cred)
	if !strings.HasPrefix(l, "tok_") || len(l) != len("tok_")+12 || strings.Contains(l, cred[4:10]) {
		t.Errorf("Label = %q", l)
	}
	if Label("tok_", cred) != l || Label("tok_", cred+"x") == l {
		t.Error("Label is not a stable function of the credential")
	}
	if Label("tok_", "") != "" {
		t.Error(`Label("") != ""`)
	}
}

func TestLogAndStart(t *testing.T) {
	log := NewLog(func(s []string) []string { return append([]string(nil), s...) })
	base, stop := Start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Add([]string{r.Method, r.URL.Path})
		w.WriteHeader(http.StatusTeapot)
	}))
	defer stop()
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("base URL %q", base)
	}
	for _, p := range []string{"/a", "/b", "/a/c"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	all := log.All()
	all[0][1] = "mutated"
	if got := log.Count(func(r []string) bool { return strings.HasPrefix(r[1], "/a") }); got != 2 {
		t.Errorf("Count = %d, want 2 (All must hand out copies)", got)
	}
	log.Reset()
	if n := len(log.All()); n != 0 {
		t.Errorf("after Reset: %d records", n)
	}
	stop()
	stop() // safe twice
	if _, err := http.Get(base + "/a"); err == nil {
		t.Error("server still answers after stop")
	}
}

func TestFaultLimitedToACredential(t *testing.T) {
	var fs Faults[string]
	fail := "refused"
	fs.Inject(Rule{Method: "POST", PathPrefix: "/v1/webhook_endpoints", Credential: "sk_test_a"}, &fail)
	if got := fs.TakeFor("POST", "/v1/webhook_endpoints", "sk_test_b"); got.Fail != nil {
		t.Errorf("another credential's request got the fault")
	}
	if got := fs.Take("POST", "/v1/webhook_endpoints"); got.Fail != nil {
		t.Errorf("a request without a credential got a fault limited to one")
	}
	if got := fs.TakeFor("POST", "/v1/webhook_endpoints", "sk_test_a"); got.Fail == nil || *got.Fail != fail {
		t.Errorf("the credential's own request did not get the fault: %+v", got)
	}
}

func TestClockAdvance(t *testing.T) {
	var c Clock
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.Set(func() time.Time { return base })
	c.Advance(96 * time.Hour)
	c.Advance(time.Minute)
	if got, want := c.Now(), base.Add(96*time.Hour+time.Minute); !got.Equal(want) {
		t.Errorf("after Advance: %v, want %v", got, want)
	}
	c.Set(func() time.Time { return base })
	if got := c.Now(); !got.Equal(base) {
		t.Errorf("Set keeps the advance: %v, want %v", got, base)
	}
	var real Clock
	real.Advance(24 * time.Hour)
	if d := time.Until(real.Now()); d < 23*time.Hour || d > 25*time.Hour {
		t.Errorf("advancing time.Now by a day is %v ahead", d)
	}
}
