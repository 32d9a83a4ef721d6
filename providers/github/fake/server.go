package fake

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
)

const (
	maxBodyBytes = 1 << 20
	// enterprisePrefix is where GitHub Enterprise Server serves the REST API; the fake accepts
	// it too, so a client configured for https://HOST/api/v3 can be tested.
	enterprisePrefix = "/api/v3"
	apiVersion       = "2022-11-28"
	docsRoot         = "https://docs.github.com/rest"
)

// result is a complete response.
type result struct {
	status int
	body   []byte
	header http.Header
	// rateLimited marks primary and secondary rate-limit refusals (for the log).
	rateLimited bool
	// jobs are deliveries to make once the lock is released (pings, redeliveries).
	jobs []job
}

func (r *result) set(k, v string) {
	if r.header == nil {
		r.header = http.Header{}
	}
	r.header.Set(k, v)
}

// route is what a request path addresses.
type route struct {
	prefix string // "" or "/api/v3", as sent
	path   string // the path without prefix
	kind   string // KindRepository, KindOrganization, "" when not a hook route
	owner  string
	repo   string
	hookID int64 // 0 for the collection
	pings  bool
	// deliveries: .../hooks/{id}/deliveries; deliveryID names one of them, attempts its
	// .../attempts.
	deliveries bool
	deliveryID int64
	attempts   bool
	op         string
}

func (rt route) key() string {
	if rt.kind == KindApp {
		return "app" // which App, the JWT says
	}
	return targetKey(rt.kind, rt.owner, rt.repo)
}

// meterRoute names a request for the meter's counters: the hook route with its owner,
// repository and hook id taken out, or the path as sent for anything else.
func (rt route) meterRoute(method string) fakeapi.Route {
	if rt.op == "" || rt.kind == KindApp {
		return fakeapi.Route{Method: method, Pattern: rt.path}
	}
	p := "/repos/{owner}/{repo}/hooks"
	if rt.kind == KindOrganization {
		p = "/orgs/{org}/hooks"
	}
	if rt.hookID != 0 {
		p += "/{id}"
	}
	switch {
	case rt.pings:
		p += "/pings"
	case rt.deliveries:
		p += "/deliveries"
		if rt.deliveryID != 0 {
			p += "/{delivery_id}"
		}
		if rt.attempts {
			p += "/attempts"
		}
	}
	return fakeapi.Route{Method: method, Pattern: p}
}

func parseRoute(method, p string) route {
	var rt route
	if len(p) >= len(enterprisePrefix) && strings.EqualFold(p[:len(enterprisePrefix)], enterprisePrefix) {
		rt.prefix, p = p[:len(enterprisePrefix)], p[len(enterprisePrefix):]
	}
	rt.path = p
	if parseAppRoute(method, p, &rt) || strings.HasPrefix(p, "/app") {
		return rt
	}
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	var rest []string
	switch {
	case len(segs) >= 4 && strings.EqualFold(segs[0], "repos") && strings.EqualFold(segs[3], "hooks") && segs[1] != "" && segs[2] != "":
		rt.kind, rt.owner, rt.repo, rest = KindRepository, segs[1], segs[2], segs[4:]
	case len(segs) >= 3 && strings.EqualFold(segs[0], "orgs") && strings.EqualFold(segs[2], "hooks") && segs[1] != "":
		rt.kind, rt.owner, rest = KindOrganization, segs[1], segs[3:]
	default:
		return rt
	}
	if len(rest) > 0 {
		id, err := strconv.ParseInt(rest[0], 10, 64)
		if err != nil || id <= 0 || !hookSubroute(&rt, rest[1:]) {
			rt.kind = ""
			return rt
		}
		rt.hookID = id
	}
	sub := rt.pings || rt.deliveries
	switch {
	case rt.hookID == 0 && method == http.MethodGet:
		rt.op = OpList
	case rt.hookID == 0 && method == http.MethodPost:
		rt.op = OpCreate
	case rt.pings && method == http.MethodPost:
		rt.op = OpPing
	case rt.deliveries && rt.deliveryID == 0 && method == http.MethodGet:
		rt.op = OpDeliveries
	case rt.deliveries && rt.deliveryID != 0 && !rt.attempts && method == http.MethodGet:
		rt.op = OpDelivery
	case rt.attempts && method == http.MethodPost:
		rt.op = OpRedeliver
	case rt.hookID != 0 && !sub && method == http.MethodGet:
		rt.op = OpGet
	case rt.hookID != 0 && !sub && method == http.MethodPatch:
		rt.op = OpUpdate
	case rt.hookID != 0 && !sub && method == http.MethodDelete:
		rt.op = OpDelete
	}
	return rt
}

// hookSubroute reads what follows .../hooks/{id}: nothing, pings, deliveries,
// deliveries/{delivery_id} or deliveries/{delivery_id}/attempts; false for anything else.
func hookSubroute(rt *route, rest []string) bool {
	switch {
	case len(rest) == 0:
		return true
	case len(rest) == 1 && strings.EqualFold(rest[0], "pings"):
		rt.pings = true
		return true
	case !strings.EqualFold(rest[0], "deliveries") || len(rest) > 3:
		return false
	}
	rt.deliveries = true
	if len(rest) == 1 {
		return true
	}
	id, err := strconv.ParseInt(rest[1], 10, 64)
	if err != nil || id <= 0 {
		return false
	}
	rt.deliveryID = id
	if len(rest) == 3 {
		if !strings.EqualFold(rest[2], "attempts") {
			return false
		}
		rt.attempts = true
	}
	return true
}

// ServeHTTP implements the GitHub API surface described in the package comment.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cred, hasAuth := credential(r)
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	rt := parseRoute(r.Method, r.URL.Path)
	rec := Request{
		Time:        s.now(),
		Token:       TokenLabel(cred),
		Method:      r.Method,
		Path:        r.URL.Path,
		Query:       r.URL.Query(),
		Body:        maskBody(body),
		UserAgent:   r.Header.Get("User-Agent"),
		Op:          rt.op,
		Conditional: r.Header.Get("If-None-Match") != "",
	}
	if rt.op != "" {
		rec.Target = rt.key()
	}
	if rt.op == OpList {
		rec.Page = 1
		if n, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && n > 0 {
			rec.Page = n
		}
	}
	taken := s.faults.Take(r.Method, rt.path)
	var chaos fakeapi.Decision
	if taken.Fail == nil && taken.Latency == 0 {
		chaos = s.chaos.Decide()
		if chaos.Kind != "" {
			rec.Chaos = chaos.String()
		}
	}
	// Metered after chaos chose: a chaos fault answers as it would have, and is still counted.
	taken = fakeapi.Metered(s.meter, taken, cred, rt.meterRoute(r.Method), func(wait time.Duration) *Fault {
		f := SecondaryLimit(s.limitStatus, max(wait, time.Second))
		return &f
	})

	logged := false
	apply := func() result {
		// The log entry is added under the same lock as the state change, so a test that sees
		// the change (Hooks) and then resets the log never finds the request logged afterwards.
		s.mu.Lock()
		res := s.handle(r, cred, hasAuth, rt, body)
		if rt.kind == KindApp && rt.op != "" {
			rec.Target = s.appTarget(cred)
		}
		final := res
		if taken.Fail != nil { // AfterApply: the client gets the fault instead
			final = result{status: taken.Fail.Status, rateLimited: taken.Fail.Secondary}
		}
		if chaos.Kind == fakeapi.ChaosTimeout { // held after this until the client gives up
			final = result{status: fakeapi.StatusClientGone}
		} else if chaos.Kind != "" {
			f := chaosFault(chaos)
			final = result{status: f.Status, rateLimited: f.Secondary}
		}
		rec.Status, rec.NotModified, rec.RateLimited = final.status, final.status == http.StatusNotModified, final.rateLimited
		s.requests.Add(rec)
		logged = true
		s.mu.Unlock()
		s.launch(res.jobs)
		return res
	}
	var res result
	var ok bool
	if chaos.Kind != "" {
		res, ok = fakeapi.ServeChaos(r.Context(), chaos, apply, func(d fakeapi.Decision) result { return s.faultResult(chaosFault(d), cred) })
	} else {
		res, ok = fakeapi.Serve(r.Context(), taken, apply, func(f *Fault) result { return s.faultResult(f, cred) })
	}
	if ok {
		writeResult(w, r, res)
	}
	if logged {
		return
	}
	rec.Status, rec.RateLimited = res.status, res.rateLimited
	if !ok {
		rec.Status = fakeapi.StatusClientGone
	}
	s.requests.Add(rec)
}

// handle answers one request that passed the faults. Callers hold s.mu.
func (s *Server) handle(r *http.Request, cred string, hasAuth bool, rt route, body []byte) result {
	if rt.kind == KindApp {
		return s.handleApp(r, cred, hasAuth, rt, body)
	}
	if !hasAuth {
		res := basicError(http.StatusUnauthorized, "Requires authentication", docsRoot)
		s.anonymousLimit(&res)
		return res
	}
	tk := s.tokens[cred]
	if tk == nil {
		res := basicError(http.StatusUnauthorized, "Bad credentials", docsRoot)
		s.anonymousLimit(&res)
		return res
	}

	// GitHub charges every authenticated request except a 304 to a conditional one. GETs have
	// no side effects, so an exhausted token's GET is evaluated to see whether it is a 304.
	exhausted := s.budget(tk).Remaining == 0
	if exhausted && r.Method != http.MethodGet {
		return s.primaryLimit(tk)
	}
	res := s.route(r, tk, rt, body)
	if res.status == http.StatusNotModified {
		s.rateHeaders(&res, tk)
		return res
	}
	if exhausted {
		return s.primaryLimit(tk)
	}
	tk.used++
	s.rateHeaders(&res, tk)
	return res
}

func (s *Server) route(r *http.Request, tk *token, rt route, body []byte) result {
	if rt.op == "" {
		return basicError(http.StatusNotFound, "Not Found", docsRoot)
	}
	write := rt.op != OpList && rt.op != OpGet && rt.op != OpDeliveries && rt.op != OpDelivery
	var res result
	scopeHeaders(&res, tk, rt.kind, write)

	key := rt.key()
	tg := s.targets[key]
	a := tk.access[key]
	if tg == nil || a == accessNone || (tk.classic && !hasHookScope(tk.scopes, rt.kind, write)) {
		return with(res, basicError(http.StatusNotFound, "Not Found", docURL(rt)))
	}
	if write && a == accessRead {
		return with(res, basicError(http.StatusForbidden, "Resource not accessible by personal access token", docURL(rt)))
	}

	base := baseURL(r, rt.prefix)
	var out result
	switch rt.op {
	case OpList:
		out = s.list(r, tg, rt, base)
	case OpCreate:
		out = s.create(tg, rt, body, base)
	case OpGet:
		i := tg.find(rt.hookID)
		if i < 0 {
			return with(res, basicError(http.StatusNotFound, "Not Found", docURL(rt)))
		}
		out = jsonResult(http.StatusOK, render(tg, *tg.hooks[i], base))
	case OpUpdate:
		out = s.update(tg, rt, body, base)
	case OpDelete:
		i := tg.find(rt.hookID)
		if i < 0 {
			return with(res, basicError(http.StatusNotFound, "Not Found", docURL(rt)))
		}
		tg.hooks = slices.Delete(tg.hooks, i, i+1)
		delete(s.logs, rt.hookID)
		out = result{status: http.StatusNoContent}
	case OpPing:
		i := tg.find(rt.hookID)
		if i < 0 {
			return with(res, basicError(http.StatusNotFound, "Not Found", docURL(rt)))
		}
		out = result{status: http.StatusNoContent}
		if s.deliveries {
			out.jobs = []job{s.pingJob(tg, *tg.hooks[i], base)}
		}
	case OpDeliveries, OpDelivery, OpRedeliver:
		i := tg.find(rt.hookID)
		if i < 0 {
			return with(res, basicError(http.StatusNotFound, "Not Found", docURL(rt)))
		}
		out = s.deliveryRoute(r, tg, *tg.hooks[i], rt, base)
	}
	out = with(res, out)
	if r.Method == http.MethodGet && out.status == http.StatusOK {
		conditional(r, &out)
	}
	return out
}

// with returns out carrying the headers already set on pre.
func with(pre, out result) result {
	for k, vs := range pre.header {
		for _, v := range vs {
			if out.header == nil {
				out.header = http.Header{}
			}
			out.header.Add(k, v)
		}
	}
	return out
}

// conditional sets the ETag of a 200 GET (over the body and the Link header, so a page whose
// items are unchanged but whose next link moved is new) and turns a matching If-None-Match
// into a body-less 304.
func conditional(r *http.Request, res *result) {
	h := sha256.New()
	h.Write(res.body)
	h.Write([]byte(res.header.Get("Link")))
	etag := `W/"` + hex.EncodeToString(h.Sum(nil)) + `"`
	res.set("ETag", etag)
	for _, c := range strings.Split(r.Header.Get("If-None-Match"), ",") {
		c = strings.TrimSpace(c)
		if c == "*" || strings.TrimPrefix(c, "W/") == strings.TrimPrefix(etag, "W/") {
			res.status, res.body = http.StatusNotModified, nil
			return
		}
	}
}

func (s *Server) list(r *http.Request, tg *target, rt route, base string) result {
	q := r.URL.Query()
	perPage := DefaultPerPage
	if n, err := strconv.Atoi(q.Get("per_page")); err == nil && n > 0 {
		perPage = min(n, MaxPerPage)
	}
	size := perPage
	if s.pageSize > 0 {
		size = min(size, s.pageSize)
	}
	page := 1
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 0 {
		page = n
	}
	total := len(tg.hooks)
	last := max(1, (total+size-1)/size)
	lo := min((page-1)*size, total)
	hi := min(lo+size, total)
	items := make([]any, 0, hi-lo)
	for _, h := range tg.hooks[lo:hi] {
		items = append(items, render(tg, *h, base))
	}
	res := jsonResult(http.StatusOK, items)

	pageURL := func(n int) string {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set("per_page", strconv.Itoa(perPage))
		v.Set("page", strconv.Itoa(n))
		return "<" + base + "/" + tg.collection() + "?" + v.Encode() + ">"
	}
	var links []string
	if page > 1 {
		links = append(links, pageURL(min(page-1, last))+`; rel="prev"`)
	}
	if page < last {
		links = append(links, pageURL(page+1)+`; rel="next"`, pageURL(last)+`; rel="last"`)
	}
	if page > 1 {
		links = append(links, pageURL(1)+`; rel="first"`)
	}
	if len(links) > 0 {
		res.set("Link", strings.Join(links, ", "))
	}
	return res
}

func (tg *target) collection() string {
	switch tg.kind {
	case KindApp:
		return "app/hook"
	case KindOrganization:
		return "orgs/" + tg.owner + "/hooks"
	}
	return "repos/" + tg.owner + "/" + tg.repo + "/hooks"
}

// hookPath is hook id's path: the App's one webhook has none of its own.
func (tg *target) hookPath(id int64) string {
	if tg.kind == KindApp {
		return tg.collection()
	}
	return tg.collection() + "/" + strconv.FormatInt(id, 10)
}

func (tg *target) noun() string {
	if tg.kind == KindOrganization {
		return "organization"
	}
	return "repository"
}

func (s *Server) create(tg *target, rt route, body []byte, base string) result {
	fields, errRes := decodeObject(body, rt)
	if errRes != nil {
		return *errRes
	}
	allowed := []string{"name", "config", "events", "active"}
	if tg.kind == KindRepository {
		// The repository create schema has additionalProperties: false.
		for _, k := range sortedKeys(fields) {
			if !slices.Contains(allowed, k) {
				return invalidRequest(rt, "%q is not a permitted key.", k)
			}
		}
	}
	name, hasName, bad := str(fields, "name", rt)
	if bad != nil {
		return *bad
	}
	if !hasName && tg.kind == KindOrganization {
		return invalidRequest(rt, "%q wasn't supplied.", "name")
	}
	if hasName && name != "web" {
		return validationFailed(rt, fieldError{Resource: "Hook", Code: "invalid", Field: "name", Message: "name must be web"})
	}
	h := Hook{Active: true, Events: []string{"push"}}
	if v, ok, bad := boolean(fields, "active", rt); bad != nil {
		return *bad
	} else if ok {
		h.Active = v
	}
	if v, ok, bad := stringList(fields, "events", rt); bad != nil {
		return *bad
	} else if ok {
		h.Events = v
	}
	raw, ok := fields["config"]
	if !ok {
		if tg.kind == KindOrganization {
			return invalidRequest(rt, "%q wasn't supplied.", "config")
		}
		return validationFailed(rt, fieldError{Resource: "Hook", Code: "custom", Message: "Config must contain url"})
	}
	cfg, bad := decodeConfig(raw, rt)
	if bad != nil {
		return *bad
	}
	h.Config = cfg
	if msg := s.refuse(tg, h, 0); msg != "" {
		return validationFailed(rt, fieldError{Resource: "Hook", Code: "custom", Message: msg})
	}

	now := s.now()
	s.nextHookID++
	h.ID = s.nextHookID
	h.CreatedAt, h.UpdatedAt = now, now
	h.LastResponse = LastResponse{Status: "unused"}
	stored := h.clone()
	tg.hooks = append(tg.hooks, &stored)

	res := jsonResult(http.StatusCreated, render(tg, h, base))
	res.set("Location", base+"/"+tg.collection()+"/"+strconv.FormatInt(h.ID, 10))
	if s.deliveries && h.Active {
		res.jobs = []job{s.pingJob(tg, h, base)}
	}
	return res
}

func (s *Server) update(tg *target, rt route, body []byte, base string) result {
	i := tg.find(rt.hookID)
	if i < 0 {
		return basicError(http.StatusNotFound, "Not Found", docURL(rt))
	}
	fields, errRes := decodeObject(body, rt)
	if errRes != nil {
		return *errRes
	}
	h := tg.hooks[i].clone()
	if tg.kind == KindOrganization {
		if name, ok, bad := str(fields, "name", rt); bad != nil {
			return *bad
		} else if ok && name != "web" {
			return validationFailed(rt, fieldError{Resource: "Hook", Code: "invalid", Field: "name", Message: "name must be web"})
		}
	}
	if raw, ok := fields["config"]; ok {
		// The config object replaces the stored one: what it omits is reset, the secret
		// included (GitHub: "you must provide the same secret or set a new secret or the
		// secret will be removed").
		cfg, bad := decodeConfig(raw, rt)
		if bad != nil {
			return *bad
		}
		h.Config = cfg
	}
	if v, ok, bad := stringList(fields, "events", rt); bad != nil {
		return *bad
	} else if ok {
		h.Events = v
	}
	if tg.kind == KindRepository {
		// add_events and remove_events exist on the repository update only.
		if v, ok, bad := stringList(fields, "add_events", rt); bad != nil {
			return *bad
		} else if ok {
			for _, e := range v {
				if !slices.Contains(h.Events, e) {
					h.Events = append(h.Events, e)
				}
			}
		}
		if v, ok, bad := stringList(fields, "remove_events", rt); bad != nil {
			return *bad
		} else if ok {
			h.Events = slices.DeleteFunc(h.Events, func(e string) bool { return slices.Contains(v, e) })
		}
	}
	if v, ok, bad := boolean(fields, "active", rt); bad != nil {
		return *bad
	} else if ok {
		h.Active = v
	}
	if msg := s.refuse(tg, h, h.ID); msg != "" {
		return validationFailed(rt, fieldError{Resource: "Hook", Code: "custom", Message: msg})
	}
	h.UpdatedAt = s.now()
	*tg.hooks[i] = h
	return jsonResult(http.StatusOK, render(tg, h, base))
}

// refuse says why h may not exist on tg beside the other hooks (self excluded): another hook
// with the same config.url and an overlapping event, or an event already at the cap.
func (s *Server) refuse(tg *target, h Hook, self int64) string {
	for _, o := range tg.hooks {
		if o.ID != self && o.Config.URL == h.Config.URL && overlap(o.Events, h.Events) {
			return "Hook already exists on this " + tg.noun()
		}
	}
	var old []string
	if i := tg.find(self); self != 0 && i >= 0 {
		old = tg.hooks[i].Events
	}
	for _, e := range h.Events {
		if slices.Contains(old, e) {
			continue // already counted: an update may keep what it has
		}
		n := 0
		for _, o := range tg.hooks {
			if o.ID != self && slices.Contains(o.Events, e) {
				n++
			}
		}
		if n >= s.hookCap {
			// GitHub documents the refusal as "cannot have more than 20 webhooks"
			// (troubleshooting-webhooks); the rest of the sentence is the fake's.
			return fmt.Sprintf("The %q event cannot have more than %d webhooks on this %s", e, s.hookCap, tg.noun())
		}
	}
	return ""
}

func overlap(a, b []string) bool {
	for _, e := range a {
		if e == "*" || slices.Contains(b, e) || slices.Contains(b, "*") {
			return true
		}
	}
	return false
}

// decodeConfig reads a config object: url required, content_type json or form (default
// form), insecure_ssl "0"/"1" or the numbers 0/1 (default "0"), secret optional. Other keys
// (an organization hook's username and password) are accepted and not stored.
func decodeConfig(raw json.RawMessage, rt route) (Config, *result) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		r := invalidRequest(rt, "For 'properties/config', %s is not an object.", compact(raw))
		return Config{}, &r
	}
	cfg := Config{ContentType: "form", InsecureSSL: "0"}
	u, ok, bad := str(fields, "url", rt)
	if bad != nil {
		return Config{}, bad
	}
	if !ok {
		r := invalidRequest(rt, "%q wasn't supplied.", "url")
		return Config{}, &r
	}
	if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		r := validationFailed(rt, fieldError{Resource: "Hook", Code: "custom", Field: "url", Message: "url must be an absolute http or https URL"})
		return Config{}, &r
	}
	cfg.URL = u
	if v, ok, bad := str(fields, "content_type", rt); bad != nil {
		return Config{}, bad
	} else if ok {
		if v != "json" && v != "form" {
			r := validationFailed(rt, fieldError{Resource: "Hook", Code: "invalid", Field: "content_type", Message: "content_type must be json or form"})
			return Config{}, &r
		}
		cfg.ContentType = v
	}
	if v, ok, bad := str(fields, "secret", rt); bad != nil {
		return Config{}, bad
	} else if ok {
		cfg.Secret = v
	}
	if raw, ok := fields["insecure_ssl"]; ok {
		var sv string
		var nv float64
		switch {
		case json.Unmarshal(raw, &sv) == nil:
		case json.Unmarshal(raw, &nv) == nil:
			sv = strconv.FormatFloat(nv, 'f', -1, 64)
		default:
			r := invalidRequest(rt, "For 'properties/insecure_ssl', %s is not a string or a number.", compact(raw))
			return Config{}, &r
		}
		if sv != "0" && sv != "1" {
			r := validationFailed(rt, fieldError{Resource: "Hook", Code: "invalid", Field: "insecure_ssl", Message: "insecure_ssl must be 0 or 1"})
			return Config{}, &r
		}
		cfg.InsecureSSL = sv
	}
	return cfg, nil
}

// decodeObject parses a JSON object body; an empty body or null is an empty object.
func decodeObject(body []byte, rt route) (map[string]json.RawMessage, *result) {
	b := bytes.TrimSpace(body)
	if len(b) == 0 || string(b) == "null" {
		return map[string]json.RawMessage{}, nil
	}
	if !json.Valid(b) {
		r := basicError(http.StatusBadRequest, "Problems parsing JSON", docURL(rt))
		return nil, &r
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
		r := invalidRequest(rt, "%s is not an object.", compact(b))
		return nil, &r
	}
	return fields, nil
}

func str(f map[string]json.RawMessage, k string, rt route) (string, bool, *result) {
	raw, ok := f[k]
	if !ok {
		return "", false, nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		r := invalidRequest(rt, "For 'properties/%s', %s is not a string.", k, compact(raw))
		return "", false, &r
	}
	return v, true, nil
}

func boolean(f map[string]json.RawMessage, k string, rt route) (bool, bool, *result) {
	raw, ok := f[k]
	if !ok {
		return false, false, nil
	}
	var v bool
	if err := json.Unmarshal(raw, &v); err != nil {
		r := invalidRequest(rt, "For 'properties/%s', %s is not a boolean.", k, compact(raw))
		return false, false, &r
	}
	return v, true, nil
}

func stringList(f map[string]json.RawMessage, k string, rt route) ([]string, bool, *result) {
	raw, ok := f[k]
	if !ok {
		return nil, false, nil
	}
	var v []string
	if err := json.Unmarshal(raw, &v); err != nil || v == nil {
		r := invalidRequest(rt, "For 'properties/%s', %s is not an array of strings.", k, compact(raw))
		return nil, false, &r
	}
	return slices.Compact(v), true, nil
}

func compact(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// fieldError is one entry of a Validation Failed response's errors array.
type fieldError struct {
	Resource string `json:"resource,omitempty"`
	Code     string `json:"code"`
	Field    string `json:"field,omitempty"`
	Message  string `json:"message,omitempty"`
}

func validationFailed(rt route, errs ...fieldError) result {
	return jsonResult(http.StatusUnprocessableEntity, struct {
		Message string       `json:"message"`
		Errors  []fieldError `json:"errors"`
		DocURL  string       `json:"documentation_url"`
		Status  string       `json:"status"`
	}{"Validation Failed", errs, docURL(rt), "422"})
}

// invalidRequest is GitHub's answer to a body its JSON schema refuses.
func invalidRequest(rt route, format string, args ...any) result {
	return jsonResult(http.StatusUnprocessableEntity, struct {
		Message string `json:"message"`
		DocURL  string `json:"documentation_url"`
		Status  string `json:"status"`
	}{"Invalid request.\n\n" + fmt.Sprintf(format, args...), docURL(rt), "422"})
}

func basicError(status int, msg, doc string) result {
	return jsonResult(status, struct {
		Message string `json:"message"`
		DocURL  string `json:"documentation_url"`
		Status  string `json:"status"`
	}{msg, doc, strconv.Itoa(status)})
}

// docURL is the documentation_url GitHub sends with errors of the operation.
func docURL(rt route) string {
	anchors := map[string][2]string{
		OpList:       {"list-repository-webhooks", "list-organization-webhooks"},
		OpCreate:     {"create-a-repository-webhook", "create-an-organization-webhook"},
		OpGet:        {"get-a-repository-webhook", "get-an-organization-webhook"},
		OpUpdate:     {"update-a-repository-webhook", "update-an-organization-webhook"},
		OpDelete:     {"delete-a-repository-webhook", "delete-an-organization-webhook"},
		OpPing:       {"ping-a-repository-webhook", "ping-an-organization-webhook"},
		OpDeliveries: {"list-deliveries-for-a-repository-webhook", "list-deliveries-for-an-organization-webhook"},
		OpDelivery:   {"get-a-delivery-for-a-repository-webhook", "get-a-webhook-delivery-for-an-organization-webhook"},
		OpRedeliver:  {"redeliver-a-delivery-for-a-repository-webhook", "redeliver-a-delivery-for-an-organization-webhook"},
	}
	a, ok := anchors[rt.op]
	if !ok {
		return docsRoot
	}
	if rt.kind == KindOrganization {
		return docsRoot + "/orgs/webhooks#" + a[1]
	}
	return docsRoot + "/repos/webhooks#" + a[0]
}

func jsonResult(status int, v any) result {
	b, err := json.Marshal(v)
	if err != nil {
		panic("fake: marshal: " + err.Error()) // only our own plain structs are marshalled
	}
	return result{status: status, body: b}
}

func (s *Server) rateHeaders(res *result, tk *token) {
	b := s.budget(tk)
	setRate(res, b)
}

func setRate(res *result, b RateLimit) {
	res.set("X-RateLimit-Limit", strconv.Itoa(b.Limit))
	res.set("X-RateLimit-Remaining", strconv.Itoa(b.Remaining))
	res.set("X-RateLimit-Used", strconv.Itoa(b.Used))
	res.set("X-RateLimit-Reset", strconv.FormatInt(b.Reset.Unix(), 10))
	res.set("X-RateLimit-Resource", "core")
}

// anonymousLimit sets the headers of the unauthenticated budget (60 an hour), which the fake
// does not enforce: a refused credential must keep answering 401.
func (s *Server) anonymousLimit(res *result) {
	setRate(res, RateLimit{Limit: 60, Remaining: 60, Reset: s.now().Add(rateWindow)})
}

func (s *Server) primaryLimit(tk *token) result {
	res := basicError(s.limitStatus, "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID "+requestID()+".",
		docsRoot+"/overview/rate-limits-for-the-rest-api#about-the-primary-rate-limit")
	res.rateLimited = true
	s.rateHeaders(&res, tk)
	return res
}

// faultResult answers with an injected fault; its rate-limit headers are the token's, uncharged.
func (s *Server) faultResult(f *Fault, cred string) result {
	msg := f.Message
	if msg == "" {
		msg = http.StatusText(f.Status)
		if f.Secondary {
			msg = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID " + requestID() + "."
		}
	}
	var res result
	if f.HTML {
		res = result{status: f.Status, body: []byte("<html><head><title>" + strconv.Itoa(f.Status) + "</title></head><body><h1>" + msg + "</h1></body></html>\n")}
		res.set("Content-Type", "text/html; charset=utf-8")
	} else {
		doc := docsRoot
		if f.Secondary {
			doc = docsRoot + "/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
		}
		res = basicError(f.Status, msg, doc)
	}
	res.rateLimited = f.Secondary
	if f.RetryAfter > 0 {
		res.set("Retry-After", strconv.Itoa(int(math.Ceil(f.RetryAfter.Seconds()))))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if tk := s.tokens[cred]; tk != nil {
		s.rateHeaders(&res, tk)
	}
	return res
}

// scopeHeaders sets what GitHub tells a client about the token's grants: X-OAuth-Scopes and
// X-Accepted-OAuth-Scopes for classic tokens, X-Accepted-GitHub-Permissions for the
// fine-grained permission the endpoint needs.
func scopeHeaders(res *result, tk *token, kind string, write bool) {
	perm := "repository_hooks"
	if kind == KindOrganization {
		perm = "organization_hooks"
	}
	if write {
		res.set("X-Accepted-GitHub-Permissions", perm+"=write")
	} else {
		res.set("X-Accepted-GitHub-Permissions", perm+"=read")
	}
	if tk.classic {
		res.set("X-OAuth-Scopes", strings.Join(tk.scopes, ", "))
		res.set("X-Accepted-OAuth-Scopes", strings.Join(hookScopes(kind, write), ", "))
	}
}

// hookScopes are the classic scopes any one of which reaches the hooks of a target.
func hookScopes(kind string, write bool) []string {
	switch {
	case kind == KindOrganization:
		return []string{"admin:org_hook"}
	case write:
		return []string{"admin:repo_hook", "repo", "write:repo_hook"}
	default:
		return []string{"admin:repo_hook", "read:repo_hook", "repo", "write:repo_hook"}
	}
}

func hasHookScope(scopes []string, kind string, write bool) bool {
	for _, s := range hookScopes(kind, write) {
		if slices.Contains(scopes, s) {
			return true
		}
	}
	return false
}

// wireConfig and wireHook are the JSON hook objects of GitHub's description ("hook" for
// repositories, "org-hook" for organizations: no test_url and no last_response).
type wireConfig struct {
	ContentType string `json:"content_type"`
	InsecureSSL string `json:"insecure_ssl"`
	URL         string `json:"url"`
	Secret      string `json:"secret,omitempty"`
}

type wireResponse struct {
	Code    *int    `json:"code"`
	Status  *string `json:"status"`
	Message *string `json:"message"`
}

type wireHook struct {
	Type          string        `json:"type"`
	ID            int64         `json:"id"`
	Name          string        `json:"name"`
	Active        bool          `json:"active"`
	Events        []string      `json:"events"`
	Config        wireConfig    `json:"config"`
	UpdatedAt     string        `json:"updated_at"`
	CreatedAt     string        `json:"created_at"`
	URL           string        `json:"url"`
	TestURL       string        `json:"test_url,omitempty"`
	PingURL       string        `json:"ping_url"`
	DeliveriesURL string        `json:"deliveries_url"`
	LastResponse  *wireResponse `json:"last_response,omitempty"`
}

// render is the hook's JSON object with its quirks applied.
func render(tg *target, h Hook, base string) json.RawMessage {
	b, err := json.Marshal(wire(tg, h, base))
	if err != nil {
		panic("fake: marshal: " + err.Error()) // only our own plain structs are marshalled
	}
	return fakeapi.ApplyQuirks(b, h.Quirks)
}

func wire(tg *target, h Hook, base string) wireHook {
	h = h.clone()
	self := base + "/" + tg.collection() + "/" + strconv.FormatInt(h.ID, 10)
	w := wireHook{
		Type:          tg.kind,
		ID:            h.ID,
		Name:          "web",
		Active:        h.Active,
		Events:        h.Events,
		Config:        wireConfig{ContentType: h.Config.ContentType, InsecureSSL: h.Config.InsecureSSL, URL: h.Config.URL},
		UpdatedAt:     h.UpdatedAt.UTC().Format(time.RFC3339),
		CreatedAt:     h.CreatedAt.UTC().Format(time.RFC3339),
		URL:           self,
		PingURL:       self + "/pings",
		DeliveriesURL: self + "/deliveries",
	}
	if h.Config.Secret != "" {
		w.Config.Secret = MaskedSecret
	}
	// GitHub's description has test_url and last_response (required) on repository hooks
	// only; the org-hook schema and examples carry neither, so neither is invented for them.
	if tg.kind == KindRepository {
		w.TestURL = self + "/test"
		lr := wireResponse{}
		if h.LastResponse.Code != 0 {
			lr.Code = &h.LastResponse.Code
		}
		if h.LastResponse.Status != "" {
			lr.Status = &h.LastResponse.Status
		}
		if h.LastResponse.Message != "" {
			lr.Message = &h.LastResponse.Message
		}
		w.LastResponse = &lr
	}
	return w
}

func baseURL(r *http.Request, prefix string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + prefix
}

func writeResult(w http.ResponseWriter, r *http.Request, res result) {
	h := w.Header()
	h.Set("X-GitHub-Request-Id", requestID())
	h.Set("X-GitHub-Media-Type", "github.v3; format=json")
	if r.Header.Get("X-GitHub-Api-Version") != "" {
		h.Set("X-GitHub-Api-Version-Selected", apiVersion)
	}
	h.Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
	if r.Method == http.MethodGet {
		h.Set("Cache-Control", "private, max-age=60, s-maxage=60")
	}
	if len(res.body) > 0 {
		h.Set("Content-Type", "application/json; charset=utf-8")
	}
	for k, vs := range res.header {
		h[k] = vs
	}
	w.WriteHeader(res.status)
	_, _ = w.Write(res.body)
}

// credential takes the token from "Authorization: Bearer X" (go-github, resty) or "token X".
func credential(r *http.Request) (string, bool) {
	auth := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || (!strings.EqualFold(scheme, "bearer") && !strings.EqualFold(scheme, "token")) {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// maskBody is the request body for the log, with config.secret masked; "" when it is not a
// JSON object (nothing to log safely).
func maskBody(body []byte) string {
	var m map[string]any
	if len(bytes.TrimSpace(body)) == 0 || json.Unmarshal(body, &m) != nil || m == nil {
		return ""
	}
	if sec, ok := m["secret"].(string); ok && sec != "" {
		m["secret"] = MaskedSecret // PATCH /app/hook/config
	}
	if cfg, ok := m["config"].(map[string]any); ok {
		if sec, ok := cfg["secret"].(string); ok && sec != "" {
			cfg["secret"] = MaskedSecret
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func requestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:4]) + ":" + hex.EncodeToString(b[4:]))
}
