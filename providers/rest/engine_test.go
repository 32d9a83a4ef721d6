package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tidwall/sjson"
	"sigs.k8s.io/yaml"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/rest"
)

// tinyProfile is the smallest valid profile; cases change it with sjson paths.
const tinyProfile = `
apiVersion: rest.hookwarden.io/v1alpha1
kind: Profile
name: tiny
baseURL: https://api.example.com
auth: {header: Authorization, value: "Bearer {{.Credential}}"}
object: {id: {path: id}, url: {path: url}}
events: {style: list, path: events}
secret: {mode: none}
marker: {location: none}
list: {path: /hooks}
get: {path: "/hooks/{{.ID}}"}
create: {path: /hooks}
update: {strategy: patch, path: "/hooks/{{.ID}}"}
delete: {path: "/hooks/{{.ID}}"}
verify: {scheme: none}
`

// profileWith returns tinyProfile as JSON with each path set to its value (a string holding
// raw JSON when it starts with "raw:"), or deleted when the value is nil.
func profileWith(t testing.TB, kv ...any) []byte {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(tinyProfile))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		path := kv[i].(string)
		switch v := kv[i+1].(type) {
		case nil:
			js, err = sjson.DeleteBytes(js, path)
		case string:
			if raw, ok := strings.CutPrefix(v, "raw:"); ok {
				js, err = sjson.SetRawBytes(js, path, []byte(raw))
			} else {
				js, err = sjson.SetBytes(js, path, v)
			}
		default:
			js, err = sjson.SetBytes(js, path, v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return js
}

func TestParseNamesTheFieldPath(t *testing.T) {
	cases := []struct {
		name, reason string
		profile      []byte
		want         []string
	}{
		{"not yaml", "a profile that does not parse says so", []byte("apiVersion: [unclosed"), []string{"does not parse"}},
		{"empty", "nothing to check", []byte("  \n"), []string{"is empty"}},
		{"misspelt field", "unknown fields are errors with their full path, not silently ignored", profileWith(t, "list.paginaton", "raw:{}"), []string{`unknown field "list.paginaton"`}},
		{"wrong version", "the format is versioned", profileWith(t, "apiVersion", "rest.hookwarden.io/v2"), []string{"apiVersion: want"}},
		{"template syntax", "a template error names its place", profileWith(t, "list.path", "/hooks/{{.ID"), []string{"list.path: template does not parse"}},
		{"undeclared parameter", "a template naming a parameter the profile lacks fails before any request", profileWith(t, "create.path", "/p/{{.Params.project}}/hooks"), []string{"create.path: template fails", "project"}},
		{"credential outside auth", "only the auth header sees the credential", profileWith(t, "headers", "raw:{\"X-Key\":\"{{.Credential}}\"}"), []string{"headers.X-Key: template fails"}},
		{"cursor without next", "a cursor style must say where the cursor is", profileWith(t, "list.pagination", "raw:{\"style\":\"cursor\",\"sizeParam\":\"limit\",\"size\":10,\"cursorParam\":\"after\"}"), []string{"list.pagination.next"}},
		{"bad style", "only known pagination styles", profileWith(t, "list.pagination", "raw:{\"style\":\"infinite\"}"), []string{"list.pagination.style"}},
		{"flags without flags", "a flags style needs its flags", profileWith(t, "events", "raw:{\"style\":\"flags\"}"), []string{"events.flags: required"}},
		{"fetched without fetch", "a fetched secret needs its request", profileWith(t, "secret", "raw:{\"mode\":\"fetched\",\"path\":\"key\"}", "verify", "raw:{\"scheme\":\"token\",\"token\":{\"header\":\"X-T\"}}"), []string{"secret.fetch: required"}},
		{"marker in a missing description", "the description must be mapped", profileWith(t, "marker.location", "description"), []string{"marker.location"}},
		{"secret none signed", "an unsigned API verifies nothing", profileWith(t, "verify", "raw:{\"scheme\":\"token\",\"token\":{\"header\":\"X-T\"}}"), []string{"verify.scheme"}},
		{"bad verify header", "the verifier is built at validation", profileWith(t, "secret", "raw:{\"mode\":\"clientChosen\",\"path\":\"s\"}", "verify", "raw:{\"scheme\":\"hmac\",\"hmac\":{\"header\":\"X Sig\"}}"), []string{"verify:", "not a valid HTTP header name"}},
		{"id header that is no id", "notIDHeaders forbids its names as the event id", profileWith(t, "secret", "raw:{\"mode\":\"clientChosen\",\"path\":\"s\"}", "verify", "raw:{\"scheme\":\"token\",\"token\":{\"header\":\"X-Gitlab-Token\",\"eventIDHeader\":\"X-Gitlab-Event-UUID\"},\"notIDHeaders\":[\"X-Gitlab-Event-UUID\"]}"), []string{"notIDHeaders"}},
		{"recreate unknown field", "only fields a registration has", profileWith(t, "update.recreate", "raw:[\"colour\"]"), []string{"update.recreate[0]"}},
		{"several problems", "every problem at once", profileWith(t, "object.url", nil, "delete.path", "hooks"), []string{"2 problems", "object.url.path: required", "delete.path"}},
		{"path syntax", "gjson queries are not paths", profileWith(t, "object.id.path", "items.#.id"), []string{"object.id.path"}},
		{"backoff factor below 1", "a backoff that shrinks is no backoff", profileWith(t, "errors.rateLimit.backoff", "raw:{\"factor\":0.5}"), []string{"errors.rateLimit.backoff.factor: 0.5 is not between 1"}},
		{"backoff max below first", "the cap cannot be shorter than the first wait", profileWith(t, "errors.rateLimit.backoff", "raw:{\"first\":\"2m\",\"max\":\"30s\"}"), []string{"errors.rateLimit.backoff.max: 30s is shorter than first (2m0s)"}},
		{"backoff past an hour", "no API's window is longer", profileWith(t, "errors.rateLimit.backoff", "raw:{\"first\":\"-1s\",\"max\":\"2h\"}"), []string{"2 problems", "errors.rateLimit.backoff.first: -1s is not between", "errors.rateLimit.backoff.max: 2h0m0s is not between 0 (the default) and 1h0m0s"}},
		{"backoff as a duration", "backoff is a section, not the first wait alone", profileWith(t, "errors.rateLimit.backoff", "30s"), []string{"does not decode"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rest.Parse(tc.profile)
			if err == nil {
				t.Fatalf("%s\nParse accepted the profile", tc.reason)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s\nParse error %q lacks %q", tc.reason, err, w)
				}
			}
		})
	}
	if _, err := rest.Parse(profileWith(t)); err != nil {
		t.Fatalf("the tiny profile is invalid: %v", err)
	}
}

// handlerClient serves h and returns a client for profile against it.
func handlerClient(t *testing.T, profile []byte, h http.HandlerFunc) *rest.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := rest.New(providers.Config{APIURL: srv.URL, Settings: profile, Credential: "secret-api-key-canary", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestListRefusesBadAnswers(t *testing.T) {
	cursorProfile := profileWith(t, "list.items", "data", "list.pagination", "raw:{\"style\":\"cursor\",\"sizeParam\":\"limit\",\"size\":2,\"cursorParam\":\"after\",\"next\":\"next\",\"hasMore\":\"has_more\"}")
	pageProfile := profileWith(t, "list.pagination", "raw:{\"style\":\"page\",\"sizeParam\":\"per_page\",\"size\":1,\"pageParam\":\"page\"}", "limits.maxPages", 5)
	big := `[` + strings.Repeat(`{"id":"1","url":"https://a.example.com","events":["x"]},`, 30000) + `{"id":"2","url":"https://a.example.com","events":["x"]}]`
	cases := []struct {
		name, reason string
		profile      []byte
		h            http.HandlerFunc
		want         string
		kind         providers.Kind
	}{
		{"html", "a login page or proxy in front of the API is not a list", profileWith(t), func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html><body>Sign in</body></html>")
		}, "an HTML page", providers.Permanent},
		{"items not an array", "the list envelope is wrong", profileWith(t, "list.items", "webhooks"), func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"data":[]}`)
		}, `list.items "webhooks" is not an array`, providers.Permanent},
		{"too large", "a response larger than the bound", profileWith(t, "limits.maxResponseBytes", 1<<20), func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, big)
		}, "larger than 1048576 bytes", providers.Permanent},
		{"repeated cursor", "a cursor that does not advance", cursorProfile, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"data":[{"id":%q,"url":"https://a.example.com","events":[]}],"next":"c1","has_more":true}`, "id-"+r.URL.Query().Get("after"))
		}, "repeats the cursor", providers.Permanent},
		{"endless pages", "more pages than the bound", pageProfile, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `[{"id":%q,"url":"https://a.example.com","events":[]}]`, r.URL.Query().Get("page"))
		}, "more than 5 pages", providers.Permanent},
		{"overlapping pages", "the same page again is a loop, not more registrations", pageProfile, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `[{"id":"same","url":"https://a.example.com","events":[]}]`)
		}, "listed twice", providers.Permanent},
		{"has more without cursor", "the end condition and the cursor disagree", cursorProfile, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"data":[{"id":"1","url":"https://a.example.com","events":[]}],"has_more":true}`)
		}, "gives no cursor", providers.Permanent},
		{"redirect", "redirects are not followed with the credential", profileWith(t), func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://login.example.com/", http.StatusFound)
		}, "redirected", providers.Permanent},
		{"credential echoed", "an error body that echoes the credential is redacted", profileWith(t), func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"bad key %s"}`, r.Header.Get("Authorization"))
		}, "[redacted]", providers.Permanent},
		{"server error", "5xx is transient", profileWith(t), func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
		}, "Bad Gateway", providers.Transient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := handlerClient(t, tc.profile, tc.h)
			regs, err := c.List(context.Background())
			if err == nil || regs != nil {
				t.Fatalf("%s\nList = %d registrations, %v; want an error and no partial list", tc.reason, len(regs), err)
			}
			if !strings.Contains(err.Error(), tc.want) || providers.KindOf(err) != tc.kind {
				t.Errorf("%s\nList error = %v (%v); want %v naming %q", tc.reason, err, providers.KindOf(err), tc.kind, tc.want)
			}
			if strings.Contains(err.Error(), "secret-api-key-canary") {
				t.Errorf("the error contains the credential: %v", err)
			}
		})
	}
}

func TestListFollowsEveryStyle(t *testing.T) {
	const n = 7
	item := func(i int) string {
		return fmt.Sprintf(`{"id":"h%02d","url":"https://a.example.com/%d","events":["e"]}`, i, i)
	}
	items := func(from, to int) string {
		var parts []string
		for i := from; i < min(to, n); i++ {
			parts = append(parts, item(i))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	cases := []struct {
		name    string
		profile []byte
		h       http.HandlerFunc
	}{
		{"page", profileWith(t, "list.pagination", "raw:{\"style\":\"page\",\"sizeParam\":\"per_page\",\"size\":3,\"pageParam\":\"page\"}"), func(w http.ResponseWriter, r *http.Request) {
			p, _ := strconv.Atoi(r.URL.Query().Get("page"))
			fmt.Fprint(w, items((p-1)*3, p*3))
		}},
		{"offset with more", profileWith(t, "list.items", "subs", "list.pagination", "raw:{\"style\":\"offset\",\"sizeParam\":\"limit\",\"size\":3,\"offsetParam\":\"offset\",\"more\":\"more\"}"), func(w http.ResponseWriter, r *http.Request) {
			o, _ := strconv.Atoi(r.URL.Query().Get("offset"))
			fmt.Fprintf(w, `{"subs":%s,"more":%v}`, items(o, o+3), o+3 < n)
		}},
		{"cursor from the last id", profileWith(t, "list.items", "data", "list.pagination", "raw:{\"style\":\"cursor\",\"sizeParam\":\"limit\",\"size\":3,\"cursorParam\":\"after\",\"nextFromLastID\":true,\"hasMore\":\"has_more\"}"), func(w http.ResponseWriter, r *http.Request) {
			start := 0
			if a := r.URL.Query().Get("after"); a != "" {
				start, _ = strconv.Atoi(strings.TrimPrefix(a, "h"))
				start++
			}
			fmt.Fprintf(w, `{"object":"list","data":%s,"has_more":%v}`, items(start, start+3), start+3 < n)
		}},
		{"cursor until none", profileWith(t, "list.items", "collection", "list.pagination", "raw:{\"style\":\"cursor\",\"sizeParam\":\"count\",\"size\":3,\"cursorParam\":\"page_token\",\"next\":\"pagination.next_page_token\"}"), func(w http.ResponseWriter, r *http.Request) {
			start, _ := strconv.Atoi(r.URL.Query().Get("page_token"))
			next := "null"
			if start+3 < n {
				next = strconv.Quote(strconv.Itoa(start + 3))
			}
			fmt.Fprintf(w, `{"collection":%s,"pagination":{"next_page_token":%s}}`, items(start, start+3), next)
		}},
		{"link", profileWith(t, "list.pagination", "raw:{\"style\":\"link\",\"sizeParam\":\"limit\",\"size\":3}"), func(w http.ResponseWriter, r *http.Request) {
			start, _ := strconv.Atoi(r.URL.Query().Get("page_info"))
			if start+3 < n {
				w.Header().Add("Link", fmt.Sprintf(`<http://%s/hooks?page_info=%d&limit=3>; rel="next", <http://%s/hooks?page_info=0>; rel="previous"`, r.Host, start+3, r.Host))
			}
			fmt.Fprint(w, items(start, start+3))
		}},
		{"next URL in the body", profileWith(t, "list.items", "values", "list.pagination", "raw:{\"style\":\"nextURL\",\"sizeParam\":\"pagelen\",\"size\":3,\"next\":\"next\"}"), func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("pagelen") != "3" {
				http.Error(w, "the page size is lost", http.StatusBadRequest)
				return
			}
			start, _ := strconv.Atoi(r.URL.Query().Get("page"))
			next := ""
			if start+3 < n {
				// Bitbucket's next carries an opaque page token and the page size.
				next = fmt.Sprintf(`,"next":"http://%s/hooks?pagelen=3&page=%d"`, r.Host, start+3)
			}
			fmt.Fprintf(w, `{"pagelen":3,"values":%s%s}`, items(start, start+3), next)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			regs, err := handlerClient(t, tc.profile, tc.h).List(context.Background())
			if err != nil || len(regs) != n {
				t.Fatalf("List = %d registrations, %v; want %d", len(regs), err, n)
			}
		})
	}
	t.Run("link to another host", func(t *testing.T) {
		c := handlerClient(t, profileWith(t, "list.pagination", "raw:{\"style\":\"link\"}"), func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Link", `<https://elsewhere.example.com/hooks?page=2>; rel="next"`)
			fmt.Fprint(w, items(0, 3))
		})
		if _, err := c.List(context.Background()); err == nil || !strings.Contains(err.Error(), "another host") {
			t.Errorf("List = %v; want a refusal to send the credential to another host", err)
		}
	})
	nextURL := "raw:{\"style\":\"nextURL\",\"next\":\"next\"}"
	for _, tc := range []struct{ reason, next, want string }{
		{"a next URL on another host would carry the credential there", `"https://elsewhere.example.com/hooks?page=2"`, "another host"},
		{"a next URL that is not a string is not followed as one", `{"href":"/hooks?page=2"}`, "not a string"},
		{"a next URL that leads back is a loop", `"/hooks"`, "earlier page"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			var served atomic.Int64
			c := handlerClient(t, profileWith(t, "list.items", "values", "list.pagination", nextURL), func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, `{"values":[%s],"next":%s}`, item(int(served.Add(1))), tc.next)
			})
			if _, err := c.List(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("List = %v; want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestErrorsClassify(t *testing.T) {
	profile := profileWith(t, "create.alreadyExists", "raw:[{\"status\":422,\"contains\":\"already been taken\"}]",
		"errors", "raw:{\"message\":[\"errors.0\"],\"quota\":[{\"status\":403,\"contains\":\"limit\"}],\"rateLimit\":{\"resetHeader\":\"ratelimit-reset\",\"remainingHeader\":\"x-ratelimit-remaining\"}}")
	cases := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		kind       providers.Kind
		retryAfter time.Duration
	}{
		{"duplicate", 422, nil, `{"errors":["address for this topic has already been taken"]}`, providers.AlreadyExists, 0},
		{"other 422", 422, nil, `{"errors":["address is invalid"]}`, providers.Permanent, 0},
		{"quota", 403, nil, `{"errors":["webhook limit reached"]}`, providers.QuotaExceeded, 0},
		{"forbidden", 403, nil, `{"errors":["no"]}`, providers.Unauthorized, 0},
		{"secondary rate limit", 403, map[string]string{"x-ratelimit-remaining": "0"}, `{}`, providers.RateLimited, 0},
		{"429 with reset seconds", 429, map[string]string{"ratelimit-reset": "7"}, `{}`, providers.RateLimited, 7 * time.Second},
		{"429 with Retry-After", 429, map[string]string{"Retry-After": "3", "ratelimit-reset": "7"}, `{}`, providers.RateLimited, 3 * time.Second},
		{"unauthorized", 401, nil, `{}`, providers.Unauthorized, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := handlerClient(t, profile, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			})
			_, err := c.Create(context.Background(), providers.Desired{URL: "https://a.example.com", Events: []string{"e"}}, "k")
			if providers.KindOf(err) != tc.kind || providers.RetryAfter(err) != tc.retryAfter {
				t.Errorf("Create = %v (%v, retry after %v); want %v, %v", err, providers.KindOf(err), providers.RetryAfter(err), tc.kind, tc.retryAfter)
			}
		})
	}
}

// topicAPI is a minimal API with one topic per registration (as Shopify's REST webhooks),
// for the per-registration event style.
type topicAPI struct {
	mu    sync.Mutex
	seq   int
	hooks map[int]map[string]any
}

func (a *topicAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		out := []map[string]any{}
		for _, id := range slices.Sorted(func(yield func(int) bool) {
			for id := range a.hooks {
				if !yield(id) {
					return
				}
			}
		}) {
			out = append(out, a.hooks[id])
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"webhooks": out})
	case http.MethodPost:
		var body struct {
			Webhook map[string]any `json:"webhook"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		for _, h := range a.hooks {
			if h["topic"] == body.Webhook["topic"] && h["address"] == body.Webhook["address"] {
				w.WriteHeader(422)
				fmt.Fprint(w, `{"errors":{"address":["for this topic has already been taken"]}}`)
				return
			}
		}
		a.seq++
		body.Webhook["id"] = a.seq
		a.hooks[a.seq] = body.Webhook
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(map[string]any{"webhook": body.Webhook})
	case http.MethodPut:
		id, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/webhooks/"), ".json"))
		var body struct {
			Webhook map[string]any `json:"webhook"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		for k, v := range body.Webhook {
			a.hooks[id][k] = v
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"webhook": a.hooks[id]})
	case http.MethodDelete:
		id, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/webhooks/"), ".json"))
		if a.hooks[id] == nil {
			w.WriteHeader(404)
			return
		}
		delete(a.hooks, id)
		fmt.Fprint(w, `{}`)
	}
}

func TestPerRegistrationEvents(t *testing.T) {
	api := &topicAPI{hooks: map[int]map[string]any{}}
	profile := profileWith(t,
		"object.requestEnvelope", "webhook", "object.responseEnvelope", "webhook",
		"object.url.path", "address", "object.static", "raw:{\"format\":\"json\"}",
		"events", "raw:{\"style\":\"perRegistration\",\"path\":\"topic\"}",
		"list.path", "/webhooks.json", "list.items", "webhooks",
		"get", nil, "create.path", "/webhooks.json",
		"update", "raw:{\"strategy\":\"putPartial\",\"path\":\"/webhooks/{{.ID}}.json\"}",
		"delete.path", "/webhooks/{{.ID}}.json")
	c := handlerClient(t, profile, api.ServeHTTP)
	ctx := context.Background()
	d := providers.Desired{URL: "https://hooks.example.com/shop", Events: []string{"orders/create", "orders/paid"}}
	reg, err := c.Create(ctx, d, "k")
	if err != nil || len(api.hooks) != 2 || len(reg.Events) != 2 {
		t.Fatalf("Create = %+v, %v; API holds %d; want one registration per topic", reg, err, len(api.hooks))
	}
	regs, err := c.List(ctx)
	if err != nil || len(regs) != 1 || regs[0].ID != reg.ID || len(regs[0].Events) != 2 {
		t.Fatalf("List = %+v, %v; want one registration standing for both topics, id %s", regs, err, reg.ID)
	}
	d.Events = []string{"orders/paid", "orders/cancelled"}
	u, err := c.Update(ctx, reg.ID, d)
	if err != nil || !slices.Equal(slices.Sorted(slices.Values(u.Events)), []string{"orders/cancelled", "orders/paid"}) {
		t.Fatalf("Update = %+v, %v", u, err)
	}
	var topics []string
	for _, h := range api.hooks {
		topics = append(topics, h["topic"].(string))
	}
	if slices.Sort(topics); !slices.Equal(topics, []string{"orders/cancelled", "orders/paid"}) {
		t.Errorf("topics after update = %v; orders/create deleted, orders/cancelled created", topics)
	}
	if err := c.Delete(ctx, u.ID); err != nil || len(api.hooks) != 0 {
		t.Errorf("Delete = %v; %d registrations left", err, len(api.hooks))
	}
	if err := c.Delete(ctx, u.ID); err != nil {
		t.Errorf("second Delete = %v", err)
	}
}

func TestReadableSecretAndStubUpdates(t *testing.T) {
	// Resend-shaped: the secret is on every read; PATCH answers a stub {object, id}.
	var mu sync.Mutex
	hook := map[string]any{"object": "webhook", "id": "wh_1", "endpoint": "https://a.example.com", "events": nil, "status": "enabled", "signing_secret": "whsec_readable"}
	profile := profileWith(t, "object.url.path", "endpoint", "object.disabled", "raw:{\"path\":\"status\",\"enabledValue\":\"enabled\",\"disabledValue\":\"disabled\"}",
		"secret", "raw:{\"mode\":\"readable\",\"path\":\"signing_secret\"}", "list.items", "data",
		"verify", "raw:{\"scheme\":\"standardWebhooks\",\"standardWebhooks\":{\"headerPrefix\":\"svix-\"}}")
	c := handlerClient(t, profile, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/hooks":
			_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "has_more": false, "data": []any{hook}})
		case r.Method == http.MethodGet:
			_ = json.NewEncoder(w).Encode(hook)
		case r.Method == http.MethodPatch:
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			for k, v := range body {
				hook[k] = v
			}
			fmt.Fprint(w, `{"object":"webhook","id":"wh_1"}`)
		}
	})
	ctx := context.Background()
	if c.Capabilities().Secret != providers.SecretReadable {
		t.Fatalf("secret mode %v", c.Capabilities().Secret)
	}
	regs, err := c.List(ctx)
	if err != nil || len(regs) != 1 || regs[0].Secret != "whsec_readable" || len(regs[0].Events) != 0 {
		t.Fatalf("List = %+v, %v; want the secret read on list, null events as none", regs, err)
	}
	u, err := c.Update(ctx, "wh_1", providers.Desired{URL: "https://a.example.com", Events: []string{"email.sent"}, Disabled: true})
	if err != nil || !u.Disabled || u.Secret != "whsec_readable" || len(u.Events) != 1 {
		t.Errorf("Update = %+v, %v; want the stub answer followed by a read", u, err)
	}
	if s, err := c.FetchSecret(ctx, "wh_1"); err != nil || s != "whsec_readable" {
		t.Errorf("FetchSecret = %q, %v", s, err)
	}
}

func TestNewRefusesBadParameters(t *testing.T) {
	profile := profileWith(t, "parameters", "raw:[{\"name\":\"project\",\"required\":true,\"pattern\":\"[0-9]+\"}]")
	for _, tc := range []struct{ target, want string }{
		{"", `"project" is required`},
		{"project=abc", "does not match"},
		{"project=1&color=red", `"color" is not declared`},
	} {
		_, err := rest.New(providers.Config{Settings: profile, Target: tc.target, Credential: "k"})
		if providers.KindOf(err) != providers.Permanent || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(target %q) = %v; want Permanent naming %q", tc.target, err, tc.want)
		}
	}
}

func TestShippedProfilesValidate(t *testing.T) {
	names := shippedProfiles(t)
	if len(names) < 6 {
		t.Fatalf("found %d shipped profiles: %v", len(names), names)
	}
	for _, name := range names {
		if _, err := rest.Parse(sampleProfile(t, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestErrorsNeverShowTheSecret(t *testing.T) {
	profile := profileWith(t, "secret", "raw:{\"mode\":\"clientChosen\",\"path\":\"token\"}", "verify", "raw:{\"scheme\":\"token\",\"token\":{\"header\":\"X-Token\"}}")
	c := handlerClient(t, profile, func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		_, _ = fmt.Fprint(&b, "rejected: ")
		buf := make([]byte, 4096)
		n, _ := r.Body.Read(buf)
		b.Write(buf[:n])
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": b.String()})
	})
	d := providers.Desired{URL: "https://a.example.com", Events: []string{"e"}, Secret: "signing-secret-canary-0123"}
	for name, call := range map[string]func() error{
		"create": func() error { _, err := c.Create(context.Background(), d, "k"); return err },
		"update": func() error { _, err := c.Update(context.Background(), "1", d); return err },
	} {
		err := call()
		if err == nil || strings.Contains(err.Error(), "signing-secret-canary-0123") || !strings.Contains(err.Error(), "[redacted]") {
			t.Errorf("%s error %v shows the secret the API echoed", name, err)
		}
	}
}

// TestRateLimitBackoffFromProfile: the profile's errors.rateLimit.backoff is the API's backoff
// (Capabilities.RateLimitBackoff); unset fields take the defaults.
func TestRateLimitBackoffFromProfile(t *testing.T) {
	cases := []struct {
		reason  string
		section any // errors.rateLimit.backoff; nil leaves it out
		want    providers.Backoff
	}{
		{"no section: the defaults, a second doubling up to a minute", nil, providers.DefaultRateLimitBackoff},
		{"every field set", "raw:{\"first\":\"15s\",\"factor\":1.5,\"max\":\"5m\"}", providers.Backoff{First: 15 * time.Second, Factor: 1.5, Max: 5 * time.Minute}},
		{"a first wait past the default cap raises the cap to it", "raw:{\"first\":\"2m\"}", providers.Backoff{First: 2 * time.Minute, Factor: 2, Max: 2 * time.Minute}},
		{"factor 1: every wait the same", "raw:{\"first\":\"10s\",\"factor\":1}", providers.Backoff{First: 10 * time.Second, Factor: 1, Max: time.Minute}},
	}
	for _, c := range cases {
		profile := profileWith(t, "errors.rateLimit.backoff", c.section)
		cl, err := rest.New(providers.Config{APIURL: "https://api.example.com", Settings: profile, Credential: "secret-api-key-canary"})
		if err != nil {
			t.Fatalf("%s: %v", c.reason, err)
		}
		if d := cmp.Diff(c.want, cl.Capabilities().RateLimitBackoff); d != "" {
			t.Errorf("%s: -want +got\n%s", c.reason, d)
		}
	}
}

// TestRateLimitResetEpochByTheInjectedClock: a reset header that is a unix time is read against
// Config.Now, so the manager's clock decides the wait.
func TestRateLimitResetEpochByTheInjectedClock(t *testing.T) {
	now := time.Date(2031, 5, 6, 7, 0, 0, 0, time.UTC)
	profile := profileWith(t, "errors.rateLimit", "raw:{\"resetHeader\":\"RateLimit-Reset\",\"resetEpoch\":true}")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("RateLimit-Reset", strconv.FormatInt(now.Add(42*time.Second).Unix(), 10))
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	c, err := rest.New(providers.Config{APIURL: srv.URL, Settings: profile, Credential: "secret-api-key-canary", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.List(context.Background())
	if providers.KindOf(err) != providers.RateLimited || providers.RetryAfter(err) != 42*time.Second {
		t.Errorf("List = %v, retry after %s; want RateLimited, exactly 42s until the reset", err, providers.RetryAfter(err))
	}
}
