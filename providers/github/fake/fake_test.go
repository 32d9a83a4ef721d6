package fake_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/github/fake"
	"github.com/hookwarden/hookwarden/providers/github/internal/openapitest"
)

const (
	tok  = "ghp_fakeTestLeakCanary000000000000000000"
	repo = "repos/Octo/Hello"
	org  = "orgs/Octo"
)

type tc struct {
	t   *testing.T
	srv *fake.Server
	url string
}

// serve starts srv behind the OpenAPI validator; violations fail the test.
func serve(t *testing.T, opts ...fake.Option) *tc { return serveWith(t, true, opts...) }

// serveWith starts srv, behind the validator if validate (requests GitHub's description
// refuses are sent without it, to see the fake refuse them too).
func serveWith(t *testing.T, validate bool, opts ...fake.Option) *tc {
	t.Helper()
	srv := fake.New(opts...)
	var h http.Handler = srv
	if validate {
		v, err := openapitest.New()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, s := range v.Violations() {
				t.Errorf("OpenAPI: %s", s)
			}
		})
		h = v.Handler(srv)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() { hs.Close(); srv.WaitDeliveries() })
	srv.Grant(tok, repo, org)
	return &tc{t: t, srv: srv, url: hs.URL}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decoding %s: %v", a.body, err)
	}
}

func (c *tc) do(method, path, credential, body string, header ...string) answer {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if credential != "" {
		req.Header.Set("Authorization", "Bearer "+credential)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

type wireHook struct {
	ID           int64             `json:"id"`
	Type         string            `json:"type"`
	Active       bool              `json:"active"`
	Events       []string          `json:"events"`
	Config       map[string]string `json:"config"`
	URL          string            `json:"url"`
	LastResponse *json.RawMessage  `json:"last_response"`
}

func TestAuthAndVisibility(t *testing.T) {
	c := serve(t)
	c.srv.Grant("ghp_other", "repos/someone/else")
	cases := []struct {
		name, reason, path, credential string
		status                         int
		message                        string
	}{
		{"no token", "GitHub asks for authentication", "/repos/octo/hello/hooks", "", 401, "Requires authentication"},
		{"unknown token", "a token the fake does not know", "/repos/octo/hello/hooks", "ghp_unknown", 401, "Bad credentials"},
		{"case-insensitive", "owner and repository names are case-insensitive", "/repos/OCTO/hElLo/hooks", tok, 200, ""},
		{"other's repository", "a repository the token cannot administer is hidden", "/repos/someone/else/hooks", tok, 404, "Not Found"},
		{"missing organization", "a target that does not exist", "/orgs/nobody/hooks", tok, 404, "Not Found"},
		{"missing hook", "a hook id that does not exist", "/orgs/octo/hooks/1", tok, 404, "Not Found"},
		{"enterprise prefix", "GitHub Enterprise Server's /api/v3", "/api/v3/orgs/octo/hooks", tok, 200, ""},
	}
	for _, k := range cases {
		t.Run(k.name, func(t *testing.T) {
			a := c.do("GET", k.path, k.credential, "")
			if a.status != k.status || !bytes.Contains(a.body, []byte(k.message)) {
				t.Errorf("%s: %d %s, want %d %q", k.reason, a.status, a.body, k.status, k.message)
			}
			if a.status == 404 && !bytes.Contains(a.body, []byte(`"documentation_url":"https://docs.github.com/rest`)) {
				t.Errorf("404 body %s lacks GitHub's documentation_url", a.body)
			}
			if a.header.Get("X-RateLimit-Limit") == "" || a.header.Get("X-RateLimit-Resource") != "core" {
				t.Errorf("rate-limit headers missing: %v", a.header)
			}
		})
	}
	for _, r := range c.srv.Requests() {
		if strings.Contains(fmt.Sprint(r), tok) {
			t.Errorf("the request log holds the token: %+v", r)
		}
	}
	if got := c.srv.Requests()[1].Token; got != fake.TokenLabel("ghp_unknown") || !strings.HasPrefix(got, "tok_") {
		t.Errorf("token label %q", got)
	}
}

func TestScopesAndPermissions(t *testing.T) {
	c := serve(t)
	c.srv.SetScopes(tok, "repo:status")
	a := c.do("GET", "/repos/octo/hello/hooks", tok, "")
	if a.status != 404 || a.header.Get("X-OAuth-Scopes") != "repo:status" || a.header.Get("X-Accepted-OAuth-Scopes") != "admin:repo_hook, read:repo_hook, repo, write:repo_hook" {
		t.Errorf("classic token without a hook scope: %d %v", a.status, a.header)
	}
	c.srv.SetScopes(tok, "admin:repo_hook")
	if a := c.do("GET", "/repos/octo/hello/hooks", tok, ""); a.status != 200 {
		t.Errorf("with admin:repo_hook: %d", a.status)
	}
	if a := c.do("GET", "/orgs/octo/hooks", tok, ""); a.status != 404 || a.header.Get("X-Accepted-OAuth-Scopes") != "admin:org_hook" {
		t.Errorf("org hooks without admin:org_hook: %d %v", a.status, a.header)
	}

	c.srv.GrantRead("ghp_reader", repo)
	if a := c.do("GET", "/repos/octo/hello/hooks", "ghp_reader", ""); a.status != 200 {
		t.Errorf("read-only list: %d", a.status)
	}
	a = c.do("POST", "/repos/octo/hello/hooks", "ghp_reader", `{"config":{"url":"https://example.com/h"}}`)
	if a.status != 403 || !bytes.Contains(a.body, []byte("Resource not accessible by personal access token")) || a.header.Get("X-Accepted-GitHub-Permissions") != "repository_hooks=write" {
		t.Errorf("read-only create: %d %s %v", a.status, a.body, a.header)
	}
}

func TestCreateDefaultsAndValidation(t *testing.T) {
	c := serve(t)
	a := c.do("POST", "/repos/octo/hello/hooks", tok, `{"config":{"url":"https://example.com/a","insecure_ssl":1}}`)
	var h wireHook
	a.json(t, &h)
	if a.status != 201 || a.header.Get("Location") != c.url+"/repos/Octo/Hello/hooks/"+strconv.FormatInt(h.ID, 10) {
		t.Fatalf("create: %d %v", a.status, a.header)
	}
	want := wireHook{ID: h.ID, Type: "Repository", Active: true, Events: []string{"push"},
		Config: map[string]string{"url": "https://example.com/a", "content_type": "form", "insecure_ssl": "1"},
		URL:    c.url + "/repos/Octo/Hello/hooks/" + strconv.FormatInt(h.ID, 10), LastResponse: h.LastResponse}
	if d := cmp.Diff(want, h); d != "" {
		t.Errorf("defaults (-want +got):\n%s", d)
	}
	if string(*h.LastResponse) != `{"code":null,"status":"unused","message":null}` {
		t.Errorf("last_response = %s", *h.LastResponse)
	}

	bad := serveWith(t, false)
	cases := []struct {
		name, reason, path, body string
		status                   int
		message                  string
	}{
		{"unknown field", "the repository create schema has additionalProperties: false", "/repos/octo/hello/hooks",
			`{"config":{"url":"https://example.com/b"},"description":"x"}`, 422, `\"description\" is not a permitted key.`},
		{"not web", "name only accepts web", "/repos/octo/hello/hooks", `{"name":"email","config":{"url":"https://example.com/b"}}`, 422, "Validation Failed"},
		{"org without name", "organization create requires name", "/orgs/octo/hooks", `{"config":{"url":"https://example.com/b"}}`, 422, `\"name\" wasn't supplied.`},
		{"org without url", "organization create requires config.url", "/orgs/octo/hooks", `{"name":"web","config":{}}`, 422, `\"url\" wasn't supplied.`},
		{"repo without config", "a hook needs a URL", "/repos/octo/hello/hooks", `{}`, 422, "Config must contain url"},
		{"bad content type", "json or form", "/repos/octo/hello/hooks", `{"config":{"url":"https://example.com/b","content_type":"xml"}}`, 422, "content_type"},
		{"active not a boolean", "types are checked", "/repos/octo/hello/hooks", `{"active":"yes","config":{"url":"https://example.com/b"}}`, 422, "is not a boolean"},
		{"not JSON", "a body that does not parse", "/repos/octo/hello/hooks", `{`, 400, "Problems parsing JSON"},
	}
	for _, k := range cases {
		t.Run(k.name, func(t *testing.T) {
			a := bad.do("POST", k.path, tok, k.body)
			if a.status != k.status || !bytes.Contains(a.body, []byte(k.message)) {
				t.Errorf("%s: %d %s, want %d %q", k.reason, a.status, a.body, k.status, k.message)
			}
		})
	}
	if n := len(bad.srv.Hooks(repo)) + len(bad.srv.Hooks(org)); n != 0 {
		t.Errorf("%d hooks stored from refused creates", n)
	}
}

func TestUpdateReplacesConfigAndRemovesAnOmittedSecret(t *testing.T) {
	c := serve(t)
	h := c.srv.Seed(repo, fake.Hook{Active: true, Events: []string{"push", "issues"}, Config: fake.Config{URL: "https://example.com/a", ContentType: "json", Secret: "s1"}})
	path := "/repos/octo/hello/hooks/" + strconv.FormatInt(h.ID, 10)

	a := c.do("PATCH", path, tok, `{"config":{"url":"https://example.com/b","secret":"s2","content_type":"json"},"add_events":["issues","fork"],"remove_events":["push"]}`)
	var w wireHook
	a.json(t, &w)
	if a.status != 200 || w.Config["secret"] != fake.MaskedSecret || !cmp.Equal(w.Events, []string{"issues", "fork"}) {
		t.Errorf("PATCH: %d %+v", a.status, w)
	}
	if got := c.srv.Hooks(repo)[0].Config; got != (fake.Config{URL: "https://example.com/b", ContentType: "json", InsecureSSL: "0", Secret: "s2"}) {
		t.Errorf("stored %+v", got)
	}
	// Without config the secret stays; a config without secret removes it and resets what it omits.
	c.do("PATCH", path, tok, `{"active":false}`)
	if got := c.srv.Hooks(repo)[0]; got.Config.Secret != "s2" || got.Active {
		t.Errorf("after active=false: %+v", got)
	}
	a = c.do("PATCH", path, tok, `{"config":{"url":"https://example.com/b"}}`)
	w = wireHook{}
	a.json(t, &w)
	if _, masked := w.Config["secret"]; masked || c.srv.Hooks(repo)[0].Config != (fake.Config{URL: "https://example.com/b", ContentType: "form", InsecureSSL: "0"}) {
		t.Errorf("after a config without secret: %+v, stored %+v", w, c.srv.Hooks(repo)[0].Config)
	}
	if a := c.do("PATCH", "/repos/octo/hello/hooks/999", tok, `{"active":true}`); a.status != 404 {
		t.Errorf("PATCH of a missing hook: %d", a.status)
	}
}

func TestDuplicatesAndTheCap(t *testing.T) {
	c := serve(t, fake.WithHookCap(3))
	body := func(u string, events ...string) string {
		b, _ := json.Marshal(map[string]any{"name": "web", "events": events, "config": map[string]string{"url": u}})
		return string(b)
	}
	if a := c.do("POST", "/orgs/octo/hooks", tok, body("https://example.com/a", "push", "issues")); a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	a := c.do("POST", "/orgs/octo/hooks", tok, body("https://example.com/a", "issues"))
	if a.status != 422 || !bytes.Contains(a.body, []byte(`"message":"Hook already exists on this organization"`)) {
		t.Errorf("overlapping events on the same URL: %d %s", a.status, a.body)
	}
	if a := c.do("POST", "/orgs/octo/hooks", tok, body("https://example.com/a", "fork")); a.status != 201 {
		t.Errorf("same URL, disjoint events: %d %s", a.status, a.body)
	}
	if a := c.do("POST", "/repos/octo/hello/hooks", tok, body("https://example.com/a", "*")); a.status != 201 {
		t.Errorf("the same URL on another target: %d %s", a.status, a.body)
	}
	if a := c.do("POST", "/repos/octo/hello/hooks", tok, body("https://example.com/a", "push")); a.status != 422 || !bytes.Contains(a.body, []byte("on this repository")) {
		t.Errorf("* overlaps push: %d %s", a.status, a.body)
	}
	for i := range 2 {
		if a := c.do("POST", "/orgs/octo/hooks", tok, body(fmt.Sprintf("https://example.com/%d", i), "push")); a.status != 201 {
			t.Fatalf("create %d: %d %s", i, a.status, a.body)
		}
	}
	a = c.do("POST", "/orgs/octo/hooks", tok, body("https://example.com/4", "push"))
	if a.status != 422 || !bytes.Contains(a.body, []byte(`cannot have more than 3 webhooks`)) {
		t.Errorf("over the cap: %d %s", a.status, a.body)
	}
}

func TestListPagingAndConditionalRequests(t *testing.T) {
	c := serve(t)
	for i := range 35 {
		c.srv.Seed(repo, fake.Hook{Active: true, Config: fake.Config{URL: fmt.Sprintf("https://example.com/%d", i)}})
	}
	var page []wireHook
	a := c.do("GET", "/repos/octo/hello/hooks", tok, "")
	a.json(t, &page)
	base := c.url + "/repos/Octo/Hello/hooks"
	if len(page) != 30 || a.header.Get("Link") != `<`+base+`?page=2&per_page=30>; rel="next", <`+base+`?page=2&per_page=30>; rel="last"` {
		t.Errorf("default page: %d items, Link %q", len(page), a.header.Get("Link"))
	}
	a = c.do("GET", "/repos/octo/hello/hooks?per_page=20&page=2", tok, "")
	a.json(t, &page)
	if len(page) != 15 || a.header.Get("Link") != `<`+base+`?page=1&per_page=20>; rel="prev", <`+base+`?page=1&per_page=20>; rel="first"` {
		t.Errorf("last page: %d items, Link %q", len(page), a.header.Get("Link"))
	}
	if a := c.do("GET", "/repos/octo/hello/hooks?per_page=500", tok, ""); strings.Count(string(a.body), `"id"`) != 35 {
		t.Errorf("per_page above 100 is capped at 100, not refused")
	}

	etag := a.header.Get("ETag")
	used := c.srv.RateLimit(tok).Used
	a = c.do("GET", "/repos/octo/hello/hooks?per_page=20&page=2", tok, "", "If-None-Match", etag)
	if a.status != 304 || len(a.body) != 0 || a.header.Get("ETag") != etag {
		t.Errorf("conditional GET: %d %q %q", a.status, a.body, a.header.Get("ETag"))
	}
	if got := c.srv.RateLimit(tok).Used; got != used || a.header.Get("X-RateLimit-Used") != strconv.Itoa(used) {
		t.Errorf("a 304 cost rate limit: used %d → %d", used, got)
	}
	c.srv.Edit(repo, c.srv.Hooks(repo)[34].ID, func(h *fake.Hook) { h.Active = false })
	if a := c.do("GET", "/repos/octo/hello/hooks?per_page=20&page=2", tok, "", "If-None-Match", etag); a.status != 200 {
		t.Errorf("after an edit the page changed; got %d", a.status)
	}
	if st := c.srv.Stats(); st.ListPages != 5 || st.Lists != 2 || st.NotModified != 1 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestRateLimits(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := serve(t, fake.WithRateLimit(2), fake.WithClock(clock))
	for i := range 2 {
		if a := c.do("GET", "/orgs/octo/hooks", tok, ""); a.status != 200 || a.header.Get("X-RateLimit-Remaining") != strconv.Itoa(1-i) {
			t.Fatalf("request %d: %d remaining %s", i, a.status, a.header.Get("X-RateLimit-Remaining"))
		}
	}
	a := c.do("POST", "/orgs/octo/hooks", tok, `{"name":"web","config":{"url":"https://example.com/h"}}`)
	reset := strconv.FormatInt(now.Add(time.Hour).Unix(), 10)
	if a.status != 403 || a.header.Get("X-RateLimit-Remaining") != "0" || a.header.Get("X-RateLimit-Reset") != reset || !bytes.Contains(a.body, []byte("API rate limit exceeded")) {
		t.Errorf("exhausted: %d %s %v", a.status, a.body, a.header)
	}
	if len(c.srv.Hooks(org)) != 0 {
		t.Error("a refused create created a hook")
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	if a := c.do("GET", "/orgs/octo/hooks", tok, ""); a.status != 200 || a.header.Get("X-RateLimit-Used") != "1" {
		t.Errorf("after the reset: %d used %s", a.status, a.header.Get("X-RateLimit-Used"))
	}

	c.srv.Inject(fake.SecondaryLimit(429, 90*time.Second))
	a = c.do("GET", "/orgs/octo/hooks", tok, "")
	if a.status != 429 || a.header.Get("Retry-After") != "90" || !bytes.Contains(a.body, []byte("You have exceeded a secondary rate limit")) || a.header.Get("X-RateLimit-Remaining") != "1" {
		t.Errorf("secondary limit: %d %s %v", a.status, a.body, a.header)
	}
	if st := c.srv.Stats(); st.RateLimited != 2 {
		t.Errorf("Stats.RateLimited = %d, want 2", st.RateLimited)
	}
}

func TestRequestLogMasksTheSecret(t *testing.T) {
	c := serve(t)
	c.do("POST", "/repos/octo/hello/hooks", tok, `{"config":{"url":"https://example.com/h","secret":"hunter2"}}`)
	r := c.srv.Requests()[0]
	if strings.Contains(r.Body, "hunter2") || !strings.Contains(r.Body, `"secret":"********"`) || r.Op != fake.OpCreate || r.Target != "repos/octo/hello" || r.Status != 201 {
		t.Errorf("logged %+v", r)
	}
	if c.srv.Hooks(repo)[0].Config.Secret != "hunter2" {
		t.Error("Hooks must show the real secret")
	}
	if n := c.srv.CountRequests("post", "/REPOS/octo"); n != 1 {
		t.Errorf("CountRequests = %d", n)
	}
	c.srv.ResetRequests()
	if len(c.srv.Requests()) != 0 {
		t.Error("ResetRequests kept requests")
	}
}

func TestSeedEditRemove(t *testing.T) {
	srv := fake.New()
	h := srv.Seed("repos/a/b", fake.Hook{Active: true, Config: fake.Config{URL: "https://example.com"}})
	if h.ID == 0 || h.Config.ContentType != "form" || h.Config.InsecureSSL != "0" || !cmp.Equal(h.Events, []string{"push"}) || h.LastResponse.Status != "unused" || h.CreatedAt.IsZero() {
		t.Errorf("Seed defaults: %+v", h)
	}
	if !srv.Edit("REPOS/A/B", h.ID, func(x *fake.Hook) { x.ID = 7; x.Events = []string{"fork"} }) {
		t.Fatal("Edit found nothing")
	}
	if got := srv.Hooks("repos/a/b"); len(got) != 1 || got[0].ID != h.ID || got[0].Events[0] != "fork" {
		t.Errorf("after Edit: %+v", got)
	}
	if !srv.Remove("repos/a/b", h.ID) || srv.Remove("repos/a/b", h.ID) || len(srv.Hooks("repos/a/b")) != 0 {
		t.Error("Remove")
	}
	if srv.Hooks("orgs/none") != nil {
		t.Error("Hooks of an unknown target is not nil")
	}
}

func TestDeliveries(t *testing.T) {
	type got struct {
		header http.Header
		body   []byte
	}
	var mu sync.Mutex
	var deliveries []got
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		deliveries = append(deliveries, got{r.Header.Clone(), b})
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer rcv.Close()
	c := serve(t, fake.WithDeliveries(nil))

	a := c.do("POST", "/orgs/octo/hooks", tok, `{"name":"web","config":{"url":"`+rcv.URL+`","secret":"s3","content_type":"form"}}`)
	var h wireHook
	a.json(t, &h)
	c.srv.WaitDeliveries()
	mu.Lock()
	if len(deliveries) != 1 {
		t.Fatalf("%d deliveries after create, want the ping", len(deliveries))
	}
	d := deliveries[0]
	mu.Unlock()
	form, _ := url.ParseQuery(string(d.body))
	var ping struct {
		Zen    string `json:"zen"`
		HookID int64  `json:"hook_id"`
		Hook   struct {
			Config map[string]string `json:"config"`
		} `json:"hook"`
		Organization struct{ Login string } `json:"organization"`
	}
	if err := json.Unmarshal([]byte(form.Get("payload")), &ping); err != nil {
		t.Fatalf("form payload %q: %v", d.body, err)
	}
	checks := map[string]bool{
		"event":       d.header.Get("X-GitHub-Event") == "ping",
		"guid":        len(d.header.Get("X-GitHub-Delivery")) == 36,
		"hook id":     d.header.Get("X-GitHub-Hook-ID") == strconv.FormatInt(h.ID, 10) && ping.HookID == h.ID,
		"target type": d.header.Get("X-GitHub-Hook-Installation-Target-Type") == "organization",
		"target id":   d.header.Get("X-GitHub-Hook-Installation-Target-ID") != "",
		"user agent":  strings.HasPrefix(d.header.Get("User-Agent"), "GitHub-Hookshot/"),
		"form":        d.header.Get("Content-Type") == "application/x-www-form-urlencoded",
		"signature":   d.header.Get("X-Hub-Signature-256") == sign("s3", d.body),
		"masked":      ping.Hook.Config["secret"] == fake.MaskedSecret && ping.Zen != "" && ping.Organization.Login == "Octo",
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("ping %s wrong: %v %s", name, d.header, d.body)
		}
	}
	if lr := c.srv.Hooks(org)[0].LastResponse; lr != (fake.LastResponse{Code: 202, Status: "active", Message: "OK"}) {
		t.Errorf("last_response = %+v", lr)
	}

	c.srv.Edit(org, h.ID, func(x *fake.Hook) { x.Config.URL = "http://127.0.0.1:1/closed"; x.Config.Secret = "" })
	del, err := c.srv.Deliver(org, h.ID, "push", []byte(`{"ref":"main"}`))
	if err != nil || del.Code != 0 || del.Status != "failed" || del.Signed {
		t.Errorf("Deliver to a closed port: %+v %v", del, err)
	}
	c.srv.Edit(org, h.ID, func(x *fake.Hook) { x.Active = false })
	if _, err := c.srv.Deliver(org, h.ID, "push", nil); err == nil {
		t.Error("Deliver to an inactive hook succeeded")
	}
	if n := len(c.srv.Deliveries()); n != 2 {
		t.Errorf("%d deliveries logged, want 2", n)
	}
}

func TestPathWordsAreCaseInsensitive(t *testing.T) {
	srv := fake.New()
	srv.Grant(tok, repo)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/REPOS/octo/HELLO/Hooks", nil)
	req.Header.Set("Authorization", "token "+tok)
	srv.ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Body.String() != "[]" {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
}

func sign(secret string, body []byte) string { return github.Sign([]byte(secret), body) }

func TestMeterAnswersLikeTheSecondaryLimit(t *testing.T) {
	m := fakeapi.NewMeter(fakeapi.MeterOptions{Rate: 0.5, Burst: 1})
	c := serve(t, fake.WithMeter(m))
	if a := c.do("POST", "/repos/Octo/Hello/hooks", tok, `{"name":"web","config":{"url":"https://example.com/h"}}`); a.status != 201 {
		t.Fatalf("within the rate: %d %s", a.status, a.body)
	}
	a := c.do("GET", "/repos/Octo/Hello/hooks", tok, "")
	if a.status != 403 || a.header.Get("Retry-After") != "2" || !bytes.Contains(a.body, []byte("You have exceeded a secondary rate limit")) {
		t.Errorf("over the rate: %d %s %v", a.status, a.body, a.header)
	}
	wantCounts := []fakeapi.RouteCount{
		{Route: fakeapi.Route{Method: "GET", Pattern: "/repos/{owner}/{repo}/hooks"}, Requests: 1, Limited: 1},
		{Route: fakeapi.Route{Method: "POST", Pattern: "/repos/{owner}/{repo}/hooks"}, Requests: 1},
	}
	if d := cmp.Diff(wantCounts, m.Counts()); d != "" {
		t.Errorf("counts: -want +got\n%s", d)
	}
}
