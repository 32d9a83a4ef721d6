// Package bitbucket is a stateful, in-process fake of Bitbucket Cloud's webhooks API (REST 2.0),
// written from Bitbucket's published OpenAPI description (swagger.v3.json, the Webhooks paths
// and the webhook_subscription, paginated_webhook_subscriptions and error schemas) and its
// support pages (API request limits, troubleshoot webhooks, event payloads):
//
//   - GET/POST /2.0/repositories/{workspace}/{repo_slug}/hooks and GET/PUT/DELETE
//     .../hooks/{uid}; the same under /2.0/workspaces/{workspace}/hooks. A workspace, a
//     repository and a hook are named by slug or by their UUID in curly braces ({…}, sent as
//     %7B…%7D or bare). Workspace hooks need a workspace owner, repository hooks a repository
//     admin; without the role 403. Without credentials 401.
//   - A list is {pagelen, size, page, values, next}: pagelen 10 by default and at most 100 (a
//     larger one is cut to 100, as "individual APIs may enforce different values"), in creation
//     order. next is an absolute URL with an opaque page token ("refrain from constructing your
//     own URLs"): a page number a client makes up is 400; the last page has no next.
//   - A hook is {type: webhook_subscription, uuid "{…}", url, description, subject_type,
//     subject, active, created_at, events, secret_set, links}; the secret is never returned.
//     Hooks made by hand in Bitbucket's UI before secrets existed have secret_set false and an
//     empty description (Seed).
//   - POST answers 201 with Location. url must be an absolute http(s) URL that "cannot be an
//     internal, non-routed address" (a loopback or private literal IP, localhost: 400); events
//     are one or more, unique, of the description's enum (else 400); secret is at most 128
//     characters, and null or "" leaves the hook without one.
//   - PUT changes only what it is sent (description, url, secret, active, events); a null or
//     empty secret removes it, an absent one keeps it; secret_set is ignored. 200 with the hook.
//   - DELETE answers 204; an unknown hook, repository or workspace 404.
//   - Errors are {"type": "error", "error": {"message", "detail"?}}. Rate limits (a rolling hour;
//     "access to webhook data" 1,000 an hour) answer 429 "Rate limit for this resource has been
//     exceeded" without Retry-After: RateLimited builds that answer for Inject.
//   - Deliver sends an event as Bitbucket does (event payloads, troubleshoot webhooks): JSON,
//     X-Event-Key, X-Hook-UUID, X-Request-UUID, X-Attempt-Number, and X-Hub-Signature
//     "sha256=<hex HMAC of the body>" only when the hook has a secret; an answer in 500-599 is
//     resent up to two more times (at once here; Bitbucket states no interval), each attempt
//     with a request UUID of its own (Bitbucket does not say it keeps one).
package bitbucket

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
)

// Events are the event keys webhook_subscription.events accepts (the description's enum).
var Events = []string{
	"issue:comment_created", "issue:created", "issue:updated",
	"project:updated",
	"pullrequest:approved", "pullrequest:changes_request_created", "pullrequest:changes_request_removed",
	"pullrequest:comment_created", "pullrequest:comment_deleted", "pullrequest:comment_reopened",
	"pullrequest:comment_resolved", "pullrequest:comment_updated", "pullrequest:created",
	"pullrequest:fulfilled", "pullrequest:rejected", "pullrequest:unapproved", "pullrequest:updated",
	"repo:commit_comment_created", "repo:commit_status_created", "repo:commit_status_updated",
	"repo:created", "repo:deleted", "repo:fork", "repo:imported", "repo:push", "repo:transfer",
	"repo:updated",
}

// RateLimitMessage is Bitbucket's answer to a credential past its hourly allowance.
const RateLimitMessage = "Rate limit for this resource has been exceeded"

// Hook is one webhook as the fake stores it.
type Hook struct {
	UUID        string // "{…}"
	URL         string
	Description string
	Active      bool
	Events      []string
	Secret      string
	Created     time.Time
}

// Role is a credential's role in a workspace.
type Role int

// Bitbucket's roles, lowest first: repository hooks need Admin, workspace hooks Owner.
const (
	Member Role = iota + 1
	Admin
	Owner
)

// space is a repository or a workspace: what one list covers.
type space struct {
	kind      string // "repository" or "workspace"
	slug      string // "ws/repo" or "ws"
	uuid      string
	workspace string
	hooks     []*Hook // creation order
}

// Server is the fake.
type Server struct {
	core.Core
	mu         sync.Mutex
	spaces     map[string]*space // "repositories/ws/repo", "workspaces/ws"
	byUUID     map[string]string // a space's {uuid} path -> its slug path
	roles      map[string]map[string]Role
	maxPageLen int
	now        func() time.Time
	deliveries *http.Client
}

// Option configures the fake.
type Option func(*Server)

// WithDeliveryClient is the HTTP client Deliver sends with (default: http.DefaultClient with a
// 10 s timeout, Bitbucket's).
func WithDeliveryClient(c *http.Client) Option { return func(s *Server) { s.deliveries = c } }

// WithPageSize caps pages below the 100 Bitbucket allows, so tests page with few hooks.
func WithPageSize(n int) Option { return func(s *Server) { s.maxPageLen = n } }

// New returns an empty fake.
func New(opts ...Option) *Server {
	s := &Server{spaces: map[string]*space{}, byUUID: map[string]string{}, roles: map[string]map[string]Role{}, maxPageLen: 100, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	if s.deliveries == nil {
		s.deliveries = &http.Client{Timeout: 10 * time.Second}
	}
	return s
}

// Attempt is one request Deliver made.
type Attempt struct {
	Number      int
	RequestUUID string
	Status      int // 0: no answer
}

// Deliver sends event (an event key, repo:push) with payload to hook uuid of key now, as
// Bitbucket does when the event happens, and returns its attempts. An inactive or unknown hook
// gets nothing (an error).
func (s *Server) Deliver(key, uuid, event string, payload []byte) ([]Attempt, error) {
	s.mu.Lock()
	sp := s.spaces[key]
	i := -1
	if sp != nil {
		i = sp.find(uuid)
	}
	if i < 0 || !sp.hooks[i].Active {
		s.mu.Unlock()
		return nil, fmt.Errorf("bitbucket fake: no active hook %s on %s", uuid, key)
	}
	h := *sp.hooks[i]
	s.mu.Unlock()
	var out []Attempt
	for n := 1; n <= 3; n++ {
		a := Attempt{Number: n, RequestUUID: strings.Trim(newUUID(), "{}")}
		req, err := http.NewRequest(http.MethodPost, h.URL, bytes.NewReader(payload))
		if err != nil {
			return out, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "Bitbucket-Webhooks/2.0")
		req.Header.Set("X-Event-Key", event)
		req.Header.Set("X-Hook-UUID", strings.Trim(h.UUID, "{}"))
		req.Header.Set("X-Request-UUID", a.RequestUUID)
		req.Header.Set("X-Attempt-Number", strconv.Itoa(n))
		if h.Secret != "" {
			mac := hmac.New(sha256.New, []byte(h.Secret))
			mac.Write(payload)
			req.Header.Set("X-Hub-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		}
		if res, err := s.deliveries.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
			res.Body.Close()
			a.Status = res.StatusCode
		}
		out = append(out, a)
		if a.Status < 500 || a.Status > 599 {
			break
		}
	}
	return out, nil
}

// Start serves the fake on 127.0.0.1; the API root is baseURL + "/2.0".
func (s *Server) Start() (baseURL string, stop func()) { return core.Start(s.Handler()) }

// Handler is the fake's HTTP handler.
func (s *Server) Handler() http.Handler { return s.Wrap(http.HandlerFunc(s.serve)) }

func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("{%x-%x-%x-%x-%x}", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// AddWorkspace makes a workspace; AddRepository makes it too when it is missing.
func (s *Server) AddWorkspace(slug string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addSpace("workspaces/"+slug, "workspace", slug, slug)
}

// AddRepository makes the repository workspace/slug.
func (s *Server) AddRepository(workspace, slug string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addSpace("workspaces/"+workspace, "workspace", workspace, workspace)
	s.addSpace("repositories/"+workspace+"/"+slug, "repository", workspace+"/"+slug, workspace)
}

func (s *Server) addSpace(key, kind, slug, workspace string) {
	if s.spaces[key] != nil {
		return
	}
	sp := &space{kind: kind, slug: slug, uuid: newUUID(), workspace: workspace}
	s.spaces[key] = sp
	parent := "workspaces/"
	if kind == "repository" {
		parent = "repositories/" + workspace + "/"
		s.byUUID["repositories/"+s.spaces["workspaces/"+workspace].uuid+"/"+slug[len(workspace)+1:]] = key
	}
	s.byUUID[parent+sp.uuid] = key
}

// SetRole gives token a role in a workspace (a credential given none owns every workspace).
func (s *Server) SetRole(token, workspace string, r Role) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.roles[token] == nil {
		s.roles[token] = map[string]Role{}
	}
	s.roles[token][workspace] = r
}

// Seed adds a hook as a user in Bitbucket's UI would (key: "repositories/ws/repo" or
// "workspaces/ws") and returns its uuid. A zero Created is now.
func (s *Server) Seed(key string, h Hook) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.spaces[key]
	if sp == nil {
		panic("bitbucket fake: no " + key)
	}
	if h.UUID == "" {
		h.UUID = newUUID()
	}
	if h.Created.IsZero() {
		h.Created = s.now()
	}
	sp.hooks = append(sp.hooks, &h)
	return h.UUID
}

// Hooks returns the hooks of key in creation order.
func (s *Server) Hooks(key string) []Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Hook
	if sp := s.spaces[key]; sp != nil {
		for _, h := range sp.hooks {
			out = append(out, *h)
		}
	}
	return out
}

// Edit changes a hook out of band, as a user in Bitbucket's UI would; it reports whether the
// hook exists.
func (s *Server) Edit(key, uuid string, fn func(*Hook)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp := s.spaces[key]; sp != nil {
		if i := sp.find(uuid); i >= 0 {
			fn(sp.hooks[i])
			sp.hooks[i].UUID = uuid
			return true
		}
	}
	return false
}

// Remove deletes a hook out of band, as a user in Bitbucket's UI would; it reports whether it
// existed.
func (s *Server) Remove(key, uuid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp := s.spaces[key]; sp != nil {
		if i := sp.find(uuid); i >= 0 {
			sp.hooks = slices.Delete(sp.hooks, i, i+1)
			return true
		}
	}
	return false
}

// RateLimited is Bitbucket's answer to a credential past its allowance, for Inject: 429 with
// no Retry-After (Bitbucket states no wait; its window is a rolling hour).
func RateLimited() core.Fault {
	return core.Fault{Status: http.StatusTooManyRequests, Body: errorBody(RateLimitMessage, ""), Times: 1}
}

func errorBody(msg, detail string) string {
	e := map[string]string{"message": msg}
	if detail != "" {
		e["detail"] = detail
	}
	b, _ := json.Marshal(map[string]any{"type": "error", "error": e})
	return string(b)
}

func fail(w http.ResponseWriter, status int, msg, detail string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(errorBody(msg, detail)))
}

func (sp *space) find(uuid string) int {
	want := strings.Trim(strings.ToLower(uuid), "{}")
	return slices.IndexFunc(sp.hooks, func(h *Hook) bool { return strings.Trim(strings.ToLower(h.UUID), "{}") == want })
}

// credential is the token of a Bearer or Basic Authorization header; "" without one.
func credential(r *http.Request) string {
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return t
	}
	if _, p, ok := r.BasicAuth(); ok {
		return p
	}
	return ""
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	tok := credential(r)
	if tok == "" {
		fail(w, http.StatusUnauthorized, "Access denied. You must be logged in to use this resource.", "")
		return
	}
	p, err := url.PathUnescape(r.URL.EscapedPath())
	rest, ok := strings.CutPrefix(p, "/2.0/")
	if err != nil || !ok {
		fail(w, http.StatusNotFound, "Resource not found", "")
		return
	}
	parts := strings.Split(rest, "/")
	var key string
	var tail []string
	switch {
	case parts[0] == "repositories" && len(parts) >= 4 && parts[3] == "hooks":
		key, tail = strings.Join(parts[:3], "/"), parts[4:]
	case parts[0] == "workspaces" && len(parts) >= 3 && parts[2] == "hooks":
		key, tail = strings.Join(parts[:2], "/"), parts[3:]
	default:
		fail(w, http.StatusNotFound, "Resource not found", "")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.byUUID[strings.ToLower(key)]; ok {
		key = k
	}
	sp := s.spaces[key]
	if sp == nil || len(tail) > 1 {
		fail(w, http.StatusNotFound, "Resource not found", "")
		return
	}
	role, set := s.roles[tok][sp.workspace]
	if !set {
		role = Owner
	}
	if (sp.kind == "workspace" && role < Owner) || role < Admin {
		fail(w, http.StatusForbidden, "Your credentials lack one or more required privilege scopes.", "")
		return
	}
	if len(tail) == 0 {
		switch r.Method {
		case http.MethodGet:
			s.list(w, r, sp)
		case http.MethodPost:
			s.create(w, r, sp)
		default:
			fail(w, http.StatusMethodNotAllowed, "Method not allowed", "")
		}
		return
	}
	i := sp.find(tail[0])
	if i < 0 {
		fail(w, http.StatusNotFound, "Resource not found", "")
		return
	}
	switch r.Method {
	case http.MethodGet:
		core.JSON(w, http.StatusOK, s.render(r, sp, sp.hooks[i]))
	case http.MethodPut:
		s.update(w, r, sp, sp.hooks[i])
	case http.MethodDelete:
		sp.hooks = slices.Delete(sp.hooks, i, i+1)
		w.WriteHeader(http.StatusNoContent)
	default:
		fail(w, http.StatusMethodNotAllowed, "Method not allowed", "")
	}
}

func apiRoot(r *http.Request) string { return "http://" + r.Host + "/2.0/" }

func (sp *space) path() string {
	if sp.kind == "workspace" {
		return "workspaces/" + sp.slug
	}
	return "repositories/" + sp.slug
}

func (s *Server) render(r *http.Request, sp *space, h *Hook) map[string]any {
	subject := map[string]any{"type": sp.kind, "uuid": sp.uuid, "links": map[string]any{"self": map[string]string{"href": apiRoot(r) + sp.path()}}}
	if sp.kind == "workspace" {
		subject["slug"], subject["name"] = sp.slug, sp.slug
	} else {
		subject["full_name"], subject["name"] = sp.slug, sp.slug[len(sp.workspace)+1:]
	}
	return map[string]any{
		"type":         "webhook_subscription",
		"uuid":         h.UUID,
		"url":          h.URL,
		"description":  h.Description,
		"subject_type": sp.kind,
		"subject":      subject,
		"active":       h.Active,
		"created_at":   h.Created.UTC().Format("2006-01-02T15:04:05.000000-07:00"),
		"events":       slices.Clone(h.Events),
		"secret_set":   h.Secret != "",
		"links":        map[string]any{"self": map[string]string{"href": apiRoot(r) + sp.path() + "/hooks/" + url.PathEscape(h.UUID)}},
	}
}

// pageToken is opaque to clients: the offset, wrapped so that a number a client makes up is
// refused as Bitbucket refuses a page it did not hand out.
func pageToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o:" + strconv.Itoa(offset)))
}

func pageOffset(token string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	n, ok := strings.CutPrefix(string(b), "o:")
	if err != nil || !ok {
		return 0, false
	}
	off, err := strconv.Atoi(n)
	return off, err == nil && off >= 0
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, sp *space) {
	q := r.URL.Query()
	pagelen := 10
	if v := q.Get("pagelen"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fail(w, http.StatusBadRequest, "Invalid pagelen", "pagelen must be a positive integer")
			return
		}
		pagelen = n
	}
	pagelen = min(pagelen, s.maxPageLen)
	offset := 0
	if v := q.Get("page"); v != "" {
		var ok bool
		if offset, ok = pageOffset(v); !ok {
			fail(w, http.StatusBadRequest, "Invalid page", "")
			return
		}
	}
	end := min(offset+pagelen, len(sp.hooks))
	values := []map[string]any{}
	for _, h := range sp.hooks[min(offset, end):end] {
		values = append(values, s.render(r, sp, h))
	}
	out := map[string]any{"pagelen": pagelen, "size": len(sp.hooks), "page": offset/pagelen + 1, "values": values}
	if end < len(sp.hooks) {
		next := url.Values{"pagelen": {strconv.Itoa(pagelen)}, "page": {pageToken(end)}}
		out["next"] = apiRoot(r) + sp.path() + "/hooks?" + next.Encode()
	}
	core.JSON(w, http.StatusOK, out)
}

// internal reports a URL host Bitbucket cannot deliver to: localhost or a literal loopback,
// private, link-local or unspecified address.
func internal(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified())
}

// apply checks and writes the fields a create or update sends; it returns a problem ("field:
// why") and writes nothing when there is one.
func apply(h *Hook, body map[string]json.RawMessage, create bool) string {
	next := *h
	if raw, ok := body["url"]; ok || create {
		var u string
		if json.Unmarshal(raw, &u) != nil || u == "" {
			return "url: a URL is required"
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return "url: enter a valid URL"
		}
		if internal(pu.Hostname()) {
			return "url: the URL cannot be an internal, non-routed address"
		}
		next.URL = u
	}
	if raw, ok := body["description"]; ok {
		var d *string
		if json.Unmarshal(raw, &d) != nil {
			return "description: not a string"
		}
		next.Description = ""
		if d != nil {
			next.Description = *d
		}
	}
	if raw, ok := body["active"]; ok {
		if json.Unmarshal(raw, &next.Active) != nil {
			return "active: not a boolean"
		}
	}
	if raw, ok := body["events"]; ok || create {
		var ev []string
		if json.Unmarshal(raw, &ev) != nil || len(ev) == 0 {
			return "events: at least one event is required"
		}
		for i, e := range ev {
			if !slices.Contains(Events, e) {
				return fmt.Sprintf("events: %q is not a valid event", e)
			}
			if slices.Contains(ev[:i], e) {
				return fmt.Sprintf("events: %q is listed twice", e)
			}
		}
		next.Events = ev
	}
	if raw, ok := body["secret"]; ok {
		var sec *string
		if json.Unmarshal(raw, &sec) != nil {
			return "secret: not a string"
		}
		next.Secret = ""
		if sec != nil {
			if len(*sec) > 128 {
				return "secret: at most 128 characters"
			}
			next.Secret = *sec
		}
	}
	*h = next
	return ""
}

func decode(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, bool) {
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body == nil {
		fail(w, http.StatusBadRequest, "Bad request", "the body is not a JSON object")
		return nil, false
	}
	return body, true
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, sp *space) {
	body, ok := decode(w, r)
	if !ok {
		return
	}
	h := &Hook{Active: true}
	if problem := apply(h, body, true); problem != "" {
		fail(w, http.StatusBadRequest, "Bad request", problem)
		return
	}
	h.UUID, h.Created = newUUID(), s.now()
	sp.hooks = append(sp.hooks, h)
	w.Header().Set("Location", apiRoot(r)+sp.path()+"/hooks/"+url.PathEscape(h.UUID))
	core.JSON(w, http.StatusCreated, s.render(r, sp, h))
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, sp *space, h *Hook) {
	body, ok := decode(w, r)
	if !ok {
		return
	}
	delete(body, "secret_set") // "This field is ignored during updates."
	if problem := apply(h, body, false); problem != "" {
		fail(w, http.StatusBadRequest, "Bad request", problem)
		return
	}
	core.JSON(w, http.StatusOK, s.render(r, sp, h))
}
