// Package zendesk is a stateful, in-process fake of Zendesk's Webhooks API
// (/api/v2/webhooks), built from Zendesk's documentation and its OpenAPI transcription as
// summarised in REST-PROVIDERS.md §2:
//
//   - Auth: Basic with username "{email}/token" and the API token as password; anything else
//     is 401. Each email is one account here (one subdomain).
//   - Bodies are wrapped: {"webhook": {...}}; list answers {"webhooks": [...], "meta":
//     {"has_more", "after_cursor", "before_cursor"}, "links": {...}}, paged by page[size]
//     (at most 100) and page[after].
//   - name, status (active|inactive), endpoint, http_method and request_format are required
//     on create and on PUT (a full replace); with event subscriptions (zen:event-type:...)
//     http_method must be POST and request_format json; subscriptions is either event types
//     or exactly ["conditional_ticket_events"], and the connection method cannot change.
//   - Create answers 201 {"webhook"}; PUT and PATCH answer 204 without a body; delete 204;
//     unknown ids 404.
//   - The signing secret is generated and never part of the webhook: GET
//     /webhooks/{id}/signing_secret answers {"signing_secret": {"algorithm", "secret"}},
//     POST there resets it (201).
//   - custom_headers is an object of header name to value, echoed back.
package zendesk

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
)

// Webhook is one webhook as the fake stores it.
type Webhook struct {
	ID            string
	Name          string
	Description   string
	Status        string
	Endpoint      string
	HTTPMethod    string
	RequestFormat string
	Subscriptions []string
	CustomHeaders map[string]string
	Secret        string
	Created       time.Time
}

// Server is the fake.
type Server struct {
	core.Core
	mu       sync.Mutex
	seq      int
	accounts map[string]map[string]*Webhook // email -> id -> webhook
}

// New returns an empty fake.
func New() *Server { return &Server{accounts: map[string]map[string]*Webhook{}} }

// Start serves the fake on 127.0.0.1; the base URL is followed by /api/v2.
func (s *Server) Start() (baseURL string, stop func()) { return core.Start(s.Handler()) }

// Handler is the fake's HTTP handler.
func (s *Server) Handler() http.Handler { return s.Wrap(http.HandlerFunc(s.serve)) }

// Seed adds a webhook as an admin in Zendesk's UI would, and returns its id.
func (s *Server) Seed(email string, w Webhook) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.ID = s.newID()
	if w.Secret == "" {
		w.Secret = newSecret()
	}
	if w.Status == "" {
		w.Status = "active"
	}
	if w.HTTPMethod == "" {
		w.HTTPMethod, w.RequestFormat = "POST", "json"
	}
	if w.Name == "" {
		w.Name = "made by hand"
	}
	w.Created = time.Now().UTC()
	s.account(email)[w.ID] = &w
	return w.ID
}

// Webhooks returns an account's webhooks, by id.
func (s *Server) Webhooks(email string) []Webhook {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Webhook
	for _, w := range s.accounts[email] {
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *Server) account(email string) map[string]*Webhook {
	if s.accounts[email] == nil {
		s.accounts[email] = map[string]*Webhook{}
	}
	return s.accounts[email]
}

// newID is ULID-like: 26 upper-case characters, sortable by creation.
func (s *Server) newID() string {
	s.seq++
	return "01H" + strings.ToUpper(strconv.FormatInt(time.Now().UnixMilli(), 36)) + "Z" + leftPad(strconv.Itoa(s.seq), 14)
}

func leftPad(v string, n int) string {
	for len(v) < n {
		v = "0" + v
	}
	return v
}

func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func errorsBody(w http.ResponseWriter, status int, code, title string) {
	core.JSON(w, status, map[string]any{"errors": []map[string]string{{"code": code, "title": title}}})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	user, pass, ok := r.BasicAuth()
	email, isToken := strings.CutSuffix(user, "/token")
	if !ok || !isToken || email == "" || pass == "" {
		core.JSON(w, http.StatusUnauthorized, map[string]string{"error": "Couldn't authenticate you"})
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v2/webhooks")
	if !ok {
		errorsBody(w, http.StatusNotFound, "NotFound", "Not found")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	hooks := s.account(email)
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	switch {
	case rest == "" || rest == "/":
		switch r.Method {
		case http.MethodGet:
			s.list(w, r, hooks)
		case http.MethodPost:
			s.create(w, r, hooks)
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
		return
	case len(parts) > 2 || (len(parts) == 2 && parts[1] != "signing_secret"):
		errorsBody(w, http.StatusNotFound, "NotFound", "Not found")
		return
	}
	h := hooks[parts[0]]
	if h == nil {
		errorsBody(w, http.StatusNotFound, "RecordNotFound", "Webhook not found")
		return
	}
	if len(parts) == 2 {
		switch r.Method {
		case http.MethodGet:
			core.JSON(w, http.StatusOK, map[string]any{"signing_secret": map[string]string{"algorithm": "SHA256", "secret": h.Secret}})
		case http.MethodPost:
			h.Secret = newSecret()
			core.JSON(w, http.StatusCreated, map[string]any{"signing_secret": map[string]string{"algorithm": "SHA256", "secret": h.Secret}})
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
		return
	}
	switch r.Method {
	case http.MethodGet:
		core.JSON(w, http.StatusOK, map[string]any{"webhook": h.json()})
	case http.MethodPut:
		s.update(w, r, h, true)
	case http.MethodPatch:
		s.update(w, r, h, false)
	case http.MethodDelete:
		delete(hooks, h.ID)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (h *Webhook) json() map[string]any {
	m := map[string]any{
		"id": h.ID, "name": h.Name, "status": h.Status, "endpoint": h.Endpoint,
		"http_method": h.HTTPMethod, "request_format": h.RequestFormat,
		"subscriptions": h.Subscriptions, "created_at": h.Created.Format(time.RFC3339),
		"created_by": "1", "updated_at": h.Created.Format(time.RFC3339), "updated_by": "1",
	}
	if h.Description != "" {
		m["description"] = h.Description
	}
	if h.CustomHeaders != nil {
		m["custom_headers"] = h.CustomHeaders
	}
	return m
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, hooks map[string]*Webhook) {
	q := r.URL.Query()
	size := 100
	if v, err := strconv.Atoi(q.Get("page[size]")); err == nil && v > 0 {
		size = min(v, 100)
	}
	ids := make([]string, 0, len(hooks))
	for id := range hooks {
		ids = append(ids, id)
	}
	page, more := core.CursorPage(ids, q.Get("page[after]"), size)
	out := []map[string]any{}
	for _, id := range page {
		out = append(out, hooks[id].json())
	}
	meta := map[string]any{"has_more": more, "after_cursor": nil, "before_cursor": nil}
	links := map[string]any{"next": nil, "prev": nil}
	if len(page) > 0 {
		last := page[len(page)-1]
		meta["after_cursor"], meta["before_cursor"] = last, page[0]
		if more {
			links["next"] = "http://" + r.Host + r.URL.Path + "?page[after]=" + last + "&page[size]=" + strconv.Itoa(size)
		}
	}
	core.JSON(w, http.StatusOK, map[string]any{"webhooks": out, "meta": meta, "links": links})
}

func badRequest(w http.ResponseWriter, msg string) {
	errorsBody(w, http.StatusBadRequest, "InvalidValue", msg)
}

const conditional = "conditional_ticket_events"

// apply copies body onto h; full requires every required field (create, PUT).
func apply(h *Webhook, body map[string]any, full bool) string {
	for _, k := range []string{"name", "status", "endpoint", "http_method", "request_format"} {
		v, present := body[k]
		s, isString := v.(string)
		if !present {
			if full {
				return k + " is required"
			}
			continue
		}
		if !isString || s == "" {
			return k + " must be a non-empty string"
		}
		switch k {
		case "name":
			h.Name = s
		case "status":
			if s != "active" && s != "inactive" {
				return "status must be active or inactive"
			}
			h.Status = s
		case "endpoint":
			if !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
				return "endpoint is not a URL"
			}
			h.Endpoint = s
		case "http_method":
			h.HTTPMethod = s
		case "request_format":
			h.RequestFormat = s
		}
	}
	if v, ok := body["description"]; ok {
		h.Description, _ = v.(string)
	} else if full {
		h.Description = ""
	}
	if v, ok := body["subscriptions"]; ok {
		subs, ok := core.Strings(v)
		if !ok {
			return "subscriptions must be an array of strings"
		}
		h.Subscriptions = subs
	} else if full {
		h.Subscriptions = nil
	}
	if v, ok := body["custom_headers"]; ok {
		m, ok := v.(map[string]any)
		if !ok {
			return "custom_headers must be an object"
		}
		h.CustomHeaders = map[string]string{}
		for k, val := range m {
			h.CustomHeaders[k], _ = val.(string)
		}
	} else if full {
		h.CustomHeaders = nil
	}
	for _, sub := range h.Subscriptions {
		if sub == conditional {
			if len(h.Subscriptions) != 1 {
				return "conditional_ticket_events must be the only subscription"
			}
			continue
		}
		if !strings.HasPrefix(sub, "zen:event-type:") {
			return "unknown subscription " + sub
		}
		if h.HTTPMethod != "POST" || h.RequestFormat != "json" {
			return "event subscriptions need http_method POST and request_format json"
		}
	}
	return ""
}

func connection(subs []string) string {
	if len(subs) == 1 && subs[0] == conditional {
		return "trigger"
	}
	if len(subs) == 0 {
		return ""
	}
	return "event"
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, hooks map[string]*Webhook) {
	env, ok := core.Decode(w, r, badRequest)
	if !ok {
		return
	}
	body, ok := env["webhook"].(map[string]any)
	if !ok {
		badRequest(w, "webhook is required")
		return
	}
	h := &Webhook{Created: time.Now().UTC(), Secret: newSecret()}
	if msg := apply(h, body, true); msg != "" {
		badRequest(w, msg)
		return
	}
	h.ID = s.newID()
	hooks[h.ID] = h
	core.JSON(w, http.StatusCreated, map[string]any{"webhook": h.json()})
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, h *Webhook, full bool) {
	env, ok := core.Decode(w, r, badRequest)
	if !ok {
		return
	}
	body, ok := env["webhook"].(map[string]any)
	if !ok {
		badRequest(w, "webhook is required")
		return
	}
	next := *h
	if msg := apply(&next, body, full); msg != "" {
		badRequest(w, msg)
		return
	}
	if a, b := connection(h.Subscriptions), connection(next.Subscriptions); a != "" && b != "" && a != b {
		badRequest(w, "You can't change an existing webhook's connection method")
		return
	}
	*h = next
	w.WriteHeader(http.StatusNoContent)
}
