package account

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/account/accounttest"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/builtin"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/gitlab"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/pagerduty"
	stripefake "github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// refusals is how many rate limits in a row each provider answers in TestLimiterBackoffPerProvider.
const refusals = 20

// backoffCase is one provider refusing refusals requests in a row with its own rate-limit answer.
type backoffCase struct {
	name string
	// open starts the case at clock and returns the account key and what the case needs:
	// refuse makes the provider refuse the next request (it may move the clock, as time spent
	// Before the refusal); call is the request; requests counts what reached the provider.
	open func(t *testing.T, clock *accounttest.Clock) (key AccountKey, refuse func(), call func(Ops) error, requests func() int)
	// stated is the wait each refusal states (zero: none, the provider's backoff applies).
	stated time.Duration
	// policy is the provider's backoff the waits must follow when none is stated.
	policy providers.Backoff
}

// TestLimiterBackoffPerProvider drives 20 rate limits in a row per provider through the real
// path (the provider's fake answering with its documented headers, the provider's client
// classifying, the account's limiter deciding the wait) with an injected clock and jitter, and
// prints the waits. When the provider states no wait the waits follow the provider's own
// backoff: never shorter than its step, growing, up to its cap and never past it (Stripe: 20
// refusals of a per-second limiter cost minutes, not the hour a 5-minute cap made of them).
// A stated wait (Retry-After, GitHub's x-ratelimit-reset, PagerDuty's ratelimit-reset) is
// waited exactly, past the cap too. Meanwhile nothing reaches the provider.
func TestLimiterBackoffPerProvider(t *testing.T) {
	ghBackoff := providers.Backoff{First: time.Minute, Factor: 2, Max: 15 * time.Minute}
	cases := []backoffCase{
		{
			name: "stripe", policy: providers.Backoff{First: time.Second, Factor: 2, Max: 30 * time.Second},
			open: func(t *testing.T, _ *accounttest.Clock) (AccountKey, func(), func(Ops) error, func() int) {
				srv := stripefake.New()
				base, stop := srv.Start()
				t.Cleanup(stop)
				// Stripe's 429 rate_limit: no Retry-After (PROVIDERS.md §1.3).
				refuse := func() {
					srv.Inject(stripefake.Fault{Status: http.StatusTooManyRequests, Code: "rate_limit", Message: "Too many requests hit the API too quickly.", Times: 1})
				}
				return AccountKey{Provider: "stripe", APIURL: base, Credential: "sk_test_backoff"}, refuse, listOnce, func() int { return len(srv.Requests()) }
			},
		},
		{
			name: "github secondary", policy: ghBackoff,
			open: func(t *testing.T, clock *accounttest.Clock) (AccountKey, func(), func(Ops) error, func() int) {
				srv, key := githubBackoffAccount(t, clock)
				// A secondary limit without retry-after, remaining above 0 (PROVIDERS.md §2.2).
				refuse := func() {
					f := ghfake.SecondaryLimit(http.StatusForbidden, 0)
					f.Times = 1
					srv.Inject(f)
				}
				return key, refuse, listOnce, func() int { return len(srv.Requests()) }
			},
		},
		{
			name: "github primary", stated: 40 * time.Minute, policy: ghBackoff,
			open: func(t *testing.T, clock *accounttest.Clock) (AccountKey, func(), func(Ops) error, func() int) {
				srv, key := githubBackoffAccount(t, clock)
				// The token spends its hour's budget in 20 minutes: 403 with remaining 0 until
				// x-ratelimit-reset, 40 minutes on; then a fresh hour, spent the same way.
				refuse := func() {
					srv.SetRateLimitRemaining(key.Credential, 0)
					clock.Advance(20 * time.Minute)
				}
				return key, refuse, listOnce, func() int { return len(srv.Requests()) }
			},
		},
		{
			name: "gitlab create", stated: time.Minute, policy: providers.Backoff{First: 10 * time.Second, Factor: 2, Max: time.Minute},
			open: func(t *testing.T, _ *accounttest.Clock) (AccountKey, func(), func(Ops) error, func() int) {
				srv, key := gitlabBackoffAccount(t)
				// GitLab's hook-creation limit: 429 with Retry-After: 60 (REST-PROVIDERS.md §1.6).
				refuse := func() {
					srv.Inject(core.Fault{Method: http.MethodPost, Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "60"},
						Body: `{"message":"This endpoint has been requested too many times. Try again later."}`, Times: 1})
				}
				create := func(o Ops) error {
					_, err := o.Create(context.Background(), providers.Desired{URL: "https://hooks.example.com/gl", Events: []string{"push"}, Owner: providers.Owner{Cluster: "c", Namespace: "ns", Name: "n", UID: "u"}, Secret: "tok"}, "k")
					return err
				}
				return key, refuse, create, func() int { return len(srv.Requests()) }
			},
		},
		{
			name: "gitlab unstated", policy: providers.Backoff{First: 10 * time.Second, Factor: 2, Max: time.Minute},
			open: func(t *testing.T, _ *accounttest.Clock) (AccountKey, func(), func(Ops) error, func() int) {
				srv, key := gitlabBackoffAccount(t)
				// A 429 that states no wait: the profile's errors.rateLimit.backoff applies.
				refuse := func() {
					srv.Inject(core.Fault{Status: http.StatusTooManyRequests, Body: `{"message":"429 Too Many Requests"}`, Times: 1})
				}
				return key, refuse, listOnce, func() int { return len(srv.Requests()) }
			},
		},
		{
			name: "pagerduty", stated: 23 * time.Second, policy: providers.DefaultRateLimitBackoff,
			open: func(t *testing.T, _ *accounttest.Clock) (AccountKey, func(), func(Ops) error, func() int) {
				srv := pagerduty.New()
				base, stop := srv.Start()
				t.Cleanup(stop)
				// PagerDuty: 429 with ratelimit-reset in seconds, no Retry-After (REST-PROVIDERS.md §4.6).
				refuse := func() {
					srv.Inject(core.Fault{Status: http.StatusTooManyRequests, Header: map[string]string{"ratelimit-limit": "960", "ratelimit-remaining": "0", "ratelimit-reset": "23"},
						Body: `{"error":{"message":"Rate Limit Exceeded","code":2020}}`, Times: 1})
				}
				key := AccountKey{Provider: "rest", APIURL: base, Settings: accounttest.RestProfile(t, "pagerduty-webhook-subscriptions"), Credential: "pd-key-backoff"}
				return key, refuse, listOnce, func() int { return len(srv.Requests()) }
			},
		},
	}
	registry := builtin.Registry()

	waits := make([][]time.Duration, len(cases))
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := &accounttest.Clock{T: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
			key, refuse, call, requests := c.open(t, clock)
			// The pace is not under test: a bucket that never waits. The jitter is seeded, so
			// the printed waits are the same on every run.
			jitter := rand.New(rand.NewPCG(2026, uint64(i))).Float64
			accts := NewAccounts(registry, AccountOptions{QPS: 1e6, Burst: 1000, Now: clock.Now, Jitter: jitter})
			acct, err := accts.Get(key)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.policy, acct.limiter.policy); d != "" {
				t.Errorf("the limiter's backoff is not the provider's (-want +got):\n%s", d)
			}
			o, unlock := acct.Lock()
			defer unlock()
			before := requests()
			for n := range refusals {
				refuse()
				err := call(o)
				if providers.KindOf(err) != providers.RateLimited {
					t.Fatalf("refusal %d: %v; want RateLimited", n+1, err)
				}
				w := providers.RetryAfter(err)
				waits[i] = append(waits[i], w)
				// During the wait the limiter answers, and nothing reaches the provider.
				if again := call(o); providers.KindOf(again) != providers.RateLimited || providers.RetryAfter(again) != w {
					t.Errorf("refusal %d: a request during the %s wait got %v", n+1, w, again)
				}
				clock.Advance(w)
			}
			if got := requests() - before; got != refusals {
				t.Errorf("%d requests reached the provider; want %d, one per refusal, none during a wait", got, refusals)
			}
			checkBackoffWaits(t, c, waits[i])
		})
	}

	var total time.Duration
	for _, w := range waits[0] {
		total += w
	}
	if total > 15*time.Minute {
		t.Errorf("Stripe: %d refusals of a per-second limiter cost %s of waiting; want minutes, not an hour", refusals, total)
	}
	report := backoffTable(cases, waits)
	t.Log("\n" + report)
	fmt.Print(report)
}

// checkBackoffWaits asserts the properties of one case's waits: a stated wait exactly; else the
// provider's step at least, a quarter more at most, growing, up to its cap and never past it.
func checkBackoffWaits(t *testing.T, c backoffCase, waits []time.Duration) {
	t.Helper()
	if c.stated > 0 {
		for n, w := range waits {
			if w != c.stated {
				t.Errorf("refusal %d: wait %s; want the stated %s exactly", n+1, w, c.stated)
			}
		}
		return
	}
	limit := c.policy.Max
	for n, w := range waits {
		step := c.policy.Step(n)
		if w < step || w > min(step+step/4, limit) {
			t.Errorf("refusal %d: wait %s; want %s plus at most a quarter, never past the cap %s", n+1, w, step, limit)
		}
		if n > 0 && w < waits[n-1] {
			t.Errorf("refusal %d: wait %s is shorter than the one before, %s", n+1, w, waits[n-1])
		}
	}
	if last := waits[len(waits)-1]; last != limit {
		t.Errorf("the last of %d waits is %s; want the provider's cap, %s", len(waits), last, limit)
	}
}

// backoffTable prints the waits, one column per case, as a REPORT block.
func backoffTable(cases []backoffCase, waits [][]time.Duration) string {
	var b strings.Builder
	row := func(first string, cells []string) {
		fmt.Fprintf(&b, "REPORT backoff %-8s", first)
		for _, c := range cells {
			fmt.Fprintf(&b, " %17s", c)
		}
		b.WriteString("\n")
	}
	var names, policies []string
	for _, c := range cases {
		names = append(names, c.name)
		if c.stated > 0 {
			policies = append(policies, "stated "+fmtWait(c.stated))
		} else {
			policies = append(policies, fmt.Sprintf("%s×%g≤%s", fmtWait(c.policy.First), c.policy.Factor, fmtWait(c.policy.Max)))
		}
	}
	fmt.Fprintf(&b, "REPORT backoff: waits after %d rate limits in a row (injected clock, seeded jitter)\n", refusals)
	row("refusal", names)
	row("policy", policies)
	totals := make([]time.Duration, len(cases))
	for n := range refusals {
		var cells []string
		for i := range cases {
			cells = append(cells, fmtWait(waits[i][n]))
			totals[i] += waits[i][n]
		}
		row(fmt.Sprint(n+1), cells)
	}
	var cells []string
	for _, d := range totals {
		cells = append(cells, fmtWait(d))
	}
	row("total", cells)
	return b.String()
}

// fmtWait writes d to a tenth of a second, without zero minutes or seconds (4m, 1h).
func fmtWait(d time.Duration) string {
	s := d.Round(100 * time.Millisecond).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func listOnce(o Ops) error {
	_, err := o.List(context.Background(), 0)
	return err
}

// githubBackoffAccount serves the GitHub fake on clock with one repository its token administers.
func githubBackoffAccount(t *testing.T, clock *accounttest.Clock) (*ghfake.Server, AccountKey) {
	t.Helper()
	const token, repo = "ghp_backoffToken0123456789abcdefghij", "repos/octo-org/hello-world"
	srv := ghfake.New(ghfake.WithClock(clock.Now))
	base, stop := srv.Start()
	t.Cleanup(stop)
	srv.Grant(token, repo)
	return srv, AccountKey{Provider: "github", APIURL: base, Target: repo, Credential: token}
}

// gitlabBackoffAccount serves the GitLab fake with one project, for the shipped GitLab profile.
func gitlabBackoffAccount(t *testing.T) (*gitlab.Server, AccountKey) {
	t.Helper()
	srv := gitlab.New()
	srv.AddProject("42", "group/project")
	base, stop := srv.Start()
	t.Cleanup(stop)
	return srv, AccountKey{Provider: "rest", APIURL: base + "/api/v4", Target: rest.Target(map[string]string{"project": "group/project"}),
		Settings: accounttest.RestProfile(t, "gitlab-project-hooks"), Credential: "glpat-backoff"}
}
