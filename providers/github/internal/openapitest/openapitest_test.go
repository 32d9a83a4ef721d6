package openapitest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const goodRepoHook = `{"type":"Repository","id":1,"name":"web","active":true,"events":["push"],
"config":{"content_type":"json","insecure_ssl":"0","url":"https://example.com/h"},
"updated_at":"2026-01-01T00:00:00Z","created_at":"2026-01-01T00:00:00Z",
"url":"https://api.github.com/repos/o/r/hooks/1","test_url":"https://api.github.com/repos/o/r/hooks/1/test",
"ping_url":"https://api.github.com/repos/o/r/hooks/1/pings","deliveries_url":"https://api.github.com/repos/o/r/hooks/1/deliveries",
"last_response":{"code":null,"status":"unused","message":null}}`

// TestValidatorCatches shows the validator can fail: each exchange breaks the description.
func TestValidatorCatches(t *testing.T) {
	cases := []struct {
		name, reason         string
		method, path, body   string
		header               map[string]string
		status               int
		response             string
		wantViolation        string // "" means conforming
		wantUndocumentedNote string
	}{
		{name: "conforming list", reason: "GitHub's own example shape passes", method: "GET", path: "/repos/o/r/hooks?per_page=100",
			status: 200, response: "[" + goodRepoHook + "]"},
		{name: "enterprise prefix", reason: "/api/v3 is stripped before matching", method: "GET", path: "/api/v3/repos/o/r/hooks",
			status: 200, response: "[" + goodRepoHook + "]"},
		{name: "no last_response", reason: "the repository hook requires last_response", method: "GET", path: "/repos/o/r/hooks",
			status: 200, response: "[" + strings.Replace(goodRepoHook, ",\n\"last_response\":{\"code\":null,\"status\":\"unused\",\"message\":null}", "", 1) + "]",
			wantViolation: "last_response"},
		{name: "numeric insecure_ssl on an org hook", reason: "org-hook config.insecure_ssl is a string", method: "GET", path: "/orgs/o/hooks/1",
			status: 200, response: `{"id":1,"url":"https://api.github.com/orgs/o/hooks/1","ping_url":"https://api.github.com/orgs/o/hooks/1/pings","name":"web","events":["push"],"active":true,"config":{"url":"https://example.com","insecure_ssl":0},"updated_at":"2026-01-01T00:00:00Z","created_at":"2026-01-01T00:00:00Z","type":"Organization"}`,
			wantViolation: "insecure_ssl"},
		{name: "relative hook url", reason: "url has format uri", method: "GET", path: "/repos/o/r/hooks/1",
			status: 200, response: strings.Replace(goodRepoHook, `"url":"https://api.github.com/repos/o/r/hooks/1"`, `"url":"/repos/o/r/hooks/1"`, 1),
			wantViolation: "absolute URI"},
		{name: "unknown create field", reason: "repository create has additionalProperties: false", method: "POST", path: "/repos/o/r/hooks",
			body: `{"name":"web","config":{"url":"https://example.com/h"},"description":"x"}`, header: map[string]string{"Content-Type": "application/json"},
			status: 201, response: goodRepoHook, wantViolation: "request"},
		{name: "org create without name", reason: "organization create requires name", method: "POST", path: "/orgs/o/hooks",
			body: `{"config":{"url":"https://example.com/h"}}`, header: map[string]string{"Content-Type": "application/json"},
			status: 422, response: `{"message":"Invalid request.","documentation_url":"x"}`, wantViolation: "request"},
		{name: "undocumented status", reason: "IncludeResponseStatus: a 418 is not GitHub's", method: "DELETE", path: "/repos/o/r/hooks/1",
			status: 418, response: `{"message":"teapot"}`, wantViolation: "status is not supported"},
		{name: "401 basic-error", reason: "401 is sent everywhere and must be a basic-error", method: "GET", path: "/orgs/o/hooks",
			status: 401, response: `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest","status":"401"}`,
			wantUndocumentedNote: "orgs/list-webhooks 401"},
		{name: "401 not JSON", reason: "an undocumented status still needs GitHub's error object", method: "GET", path: "/orgs/o/hooks",
			status: 401, response: `<html>`, wantViolation: "basic-error"},
		{name: "304 with a body", reason: "a 304 has no body", method: "GET", path: "/orgs/o/hooks", header: map[string]string{"If-None-Match": `"x"`},
			status: 304, response: `[]`, wantViolation: "304 with a body"},
		{name: "unknown path", reason: "only hook endpoints exist in the description", method: "GET", path: "/user",
			status: 200, response: `{}`, wantViolation: "no operation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := New()
			if err != nil {
				t.Fatal(err)
			}
			h := v.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.response))
			}))
			req := httptest.NewRequest(tc.method, "http://127.0.0.1"+tc.path, strings.NewReader(tc.body))
			for k, val := range tc.header {
				req.Header.Set(k, val)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || rec.Body.String() != tc.response {
				t.Errorf("the wrapped response was changed: %d %q", rec.Code, rec.Body.String())
			}
			got := strings.Join(v.Violations(), "\n")
			switch {
			case tc.wantViolation == "" && got != "":
				t.Errorf("%s: violations:\n%s", tc.reason, got)
			case tc.wantViolation != "" && !strings.Contains(got, tc.wantViolation):
				t.Errorf("%s: violations %q, want one mentioning %q", tc.reason, got, tc.wantViolation)
			}
			if tc.wantUndocumentedNote != "" && !strings.Contains(strings.Join(v.Undocumented(), ","), tc.wantUndocumentedNote) {
				t.Errorf("Undocumented() = %v, want %q", v.Undocumented(), tc.wantUndocumentedNote)
			}
		})
	}
}
