// Package svix is a stateful, in-process fake of Svix's endpoint API, built from Svix's
// OpenAPI (codegen/lib-openapi.json) and its generated models as summarised in
// REST-PROVIDERS.md §6, with one correction from Svix's own models: the event filter field is
// filterTypes (EndpointIn/EndpointOut/EndpointPatch), not eventTypes.
//
//   - Auth: Authorization: Bearer <token>; each token is one organisation, whose applications
//     exist once added (AddApp). {app_id} is the application's id or uid.
//   - GET /api/v1/app/{app_id}/endpoint?limit=(1..250, default 50)&iterator= answers {data,
//     iterator, prevIterator, done}.
//   - POST creates (201 EndpointOut: id ep_ + 27 characters, url, description (default ""),
//     filterTypes (absent: every event type), disabled, metadata (always an object),
//     createdAt, updatedAt, version); Idempotency-Key replays the first answer for 12 hours.
//   - {endpoint_id} is the endpoint's id or uid. GET answers EndpointOut; PUT upserts (all
//     omitted fields fall back to defaults); PATCH changes what it names (null clears);
//     DELETE answers 204; unknown endpoints 404.
//   - The secret is generated unless given (whsec_ + base64): GET .../secret answers {key},
//     POST .../secret/rotate answers 204.
//   - Errors are {"code", "detail"}.
package svix

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
)

// Endpoint is one endpoint as the fake stores it.
type Endpoint struct {
	ID          string
	UID         string
	URL         string
	Description string
	// FilterTypes nil means every event type.
	FilterTypes []string
	Disabled    bool
	Metadata    map[string]string
	Secret      string
	Created     time.Time
}

type replay struct {
	status int
	body   []byte
}

// Server is the fake.
type Server struct {
	core.Core
	// Clock is the fake's time: creation, message times and recover's since.
	Clock    fakeapi.Clock
	http     *http.Client
	mu       sync.Mutex
	seq      int
	apps     map[string]map[string]map[string]*Endpoint // token -> app -> id -> endpoint
	idem     map[string]replay
	messages map[string][]Message // token/app -> messages, oldest first
	attempts []Attempt
}

// New returns an empty fake.
func New() *Server {
	return &Server{apps: map[string]map[string]map[string]*Endpoint{}, idem: map[string]replay{}, messages: map[string][]Message{},
		// Svix waits 15 s for an answer; 3xx is a failure, so redirects are not followed.
		http: &http.Client{Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Start serves the fake on 127.0.0.1 (the API root, before /api/v1).
func (s *Server) Start() (baseURL string, stop func()) { return core.Start(s.Handler()) }

// Handler is the fake's HTTP handler.
func (s *Server) Handler() http.Handler { return s.Wrap(http.HandlerFunc(s.serve)) }

// AddApp creates an application for a token.
func (s *Server) AddApp(token, app string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.apps[token] == nil {
		s.apps[token] = map[string]map[string]*Endpoint{}
	}
	if s.apps[token][app] == nil {
		s.apps[token][app] = map[string]*Endpoint{}
	}
}

// Seed adds an endpoint as a user in the Svix portal would, and returns its id.
func (s *Server) Seed(token, app string, e Endpoint) string {
	s.AddApp(token, app)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.add(s.apps[token][app], &e)
	return e.ID
}

// Endpoints returns an app's endpoints, by id.
func (s *Server) Endpoints(token, app string) []Endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Endpoint
	for _, e := range s.apps[token][app] {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

const idChars = "0123456789ABCDEFGHJKMNPQRSTVWXYZabcdefghijkmnopqrstuvwxyz"

func (s *Server) add(eps map[string]*Endpoint, e *Endpoint) {
	s.seq++
	n := s.seq
	var b strings.Builder
	for range 27 {
		b.WriteByte(idChars[n%len(idChars)])
		n /= len(idChars)
	}
	// Sortable by creation: a zero-padded sequence first.
	e.ID = "ep_" + leftPad(strconv.Itoa(s.seq), 10) + b.String()[:17]
	if e.Secret == "" {
		e.Secret = newSecret()
	}
	if e.Metadata == nil {
		e.Metadata = map[string]string{}
	}
	if e.Created.IsZero() {
		e.Created = s.Clock.Now().UTC()
	}
	eps[e.ID] = e
}

func leftPad(v string, n int) string {
	for len(v) < n {
		v = "0" + v
	}
	return v
}

func newSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func svixError(w http.ResponseWriter, status int, code, detail string) {
	core.JSON(w, status, map[string]string{"code": code, "detail": detail})
}

var endpointPath = regexp.MustCompile(`^/api/v1/app/([^/]+)/endpoint(?:/([^/]+))?(/secret(?:/rotate)?|/recover)?/?$`)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		svixError(w, http.StatusUnauthorized, "authentication_failed", "Invalid token")
		return
	}
	m := endpointPath.FindStringSubmatch(r.URL.Path)
	if m == nil {
		svixError(w, http.StatusNotFound, "not_found", "Entity not found")
		return
	}
	s.mu.Lock()
	locked := true
	defer func() {
		if locked {
			s.mu.Unlock()
		}
	}()
	eps := s.apps[token][m[1]]
	if eps == nil {
		svixError(w, http.StatusNotFound, "not_found", "Application not found")
		return
	}
	if m[2] == "" {
		switch r.Method {
		case http.MethodGet:
			s.list(w, r, eps)
		case http.MethodPost:
			s.create(w, r, token+"/"+m[1], eps)
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
		return
	}
	e := find(eps, m[2])
	if m[3] == "" && r.Method == http.MethodPut {
		s.upsert(w, r, eps, e, m[2])
		return
	}
	if e == nil {
		svixError(w, http.StatusNotFound, "not_found", "Endpoint not found")
		return
	}
	switch {
	case m[3] == "/recover" && r.Method == http.MethodPost:
		locked = false // recover releases the lock while it delivers
		s.recover(w, r, token+"/"+m[1], e)
	case m[3] == "/secret" && r.Method == http.MethodGet:
		core.JSON(w, http.StatusOK, map[string]string{"key": e.Secret})
	case m[3] == "/secret/rotate" && r.Method == http.MethodPost:
		body, _ := decode(r)
		if k, ok := body["key"].(string); ok && k != "" {
			e.Secret = k
		} else {
			e.Secret = newSecret()
		}
		w.WriteHeader(http.StatusNoContent)
	case m[3] != "":
		w.WriteHeader(http.StatusMethodNotAllowed)
	case r.Method == http.MethodGet:
		core.JSON(w, http.StatusOK, e.json())
	case r.Method == http.MethodPatch:
		s.patch(w, r, e)
	case r.Method == http.MethodDelete:
		delete(eps, e.ID)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func find(eps map[string]*Endpoint, idOrUID string) *Endpoint {
	if e := eps[idOrUID]; e != nil {
		return e
	}
	for _, e := range eps {
		if e.UID != "" && e.UID == idOrUID {
			return e
		}
	}
	return nil
}

func (e *Endpoint) json() map[string]any {
	m := map[string]any{
		"id": e.ID, "url": e.URL, "description": e.Description, "disabled": e.Disabled,
		"metadata": e.Metadata, "createdAt": e.Created.Format(time.RFC3339), "updatedAt": e.Created.Format(time.RFC3339),
		"version": 1,
	}
	if e.UID != "" {
		m["uid"] = e.UID
	}
	if e.FilterTypes != nil {
		m["filterTypes"] = e.FilterTypes
	}
	return m
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, eps map[string]*Endpoint) {
	q := r.URL.Query()
	limit := 50
	if v, err := strconv.Atoi(q.Get("limit")); err == nil {
		if v < 1 || v > 250 {
			svixError(w, http.StatusUnprocessableEntity, "validation", "limit must be between 1 and 250")
			return
		}
		limit = v
	}
	ids := make([]string, 0, len(eps))
	for id := range eps {
		ids = append(ids, id)
	}
	page, more := core.CursorPage(ids, q.Get("iterator"), limit)
	data := []map[string]any{}
	for _, id := range page {
		data = append(data, eps[id].json())
	}
	var iterator any
	if len(page) > 0 {
		iterator = page[len(page)-1]
	}
	core.JSON(w, http.StatusOK, map[string]any{"data": data, "iterator": iterator, "prevIterator": nil, "done": !more})
}

func decode(r *http.Request) (map[string]any, bool) {
	var m map[string]any
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

var secretPattern = regexp.MustCompile(`^(whsec_)?[a-zA-Z0-9+/=]{32,100}$`)

// apply sets the fields of body on e; patch leaves absent fields alone, otherwise they fall
// back to defaults.
func apply(e *Endpoint, body map[string]any, patch bool) string {
	if v, ok := body["url"]; ok || !patch {
		u, _ := v.(string)
		if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			return "url: invalid URL"
		}
		e.URL = u
	}
	if v, ok := body["description"]; ok || !patch {
		e.Description, _ = v.(string)
	}
	if v, ok := body["filterTypes"]; ok || !patch {
		if v == nil {
			e.FilterTypes = nil
		} else if fts, ok := core.Strings(v); ok && len(fts) > 0 {
			e.FilterTypes = fts
		} else {
			return "filterTypes: must be a non-empty array of strings or null"
		}
	}
	if v, ok := body["disabled"]; ok || !patch {
		e.Disabled, _ = v.(bool)
	}
	if v, ok := body["metadata"]; ok || !patch {
		md := map[string]string{}
		if mm, ok := v.(map[string]any); ok {
			for k, val := range mm {
				sv, ok := val.(string)
				if !ok {
					return "metadata: values must be strings"
				}
				md[k] = sv
			}
		}
		e.Metadata = md
	}
	if v, ok := body["uid"]; ok || !patch {
		e.UID, _ = v.(string)
	}
	return ""
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, scope string, eps map[string]*Endpoint) {
	key := r.Header.Get("Idempotency-Key")
	if key != "" {
		if rp, ok := s.idem[scope+"/"+key]; ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rp.status)
			_, _ = w.Write(rp.body)
			return
		}
	}
	body, ok := decode(r)
	if !ok {
		svixError(w, http.StatusUnprocessableEntity, "validation", "body is not a JSON object")
		return
	}
	e := &Endpoint{}
	if msg := apply(e, body, false); msg != "" {
		svixError(w, http.StatusUnprocessableEntity, "validation", msg)
		return
	}
	if sec, ok := body["secret"].(string); ok && sec != "" {
		if !secretPattern.MatchString(sec) {
			svixError(w, http.StatusUnprocessableEntity, "validation", "secret: invalid format")
			return
		}
		e.Secret = sec
	}
	if e.UID != "" && find(eps, e.UID) != nil {
		svixError(w, http.StatusConflict, "conflict", "An endpoint with this uid already exists")
		return
	}
	s.add(eps, e)
	out, _ := json.Marshal(e.json())
	if key != "" {
		s.idem[scope+"/"+key] = replay{http.StatusCreated, out}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(out)
}

func (s *Server) upsert(w http.ResponseWriter, r *http.Request, eps map[string]*Endpoint, e *Endpoint, idOrUID string) {
	body, ok := decode(r)
	if !ok {
		svixError(w, http.StatusUnprocessableEntity, "validation", "body is not a JSON object")
		return
	}
	status := http.StatusOK
	if e == nil {
		e = &Endpoint{}
		if _, has := body["uid"]; !has {
			body["uid"] = idOrUID
		}
		status = http.StatusCreated
	}
	next := *e
	if msg := apply(&next, body, false); msg != "" {
		svixError(w, http.StatusUnprocessableEntity, "validation", msg)
		return
	}
	if status == http.StatusCreated {
		s.add(eps, &next)
	}
	*e = next
	core.JSON(w, status, e.json())
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request, e *Endpoint) {
	body, ok := decode(r)
	if !ok {
		svixError(w, http.StatusUnprocessableEntity, "validation", "body is not a JSON object")
		return
	}
	next := *e
	if msg := apply(&next, body, true); msg != "" {
		svixError(w, http.StatusUnprocessableEntity, "validation", msg)
		return
	}
	*e = next
	core.JSON(w, http.StatusOK, e.json())
}
