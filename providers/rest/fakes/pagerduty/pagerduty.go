// Package pagerduty is a stateful, in-process fake of PagerDuty's v3 webhook subscriptions
// API, built from PagerDuty's OpenAPI (reference/REST/openapiv3.json) and developer docs as
// summarised in REST-PROVIDERS.md §4:
//
//   - Auth: Authorization: Token token=<key>; each key is one account. Every request must
//     send Accept: application/vnd.pagerduty+json;version=2 (marked required); without it
//     the fake answers 406.
//   - GET /webhook_subscriptions pages with limit (default 25, at most 100) and offset
//     (offset+limit at most 10000, else 400), answering {webhook_subscriptions, limit,
//     offset, more, total: null}.
//   - POST /webhook_subscriptions {webhook_subscription: {type: "webhook_subscription",
//     delivery_method: {type: "http_delivery_method", url, custom_headers?}, events (at least
//     one, unique), filter: {type, id (except account_reference)}, description?, active?}}
//     answers 200 (not 201) with delivery_method.secret: the only time the secret is shown.
//   - GET shows secret null and custom header values "-- redacted --".
//   - PUT takes description, events, filter and active only: delivery_method cannot be
//     updated (400). Answers 200 with the subscription.
//   - DELETE answers 204; unknown ids 404. POST /{id}/ping answers 202.
//   - delivery_method.temporarily_disabled is what Subscription.TemporarilyDisabled says (set
//     it with Edit, as PagerDuty does after 3 consecutive dropped webhooks); POST /{id}/enable
//     clears it and answers 200 with the subscription.
//   - Errors are {"error": {"message", "code"}}.
package pagerduty

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
)

// Accept is the media type every request must accept.
const Accept = "application/vnd.pagerduty+json;version=2"

// Subscription is one webhook subscription as the fake stores it.
type Subscription struct {
	ID            string
	URL           string
	CustomHeaders []Header
	Secret        string
	Events        []string
	FilterType    string
	FilterID      string
	Description   string
	Active        bool
	Pings         int
	// TemporarilyDisabled is delivery_method.temporarily_disabled: PagerDuty sets it after 3
	// consecutive dropped webhooks (for 24 h, its queue dropped); POST /{id}/enable clears it.
	TemporarilyDisabled bool
	Enables             int
}

// Header is one custom header.
type Header struct{ Name, Value string }

// Server is the fake.
type Server struct {
	core.Core
	mu       sync.Mutex
	seq      int
	accounts map[string]map[string]*Subscription
	order    map[string][]string // creation order per account: offsets are stable
}

// New returns an empty fake.
func New() *Server {
	return &Server{accounts: map[string]map[string]*Subscription{}, order: map[string][]string{}}
}

// Start serves the fake on 127.0.0.1 (the API root).
func (s *Server) Start() (baseURL string, stop func()) { return core.Start(s.Handler()) }

// Handler is the fake's HTTP handler.
func (s *Server) Handler() http.Handler { return s.Wrap(http.HandlerFunc(s.serve)) }

// Seed adds a subscription as a user in PagerDuty's UI would, and returns its id.
func (s *Server) Seed(key string, sub Subscription) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub.FilterType == "" {
		sub.FilterType = "account_reference"
	}
	sub.Active = true
	return s.add(key, &sub)
}

// Remove deletes a subscription as a user in PagerDuty's UI would; it reports whether it
// existed.
func (s *Server) Remove(key, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.accounts[key][id] == nil {
		return false
	}
	delete(s.accounts[key], id)
	return true
}

// Edit changes a subscription out of band, any field (the delivery URL too, which the API
// cannot change); it reports whether the subscription exists.
func (s *Server) Edit(key, id string, fn func(sub *Subscription)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := s.accounts[key][id]
	if sub == nil {
		return false
	}
	fn(sub)
	sub.ID = id
	return true
}

// Subscriptions returns an account's subscriptions in creation order.
func (s *Server) Subscriptions(key string) []Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Subscription
	for _, id := range s.order[key] {
		if sub := s.accounts[key][id]; sub != nil {
			out = append(out, *sub)
		}
	}
	return out
}

func (s *Server) add(key string, sub *Subscription) string {
	s.seq++
	sub.ID = "P" + strings.ToUpper(strconv.FormatInt(int64(100000+s.seq), 36))
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	sub.Secret = hex.EncodeToString(b)
	if s.accounts[key] == nil {
		s.accounts[key] = map[string]*Subscription{}
	}
	s.accounts[key][sub.ID] = sub
	s.order[key] = append(s.order[key], sub.ID)
	return sub.ID
}

func pdError(w http.ResponseWriter, status, code int, msg string) {
	core.JSON(w, status, map[string]any{"error": map[string]any{"message": msg, "code": code}})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Token token=")
	if !ok || key == "" {
		pdError(w, http.StatusUnauthorized, 2006, "Authentication failed")
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), Accept) {
		pdError(w, http.StatusNotAcceptable, 2001, "Accept must be "+Accept)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/webhook_subscriptions")
	if !ok {
		pdError(w, http.StatusNotFound, 2100, "Not Found")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	subs := s.accounts[key]
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	if rest == "" || rest == "/" {
		switch r.Method {
		case http.MethodGet:
			s.list(w, r, key)
		case http.MethodPost:
			s.create(w, r, key)
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
		return
	}
	sub := subs[parts[0]]
	if sub == nil || len(parts) > 2 {
		pdError(w, http.StatusNotFound, 2100, "Not Found")
		return
	}
	if len(parts) == 2 {
		switch {
		case parts[1] == "ping" && r.Method == http.MethodPost:
			sub.Pings++
			w.WriteHeader(http.StatusAccepted)
		case parts[1] == "enable" && r.Method == http.MethodPost:
			sub.TemporarilyDisabled = false
			sub.Enables++
			core.JSON(w, http.StatusOK, map[string]any{"webhook_subscription": sub.json(false)})
		default:
			pdError(w, http.StatusNotFound, 2100, "Not Found")
		}
		return
	}
	switch r.Method {
	case http.MethodGet:
		core.JSON(w, http.StatusOK, map[string]any{"webhook_subscription": sub.json(false)})
	case http.MethodPut:
		s.update(w, r, sub)
	case http.MethodDelete:
		delete(subs, sub.ID)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (sub *Subscription) json(withSecret bool) map[string]any {
	headers := []map[string]string{}
	for _, h := range sub.CustomHeaders {
		v := "-- redacted --"
		if withSecret {
			v = h.Value
		}
		headers = append(headers, map[string]string{"name": h.Name, "value": v})
	}
	var secret any
	if withSecret {
		secret = sub.Secret
	}
	filter := map[string]any{"type": sub.FilterType}
	if sub.FilterID != "" {
		filter["id"] = sub.FilterID
	}
	return map[string]any{
		"id": sub.ID, "type": "webhook_subscription", "active": sub.Active,
		"description": sub.Description, "events": sub.Events, "filter": filter,
		"delivery_method": map[string]any{
			"id": "PDM" + sub.ID, "type": "http_delivery_method", "url": sub.URL,
			"secret": secret, "temporarily_disabled": sub.TemporarilyDisabled, "custom_headers": headers,
		},
	}
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, key string) {
	q := r.URL.Query()
	limit, offset := 25, 0
	if v, err := strconv.Atoi(q.Get("limit")); err == nil && v > 0 {
		limit = min(v, 100)
	}
	if v, err := strconv.Atoi(q.Get("offset")); err == nil && v >= 0 {
		offset = v
	}
	if offset+limit > 10000 {
		pdError(w, http.StatusBadRequest, 2001, "Offset must be less than 10000 - limit")
		return
	}
	var ids []string
	for _, id := range s.order[key] {
		if s.accounts[key][id] != nil {
			ids = append(ids, id)
		}
	}
	out := []map[string]any{}
	for i := offset; i < min(offset+limit, len(ids)); i++ {
		out = append(out, s.accounts[key][ids[i]].json(false))
	}
	core.JSON(w, http.StatusOK, map[string]any{"webhook_subscriptions": out, "limit": limit, "offset": offset, "more": offset+limit < len(ids), "total": nil})
}

func badRequest(w http.ResponseWriter, msg string) { pdError(w, http.StatusBadRequest, 2001, msg) }

// applyCommon reads the fields create and update share.
func applyCommon(sub *Subscription, body map[string]any, required bool) string {
	if v, ok := body["events"]; ok || required {
		evs, ok := core.Strings(v)
		if !ok || len(evs) == 0 {
			return "events must be a non-empty array of strings"
		}
		sorted := slices.Sorted(slices.Values(evs))
		if len(slices.Compact(sorted)) != len(evs) {
			return "events must be unique"
		}
		sub.Events = evs
	}
	if v, ok := body["filter"]; ok || required {
		f, ok := v.(map[string]any)
		if !ok {
			return "filter is required"
		}
		typ, _ := core.Str(f, "type")
		id, _ := core.Str(f, "id")
		switch typ {
		case "account_reference":
		case "service_reference", "team_reference":
			if id == "" {
				return "filter.id is required for " + typ
			}
		default:
			return "filter.type must be account_reference, service_reference or team_reference"
		}
		sub.FilterType, sub.FilterID = typ, id
	}
	if v, ok := body["description"]; ok {
		sub.Description, _ = v.(string)
	}
	if v, ok := core.Bool(body, "active"); ok {
		sub.Active = v
	}
	return ""
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, key string) {
	env, ok := core.Decode(w, r, badRequest)
	if !ok {
		return
	}
	body, ok := env["webhook_subscription"].(map[string]any)
	if !ok {
		badRequest(w, "webhook_subscription is required")
		return
	}
	if typ, _ := core.Str(body, "type"); typ != "webhook_subscription" {
		badRequest(w, "type must be webhook_subscription")
		return
	}
	dm, ok := body["delivery_method"].(map[string]any)
	if !ok {
		badRequest(w, "delivery_method is required")
		return
	}
	if typ, _ := core.Str(dm, "type"); typ != "http_delivery_method" {
		badRequest(w, "delivery_method.type must be http_delivery_method")
		return
	}
	u, _ := core.Str(dm, "url")
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		badRequest(w, "delivery_method.url must be a URL")
		return
	}
	sub := &Subscription{URL: u, Active: true}
	if hs, ok := dm["custom_headers"].([]any); ok {
		for _, h := range hs {
			if m, ok := h.(map[string]any); ok {
				n, _ := core.Str(m, "name")
				v, _ := core.Str(m, "value")
				sub.CustomHeaders = append(sub.CustomHeaders, Header{n, v})
			}
		}
	}
	if msg := applyCommon(sub, body, true); msg != "" {
		badRequest(w, msg)
		return
	}
	s.add(key, sub)
	core.JSON(w, http.StatusOK, map[string]any{"webhook_subscription": sub.json(true)})
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, sub *Subscription) {
	env, ok := core.Decode(w, r, badRequest)
	if !ok {
		return
	}
	body, ok := env["webhook_subscription"].(map[string]any)
	if !ok {
		badRequest(w, "webhook_subscription is required")
		return
	}
	if _, ok := body["delivery_method"]; ok {
		badRequest(w, "delivery_method cannot be updated; delete and recreate the subscription")
		return
	}
	next := *sub
	if msg := applyCommon(&next, body, false); msg != "" {
		badRequest(w, msg)
		return
	}
	*sub = next
	core.JSON(w, http.StatusOK, map[string]any{"webhook_subscription": sub.json(false)})
}
