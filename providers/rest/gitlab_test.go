package rest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/gitlab"
)

var owner = providers.Owner{Cluster: "prod", Namespace: "shop", Name: "orders", UID: "0b7c-uid"}

func gitlabClient(t *testing.T, project string) (*gitlab.Server, *rest.Client) {
	t.Helper()
	srv := gitlab.New()
	srv.AddProject("42", "group/project")
	base, stop := srv.Start()
	t.Cleanup(stop)
	return srv, newClient(t, "gitlab-project-hooks", base+"/api/v4", map[string]string{"project": project}, "glpat-test-token")
}

func TestGitLabProfile(t *testing.T) {
	ctx := context.Background()
	srv, c := gitlabClient(t, "group/project")
	caps := c.Capabilities()
	if caps.Secret != providers.SecretClientChosen || !caps.UpdateNeedsSecret || !caps.Markers {
		t.Fatalf("capabilities = %+v; want a client-chosen secret sent on every update, and markers", caps)
	}

	d := providers.Desired{URL: "https://hooks.example.com/gl", Events: []string{"push", "merge_requests"}, Description: "orders", Owner: owner, Secret: "tok-1"}
	reg, err := c.Create(ctx, d, "k1")
	if err != nil {
		t.Fatal(err)
	}
	hooks := srv.Hooks("42")
	if len(hooks) != 1 {
		t.Fatalf("GitLab holds %d hooks; want 1 (the project path resolves to project 42)", len(hooks))
	}
	h := hooks[0]
	if h.Token != "tok-1" || !h.Flags["push_events"] || !h.Flags["merge_requests_events"] || h.Flags["tag_push_events"] || !strings.Contains(h.Name, "hookwarden:prod/shop/orders/0b7c-uid") || h.Description != "orders" {
		t.Errorf("stored hook = %+v; want the token, exactly the push and merge request flags, the marker in name", h)
	}
	if reg.Owner != owner || reg.Description != "orders" || len(reg.Events) != 2 || reg.Secret != "" {
		t.Errorf("created registration = %+v", reg)
	}

	// A URL change with the token resent keeps a token: GitLab resets it otherwise.
	d.URL = "https://hooks.example.com/gl2"
	d.Events = []string{"pipeline"}
	if _, err := c.Update(ctx, reg.ID, d); err != nil {
		t.Fatal(err)
	}
	h = srv.Hooks("42")[0]
	if h.URL != d.URL || h.Token != "tok-1" || h.Flags["push_events"] || !h.Flags["pipeline_events"] {
		t.Errorf("after update: %+v; want the new URL, the token kept, only pipeline", h)
	}

	// An event GitLab has no flag for is refused before anything is sent.
	before := len(srv.Requests())
	if _, err := c.Create(ctx, providers.Desired{URL: "https://x.example.com", Events: []string{"push_hook"}, Owner: owner, Secret: "s"}, "k"); providers.KindOf(err) != providers.Permanent || len(srv.Requests()) != before {
		t.Errorf("unknown event: %v, %d requests sent", err, len(srv.Requests())-before)
	}
	// "*" cannot be expressed with flags.
	if _, err := c.Create(ctx, providers.Desired{URL: "https://x.example.com", Events: []string{"*"}, Owner: owner, Secret: "s"}, "k"); providers.KindOf(err) != providers.Permanent {
		t.Errorf("events * on a flags API: %v; want Permanent", err)
	}

	// GitLab answers a bad URL with 422 {"error": ...}: shown to the user.
	_, err = c.Create(ctx, providers.Desired{URL: "ftp://nope", Events: []string{"push"}, Owner: owner, Secret: "s"}, "k")
	if providers.KindOf(err) != providers.Permanent || !strings.Contains(err.Error(), "Invalid url given") {
		t.Errorf("create with a bad URL = %v; want Permanent naming GitLab's message", err)
	}

	if err := c.Delete(ctx, reg.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, reg.ID); err != nil {
		t.Errorf("second delete = %v; want nil (404 is gone)", err)
	}
}

func TestGitLabProfilePagesByLink(t *testing.T) {
	srv, c := gitlabClient(t, "42")
	for range 205 {
		srv.Seed("42", gitlab.Hook{URL: "https://seeded.example.com"})
	}
	regs, err := c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 205 {
		t.Errorf("listed %d hooks; want 205 over three pages", len(regs))
	}
	var pages int
	for _, r := range srv.Requests() {
		if r.Method == http.MethodGet {
			pages++
		}
	}
	if pages != 3 {
		t.Errorf("%d list requests; want 3 (per_page 100, then Link rel=next)", pages)
	}
}

func TestGitLabProfileVerifiesDeliveries(t *testing.T) {
	_, c := gitlabClient(t, "42")
	v, err := rest.NewVerifierFromSpec(c.VerifierSpec())
	if err != nil {
		t.Fatal(err)
	}
	// GitLab sends the token verbatim, and Idempotency-Key as the delivery's stable id.
	h := http.Header{}
	h.Set("X-Gitlab-Token", "tok-1")
	h.Set("Idempotency-Key", "6f1c-idem")
	h.Set("X-Gitlab-Event-UUID", "recycled")
	got, err := v.Verify(providers.Delivery{Header: h, Body: []byte(`{"object_kind":"push"}`), Now: time.Now()}, [][]byte{[]byte("old"), []byte("tok-1")})
	if err != nil || got.EventID != "6f1c-idem" {
		t.Errorf("Verify = %+v, %v; want id 6f1c-idem", got, err)
	}
	h.Set("X-Gitlab-Token", "tok-2")
	if _, err := v.Verify(providers.Delivery{Header: h, Body: []byte(`{}`)}, [][]byte{[]byte("tok-1")}); err == nil {
		t.Error("a wrong token verified")
	}
}

// TLS verification switched off by hand is drift the update repairs (the profile expects it
// on, and a partial update sends it again).
func TestGitLabProfileRepairsTLSVerification(t *testing.T) {
	ctx := context.Background()
	srv, c := gitlabClient(t, "42")
	d := providers.Desired{URL: "https://hooks.example.com/gl", Events: []string{"push"}, Owner: owner, Secret: "tok-1"}
	reg, err := c.Create(ctx, d, "k1")
	if err != nil {
		t.Fatal(err)
	}
	regs, err := c.List(ctx)
	if err != nil || len(regs) != 1 || len(regs[0].Misconfigured) != 0 {
		t.Fatalf("List = %+v, %v; want one hook, nothing misconfigured", regs, err)
	}
	srv.Edit("42", srv.Hooks("42")[0].ID, func(h *gitlab.Hook) { h.SSL = false })
	regs, err = c.List(ctx)
	if err != nil || len(regs) != 1 || len(regs[0].Misconfigured) != 1 || regs[0].Misconfigured[0] != "enable_ssl_verification" {
		t.Fatalf("List = %+v, %v; want enable_ssl_verification misconfigured", regs, err)
	}
	if _, err := c.Update(ctx, reg.ID, d); err != nil {
		t.Fatal(err)
	}
	if h := srv.Hooks("42")[0]; !h.SSL || h.Token != "tok-1" {
		t.Errorf("after update: %+v; want TLS verification on and the token kept", h)
	}
}

// One old hook on a project (made before name existed, never setting confidential_note_events:
// GitLab renders both null) used to fail the whole list with "is not a boolean" and stall every
// subscription on the project. Now nulls read as off, and a hook that really does not fit (its
// URL null, as GitLab's schema allows) is listed marked, without touching the others.
func TestGitLabListSurvivesOddForeignHooks(t *testing.T) {
	ctx := context.Background()
	srv, c := gitlabClient(t, "42")
	ours, err := c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/gl", Events: []string{"push"}, Owner: owner, Secret: "tok-1"}, "k1")
	if err != nil {
		t.Fatal(err)
	}
	legacy := srv.Seed("42", gitlab.LegacyHook("https://ci.example.com/hook"))
	oldTag := gitlab.LegacyHook("https://old.example.com/hook")
	oldTag.Null = append(oldTag.Null, "tag_push_events", "enable_ssl_verification")
	old := srv.Seed("42", oldTag)
	noURL := gitlab.LegacyHook("")
	noURL.Null = append(noURL.Null, "url")
	broken := srv.Seed("42", noURL)

	regs, err := c.List(ctx)
	if err != nil {
		t.Fatalf("List: %v; want every hook, the odd one marked", err)
	}
	byID := map[string]providers.Registration{}
	for _, r := range regs {
		byID[r.ID] = r
	}
	if r := byID[ours.ID]; r.Owner != owner || r.Unfit != "" || len(r.Events) != 1 || len(r.Misconfigured) != 0 {
		t.Errorf("our hook = %+v; want it intact", r)
	}
	if r := byID[fmt.Sprint(legacy)]; r.Unfit != "" || r.URL != "https://ci.example.com/hook" || !r.Owner.IsZero() || r.Description != "" || fmt.Sprint(r.Events) != "[push]" {
		t.Errorf("legacy hook = %+v; want it read: nulls are off and empty", r)
	}
	if r := byID[fmt.Sprint(old)]; r.Unfit != "" || fmt.Sprint(r.Misconfigured) != "[enable_ssl_verification]" {
		t.Errorf("hook with null tag_push_events and TLS verification = %+v; want it read, TLS reported as not verified", r)
	}
	if r := byID[fmt.Sprint(broken)]; r.Unfit != `object.url "url" is null` {
		t.Errorf("hook with a null URL = %+v; want it marked unfit", r)
	}
	if len(regs) != 4 {
		t.Errorf("listed %d hooks; want 4", len(regs))
	}
}

// Every flag the ProjectHook entity has can be subscribed to, and one turned on by hand is seen
// (and so repaired): milestone, emoji, resource_deploy_token and vulnerability were missing.
func TestGitLabProfileHasEveryProjectFlag(t *testing.T) {
	ctx := context.Background()
	srv, c := gitlabClient(t, "42")
	flags := c.Profile().Events.Flags
	if len(flags) != len(gitlab.Events) {
		t.Errorf("profile has %d flags; GitLab's project hooks have %d", len(flags), len(gitlab.Events))
	}
	for _, f := range gitlab.Events {
		if flags[strings.TrimSuffix(f, "_events")] != f {
			t.Errorf("profile lacks event %s (%s)", strings.TrimSuffix(f, "_events"), f)
		}
	}
	d := providers.Desired{URL: "https://hooks.example.com/gl", Events: []string{"milestone", "emoji", "resource_deploy_token", "vulnerability"}, Owner: owner, Secret: "tok-1"}
	reg, err := c.Create(ctx, d, "k1")
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Hooks("42")[0]
	for _, f := range []string{"milestone_events", "emoji_events", "resource_deploy_token_events", "vulnerability_events"} {
		if !h.Flags[f] {
			t.Errorf("%s not set at GitLab", f)
		}
	}
	if h.Flags["push_events"] {
		t.Error("push_events left at GitLab's default (on)")
	}
	srv.Edit("42", h.ID, func(h *gitlab.Hook) { h.Flags["note_events"] = true })
	regs, err := c.List(ctx)
	if err != nil || len(regs) != 1 || !slices.Contains(regs[0].Events, "note") || len(regs[0].Events) != 5 {
		t.Fatalf("List = %+v, %v; want the hand-set note events seen", regs, err)
	}
	if _, err := c.Update(ctx, reg.ID, d); err != nil {
		t.Fatal(err)
	}
	if srv.Hooks("42")[0].Flags["note_events"] {
		t.Error("the update left the hand-set flag on")
	}
}

// A GitLab that does not know a flag yet neither stores nor renders it: the list still reads,
// and subscribing to that event says so instead of looping.
func TestGitLabProfileOnAGitLabWithoutAFlag(t *testing.T) {
	ctx := context.Background()
	srv := gitlab.New(gitlab.WithoutFlags("milestone_events"))
	srv.AddProject("42", "group/project")
	base, stop := srv.Start()
	t.Cleanup(stop)
	c := newClient(t, "gitlab-project-hooks", base+"/api/v4", map[string]string{"project": "42"}, "glpat-test-token")
	if _, err := c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/a", Events: []string{"push"}, Owner: owner, Secret: "tok-1"}, "k1"); err != nil {
		t.Fatalf("Create(push): %v", err)
	}
	if regs, err := c.List(ctx); err != nil || len(regs) != 1 || regs[0].Unfit != "" {
		t.Fatalf("List = %+v, %v", regs, err)
	}
	reg, err := c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/b", Events: []string{"milestone"}, Owner: owner, Secret: "tok-2"}, "k2")
	if providers.KindOf(err) != providers.Permanent || !strings.Contains(err.Error(), `events.flags.milestone "milestone_events" is missing`) || reg.ID == "" {
		t.Errorf("Create(milestone) = %+v, %v; want Permanent naming milestone_events, with the id", reg, err)
	}
}

// Group hooks: one registration for every project of a group, at /groups/:id/hooks, for a
// group Owner on Premium.
func TestGitLabGroupHooksProfile(t *testing.T) {
	ctx := context.Background()
	srv := gitlab.New()
	srv.AddGroup("9", "acme/platform", gitlab.Premium)
	srv.AddGroup("10", "acme/free", gitlab.Free)
	base, stop := srv.Start()
	t.Cleanup(stop)
	c := newClient(t, "gitlab-group-hooks", base+"/api/v4", map[string]string{"group": "acme/platform"}, "glpat-owner")
	flags := c.Profile().Events.Flags
	if len(flags) != len(gitlab.GroupEvents) {
		t.Errorf("profile has %d flags; GitLab's group hooks have %d", len(flags), len(gitlab.GroupEvents))
	}
	d := providers.Desired{URL: "https://hooks.example.com/group", Events: []string{"merge_requests", "subgroup", "member", "project"}, Description: "all projects", Owner: owner, Secret: "tok-1"}
	reg, err := c.Create(ctx, d, "k1")
	if err != nil {
		t.Fatal(err)
	}
	hooks := srv.GroupHooks("9")
	if len(hooks) != 1 || !hooks[0].Flags["subgroup_events"] || !hooks[0].Flags["member_events"] || !hooks[0].Flags["project_events"] || hooks[0].Flags["push_events"] || hooks[0].Token != "tok-1" {
		t.Fatalf("group hooks = %+v", hooks)
	}
	regs, err := c.List(ctx)
	if err != nil || len(regs) != 1 || regs[0].Owner != owner || len(regs[0].Events) != 4 || regs[0].Description != "all projects" {
		t.Fatalf("List = %+v, %v", regs, err)
	}
	d.Events = []string{"pipeline"}
	if _, err := c.Update(ctx, reg.ID, d); err != nil {
		t.Fatal(err)
	}
	if h := srv.GroupHooks("9")[0]; !h.Flags["pipeline_events"] || h.Flags["member_events"] || h.Token != "tok-1" {
		t.Errorf("after update: %+v", h)
	}
	if err := c.Delete(ctx, reg.ID); err != nil || len(srv.GroupHooks("9")) != 0 {
		t.Errorf("Delete = %v, %d hooks left", err, len(srv.GroupHooks("9")))
	}

	srv.SetRole("glpat-maintainer", true, "9", gitlab.Maintainer)
	maintainer := newClient(t, "gitlab-group-hooks", base+"/api/v4", map[string]string{"group": "9"}, "glpat-maintainer")
	if _, err := maintainer.List(ctx); providers.KindOf(err) != providers.Unauthorized {
		t.Errorf("a Maintainer lists group hooks: %v; want Unauthorized (group hooks need Owner)", err)
	}
	free := newClient(t, "gitlab-group-hooks", base+"/api/v4", map[string]string{"group": "acme/free"}, "glpat-owner")
	if _, err := free.List(ctx); providers.KindOf(err) != providers.Unauthorized {
		t.Errorf("group hooks on Free: %v; want Unauthorized (Premium and up)", err)
	}
}

// GitLab before 17.1 drops name, where the ownership marker lives: the main profile says so at
// the first create instead of re-"repairing" a missing marker on every resync.
func TestGitLabProfileRefusesAGitLabWithoutName(t *testing.T) {
	srv := gitlab.New(gitlab.Before171())
	srv.AddProject("42", "group/project")
	base, stop := srv.Start()
	t.Cleanup(stop)
	c := newClient(t, "gitlab-project-hooks", base+"/api/v4", map[string]string{"project": "42"}, "glpat-test-token")
	reg, err := c.Create(context.Background(), providers.Desired{URL: "https://hooks.example.com/gl", Events: []string{"push"}, Owner: owner, Secret: "tok-1"}, "k1")
	if providers.KindOf(err) != providers.Permanent || !strings.Contains(err.Error(), `marker.path "name" is missing`) {
		t.Fatalf("Create = %v; want Permanent naming the marker field GitLab dropped", err)
	}
	if reg.ID == "" || len(srv.Hooks("42")) != 1 {
		t.Errorf("Create returned %+v; want the created hook's id with the error", reg)
	}
}

// The pre-17.1 profile stores no marker: ownership falls back to the recorded id, the held
// token and the receiver URL. A create whose answer is lost leaves a hook that the next list
// finds by its URL, verifying with the token sent, which the manager wrote to the signing
// Secret (as pending) before the create; updating it with that token keeps deliveries verified.
func TestGitLabPre171ProfileRecoversByURLAndHeldToken(t *testing.T) {
	ctx := context.Background()
	srv := gitlab.New(gitlab.Before171())
	srv.AddProject("42", "group/project")
	base, stop := srv.Start()
	t.Cleanup(stop)
	c := newClient(t, "gitlab-project-hooks-pre-17.1", base+"/api/v4", map[string]string{"project": "42"}, "glpat-test-token")
	if caps := c.Capabilities(); caps.Markers || caps.Has(providers.FieldDescription) || caps.Secret != providers.SecretClientChosen {
		t.Fatalf("capabilities = %+v; want no markers, no description, a client-chosen token", caps)
	}
	srv.Inject(core.Fault{Method: http.MethodPost, Status: http.StatusBadGateway, Times: 1, AfterApply: true})
	d := providers.Desired{URL: "https://hooks.example.com/hooks/shop/orders", Events: []string{"push"}, Owner: owner, Secret: "pending-tok"}
	if _, err := c.Create(ctx, d, "k1"); providers.KindOf(err) != providers.Transient {
		t.Fatalf("Create with its answer lost = %v; want Transient", err)
	}
	regs, err := c.List(ctx)
	if err != nil || len(regs) != 1 || regs[0].URL != d.URL || !regs[0].Owner.IsZero() || regs[0].Unfit != "" {
		t.Fatalf("List = %+v, %v; want the one hook, found by URL, unmarked", regs, err)
	}
	if h := srv.Hooks("42")[0]; h.Token != "pending-tok" {
		t.Fatalf("the hook verifies with %q; want the token sent", h.Token)
	}
	if _, err := c.Update(ctx, regs[0].ID, d); err != nil {
		t.Fatal(err)
	}
	if hooks := srv.Hooks("42"); len(hooks) != 1 || hooks[0].Token != "pending-tok" {
		t.Errorf("after update: %+v; want one hook, still on the held token", hooks)
	}
}

// A GitLab served under a path (https://host/gitlab) is named through host; every request goes
// under the path, paging included, and carries Hookwarden's User-Agent.
func TestGitLabServedUnderAPath(t *testing.T) {
	ctx := context.Background()
	srv := gitlab.New(gitlab.WithRelativeURLRoot("/gitlab"))
	srv.AddProject("42", "group/project")
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.StartTLS()
	t.Cleanup(ts.Close)
	host := strings.TrimPrefix(ts.URL, "https://") + "/gitlab"
	c, err := rest.New(providers.Config{Target: rest.Target(map[string]string{"project": "group/project", "host": host}), Settings: sampleProfile(t, "gitlab-project-hooks"), Credential: "glpat-test-token", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rest.SetTransport(c, ts.Client().Transport)
	for range 120 {
		srv.Seed("42", gitlab.Hook{URL: "https://seeded.example.com"})
	}
	if _, err := c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/gl", Events: []string{"push"}, Owner: owner, Secret: "tok-1"}, "k1"); err != nil {
		t.Fatal(err)
	}
	regs, err := c.List(ctx)
	if err != nil || len(regs) != 121 {
		t.Fatalf("List = %d, %v; want 121 over two pages", len(regs), err)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Errorf("%d requests; want a create and two pages", len(reqs))
	}
	for _, r := range reqs {
		if !strings.HasPrefix(r.Path, "/gitlab/api/v4/projects/group%2Fproject/hooks") {
			t.Errorf("%s %s is not under https://%s/api/v4", r.Method, r.Path, host)
		}
		if ua := r.Header.Get("User-Agent"); !strings.HasPrefix(ua, "hookwarden/") || !strings.HasSuffix(ua, "(+https://github.com/hookwarden/hookwarden)") {
			t.Errorf("%s %s carries User-Agent %q", r.Method, r.Path, ua)
		}
	}
	for _, bad := range []string{"gitlab.example.com/../admin", "gitlab.example.com/x?y", "user@gitlab.example.com", "gitlab.example.com/gitlab/"} {
		if _, err := rest.New(providers.Config{Target: rest.Target(map[string]string{"project": "1", "host": bad}), Settings: sampleProfile(t, "gitlab-project-hooks"), Credential: "k"}); providers.KindOf(err) != providers.Permanent {
			t.Errorf("host %q: %v; want it refused", bad, err)
		}
	}
	// The same holds for an apiURL override, which no parameter pattern guards.
	for _, bad := range []string{"https://gitlab.example.com/api/v4?x=1", "https://u:p@gitlab.example.com/api/v4", "https://gitlab.example.com/a/../api/v4", "https://gitlab.example.com/api/v4#f"} {
		if _, err := rest.New(providers.Config{APIURL: bad, Target: rest.Target(map[string]string{"project": "1"}), Settings: sampleProfile(t, "gitlab-project-hooks"), Credential: "k"}); providers.KindOf(err) != providers.Permanent {
			t.Errorf("apiURL %q: %v; want it refused", bad, err)
		}
	}
}

// TestGitLabAdoptionKeepsTheName: the marker lives in a hook's name (GitLab 17.1+), which a
// user may have given the hook by hand. Adopting it writes the marker after that name instead
// of over it (a GET reads the name before the PUT); updating it again keeps one marker; a hook
// Hookwarden made, whose name is the marker alone, keeps it as it is.
func TestGitLabAdoptionKeepsTheName(t *testing.T) {
	ctx := context.Background()
	srv, c := gitlabClient(t, "group/project")
	id := strconv.Itoa(srv.Seed("42", gitlab.Hook{URL: "https://hooks.example.com/gl", Name: "CI notifications", Flags: map[string]bool{"push_events": true}}))
	d := providers.Desired{URL: "https://hooks.example.com/gl", Events: []string{"push"}, Owner: owner, Secret: "tok-1"}
	const want = "CI notifications [hookwarden:prod/shop/orders/0b7c-uid]"
	for i := range 2 {
		before := len(srv.Requests())
		reg, err := c.Update(ctx, id, d)
		if err != nil {
			t.Fatal(err)
		}
		if got := srv.Hooks("42")[0].Name; got != want {
			t.Errorf("update %d: name = %q; want %q (the hand-given name kept, one marker after it)", i+1, got, want)
		}
		if reg.Owner != owner {
			t.Errorf("update %d: owner read back = %+v; want %+v", i+1, reg.Owner, owner)
		}
		var methods []string
		for _, r := range srv.Requests()[before:] {
			methods = append(methods, r.Method)
		}
		if diff := cmp.Diff([]string{"GET", "PUT"}, methods); diff != "" {
			t.Errorf("update %d: requests (-want +got):\n%s", i+1, diff)
		}
	}

	made, err := c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/made", Events: []string{"push"}, Owner: owner, Secret: "tok-2"}, "k-made")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Update(ctx, made.ID, providers.Desired{URL: "https://hooks.example.com/made", Events: []string{"push", "pipeline"}, Owner: owner, Secret: "tok-2"}); err != nil {
		t.Fatal(err)
	}
	for _, h := range srv.Hooks("42") {
		if strconv.Itoa(h.ID) == made.ID && h.Name != "hookwarden:prod/shop/orders/0b7c-uid" {
			t.Errorf("a hook Hookwarden made is named %q after an update; want the marker alone", h.Name)
		}
	}
}
