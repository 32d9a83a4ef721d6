// Package gitlab is a stateful, in-process fake of GitLab's project and group webhooks API
// (REST v4), built from GitLab's documentation (doc/api/project_webhooks.md,
// group_webhooks.md), its API source (lib/api/project_hooks.rb, ee/lib/api/group_hooks.rb, the
// Hook, ProjectHook and GroupHook entities) and its database schema (db/structure.sql,
// web_hooks), as summarised in REST-PROVIDERS.md §1:
//
//   - GET/POST /api/v4/projects/:id/hooks, GET/PUT/DELETE /api/v4/projects/:id/hooks/:hook_id,
//     and the same under /api/v4/groups/:id/hooks; :id is a numeric id or the URL-encoded path
//     (group%2Fproject). WithRelativeURLRoot serves it under a path (https://host/gitlab).
//   - Auth: PRIVATE-TOKEN or a Bearer token; 401 {"message":"401 Unauthorized"} without one.
//     Project hooks need the Maintainer role, group hooks the Owner role and a Premium or
//     Ultimate group: otherwise 403 {"message":"403 Forbidden"}. A token given no role with
//     SetRole is an Owner everywhere.
//   - The list is a bare array paged with page/per_page (default 20, at most 100), with Link,
//     X-Next-Page, X-Page, X-Per-Page, X-Total and X-Total-Pages headers.
//   - Hooks have an integer id, url, name, description, one boolean per event (only
//     push_events defaults to true), enable_ssl_verification, alert_status; the token is
//     accepted and never returned. Create answers 201, delete 204, an unknown hook 404.
//   - Columns GitLab's schema leaves nullable render null when never set: name, description,
//     push_events_branch_filter and confidential_note_events (which has no default) for a hook
//     created without them; Hook.Null seeds any other (tag_push_events, enable_ssl_verification).
//   - PUT requires url and applies only the parameters sent; when the URL changes the token
//     is reset unless one is sent with it, and custom headers are dropped.
//   - An invalid URL is answered 422 {"error":"Invalid url given"}.
//   - Before171 serves a GitLab older than 17.1, which has neither name nor description: both
//     parameters are ignored (Grape drops undeclared parameters) and neither is rendered.
//     WithoutFlags does the same for event flags an older GitLab does not know.
//   - For benchmarks, WithMeter limits and counts requests as GitLab's rate limits do, and
//     WithPageSize caps list pages below what a client asks for.
package gitlab

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
)

// Events are the project hook's event flags (the ProjectHook entity and the project hooks API
// parameters; emoji_events and vulnerability_events are accepted though the API document lists
// emoji only as a test trigger and vulnerability not at all).
var Events = []string{
	"push_events", "tag_push_events", "issues_events", "confidential_issues_events",
	"merge_requests_events", "note_events", "confidential_note_events", "job_events",
	"pipeline_events", "wiki_page_events", "deployment_events", "feature_flag_events",
	"releases_events", "milestone_events", "emoji_events", "resource_access_token_events",
	"resource_deploy_token_events", "vulnerability_events",
}

// GroupEvents are the group hook's event flags (the GroupHook entity): the project's but
// resource_deploy_token_events, plus subgroup, member and project events.
var GroupEvents = []string{
	"push_events", "tag_push_events", "issues_events", "confidential_issues_events",
	"merge_requests_events", "note_events", "confidential_note_events", "job_events",
	"pipeline_events", "wiki_page_events", "deployment_events", "feature_flag_events",
	"releases_events", "milestone_events", "subgroup_events", "emoji_events",
	"resource_access_token_events", "member_events", "vulnerability_events", "project_events",
}

// nullableByDefault are the columns a hook created through the API without them holds as
// NULL: text columns without a default, and confidential_note_events, a boolean without one.
var nullableByDefault = []string{"name", "description", "push_events_branch_filter", "confidential_note_events"}

// Hook is one project or group hook as the fake stores it.
type Hook struct {
	ID int
	// Project is the numeric id of the project or group the hook belongs to.
	Project     string
	URL         string
	Name        string
	Description string
	Token       string
	Flags       map[string]bool
	SSL         bool
	// BranchFilter is push_events_branch_filter.
	BranchFilter string
	Created      time.Time
	// CustomHeaders are stored but, as on GitLab, not listed.
	CustomHeaders map[string]string
	// Null are columns NULL in GitLab's database, rendered null whatever the fields above say:
	// hooks made before a column existed, or by a tool that never set it. Setting a value
	// through the API clears the column's entry.
	Null []string
	// RecentFailures and DisabledUntil are GitLab's auto-disabling state (recent_failures,
	// disabled_until): see deliveries.go.
	RecentFailures int
	DisabledUntil  *time.Time
	// Events is the hook's delivery log, oldest first.
	Events []HookEvent
}

// LegacyHook is a hook as GitLab renders one made in its UI before 17.1 (before name and
// description existed, and without the confidential note flag): push events only, and name,
// description, push_events_branch_filter and confidential_note_events null.
func LegacyHook(url string) Hook {
	return Hook{URL: url, SSL: true, Flags: map[string]bool{"push_events": true}, Null: slices.Clone(nullableByDefault)}
}

// Role is a member's role in a project or group.
type Role int

// GitLab's roles, lowest first.
const (
	Guest Role = iota + 1
	Reporter
	Developer
	Maintainer
	Owner
)

// Tier is a group's subscription.
type Tier int

// GitLab's tiers; group hooks need Premium or Ultimate.
const (
	Free Tier = iota
	Premium
	Ultimate
)

type kind int

const (
	projectKind kind = iota
	groupKind
)

func (k kind) collection() string {
	if k == groupKind {
		return "groups"
	}
	return "projects"
}

// namespace is a project or a group and its hooks.
type namespace struct {
	kind  kind
	tier  Tier
	hooks map[int]*Hook
}

// Server is the fake. Projects and groups exist once added (AddProject, AddGroup) or seeded
// into.
type Server struct {
	core.Core
	// Clock is the fake's time: hook creation, delivery log times, the 7-day window, the
	// disable backoff and the resend limit's minutes. Set it to move time without waiting.
	Clock     fakeapi.Clock
	http      *http.Client
	root      string
	before171 bool
	unknown   map[string]bool
	pageSize  int

	mu        sync.Mutex
	nextID    int
	nextEvent int
	resends   map[string]int        // project|token|minute -> resend requests
	spaces    map[string]*namespace // "projects/42", "groups/7"
	paths     map[string]string     // "projects/group/project" -> "projects/42"
	roles     map[string]map[string]Role
}

// Option configures a Server at construction.
type Option func(*Server)

// WithRelativeURLRoot serves the API under root ("/gitlab"), as a GitLab installed with a
// relative URL root is: https://host/gitlab/api/v4/...
func WithRelativeURLRoot(root string) Option {
	return func(s *Server) { s.root = "/" + strings.Trim(root, "/") }
}

// Before171 serves a GitLab older than 17.1: hooks have no name and no description.
func Before171() Option { return func(s *Server) { s.before171 = true } }

// WithoutFlags serves a GitLab that does not know these event flags (milestone_events before
// it existed): they are neither accepted nor rendered.
func WithoutFlags(flags ...string) Option {
	return func(s *Server) {
		for _, f := range flags {
			s.unknown[f] = true
		}
	}
}

// WithPageSize caps every list page (hooks and their event logs) at n items whatever per_page
// asks for, so tests can force many pages although clients ask for 100 (20 for event logs).
// n <= 0 means no cap beyond GitLab's own.
func WithPageSize(n int) Option { return func(s *Server) { s.pageSize = n } }

// WithMeter paces and counts the fake's requests (see fakeapi.Meter), by token, on the routes
// meterRoute names ("/api/v4/projects/{id}/hooks", ".../hooks/{hook_id}/events", ...). A token
// beyond the meter's rate is answered as GitLab answers it: on hook creation and resend
// (Gitlab::ApplicationRateLimiter) 429 with Retry-After: 60 and the limiter's message, elsewhere
// (Rack::Attack's throttles) 429 "Retry later" with Retry-After. GitLab counts hook creation per
// user and project; the meter counts per token, which is the same where each project has a
// token of its own.
func WithMeter(m *fakeapi.Meter) Option {
	return func(s *Server) { s.Meter(m, s.meterRoute, throttled) }
}

// New returns an empty fake.
func New(opts ...Option) *Server {
	s := &Server{nextID: 1, nextEvent: 1, resends: map[string]int{}, unknown: map[string]bool{}, spaces: map[string]*namespace{}, paths: map[string]string{}, roles: map[string]map[string]Role{}}
	for _, o := range opts {
		o(s)
	}
	// GitLab's webhook timeout is 10 s; redirects are answers, not followed (3xx is success).
	s.http = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return s
}

func sortedHookIDs(ns *namespace) []int {
	ids := make([]int, 0, len(ns.hooks))
	for id := range ns.hooks {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}

func (s *Server) space(k kind, id string) *namespace {
	key := k.collection() + "/" + id
	ns := s.spaces[key]
	if ns == nil {
		ns = &namespace{kind: k, hooks: map[int]*Hook{}}
		s.spaces[key] = ns
	}
	return ns
}

// AddProject creates a project with a numeric id and a path (group/project).
func (s *Server) AddProject(id, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.space(projectKind, id)
	s.paths["projects/"+path] = "projects/" + id
}

// AddGroup creates a group with a numeric id, a path (top/sub) and a tier.
func (s *Server) AddGroup(id, path string, tier Tier) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.space(groupKind, id).tier = tier
	s.paths["groups/"+path] = "groups/" + id
}

// SetRole gives token role in the project (groups false) or group with numeric id.
func (s *Server) SetRole(token string, groups bool, id string, role Role) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := projectKind
	if groups {
		k = groupKind
	}
	if s.roles[token] == nil {
		s.roles[token] = map[string]Role{}
	}
	s.roles[token][k.collection()+"/"+id] = role
}

func (s *Server) seed(k kind, id string, h Hook) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.space(k, id)
	h.ID, h.Project = s.nextID, id
	s.nextID++
	if h.Flags == nil {
		h.Flags = map[string]bool{"push_events": true}
	}
	if h.Created.IsZero() {
		h.Created = s.Clock.Now().UTC()
	}
	h.Null = slices.Clone(h.Null)
	h.Events = slices.Clone(h.Events)
	ns.hooks[h.ID] = &h
	return h.ID
}

// Seed adds a hook to a project as a user in GitLab's UI would, and returns its id.
func (s *Server) Seed(project string, h Hook) int { return s.seed(projectKind, project, h) }

// SeedGroupHook adds a hook to a group as a user in GitLab's UI would, and returns its id.
func (s *Server) SeedGroupHook(group string, h Hook) int { return s.seed(groupKind, group, h) }

func (s *Server) remove(k kind, id string, hook int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.spaces[k.collection()+"/"+id]
	if ns == nil || ns.hooks[hook] == nil {
		return false
	}
	delete(ns.hooks, hook)
	return true
}

// Remove deletes a project hook as a user in GitLab's UI would; it reports whether it existed.
func (s *Server) Remove(project string, id int) bool { return s.remove(projectKind, project, id) }

// RemoveGroupHook deletes a group hook out of band; it reports whether it existed.
func (s *Server) RemoveGroupHook(group string, id int) bool { return s.remove(groupKind, group, id) }

func (s *Server) edit(k kind, id string, hook int, fn func(h *Hook)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.spaces[k.collection()+"/"+id]
	if ns == nil || ns.hooks[hook] == nil {
		return false
	}
	h := ns.hooks[hook]
	fn(h)
	h.ID, h.Project = hook, id
	return true
}

// Edit changes a project hook as a user in GitLab's UI would; it reports whether the hook
// exists.
func (s *Server) Edit(project string, id int, fn func(h *Hook)) bool {
	return s.edit(projectKind, project, id, fn)
}

// EditGroupHook changes a group hook out of band; it reports whether the hook exists.
func (s *Server) EditGroupHook(group string, id int, fn func(h *Hook)) bool {
	return s.edit(groupKind, group, id, fn)
}

func (s *Server) hooks(k kind, id string) []Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Hook
	if ns := s.spaces[k.collection()+"/"+id]; ns != nil {
		for _, h := range ns.hooks {
			c := *h
			c.Null = slices.Clone(h.Null)
			c.Events = slices.Clone(h.Events)
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Hooks returns copies of a project's hooks, by id.
func (s *Server) Hooks(project string) []Hook { return s.hooks(projectKind, project) }

// GroupHooks returns copies of a group's hooks, by id.
func (s *Server) GroupHooks(group string) []Hook { return s.hooks(groupKind, group) }

// Start serves the fake on 127.0.0.1; the base URL is followed by the relative URL root (if
// any) and /api/v4.
func (s *Server) Start() (baseURL string, stop func()) { return core.Start(s.Handler()) }

// Handler is the fake's HTTP handler.
func (s *Server) Handler() http.Handler {
	return s.Wrap(http.HandlerFunc(s.serve))
}

// tooManyRequests is Gitlab::ApplicationRateLimiter's message (hook creation, resend).
const tooManyRequests = "This endpoint has been requested too many times. Try again later."

// meterRoute names a request for the meter: its token, and the hooks routes with their ids
// taken out ("/api/v4/projects/{id}/hooks/{hook_id}/events"), or the path as sent.
func (s *Server) meterRoute(r *http.Request) (string, fakeapi.Route) {
	p := r.URL.EscapedPath()
	rest, ok := strings.CutPrefix(p, s.root+"/api/v4/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 3 || len(parts) > 7 || (parts[0] != "projects" && parts[0] != "groups") || parts[2] != "hooks" {
		return token(r), fakeapi.Route{Method: r.Method, Pattern: p}
	}
	parts[1] = "{id}"
	if len(parts) > 3 {
		parts[3] = "{hook_id}"
	}
	if len(parts) > 5 && parts[4] == "events" {
		parts[5] = "{hook_event_id}"
	}
	return token(r), fakeapi.Route{Method: r.Method, Pattern: "/api/v4/" + strings.Join(parts, "/")}
}

// throttled is GitLab's answer to a token beyond its rate on route rt.
func throttled(rt fakeapi.Route, wait time.Duration) core.Fault {
	if rt.Method == http.MethodPost && (strings.HasSuffix(rt.Pattern, "/hooks") || strings.HasSuffix(rt.Pattern, "/resend")) {
		return core.Fault{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "60"},
			Body: `{"message":{"error":"` + tooManyRequests + `"}}`}
	}
	secs := max(1, int((wait+time.Second-1)/time.Second))
	return core.Fault{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": strconv.Itoa(secs)},
		Body: "Retry later\n", ContentType: "text/plain"}
}

func message(w http.ResponseWriter, status int, msg string) {
	core.JSON(w, status, map[string]string{"message": msg})
}

func token(r *http.Request) string {
	if t := r.Header.Get("PRIVATE-TOKEN"); t != "" {
		return t
	}
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return t
	}
	return ""
}

//nolint:funlen // the fake's route table, one case per route
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	tok := token(r)
	if tok == "" {
		message(w, http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), s.root+"/api/v4/")
	if !ok {
		message(w, http.StatusNotFound, "404 Not Found")
		return
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 3 || (parts[0] != "projects" && parts[0] != "groups") || parts[2] != "hooks" || len(parts) > 7 {
		message(w, http.StatusNotFound, "404 Not Found")
		return
	}
	k := projectKind
	if parts[0] == "groups" {
		k = groupKind
	}
	s.mu.Lock()
	locked := true
	defer func() {
		if locked {
			s.mu.Unlock()
		}
	}()
	id, err := url.PathUnescape(parts[1])
	if err != nil {
		message(w, http.StatusNotFound, "404 Not Found")
		return
	}
	key := k.collection() + "/" + id
	if byPath, ok := s.paths[key]; ok {
		key = byPath
	}
	ns := s.spaces[key]
	noun := "Project"
	if k == groupKind {
		noun = "Group"
	}
	if ns == nil {
		message(w, http.StatusNotFound, "404 "+noun+" Not Found")
		return
	}
	if !s.allowed(tok, key, ns) {
		message(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	nsID := strings.TrimPrefix(key, k.collection()+"/")
	if len(parts) == 3 {
		switch r.Method {
		case http.MethodGet:
			s.list(w, r, ns)
		case http.MethodPost:
			s.create(w, r, nsID, ns)
		default:
			message(w, http.StatusMethodNotAllowed, "405 Method Not Allowed")
		}
		return
	}
	hookID, err := strconv.Atoi(parts[3])
	h := ns.hooks[hookID]
	if err != nil || h == nil {
		message(w, http.StatusNotFound, "404 Not found")
		return
	}
	switch sub := parts[4:]; {
	case len(sub) == 1 && sub[0] == "events" && r.Method == http.MethodGet:
		s.listEvents(w, r, h)
		return
	case len(sub) == 3 && sub[0] == "events" && sub[2] == "resend" && r.Method == http.MethodPost:
		locked = false // resend releases the lock while it delivers
		s.resend(w, r, tok, key, ns, h, sub[1])
		return
	case len(sub) > 0:
		message(w, http.StatusNotFound, "404 Not Found")
		return
	}
	switch r.Method {
	case http.MethodGet:
		core.JSON(w, http.StatusOK, s.render(ns, h))
	case http.MethodPut:
		s.update(w, r, ns, h)
	case http.MethodDelete:
		delete(ns.hooks, hookID)
		w.WriteHeader(http.StatusNoContent)
	default:
		message(w, http.StatusMethodNotAllowed, "405 Method Not Allowed")
	}
}

// allowed: project hooks need Maintainer, group hooks Owner and a licensed group. Callers hold
// s.mu.
func (s *Server) allowed(tok, key string, ns *namespace) bool {
	role, set := s.roles[tok][key]
	if !set {
		role = Owner
	}
	if ns.kind == groupKind {
		return role >= Owner && ns.tier >= Premium
	}
	return role >= Maintainer
}

func (s *Server) flags(k kind) []string {
	all := Events
	if k == groupKind {
		all = GroupEvents
	}
	return slices.DeleteFunc(slices.Clone(all), func(f string) bool { return s.unknown[f] })
}

// render is the hook as GitLab's ProjectHook or GroupHook entity presents it.
func (s *Server) render(ns *namespace, h *Hook) map[string]any {
	m := map[string]any{
		"id": h.ID, "url": h.URL,
		"created_at":              h.Created.Format(time.RFC3339),
		"enable_ssl_verification": h.SSL, "alert_status": s.alertStatus(ns, h, s.Clock.Now()), "disabled_until": nil,
		"push_events_branch_filter": h.BranchFilter, "branch_filter_strategy": "wildcard",
		"repository_update_events": false,
	}
	if h.DisabledUntil != nil {
		m["disabled_until"] = h.DisabledUntil.UTC().Format(time.RFC3339)
	}
	if !s.before171 {
		m["name"], m["description"] = h.Name, h.Description
	}
	owner := "project_id"
	if ns.kind == groupKind {
		owner = "group_id"
	}
	m[owner] = h.Project
	if n, err := strconv.Atoi(h.Project); err == nil {
		m[owner] = n
	}
	for _, e := range s.flags(ns.kind) {
		m[e] = h.Flags[e]
	}
	for _, col := range h.Null {
		if _, ok := m[col]; ok {
			m[col] = nil
		}
	}
	return m
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, ns *namespace) {
	q := r.URL.Query()
	page, perPage := 1, 20
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		page = v
	}
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	perPage = s.capPage(perPage)
	ids := make([]int, 0, len(ns.hooks))
	for id := range ns.hooks {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	out := []map[string]any{}
	for i := (page - 1) * perPage; i < min(page*perPage, len(ids)); i++ {
		out = append(out, s.render(ns, ns.hooks[ids[i]]))
	}
	pageHeaders(w, r, page, perPage, len(ids))
	core.JSON(w, http.StatusOK, out)
}

// capPage is a page size under WithPageSize's cap.
func (s *Server) capPage(n int) int {
	if s.pageSize > 0 {
		return min(n, s.pageSize)
	}
	return n
}

// pageHeaders writes GitLab's offset paging headers: Link (prev, next, first, last),
// X-Next-Page, X-Page, X-Per-Page, X-Total and X-Total-Pages.
func pageHeaders(w http.ResponseWriter, r *http.Request, page, perPage, total int) {
	q := r.URL.Query()
	pages := max((total+perPage-1)/perPage, 1)
	link := func(p int, rel string) string {
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath}
		if r.TLS != nil {
			u.Scheme = "https"
		}
		lq := url.Values{}
		for k, vs := range q {
			lq[k] = vs
		}
		lq.Set("page", strconv.Itoa(p))
		lq.Set("per_page", strconv.Itoa(perPage))
		u.RawQuery = lq.Encode()
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var links []string
	if page > 1 {
		links = append(links, link(page-1, "prev"))
	}
	next := ""
	if page < pages {
		links = append(links, link(page+1, "next"))
		next = strconv.Itoa(page + 1)
	}
	links = append(links, link(1, "first"), link(pages, "last"))
	h := w.Header()
	h.Set("Link", strings.Join(links, ", "))
	h.Set("X-Next-Page", next)
	h.Set("X-Page", strconv.Itoa(page))
	h.Set("X-Per-Page", strconv.Itoa(perPage))
	h.Set("X-Total", strconv.Itoa(total))
	h.Set("X-Total-Pages", strconv.Itoa(pages))
}

func badRequest(w http.ResponseWriter, msg string) {
	core.JSON(w, http.StatusBadRequest, map[string]string{"error": msg})
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// apply copies the parameters GitLab accepts from body onto h; unknown ones are ignored, as
// Grape ignores undeclared parameters. A column given a value is no longer NULL.
func (s *Server) apply(k kind, h *Hook, body map[string]any) string {
	set := func(col string) { h.Null = slices.DeleteFunc(h.Null, func(n string) bool { return n == col }) }
	if v, ok := body["url"]; ok {
		u, _ := v.(string)
		if !validURL(u) {
			return "Invalid url given"
		}
		h.URL = u
	}
	texts := []string{"token", "push_events_branch_filter"}
	if !s.before171 {
		texts = append(texts, "name", "description")
	}
	for _, col := range texts {
		v, ok := body[col]
		if !ok {
			continue
		}
		str, _ := v.(string)
		switch col {
		case "name":
			h.Name = str
		case "description":
			h.Description = str
		case "token":
			h.Token = str
		case "push_events_branch_filter":
			h.BranchFilter = str
		}
		set(col)
	}
	for _, e := range s.flags(k) {
		if v, ok := body[e]; ok {
			b, isBool := v.(bool)
			if !isBool {
				return e + " is invalid"
			}
			h.Flags[e] = b
			set(e)
		}
	}
	if v, ok := core.Bool(body, "enable_ssl_verification"); ok {
		h.SSL = v
		set("enable_ssl_verification")
	}
	if v, ok := body["custom_headers"].([]any); ok {
		h.CustomHeaders = map[string]string{}
		for _, e := range v {
			if kv, ok := e.(map[string]any); ok {
				key, _ := kv["key"].(string)
				val, _ := kv["value"].(string)
				h.CustomHeaders[key] = val
			}
		}
	}
	return ""
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, id string, ns *namespace) {
	body, ok := core.Decode(w, r, badRequest)
	if !ok {
		return
	}
	if _, ok := body["url"]; !ok {
		badRequest(w, "url is missing")
		return
	}
	h := &Hook{Project: id, Flags: map[string]bool{"push_events": true}, SSL: true, Created: s.Clock.Now().UTC(), Null: slices.Clone(nullableByDefault)}
	if msg := s.apply(ns.kind, h, body); msg != "" {
		core.JSON(w, http.StatusUnprocessableEntity, map[string]string{"error": msg})
		return
	}
	h.ID = s.nextID
	s.nextID++
	ns.hooks[h.ID] = h
	core.JSON(w, http.StatusCreated, s.render(ns, h))
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, ns *namespace, h *Hook) {
	body, ok := core.Decode(w, r, badRequest)
	if !ok {
		return
	}
	if _, ok := body["url"]; !ok {
		badRequest(w, "url is missing")
		return
	}
	next := *h
	next.Flags = map[string]bool{}
	for k, v := range h.Flags {
		next.Flags[k] = v
	}
	next.Null = slices.Clone(h.Null)
	if msg := s.apply(ns.kind, &next, body); msg != "" {
		core.JSON(w, http.StatusUnprocessableEntity, map[string]string{"error": msg})
		return
	}
	if next.URL != h.URL {
		// "When you change the webhook URL, the secret token is reset and not retained";
		// custom headers go too.
		if _, sent := body["token"]; !sent {
			next.Token = ""
		}
		next.CustomHeaders = nil
	}
	*h = next
	core.JSON(w, http.StatusOK, s.render(ns, h))
}
