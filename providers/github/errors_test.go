package github_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/github/fake"
)

type op func(ctx context.Context, c *github.Client) error

func list(ctx context.Context, c *github.Client) error { _, err := c.List(ctx); return err }

func create(ctx context.Context, c *github.Client) error {
	_, err := c.Create(ctx, desired("https://example.com/hook", "push"), "")
	return err
}

func update(id string) op {
	return func(ctx context.Context, c *github.Client) error {
		_, err := c.Update(ctx, id, desired("https://example.com/hook", "push"))
		return err
	}
}

func TestErrorsAreClassified(t *testing.T) {
	cases := []struct {
		name, reason string
		target       string
		opts         []envOption
		setup        func(e *env)
		op           op
		kind         providers.Kind
		status       int
		// retryAfter is checked within a second below it (reset is in whole seconds); zero
		// means none stated: the reconciler backs off by Capabilities.RateLimitBackoff.
		retryAfter time.Duration
		contains   []string
	}{
		{name: "bad credentials", reason: "401 is a refused token", target: repo,
			setup: func(e *env) { e.srv.ForgetToken(token) }, op: list,
			kind: providers.Unauthorized, status: 401, contains: []string{"Bad credentials", "expired or revoked"}},
		{name: "repository not administered", reason: "a 404 on the list names the scope and the fine-grained permission", target: repo,
			setup: func(e *env) { e.srv.Revoke(token, repo) }, op: list,
			kind: providers.NotFound, status: 404, contains: []string{"repository octo-org/hello-world", "does not exist, or the token cannot administer its hooks", "admin:repo_hook", `repository permission "Webhooks" (read and write)`}},
		{name: "organization missing", reason: "the organization hook scope is admin:org_hook", target: org,
			setup: func(e *env) { e.srv.Revoke(token, org) }, op: create,
			kind: providers.NotFound, status: 404, contains: []string{"organization octo-org", "admin:org_hook", `organization permission "Webhooks" (read and write)`}},
		{name: "classic token without a hook scope", reason: "GitHub's scope headers are quoted", target: repo,
			setup: func(e *env) { e.srv.SetScopes(token, "repo:status", "read:org") }, op: list,
			kind: providers.NotFound, status: 404, contains: []string{"the token's scopes: [repo:status, read:org]", "accepted here: [admin:repo_hook, read:repo_hook, repo, write:repo_hook]"}},
		{name: "read-only token writes", reason: "a 403 not about rate limits says what to grant", target: repo,
			setup: func(e *env) { e.srv.GrantRead(token, repo) }, op: create,
			kind: providers.Unauthorized, status: 403, contains: []string{"Resource not accessible by personal access token", "repository_hooks=write", `"Webhooks" (read and write)`}},
		{name: "primary limit 403", reason: "403 with remaining 0 waits until the reset", target: repo,
			setup: func(e *env) { e.srv.SetRateLimitRemaining(token, 0) }, op: list,
			kind: providers.RateLimited, status: 403, retryAfter: time.Hour, contains: []string{"primary rate limit", "API rate limit exceeded"}},
		{name: "primary limit 429", reason: "GitHub may answer the primary limit with 429", target: org,
			opts:  []envOption{withFake(fake.WithRateLimitStatus(http.StatusTooManyRequests))},
			setup: func(e *env) { e.srv.SetRateLimitRemaining(token, 0) }, op: create,
			kind: providers.RateLimited, status: 429, retryAfter: time.Hour},
		{name: "secondary 403 with retry-after", reason: "retry-after is honoured", target: repo,
			setup: func(e *env) { e.srv.Inject(fake.SecondaryLimit(403, 30*time.Second)) }, op: create,
			kind: providers.RateLimited, status: 403, retryAfter: 30 * time.Second, contains: []string{"secondary rate limit"}},
		{name: "secondary 429 without retry-after", reason: "no stated wait: the provider's backoff applies", target: repo,
			setup: func(e *env) { e.srv.Inject(fake.SecondaryLimit(429, 0)) }, op: list,
			kind: providers.RateLimited, status: 429},
		{name: "secondary 403 by message", reason: "a 403 whose message names the secondary limit is one", target: org,
			setup: func(e *env) { e.srv.Inject(fake.SecondaryLimit(403, 0)) }, op: update("1"),
			kind: providers.RateLimited, status: 403},
		{name: "hook already exists", reason: "the 422 for an overlapping hook on the same URL", target: repo,
			setup: func(e *env) {
				e.srv.Seed(repo, fake.Hook{Active: true, Events: []string{"push"}, Config: fake.Config{URL: "https://example.com/hook"}})
			}, op: create,
			kind: providers.AlreadyExists, status: 422, contains: []string{"Validation Failed", "Hook already exists on this repository"}},
		{name: "per-event cap", reason: "the 422 over the cap is a quota", target: org, opts: []envOption{withFake(fake.WithHookCap(2))},
			setup: func(e *env) {
				for i := range 2 {
					e.srv.Seed(org, fake.Hook{Active: true, Events: []string{"push"}, Config: fake.Config{URL: fmt.Sprintf("https://example.com/%d", i)}})
				}
			}, op: create,
			kind: providers.QuotaExceeded, status: 422, contains: []string{"cannot have more than 2 webhooks"}},
		{name: "missing hook", reason: "a 404 on one hook is NotFound", target: repo, op: update("12345"),
			kind: providers.NotFound, status: 404, contains: []string{"hook not found"}},
		{name: "URL refused before sending", reason: "a URL GitHub's schema refuses is not sent", target: repo,
			op: func(ctx context.Context, c *github.Client) error {
				_, err := c.Create(ctx, desired("not-a-url", "push"), "")
				return err
			},
			kind: providers.Permanent, contains: []string{"absolute http(s) URL"}},
		{name: "server error", reason: "5xx is transient", target: repo,
			setup: func(e *env) { e.srv.Inject(fake.Fault{Status: 502}) }, op: list,
			kind: providers.Transient, status: 502, contains: []string{"Bad Gateway"}},
		{name: "HTML page", reason: "a proxy's page is transient and said to be HTML", target: repo, opts: []envOption{unvalidated()},
			setup: func(e *env) { e.srv.Inject(fake.Fault{Status: 404, HTML: true}) }, op: list,
			kind: providers.Transient, status: 404, contains: []string{"an HTML page"}},
		{name: "response lost", reason: "the create happened but the answer was a 500: transient (the next list finds it)", target: repo,
			setup: func(e *env) { e.srv.Inject(fake.Fault{Method: "POST", Status: 500, AfterApply: true}) }, op: create,
			kind: providers.Transient, status: 500},
		{name: "timeout", reason: "a request past Config.Timeout is transient", target: repo, opts: []envOption{withTimeout(50 * time.Millisecond)},
			setup: func(e *env) { e.srv.Inject(fake.Fault{Latency: 5 * time.Second}) }, op: list,
			kind: providers.Transient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.target, tc.opts...)
			if tc.setup != nil {
				tc.setup(e)
			}
			pe := asError(t, tc.op(context.Background(), e.client))
			if pe.Kind != tc.kind || pe.StatusCode != tc.status {
				t.Fatalf("%s: got %v (kind %v, HTTP %d), want %v, HTTP %d", tc.reason, pe, pe.Kind, pe.StatusCode, tc.kind, tc.status)
			}
			if tc.retryAfter > 0 && (pe.RetryAfter > tc.retryAfter || pe.RetryAfter < tc.retryAfter-2*time.Second) {
				t.Errorf("%s: RetryAfter = %v, want about %v", tc.reason, pe.RetryAfter, tc.retryAfter)
			}
			if tc.retryAfter == 0 && pe.RetryAfter != 0 {
				t.Errorf("%s: RetryAfter = %v, want 0", tc.reason, pe.RetryAfter)
			}
			for _, s := range tc.contains {
				if !strings.Contains(pe.Message, s) {
					t.Errorf("%s: message %q does not contain %q", tc.reason, pe.Message, s)
				}
			}
			if tc.status == 0 && len(e.srv.Requests()) > 0 && tc.name != "timeout" {
				t.Errorf("%s: a request was sent", tc.reason)
			}
			if tc.status != 0 && pe.RequestID == "" && !strings.Contains(tc.name, "HTML") {
				t.Errorf("RequestID is empty; GitHub's X-GitHub-Request-Id belongs in it")
			}
		})
	}
}

// TestUnfollowableAnswers covers answers the fake does not give: a moved repository, a Link
// to another host, pagination that repeats or never ends, a body that is not JSON.
func TestUnfollowableAnswers(t *testing.T) {
	cases := []struct {
		name, reason string
		handler      func(base func() string) http.HandlerFunc
		kind         providers.Kind
		contains     string
		maxRequests  int
	}{
		{name: "moved", reason: "a renamed repository is not followed with the token", kind: providers.Permanent, contains: "renamed or transferred",
			handler: func(func() string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Location", "/repositories/42/hooks")
					w.WriteHeader(http.StatusMovedPermanently)
				}
			}},
		{name: "foreign next", reason: "the token must not go to another host", kind: providers.Transient, contains: "another host (evil.example)",
			handler: func(func() string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Link", `<https://evil.example/repos/octo-org/hello-world/hooks?page=2>; rel="next"`)
					_, _ = w.Write([]byte("[]"))
				}
			}},
		{name: "repeated page", reason: "a next link back to a seen page is a loop", kind: providers.Transient, contains: "repeated a page", maxRequests: 2,
			handler: func(base func() string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Link", `<`+base()+`/repos/octo-org/hello-world/hooks?per_page=100&page=2>; rel="next"`)
					_, _ = w.Write([]byte("[]"))
				}
			}},
		{name: "endless pages", reason: "a list that never ends is refused, not returned partly", kind: providers.Transient, contains: "did not end after 100 pages", maxRequests: 100,
			handler: func(func() string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					n, _ := strconv.Atoi(r.URL.Query().Get("page"))
					w.Header().Set("Link", fmt.Sprintf(`</repos/octo-org/hello-world/hooks?page=%d>; rel="next"`, n+1))
					_, _ = w.Write([]byte("[]"))
				}
			}},
		{name: "other 422", reason: "GitHub's message and errors[].message reach the user as Permanent", kind: providers.Permanent,
			contains: "Validation Failed; Config url is not supported; events invalid",
			handler: func(func() string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(http.StatusUnprocessableEntity)
					_, _ = w.Write([]byte(`{"message":"Validation Failed","errors":[{"resource":"Hook","code":"custom","message":"Config url is not supported"},{"resource":"Hook","code":"invalid","field":"events"}],"documentation_url":"x"}`))
				}
			}},
		{name: "not JSON", reason: "a 200 that is not a hook array is transient", kind: providers.Transient, contains: "not JSON",
			handler: func(func() string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hello")) }
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var hs *httptest.Server
			requests := 0
			h := tc.handler(func() string { return hs.URL })
			hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests++; h(w, r) }))
			defer hs.Close()
			_, err := newClient(t, hs.URL, repo, 5*time.Second).List(context.Background())
			pe := asError(t, err)
			if pe.Kind != tc.kind || !strings.Contains(pe.Message, tc.contains) {
				t.Errorf("%s: %v, want %v containing %q", tc.reason, err, tc.kind, tc.contains)
			}
			if tc.maxRequests > 0 && requests != tc.maxRequests {
				t.Errorf("%d requests, want %d", requests, tc.maxRequests)
			}
		})
	}
}

func TestNetworkErrorIsTransient(t *testing.T) {
	hs := httptest.NewServer(http.NotFoundHandler())
	url := hs.URL
	hs.Close()
	_, err := newClient(t, url, repo, time.Second).List(context.Background())
	if pe := asError(t, err); pe.Kind != providers.Transient || !strings.Contains(pe.Message, "request failed") {
		t.Errorf("List against a closed port: %v, want Transient", err)
	}
}

// TestPrimaryLimitWaitsUntilResetByTheInjectedClock: the wait of a primary limit is
// x-ratelimit-reset (epoch seconds) read against Config.Now, not the machine's clock, so the
// manager's clock decides it and a test computes it exactly.
func TestPrimaryLimitWaitsUntilResetByTheInjectedClock(t *testing.T) {
	now := time.Date(2031, 5, 6, 7, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	srv := fake.New(fake.WithClock(clock))
	base, stop := srv.Start()
	t.Cleanup(stop)
	srv.Grant(token, repo)
	c, err := github.New(providers.Config{APIURL: base, Target: repo, Credential: token, Timeout: 5 * time.Second, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetRateLimitRemaining(token, 0) // the hour's window opens now, and is spent
	now = now.Add(20 * time.Minute)
	pe := asError(t, list(context.Background(), c))
	if pe.Kind != providers.RateLimited || pe.RetryAfter != 40*time.Minute {
		t.Errorf("primary limit 20 minutes into the hour: %v, RetryAfter %s; want RateLimited, exactly 40m until x-ratelimit-reset", pe, pe.RetryAfter)
	}
}
