package github_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/github/fake"
)

func TestNewRefusesBadConfig(t *testing.T) {
	cases := []struct {
		name, reason string
		cfg          providers.Config
		want         string
	}{
		{"empty token", "a token is required", providers.Config{Target: repo}, "token is empty"},
		{"token with newline", "net/http would fail every request on the header", providers.Config{Target: repo, Credential: token + "\n"}, "whitespace"},
		{"no target", "one client covers one repository or organization", providers.Config{Credential: token}, "must be repos/<owner>/<repository> or orgs/<organization>"},
		{"user target", "GitHub has no user hooks", providers.Config{Credential: token, Target: "users/octo"}, "must be repos/"},
		{"repo without name", "a repository needs owner and name", providers.Config{Credential: token, Target: "repos/octo"}, "must be repos/"},
		{"extra segment", "no path injection", providers.Config{Credential: token, Target: "repos/octo/hello/hooks"}, "must be repos/"},
		{"bad owner", "an owner cannot start with a hyphen", providers.Config{Credential: token, Target: "repos/-octo/hello"}, "not a GitHub owner name"},
		{"dot-dot repository", "path traversal", providers.Config{Credential: token, Target: "repos/octo/.."}, "not a GitHub repository name"},
		{"query in repository", "no query injection", providers.Config{Credential: token, Target: "repos/octo/a?x=1"}, "not a GitHub repository name"},
		{"bad org", "an organization name has no spaces", providers.Config{Credential: token, Target: "orgs/octo org"}, "not a GitHub organization name"},
		{"ftp API URL", "only http(s)", providers.Config{Credential: token, Target: repo, APIURL: "ftp://example.com"}, "absolute http(s) URL"},
		{"API URL with credentials", "the token goes in a header, never a URL", providers.Config{Credential: token, Target: repo, APIURL: "https://u:p@example.com/api/v3"}, "without credentials"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := github.New(tc.cfg)
			pe := asError(t, err)
			if pe.Kind != providers.Permanent || !strings.Contains(pe.Message, tc.want) {
				t.Errorf("%s: err = %v, want Permanent containing %q", tc.reason, err, tc.want)
			}
		})
	}
	for _, target := range []string{repo, org, "repos/Octo_Org/my.repo-1", "repos/a/b"} {
		if _, err := github.New(providers.Config{Credential: token, Target: target}); err != nil {
			t.Errorf("New(%q) = %v, want a client", target, err)
		}
	}
}

func TestCapabilities(t *testing.T) {
	c := newClient(t, "", repo, 0)
	want := providers.Capabilities{Secret: providers.SecretClientChosen, UpdateNeedsSecret: true, Fields: providers.FieldDisabled, Rate: providers.Rate{PerSecond: 1.2, Burst: 8},
		// GitHub's secondary limit without retry-after: at least a minute, then exponentially.
		RateLimitBackoff: providers.Backoff{First: time.Minute, Factor: 2, Max: 15 * time.Minute},
		// Deliveries can be redelivered for 3 days on github.com.
		Recovery: providers.RecoveryCapabilities{Mode: providers.RecoveryRedeliver, Window: 72 * time.Hour}}
	if d := cmp.Diff(want, c.Capabilities()); d != "" {
		t.Errorf("Capabilities (-want +got):\n%s", d)
	}
	var _ providers.Pinger = c
	var _ providers.Recoverer = c
	var _ providers.HealthReporter = c

	// GitHub Enterprise Server keeps them for 7 days; it serves the API under /api/v3.
	for apiURL, window := range map[string]time.Duration{
		"https://ghe.example.com/api/v3":  7 * 24 * time.Hour,
		"https://ghe.example.com/api/v3/": 7 * 24 * time.Hour,
		"https://api.github.com":          72 * time.Hour,
		"http://127.0.0.1:8080":           72 * time.Hour,
	} {
		got := newClient(t, apiURL, repo, 0).Capabilities().Recovery
		if want := (providers.RecoveryCapabilities{Mode: providers.RecoveryRedeliver, Window: window}); got != want {
			t.Errorf("Recovery for %s = %+v, want %+v", apiURL, got, want)
		}
	}
}

func TestListFollowsLinkToTheEnd(t *testing.T) {
	for _, target := range []string{repo, org} {
		t.Run(target, func(t *testing.T) {
			e := newEnv(t, target, withFake(fake.WithPageSize(2)))
			var want []string
			for i := range 5 {
				h := e.srv.Seed(target, fake.Hook{Active: true, Events: []string{"push"}, Config: fake.Config{URL: fmt.Sprintf("https://example.com/h%d", i), ContentType: "json"}})
				want = append(want, fmt.Sprint(h.ID))
			}
			regs, err := e.client.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range regs {
				got = append(got, r.ID)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("ids (-want +got):\n%s", d)
			}
			reqs := e.srv.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests, want 3 pages", len(reqs))
			}
			for i, r := range reqs {
				if r.Query.Get("per_page") != "100" || r.Op != fake.OpList {
					t.Errorf("request %d: %s %s?%s, want a list with per_page=100", i, r.Method, r.Path, r.Query.Encode())
				}
			}
		})
	}
}

func TestListConditionalRequestsSpendNoRateLimit(t *testing.T) {
	e := newEnv(t, repo, withFake(fake.WithPageSize(2)))
	var ids []int64
	for i := range 5 {
		ids = append(ids, e.srv.Seed(repo, fake.Hook{Active: true, Config: fake.Config{URL: fmt.Sprintf("https://example.com/%d", i), ContentType: "json"}}).ID)
	}
	first, err := e.client.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	spent := e.srv.RateLimit(token).Used
	e.srv.ResetRequests()

	second, err := e.client.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(first, second); d != "" {
		t.Errorf("second list differs (-first +second):\n%s", d)
	}
	if st := e.srv.Stats(); st.Lists != 1 || st.ListPages != 3 || st.NotModified != 3 {
		t.Errorf("second round: %+v, want one list of 3 pages, all 304", st)
	}
	if used := e.srv.RateLimit(token).Used; used != spent {
		t.Errorf("rate limit used %d after the 304 round, want %d (unchanged)", used, spent)
	}

	// A change on page 2 and a new hook (a new page 3 item and a moved Link) are seen; only
	// unchanged pages are 304s.
	e.srv.Edit(repo, ids[2], func(h *fake.Hook) { h.Events = []string{"issues"} })
	e.srv.Seed(repo, fake.Hook{Active: true, Config: fake.Config{URL: "https://example.com/new", ContentType: "json"}})
	e.srv.ResetRequests()
	third, err := e.client.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(third) != 6 || third[2].Events[0] != "issues" || third[5].URL != "https://example.com/new" {
		t.Errorf("third list = %+v, want the edit and the new hook", third)
	}
	if st := e.srv.Stats(); st.ListPages != 3 || st.NotModified != 1 {
		t.Errorf("third round: %+v, want 3 pages, only page 1 a 304", st)
	}
}

func TestListMapsHooks(t *testing.T) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		target string
		want   *providers.DeliveryReport
		health *providers.DeliveryHealth
	}{
		{repo, &providers.DeliveryReport{Code: 502, Status: "failed", Message: "Invalid HTTP Response: 502"},
			&providers.DeliveryHealth{State: providers.HealthFailing, Message: "last response 502: Invalid HTTP Response: 502"}},
		// GitHub's description has no last_response on organization hooks: no report.
		{org, nil, nil},
	} {
		t.Run(tc.target, func(t *testing.T) {
			e := newEnv(t, tc.target)
			h := e.srv.Seed(tc.target, fake.Hook{
				Active: false, Events: []string{"push", "issues"}, CreatedAt: created,
				Config:       fake.Config{URL: "https://example.com/hook", ContentType: "form", InsecureSSL: "1", Secret: "s"},
				LastResponse: fake.LastResponse{Code: 502, Status: "failed", Message: "Invalid HTTP Response: 502"},
			})
			regs, err := e.client.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want := []providers.Registration{{
				ID: fmt.Sprint(h.ID), URL: "https://example.com/hook", Events: []string{"push", "issues"},
				Disabled: true, Created: created, Misconfigured: []string{"content_type", "insecure_ssl"},
				Reconfigures: map[string]providers.ValueChange{"content_type": {From: "form", To: "json"}, "insecure_ssl": {From: "1", To: "0"}}, LastDelivery: tc.want, Health: tc.health,
			}}
			if d := cmp.Diff(want, regs); d != "" {
				t.Errorf("List (-want +got):\n%s", d)
			}
		})
	}
}

func TestCreateSendsJSONVerifiedTLSAndTheSecret(t *testing.T) {
	for _, target := range []string{repo, org} {
		t.Run(target, func(t *testing.T) {
			e := newEnv(t, target)
			d := desired("https://hooks.example.com/gh", "push", "issues", "push")
			d.Disabled = true
			reg, err := e.client.Create(context.Background(), d, "ignored-key")
			if err != nil {
				t.Fatal(err)
			}
			hooks := e.srv.Hooks(target)
			if len(hooks) != 1 {
				t.Fatalf("%d hooks, want 1", len(hooks))
			}
			h := hooks[0]
			wantCfg := fake.Config{URL: d.URL, ContentType: "json", InsecureSSL: "0", Secret: d.Secret}
			if d := cmp.Diff(wantCfg, h.Config); d != "" {
				t.Errorf("stored config (-want +got):\n%s", d)
			}
			if h.Active || !cmp.Equal(h.Events, []string{"issues", "push"}) {
				t.Errorf("stored hook active=%v events=%v, want inactive [issues push]", h.Active, h.Events)
			}
			want := providers.Registration{ID: fmt.Sprint(h.ID), URL: d.URL, Events: []string{"issues", "push"}, Disabled: true, Created: h.CreatedAt}
			if d := cmp.Diff(want, reg, cmpopts.IgnoreFields(providers.Registration{}, "LastDelivery", "Health")); d != "" {
				t.Errorf("Create (-want +got):\n%s", d)
			}
			if body := e.srv.Requests()[0].Body; strings.Contains(body, d.Secret) || !strings.Contains(body, `"secret":"********"`) {
				t.Errorf("logged body %s: the secret must have been sent, and be masked in the log", body)
			}
		})
	}
}

func TestCreateAndUpdateNeedTheSecret(t *testing.T) {
	e := newEnv(t, repo)
	d := desired("https://example.com/h", "push")
	d.Secret = ""
	_, err := e.client.Create(context.Background(), d, "")
	if pe := asError(t, err); pe.Kind != providers.Permanent {
		t.Errorf("Create without a secret: %v, want Permanent", err)
	}
	_, err = e.client.Update(context.Background(), "1", d)
	if pe := asError(t, err); pe.Kind != providers.Permanent {
		t.Errorf("Update without a secret: %v, want Permanent", err)
	}
	_, err = e.client.Update(context.Background(), "01", desired("https://example.com/h", "push"))
	if pe := asError(t, err); pe.Kind != providers.Permanent {
		t.Errorf("Update of id 01: %v, want Permanent", err)
	}
	if n := len(e.srv.Requests()); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
}

func TestUpdateResendsTheSecretAndRepairsDrift(t *testing.T) {
	e := newEnv(t, repo)
	h := e.srv.Seed(repo, fake.Hook{Active: true, Events: []string{"push"},
		Config: fake.Config{URL: "https://example.com/old", ContentType: "form", InsecureSSL: "1", Secret: "old-secret"}})
	id := fmt.Sprint(h.ID)

	d := desired("https://example.com/new", "issues", "*")
	reg, err := e.client.Update(context.Background(), id, d)
	if err != nil {
		t.Fatal(err)
	}
	want := providers.Registration{ID: id, URL: d.URL, Events: []string{"*", "issues"}, Created: h.CreatedAt,
		LastDelivery: &providers.DeliveryReport{Status: "unused"},
		Health:       &providers.DeliveryHealth{State: providers.HealthUnknown, Message: "nothing delivered yet"}}
	if d := cmp.Diff(want, reg); d != "" {
		t.Errorf("Update (-want +got):\n%s", d)
	}
	got := e.srv.Hooks(repo)[0].Config
	if d := cmp.Diff(fake.Config{URL: d.URL, ContentType: "json", InsecureSSL: "0", Secret: d.Secret}, got); d != "" {
		t.Errorf("stored config (-want +got):\n%s", d)
	}

	// The same update again keeps the secret: it is sent every time. A PATCH whose config
	// omits it, as GitHub documents, removes it.
	if _, err := e.client.Update(context.Background(), id, d); err != nil {
		t.Fatal(err)
	}
	if s := e.srv.Hooks(repo)[0].Config.Secret; s != d.Secret {
		t.Errorf("secret after a second update = %q, want %q", s, d.Secret)
	}
	patch(t, e.url+"/"+repo+"/hooks/"+id, `{"config":{"url":"https://example.com/new","content_type":"json"}}`)
	if s := e.srv.Hooks(repo)[0].Config.Secret; s != "" {
		t.Errorf("secret after a PATCH without it = %q, want it removed", s)
	}
}

func patch(t *testing.T, u, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPatch, u, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PATCH %s: %d", u, resp.StatusCode)
	}
}

func TestDeleteIsIdempotent(t *testing.T) {
	e := newEnv(t, org)
	h := e.srv.Seed(org, fake.Hook{Active: true, Config: fake.Config{URL: "https://example.com/h"}})
	for i := range 2 {
		if err := e.client.Delete(context.Background(), fmt.Sprint(h.ID)); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	if n := len(e.srv.Hooks(org)); n != 0 {
		t.Errorf("%d hooks left", n)
	}
	if got := []int{e.srv.Requests()[0].Status, e.srv.Requests()[1].Status}; !cmp.Equal(got, []int{204, 404}) {
		t.Errorf("statuses %v, want [204 404]", got)
	}
}

// receiver is an httptest server that verifies deliveries with the provider's Verifier.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	status int
	got    []providers.Verified
	hooks  []string
	errs   []error
}

func newReceiver(t *testing.T, secret string) *receiver {
	rv := &receiver{status: http.StatusOK}
	v := github.NewVerifier()
	rv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ver, err := v.Verify(providers.Delivery{Header: r.Header, Body: body}, [][]byte{[]byte(secret)})
		rv.mu.Lock()
		defer rv.mu.Unlock()
		if err != nil {
			rv.errs = append(rv.errs, err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if !strings.HasPrefix(r.UserAgent(), "GitHub-Hookshot/") || r.Header.Get("Content-Type") != "application/json" || !bytes.Contains(body, []byte(`"zen"`)) {
			rv.errs = append(rv.errs, fmt.Errorf("not a JSON ping from Hookshot: %s %q %s", r.UserAgent(), r.Header.Get("Content-Type"), body))
		}
		rv.got = append(rv.got, ver)
		rv.hooks = append(rv.hooks, r.Header.Get(github.HookIDHeader)+" "+r.Header.Get("X-GitHub-Hook-Installation-Target-Type"))
		w.WriteHeader(rv.status)
	}))
	t.Cleanup(rv.Close)
	return rv
}

func TestPingRecordsLastResponse(t *testing.T) {
	d := desired("", "push")
	rv := newReceiver(t, d.Secret)
	d.URL = rv.URL + "/github"
	e := newEnv(t, repo, withFake(fake.WithDeliveries(nil)))

	reg, err := e.client.Create(context.Background(), d, "")
	if err != nil {
		t.Fatal(err)
	}
	e.srv.WaitDeliveries() // GitHub pings after a create
	rv.mu.Lock()
	rv.status = http.StatusServiceUnavailable
	rv.mu.Unlock()
	if err := e.client.Ping(context.Background(), reg.ID); err != nil {
		t.Fatal(err)
	}
	e.srv.WaitDeliveries()

	regs, err := e.client.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (&providers.DeliveryReport{Code: 503, Status: "failed", Message: "Invalid HTTP Response: 503"}); !cmp.Equal(regs[0].LastDelivery, want) {
		t.Errorf("LastDelivery = %+v, want %+v", regs[0].LastDelivery, want)
	}
	rv.mu.Lock()
	if len(rv.errs) > 0 {
		t.Errorf("receiver refused deliveries: %v", rv.errs)
	}
	if len(rv.got) != 2 || rv.got[0].EventType != "ping" || rv.got[0].EventID == rv.got[1].EventID {
		t.Errorf("verified deliveries %+v, want two pings with distinct GUIDs", rv.got)
	} else if want := reg.ID + " repository"; rv.hooks[0] != want {
		t.Errorf("hook headers %q, want %q", rv.hooks[0], want)
	}
	rv.status = http.StatusOK
	rv.mu.Unlock()

	if err := e.client.Ping(context.Background(), reg.ID); err != nil {
		t.Fatal(err)
	}
	e.srv.WaitDeliveries()
	if lr := e.srv.Hooks(repo)[0].LastResponse; lr != (fake.LastResponse{Code: 200, Status: "active", Message: "OK"}) {
		t.Errorf("last_response after a good ping = %+v", lr)
	}
	if err := e.client.Ping(context.Background(), "999"); !providers.IsNotFound(err) {
		t.Errorf("Ping of a missing hook: %v, want NotFound", err)
	}
}

func TestEnterpriseAPIURL(t *testing.T) {
	e := newEnv(t, repo, withPrefix("/api/v3/"))
	if _, err := e.client.Create(context.Background(), desired("https://example.com/h", "push"), ""); err != nil {
		t.Fatal(err)
	}
	regs, err := e.client.List(context.Background())
	if err != nil || len(regs) != 1 {
		t.Fatalf("List = %v, %v", regs, err)
	}
	for _, r := range e.srv.Requests() {
		if !strings.HasPrefix(r.Path, "/api/v3/repos/") {
			t.Errorf("request path %q, want under /api/v3", r.Path)
		}
	}
}

// TestListWithoutLastResponse: GitHub's description has no last_response on organization
// hooks; without one there is no delivery report, and numeric insecure_ssl (allowed on
// repository hooks) reads as its string.
func TestListWithoutLastResponse(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`[{"id":1,"url":"https://api.github.com/orgs/octo-org/hooks/1","ping_url":"https://api.github.com/orgs/octo-org/hooks/1/pings","name":"web","events":["push"],"active":true,"config":{"url":"https://example.com","content_type":"json","insecure_ssl":0},"updated_at":"2011-09-06T20:39:23Z","created_at":"2011-09-06T17:26:27Z","type":"Organization"}]`))
	}))
	defer hs.Close()
	regs, err := newClient(t, hs.URL, org, time.Second).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []providers.Registration{{ID: "1", URL: "https://example.com", Events: []string{"push"}, Created: time.Date(2011, 9, 6, 17, 26, 27, 0, time.UTC)}}
	if d := cmp.Diff(want, regs); d != "" {
		t.Errorf("List (-want +got):\n%s", d)
	}
}
