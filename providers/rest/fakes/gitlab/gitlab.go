// Package gitlab is a stateful, in-process fake of GitLab's project webhooks API (REST v4),
// built from GitLab's documentation and server source as summarised in REST-PROVIDERS.md §1:
//
//   - GET/POST /api/v4/projects/:id/hooks, GET/PUT/DELETE /api/v4/projects/:id/hooks/:hook_id;
//     :id is a numeric id or the URL-encoded path (group%2Fproject).
//   - Auth: PRIVATE-TOKEN; 401 {"message":"401 Unauthorized"} without it.
//   - The list is a bare array paged with page/per_page (default 20, at most 100), with Link,
//     X-Next-Page, X-Page, X-Per-Page, X-Total and X-Total-Pages headers.
//   - Hooks have an integer id, url, name, description, one boolean per event (only
//     push_events defaults to true), enable_ssl_verification, alert_status; the token is
//     accepted and never returned. Create answers 201, delete 204, an unknown hook 404.
//   - PUT requires url and applies only the parameters sent; when the URL changes the token
//     is reset unless one is sent with it, and custom headers are dropped.
//   - An invalid URL is answered 422 {"error":"Invalid url given"}.
package gitlab

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
)

// Events are the project hook's event flags.
var Events = []string{
	"push_events", "tag_push_events", "issues_events", "confidential_issues_events",
	"merge_requests_events", "note_events", "confidential_note_events", "job_events",
	"pipeline_events", "wiki_page_events", "deployment_events", "feature_flag_events",
	"releases_events", "resource_access_token_events",
}

// Hook is one project hook as the fake stores it.
type Hook struct {
	ID          int
	Project     string
	URL         string
	Name        string
	Description string
	Token       string
	Flags       map[string]bool
	SSL         bool
	Created     time.Time
	// CustomHeaders are stored but, as on GitLab, not listed.
	CustomHeaders map[string]string
}

// Server is the fake. Projects exist once added (AddProject) or seeded into.
type Server struct {
	core.Core
	mu       sync.Mutex
	nextID   int
	projects map[string]map[int]*Hook // project id -> hooks
	paths    map[string]string        // project path -> id
}

// New returns an empty fake.
func New() *Server {
	return &Server{nextID: 1, projects: map[string]map[int]*Hook{}, paths: map[string]string{}}
}

// AddProject creates a project with a numeric id and a path (group/project).
func (s *Server) AddProject(id, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.projects[id] == nil {
		s.projects[id] = map[int]*Hook{}
	}
	s.paths[path] = id
}

// Seed adds a hook as a user in GitLab's UI would, and returns its id.
func (s *Server) Seed(project string, h Hook) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.projects[project] == nil {
		s.projects[project] = map[int]*Hook{}
	}
	h.ID, h.Project = s.nextID, project
	s.nextID++
	if h.Flags == nil {
		h.Flags = map[string]bool{"push_events": true}
	}
	if h.Created.IsZero() {
		h.Created = time.Now().UTC()
	}
	s.projects[project][h.ID] = &h
	return h.ID
}

// Remove deletes a hook as a user in GitLab's UI would; it reports whether it existed.
func (s *Server) Remove(project string, id int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.projects[project][id]; !ok {
		return false
	}
	delete(s.projects[project], id)
	return true
}

// Edit changes a hook as a user in GitLab's UI would; it reports whether the hook exists.
func (s *Server) Edit(project string, id int, fn func(h *Hook)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.projects[project][id]
	if h == nil {
		return false
	}
	fn(h)
	h.ID, h.Project = id, project
	return true
}

// Hooks returns copies of a project's hooks, by id.
func (s *Server) Hooks(project string) []Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Hook
	for _, h := range s.projects[project] {
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Start serves the fake on 127.0.0.1; the base URL is followed by /api/v4.
func (s *Server) Start() (baseURL string, stop func()) { return core.Start(s.Handler()) }

// Handler is the fake's HTTP handler.
func (s *Server) Handler() http.Handler {
	return s.Wrap(http.HandlerFunc(s.serve))
}

func message(w http.ResponseWriter, status int, msg string) {
	core.JSON(w, status, map[string]string{"message": msg})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("PRIVATE-TOKEN") == "" && !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		message(w, http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/v4/projects/")
	if !ok {
		message(w, http.StatusNotFound, "404 Not Found")
		return
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 2 || parts[1] != "hooks" || len(parts) > 3 {
		message(w, http.StatusNotFound, "404 Not Found")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	project, err := url.PathUnescape(parts[0])
	if err != nil {
		message(w, http.StatusNotFound, "404 Project Not Found")
		return
	}
	if id, ok := s.paths[project]; ok {
		project = id
	}
	hooks, ok := s.projects[project]
	if !ok {
		message(w, http.StatusNotFound, "404 Project Not Found")
		return
	}
	if len(parts) == 2 {
		switch r.Method {
		case http.MethodGet:
			s.list(w, r, hooks)
		case http.MethodPost:
			s.create(w, r, project, hooks)
		default:
			message(w, http.StatusMethodNotAllowed, "405 Method Not Allowed")
		}
		return
	}
	id, err := strconv.Atoi(parts[2])
	h := hooks[id]
	if err != nil || h == nil {
		message(w, http.StatusNotFound, "404 Not found")
		return
	}
	switch r.Method {
	case http.MethodGet:
		core.JSON(w, http.StatusOK, h.json())
	case http.MethodPut:
		s.update(w, r, h)
	case http.MethodDelete:
		delete(hooks, id)
		w.WriteHeader(http.StatusNoContent)
	default:
		message(w, http.StatusMethodNotAllowed, "405 Method Not Allowed")
	}
}

func (h *Hook) json() map[string]any {
	m := map[string]any{
		"id": h.ID, "url": h.URL, "name": h.Name, "description": h.Description,
		"project_id": h.Project, "created_at": h.Created.Format(time.RFC3339),
		"enable_ssl_verification": h.SSL, "alert_status": "executable", "disabled_until": nil,
		"push_events_branch_filter": "", "branch_filter_strategy": "wildcard",
		"repository_update_events": false,
	}
	if n, err := strconv.Atoi(h.Project); err == nil {
		m["project_id"] = n
	}
	for _, e := range Events {
		m[e] = h.Flags[e]
	}
	return m
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, hooks map[int]*Hook) {
	q := r.URL.Query()
	page, perPage := 1, 20
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		page = v
	}
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	ids := make([]int, 0, len(hooks))
	for id := range hooks {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	total := len(ids)
	pages := max((total+perPage-1)/perPage, 1)
	out := []map[string]any{}
	for i := (page - 1) * perPage; i < min(page*perPage, total); i++ {
		out = append(out, hooks[ids[i]].json())
	}
	link := func(p int, rel string) string {
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath}
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
	core.JSON(w, http.StatusOK, out)
}

func badRequest(w http.ResponseWriter, msg string) {
	core.JSON(w, http.StatusBadRequest, map[string]string{"error": msg})
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// apply copies the parameters GitLab accepts from body onto h; unknown ones are ignored, as
// Grape ignores undeclared parameters.
func apply(h *Hook, body map[string]any) string {
	if v, ok := body["url"]; ok {
		s, _ := v.(string)
		if !validURL(s) {
			return "Invalid url given"
		}
		h.URL = s
	}
	for _, k := range []string{"name", "description", "token"} {
		if v, ok := body[k]; ok {
			s, _ := v.(string)
			switch k {
			case "name":
				h.Name = s
			case "description":
				h.Description = s
			case "token":
				h.Token = s
			}
		}
	}
	for _, e := range Events {
		if v, ok := body[e]; ok {
			b, isBool := v.(bool)
			if !isBool {
				return e + " is invalid"
			}
			h.Flags[e] = b
		}
	}
	if v, ok := core.Bool(body, "enable_ssl_verification"); ok {
		h.SSL = v
	}
	if v, ok := body["custom_headers"].([]any); ok {
		h.CustomHeaders = map[string]string{}
		for _, e := range v {
			if kv, ok := e.(map[string]any); ok {
				k, _ := kv["key"].(string)
				val, _ := kv["value"].(string)
				h.CustomHeaders[k] = val
			}
		}
	}
	return ""
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, project string, hooks map[int]*Hook) {
	body, ok := core.Decode(w, r, badRequest)
	if !ok {
		return
	}
	if _, ok := body["url"]; !ok {
		badRequest(w, "url is missing")
		return
	}
	h := &Hook{Project: project, Flags: map[string]bool{"push_events": true}, SSL: true, Created: time.Now().UTC()}
	if msg := apply(h, body); msg != "" {
		core.JSON(w, http.StatusUnprocessableEntity, map[string]string{"error": msg})
		return
	}
	h.ID = s.nextID
	s.nextID++
	hooks[h.ID] = h
	core.JSON(w, http.StatusCreated, h.json())
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, h *Hook) {
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
	if msg := apply(&next, body); msg != "" {
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
	core.JSON(w, http.StatusOK, h.json())
}
