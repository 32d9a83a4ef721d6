// Package fakes_test checks documented facts of each fake directly over HTTP, facts the
// profile tests rely on without exercising (a profile that sends the right thing never sees
// the refusal).
package fakes_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/gitlab"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/pagerduty"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/svix"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/zendesk"
)

type step struct {
	reason       string
	method, path string
	header       map[string]string
	body         string
	status       int
	contains     string
}

func run(t *testing.T, base string, auth map[string]string, steps []step) {
	t.Helper()
	for _, s := range steps {
		req, err := http.NewRequest(s.method, base+s.path, strings.NewReader(s.body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range auth {
			req.Header.Set(k, v)
		}
		for k, v := range s.header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != s.status || !strings.Contains(string(b), s.contains) {
			t.Errorf("%s\n%s %s = %d %s; want %d containing %q", s.reason, s.method, s.path, res.StatusCode, b, s.status, s.contains)
		}
	}
}

func TestGitLabFacts(t *testing.T) {
	srv := gitlab.New()
	srv.AddProject("7", "g/p")
	base, stop := srv.Start()
	defer stop()
	run(t, base+"/api/v4", map[string]string{"PRIVATE-TOKEN": "t"}, []step{
		{"create answers 201 and never returns the token", "POST", "/projects/g%2Fp/hooks", nil, `{"url":"https://a.example.com","token":"tok"}`, 201, `"push_events":true`},
		{"PUT requires url", "PUT", "/projects/7/hooks/1", nil, `{"push_events":false}`, 400, "url is missing"},
		{"an unknown hook is 404", "DELETE", "/projects/7/hooks/99", nil, "", 404, "404"},
	})
	if h := srv.Hooks("7")[0]; h.Token != "tok" {
		t.Fatalf("token %q", h.Token)
	}
	run(t, base+"/api/v4", map[string]string{"PRIVATE-TOKEN": "t"}, []step{
		{"a URL change without the token", "PUT", "/projects/7/hooks/1", nil, `{"url":"https://b.example.com"}`, 200, `"url":"https://b.example.com"`},
	})
	if h := srv.Hooks("7")[0]; h.Token != "" {
		t.Errorf("the token survived a URL change without it: %q", h.Token)
	}
	run(t, base+"/api/v4", nil, []step{{"no token is 401", "GET", "/projects/7/hooks", nil, "", 401, "401 Unauthorized"}})
}

// GitLab renders nullable columns a hook never set as null (db/structure.sql, web_hooks), has
// no name before 17.1, and guards group hooks by role and tier.
func TestGitLabNullsVersionsAndGroups(t *testing.T) {
	srv := gitlab.New()
	srv.AddProject("7", "g/p")
	srv.AddGroup("3", "g", gitlab.Premium)
	srv.AddGroup("4", "free", gitlab.Free)
	srv.SetRole("dev", false, "7", gitlab.Developer)
	srv.SetRole("maint", true, "3", gitlab.Maintainer)
	base, stop := srv.Start()
	defer stop()
	run(t, base+"/api/v4", map[string]string{"PRIVATE-TOKEN": "t"}, []step{
		{"a flag without a default that was not sent is null", "POST", "/projects/7/hooks", nil, `{"url":"https://a.example.com"}`, 201, `"confidential_note_events":null`},
		{"so are name and description", "GET", "/projects/7/hooks/1", nil, "", 200, `"name":null`},
		{"a value sent is no longer null", "PUT", "/projects/7/hooks/1", nil, `{"url":"https://a.example.com","name":"n","confidential_note_events":false}`, 200, `"confidential_note_events":false`},
		{"group hooks carry group flags", "POST", "/groups/g/hooks", nil, `{"url":"https://a.example.com","subgroup_events":true}`, 201, `"subgroup_events":true`},
		{"and the group id", "GET", "/groups/3/hooks", nil, "", 200, `"group_id":3`},
		{"group hooks need Premium", "GET", "/groups/4/hooks", nil, "", 403, "403 Forbidden"},
	})
	run(t, base+"/api/v4", map[string]string{"PRIVATE-TOKEN": "dev"}, []step{{"project hooks need Maintainer", "GET", "/projects/7/hooks", nil, "", 403, "403 Forbidden"}})
	run(t, base+"/api/v4", map[string]string{"PRIVATE-TOKEN": "maint"}, []step{{"group hooks need Owner", "GET", "/groups/3/hooks", nil, "", 403, "403 Forbidden"}})
	srv.Seed("7", gitlab.LegacyHook("https://old.example.com"))
	run(t, base+"/api/v4", map[string]string{"PRIVATE-TOKEN": "t"}, []step{{"a legacy hook renders its nulls", "GET", "/projects/7/hooks/3", nil, "", 200, `"push_events_branch_filter":null`}})

	old := gitlab.New(gitlab.Before171(), gitlab.WithRelativeURLRoot("/gitlab"), gitlab.WithoutFlags("milestone_events"))
	old.AddProject("7", "g/p")
	oldBase, stopOld := old.Start()
	defer stopOld()
	run(t, oldBase+"/gitlab/api/v4", map[string]string{"PRIVATE-TOKEN": "t"}, []step{
		{"before 17.1 name is dropped", "POST", "/projects/7/hooks", nil, `{"url":"https://a.example.com","name":"n","milestone_events":true}`, 201, `"push_events":true`},
	})
	run(t, oldBase, map[string]string{"PRIVATE-TOKEN": "t"}, []step{
		{"outside the relative URL root there is no API", "GET", "/api/v4/projects/7/hooks", nil, "", 404, "404"},
	})
	if h := old.Hooks("7")[0]; h.Name != "" || h.Flags["milestone_events"] {
		t.Errorf("an old GitLab stored what it does not know: %+v", h)
	}
	res, err := http.DefaultClient.Do(mustReq(t, "GET", oldBase+"/gitlab/api/v4/projects/7/hooks/1", "", map[string]string{"PRIVATE-TOKEN": "t"}))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(b), `"push_events"`) || strings.Contains(string(b), `"name"`) || strings.Contains(string(b), "milestone_events") {
		t.Errorf("an old GitLab's hook = %d %s; want it without name and milestone_events", res.StatusCode, b)
	}
}

// GitLab's hook event log as GitLab serves it (issue 27, item 7): status is a comma-separated
// list (Grape's CommaSeparatedToArray) and an unknown value is a 400; a delivery that got no HTTP
// answer is logged "internal error" and counts as server_failure (WebHookLogsFinder); every
// entry carries created_at; a resend whose endpoint gives no HTTP answer is a 422 with the error
// text (ResendService).
func TestGitLabEventLogFacts(t *testing.T) {
	srv := gitlab.New()
	srv.AddProject("7", "g/p")
	base, stop := srv.Start()
	defer stop()
	run(t, base+"/api/v4", map[string]string{"PRIVATE-TOKEN": "t"}, []step{
		{"a hook to an address nothing listens on", "POST", "/projects/7/hooks", nil, `{"url":"http://127.0.0.1:1/hook"}`, 201, `"id":1`},
	})
	if sent, _ := srv.Emit("7", "push_events", []byte(`{"object_kind":"push"}`)); sent != 1 {
		t.Fatalf("sent to %d hooks", sent)
	}
	run(t, base+"/api/v4", map[string]string{"PRIVATE-TOKEN": "t"}, []step{
		{"no HTTP answer is logged as internal error", "GET", "/projects/7/hooks/1/events", nil, "", 200, `"response_status":"internal error"`},
		{"with its created_at", "GET", "/projects/7/hooks/1/events", nil, "", 200, `"created_at":"`},
		{"and counts as server_failure, in a comma-separated list", "GET", "/projects/7/hooks/1/events?status=client_failure,server_failure", nil, "", 200, `"response_status":"internal error"`},
		{"not as a client_failure", "GET", "/projects/7/hooks/1/events?status=client_failure", nil, "", 200, `[]`},
		{"an unknown status value is a 400", "GET", "/projects/7/hooks/1/events?status=server_failure,bogus", nil, "", 400, "status does not have a valid value"},
		{"a resend to an endpoint that gives no HTTP answer is a 422 with the error", "POST", "/projects/7/hooks/1/events/1/resend", nil, "", 422, "connection refused"},
	})
}

// Metered like GitLab's hook creation limit (5 a minute per project; the bench's meter), the
// fake refuses the sixth create as GitLab's ApplicationRateLimiter does and leaves the lists
// alone; the meter counts routes with their ids taken out; WithPageSize caps both lists.
func TestGitLabMeterAndPageSize(t *testing.T) {
	hooks := "/api/v4/projects/{id}/hooks"
	create := fakeapi.Route{Method: http.MethodPost, Pattern: hooks}
	m := fakeapi.NewMeter(fakeapi.MeterOptions{Rate: 5.0 / 60, Burst: 5, Routes: []fakeapi.Route{create}})
	srv := gitlab.New(gitlab.WithMeter(m), gitlab.WithPageSize(2))
	srv.AddProject("7", "g/p")
	base, stop := srv.Start()
	defer stop()
	auth := map[string]string{"PRIVATE-TOKEN": "t"}
	for range 5 {
		run(t, base+"/api/v4", auth, []step{{"five creates a minute", "POST", "/projects/7/hooks", nil, `{"url":"http://127.0.0.1:1/hook"}`, 201, `"id":`}})
	}
	run(t, base+"/api/v4", auth, []step{
		{"the sixth is refused as ApplicationRateLimiter refuses it", "POST", "/projects/7/hooks", nil, `{"url":"http://127.0.0.1:1/hook"}`, 429, "This endpoint has been requested too many times"},
	})
	res, err := http.DefaultClient.Do(mustReq(t, "POST", base+"/api/v4/projects/7/hooks", `{"url":"http://127.0.0.1:1/hook"}`, auth))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("Retry-After"); res.StatusCode != 429 || got != "60" {
		t.Errorf("a create over the limit = %d, Retry-After %q; want 429 and 60", res.StatusCode, got)
	}
	ids := func(path string) (ids []float64, perPage string) {
		t.Helper()
		res, err := http.DefaultClient.Do(mustReq(t, "GET", base+"/api/v4"+path, "", auth))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var page []map[string]any
		if err := json.NewDecoder(res.Body).Decode(&page); err != nil || res.StatusCode != 200 {
			t.Fatalf("GET %s = %d (%v)", path, res.StatusCode, err)
		}
		for _, o := range page {
			ids = append(ids, o["id"].(float64))
		}
		return ids, res.Header.Get("X-Per-Page")
	}
	for _, c := range []struct {
		reason, path string
		want         []float64
	}{
		{"lists are not limited, and come in pages of 2", "/projects/g%2Fp/hooks?per_page=100", []float64{1, 2}},
		{"whose second page follows", "/projects/7/hooks?per_page=100&page=2", []float64{3, 4}},
	} {
		got, perPage := ids(c.path)
		if d := cmp.Diff(c.want, got); d != "" || perPage != "2" {
			t.Errorf("%s: X-Per-Page %q, ids -want +got\n%s", c.reason, perPage, d)
		}
	}
	for range 3 {
		srv.Emit("7", "push_events", []byte(`{"object_kind":"push"}`))
	}
	if got, perPage := ids("/projects/7/hooks/1/events?per_page=20"); len(got) != 2 || perPage != "2" {
		t.Errorf("an event log of 3 gave a page of %v, X-Per-Page %q; want 2 entries in pages of 2", got, perPage)
	}
	want := []fakeapi.RouteCount{
		{Route: fakeapi.Route{Method: http.MethodGet, Pattern: hooks}, Requests: 2},
		{Route: create, Requests: 7, Limited: 2},
		{Route: fakeapi.Route{Method: http.MethodGet, Pattern: hooks + "/{hook_id}/events"}, Requests: 1},
	}
	if d := cmp.Diff(want, m.Counts()); d != "" {
		t.Errorf("meter counts: -want +got\n%s", d)
	}

	// A meter on every route stands for GitLab's API-wide limit (Rack::Attack): "Retry later".
	all := gitlab.New(gitlab.WithMeter(fakeapi.NewMeter(fakeapi.MeterOptions{Rate: 1.0 / 60, Burst: 1})))
	all.AddProject("7", "g/p")
	allBase, stopAll := all.Start()
	defer stopAll()
	run(t, allBase+"/api/v4", auth, []step{
		{"the first list", "GET", "/projects/7/hooks", nil, "", 200, "[]"},
		{"the second is over the API-wide limit", "GET", "/projects/7/hooks", nil, "", 429, "Retry later"},
	})
}

func TestZendeskFacts(t *testing.T) {
	srv := zendesk.New()
	base, stop := srv.Start()
	defer stop()
	req, _ := http.NewRequest("GET", base, nil)
	req.SetBasicAuth("a@b.example/token", "tok")
	auth := map[string]string{"Authorization": req.Header.Get("Authorization")}
	full := `{"webhook":{"name":"n","status":"active","endpoint":"https://a.example.com","http_method":"POST","request_format":"json","subscriptions":["zen:event-type:ticket.created"]}}`
	res, err := http.DefaultClient.Do(mustReq(t, "POST", base+"/api/v2/webhooks", full, auth))
	if err != nil || res.StatusCode != 201 {
		t.Fatalf("create: %v %v", res, err)
	}
	var created struct{ Webhook struct{ ID string } }
	_ = json.NewDecoder(res.Body).Decode(&created)
	res.Body.Close()
	id := created.Webhook.ID
	run(t, base+"/api/v2", auth, []step{
		{"PUT replaces: required fields must be present", "PUT", "/webhooks/" + id, nil, `{"webhook":{"name":"x"}}`, 400, "is required"},
		{"PUT answers 204 without a body", "PUT", "/webhooks/" + id, nil, full, 204, ""},
		{"event subscriptions need json", "PATCH", "/webhooks/" + id, nil, `{"webhook":{"request_format":"xml"}}`, 400, "request_format json"},
		{"the connection method cannot change", "PATCH", "/webhooks/" + id, nil, `{"webhook":{"subscriptions":["conditional_ticket_events"]}}`, 400, "connection method"},
		{"the secret is its own resource", "GET", "/webhooks/" + id + "/signing_secret", nil, "", 200, `"algorithm":"SHA256"`},
		{"the webhook does not carry it", "GET", "/webhooks/" + id, nil, "", 200, `"endpoint"`},
	})
	run(t, base+"/api/v2", map[string]string{"Authorization": "Bearer x"}, []step{{"Basic {email}/token only", "GET", "/webhooks", nil, "", 401, "authenticate"}})
}

func mustReq(t *testing.T, method, url, body string, header map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return req
}

func TestPagerDutyFacts(t *testing.T) {
	srv := pagerduty.New()
	base, stop := srv.Start()
	defer stop()
	auth := map[string]string{"Authorization": "Token token=k", "Accept": pagerduty.Accept}
	create := `{"webhook_subscription":{"type":"webhook_subscription","delivery_method":{"type":"http_delivery_method","url":"https://a.example.com","custom_headers":[{"name":"X-A","value":"v"}]},"events":["incident.triggered"],"filter":{"type":"account_reference"}}}`
	run(t, base, auth, []step{
		{"create answers 200 with the secret", "POST", "/webhook_subscriptions", nil, create, 200, `"secret":"`},
		{"a filter is required", "POST", "/webhook_subscriptions", nil, strings.Replace(create, `"filter":{"type":"account_reference"}`, `"description":"x"`, 1), 400, "filter is required"},
		{"events must be unique", "POST", "/webhook_subscriptions", nil, strings.Replace(create, `["incident.triggered"]`, `["a","a"]`, 1), 400, "unique"},
		{"offset+limit past 10000", "GET", "/webhook_subscriptions?offset=9950&limit=100", nil, "", 400, "10000"},
	})
	id := srv.Subscriptions("k")[0].ID
	run(t, base, auth, []step{
		{"reads show no secret and redacted header values", "GET", "/webhook_subscriptions/" + id, nil, "", 200, `"value":"-- redacted --"`},
		{"delivery_method cannot be updated", "PUT", "/webhook_subscriptions/" + id, nil, `{"webhook_subscription":{"delivery_method":{"url":"https://b.example.com"}}}`, 400, "cannot be updated"},
	})
	run(t, base, map[string]string{"Authorization": "Token token=k"}, []step{{"the versioned Accept is required", "GET", "/webhook_subscriptions", nil, "", 406, "Accept"}})
}

func TestSvixFacts(t *testing.T) {
	srv := svix.New()
	srv.AddApp("sk", "app_1")
	base, stop := srv.Start()
	defer stop()
	auth := map[string]string{"Authorization": "Bearer sk"}
	run(t, base+"/api/v1/app/app_1", auth, []step{
		{"create answers 201; metadata is always an object; no filterTypes means all", "POST", "/endpoint", nil, `{"url":"https://a.example.com","uid":"orders"}`, 201, `"metadata":{}`},
		{"a uid is taken once", "POST", "/endpoint", nil, `{"url":"https://a.example.com","uid":"orders"}`, 409, "uid"},
		{"endpoints are addressed by uid too", "PATCH", "/endpoint/orders", nil, `{"filterTypes":["invoice.paid"]}`, 200, `"filterTypes":["invoice.paid"]`},
		{"the secret is served on its own", "GET", "/endpoint/orders/secret", nil, "", 200, `"key":"whsec_`},
		{"limit is 1..250", "GET", "/endpoint?limit=251", nil, "", 422, "limit"},
		{"an unknown endpoint is 404", "GET", "/endpoint/x", nil, "", 404, "not_found"},
	})
	run(t, base+"/api/v1/app/app_9", auth, []step{{"an unknown app is 404", "GET", "/endpoint", nil, "", 404, "Application"}})
}
