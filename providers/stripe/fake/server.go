package fake

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
)

const (
	basePath       = "/v1/webhook_endpoints"
	statusEnabled  = "enabled"
	statusDisabled = "disabled"
	maxBodyBytes   = 1 << 20
)

// result is a complete response, kept as bytes so idempotent replays are byte-for-byte.
type result struct {
	status int
	body   []byte
	header map[string]string
	// cache marks results Stripe would store for an Idempotency-Key: those produced after the
	// endpoint started executing (success, 404, the endpoint cap), but not auth or parameter
	// validation failures.
	cache bool
}

// apiError is Stripe's error object; see https://docs.stripe.com/api/errors.
type apiError struct {
	status  int
	Code    string `json:"code,omitempty"`
	DocURL  string `json:"doc_url,omitempty"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
	Type    string `json:"type"`
}

func invalid(status int, code, param, format string, args ...any) *apiError {
	return &apiError{status: status, Type: "invalid_request_error", Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}

func (e *apiError) result() result {
	if e.Code != "" && e.DocURL == "" {
		e.DocURL = "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(e.Code, "_", "-")
	}
	return result{status: e.status, body: marshal(struct {
		Error *apiError `json:"error"`
	}{e})}
}

// marshal encodes like Stripe: two-space indented JSON with a trailing newline.
func marshal(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic("fake: marshal: " + err.Error()) // only our own plain structs are marshalled
	}
	return append(b, '\n')
}

// ServeHTTP implements the Stripe API surface described in the package comment.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := apiKey(r)
	rec := Request{
		Time:           s.now(),
		Account:        AccountLabel(key),
		Method:         r.Method,
		Path:           r.URL.Path,
		Query:          r.URL.Query(),
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
		UserAgent:      r.Header.Get("User-Agent"),
		TraceParent:    r.Header.Get("Traceparent"),
	}
	taken := s.faults.TakeFor(r.Method, r.URL.Path, key)
	// Chaos picks among requests no fault was injected for; the meter applies to all.
	chaosMayPick := taken.Fail == nil && taken.Latency == 0
	taken = fakeapi.Metered(s.meter, taken, key, meterRoute(r.Method, r.URL.Path), rateLimited)

	res, ok := s.serve(r, key, &rec, taken, chaosMayPick)
	if ok {
		writeResult(w, r, res)
	} else {
		rec.Status = fakeapi.StatusClientGone
	}
	if rec.Status == 0 {
		rec.Status = res.status
	}
	s.requests.Add(rec)
}

// serve computes the response; ok is false if the client gave up during injected latency.
func (s *Server) serve(r *http.Request, key string, rec *Request, taken fakeapi.Taken[Fault], chaosMayPick bool) (res result, ok bool) {
	if strings.HasPrefix(r.URL.Path, "/v2/") {
		// v2 speaks JSON, and answers faults in its own error shape.
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
		if err != nil {
			return badV2("Invalid request body: %v", err), true
		}
		rec.JSON = body
		return fakeapi.Serve(r.Context(), taken, func() result { return s.handleV2(r, key, rec, body) }, v2Fault)
	}
	params := rec.Query
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		// Parsed by hand: net/http's ParseForm ignores DELETE bodies, and stripe-go sends
		// DELETE parameters in the body.
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
		if err == nil {
			rec.Form, err = url.ParseQuery(string(body))
		}
		if err != nil {
			return invalid(http.StatusBadRequest, "", "", "Invalid request body: %v", err).result(), true
		}
		params = fakeapi.CloneValues(rec.Query)
		for k, vs := range rec.Form {
			params[k] = append(params[k], vs...)
		}
	}
	apply := func() result { return s.handle(r, key, rec, params) }
	if chaosMayPick {
		if d := s.chaos.Decide(); d.Kind != "" {
			rec.Chaos = d.String()
			return fakeapi.ServeChaos(r.Context(), d, apply, chaosResult)
		}
	}
	return fakeapi.Serve(r.Context(), taken, apply, faultResult)
}

func (s *Server) handle(r *http.Request, key string, rec *Request, params url.Values) result {
	if key == "" {
		return invalid(http.StatusUnauthorized, "", "", "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for details, or we can help at https://support.stripe.com/.").result()
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rejected[key] {
		return invalid(http.StatusUnauthorized, "", "", "Invalid API Key provided: %s", maskKey(key)).result()
	}
	a := s.acct(key, true)
	now := s.now()

	return s.idempotent(a, r, rec, r.Method+" "+r.URL.Path+"\n"+params.Encode(), now, func() result {
		return s.route(a, r.Method, r.URL.Path, params, now)
	})
}

// idempotent runs apply, or replays the answer an earlier POST with the same Idempotency-Key
// and the same fingerprint (method, path, parameters) got within the window; the same key with
// other parameters is refused. Callers hold s.mu.
func (s *Server) idempotent(a *account, r *http.Request, rec *Request, fp string, now time.Time, apply func() result) result {
	// Stripe documents Idempotency-Key as meaningful on POST only ("no effect" on GET and
	// DELETE), so a retried DELETE meets a 404, which the operator must tolerate.
	ikey := strings.TrimSpace(rec.IdempotencyKey)
	if r.Method != http.MethodPost || ikey == "" {
		return apply()
	}
	if prev, ok := a.idem[ikey]; ok && now.Sub(prev.at) < s.idemTTL {
		if prev.fingerprint != fp {
			return (&apiError{status: http.StatusBadRequest, Type: "idempotency_error", Message: fmt.Sprintf(
				"Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '%s' if you meant to execute a different request.", ikey)}).result()
		}
		rec.Replayed = true
		return result{status: prev.status, body: prev.body, header: map[string]string{
			"Idempotent-Replayed": "true",
			"Original-Request":    prev.requestID,
		}}
	}
	delete(a.idem, ikey) // expired, if present
	res := apply()
	if res.cache {
		reqID := newID("req_", 14)
		res.header = map[string]string{"Request-Id": reqID}
		a.idem[ikey] = idemEntry{fingerprint: fp, status: res.status, body: res.body, requestID: reqID, at: now}
	}
	return res
}

func (s *Server) route(a *account, method, path string, p url.Values, now time.Time) result {
	if path == basePath {
		switch method {
		case http.MethodGet:
			return s.list(a, p)
		case http.MethodPost:
			return s.create(a, p, now)
		}
	} else if id, ok := strings.CutPrefix(path, basePath+"/"); ok && id != "" && !strings.Contains(id, "/") {
		switch method {
		case http.MethodGet:
			return retrieve(a, id, p)
		case http.MethodPost:
			return update(a, id, p)
		case http.MethodDelete:
			return del(a, id, p)
		}
	}
	if path == eventsPath && method == http.MethodGet {
		return listEvents(a, p, now, s.pageSize)
	}
	if id, ok := strings.CutPrefix(path, eventsPath+"/"); ok && id != "" && !strings.Contains(id, "/") && method == http.MethodGet {
		return retrieveEvent(a, id, p, now)
	}
	return invalid(http.StatusNotFound, "", "", "Unrecognized request URL (%s: %s). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.", method, path).result()
}

func (s *Server) create(a *account, p url.Values, now time.Time) result {
	if err := allowOnly(p, "url", "enabled_events", "description", "metadata", "api_version", "connect", "expand"); err != nil {
		return err.result()
	}
	e := Endpoint{Status: statusEnabled, Created: now, Metadata: map[string]string{}}
	var err *apiError
	var ok bool
	if e.URL, ok, err = urlParam(p); err != nil {
		return err.result()
	} else if !ok {
		return missing("url").result()
	}
	if e.EnabledEvents, ok, err = listParam(p, "enabled_events"); err != nil {
		return err.result()
	} else if !ok {
		return missing("enabled_events").result()
	}
	if e.Description, _, err = scalar(p, "description"); err != nil {
		return err.result()
	}
	if e.APIVersion, _, err = scalar(p, "api_version"); err != nil {
		return err.result()
	}
	if e.Connect, _, err = boolParam(p, "connect"); err != nil {
		return err.result()
	}
	set, _, err := metadataParam(p)
	if err != nil {
		return err.result()
	}
	for k, v := range set {
		if v != "" {
			e.Metadata[k] = v
		}
	}

	if len(a.endpoints)+len(a.destinations) >= s.maxEndpoints {
		res := invalid(http.StatusBadRequest, "", "", "You have reached the maximum of %d test webhook endpoints.", s.maxEndpoints).result()
		res.cache = true
		return res
	}
	e.ID = newID("we_", 24)
	e.Secret = newID("whsec_", 32)
	s.seq++
	a.endpoints = append(a.endpoints, &entry{Endpoint: e, seq: s.seq})
	return ok200(render(e, true))
}

func (s *Server) list(a *account, p url.Values) result {
	if err := allowOnly(p, "limit", "starting_after", "ending_before", "expand"); err != nil {
		return err.result()
	}
	limit, lerr := limitParam(p, s.pageSize)
	if lerr != nil {
		return lerr.result()
	}
	after, _, err := scalar(p, "starting_after")
	if err != nil {
		return err.result()
	}
	before, _, err := scalar(p, "ending_before")
	if err != nil {
		return err.result()
	}
	if after != "" && before != "" {
		return invalid(http.StatusBadRequest, "", "", "You may only specify one of these parameters: starting_after, ending_before.").result()
	}

	all := a.ordered()
	lo, hi := 0, len(all) // window of candidates, newest first
	cursor, param := after, "starting_after"
	if before != "" {
		cursor, param = before, "ending_before"
	}
	if cursor != "" {
		i := indexOf(all, cursor)
		if i < 0 {
			return invalid(http.StatusBadRequest, "resource_missing", param, "No such webhook endpoint: '%s'", cursor).result()
		}
		if after != "" {
			lo = i + 1
		} else {
			hi = i
		}
	}
	var page []*entry
	hasMore := false
	if before != "" {
		// ending_before pages backwards: the items closest to the cursor, still newest first.
		start := max(lo, hi-limit)
		page, hasMore = all[start:hi], start > lo
	} else {
		end := min(hi, lo+limit)
		page, hasMore = all[lo:end], end < hi
	}
	data := make([]json.RawMessage, 0, len(page))
	for _, e := range page {
		data = append(data, render(e.Endpoint, false))
	}
	return ok200(struct {
		Object  string            `json:"object"`
		Data    []json.RawMessage `json:"data"`
		HasMore bool              `json:"has_more"`
		URL     string            `json:"url"`
	}{"list", data, hasMore, basePath})
}

// limitParam reads limit (1-100, default 10), capped at pageSize when that is positive.
func limitParam(p url.Values, pageSize int) (int, *apiError) {
	limit := 10
	if v, ok, err := scalar(p, "limit"); err != nil {
		return 0, err
	} else if ok && v != "" {
		n, convErr := strconv.Atoi(v)
		switch {
		case convErr != nil:
			return 0, invalid(http.StatusBadRequest, "parameter_invalid_integer", "limit", "Invalid integer: %s", v)
		case n < 1:
			return 0, invalid(http.StatusBadRequest, "", "limit", "This value must be greater than or equal to 1.")
		case n > 100:
			return 0, invalid(http.StatusBadRequest, "", "limit", "This value must be less than or equal to 100.")
		}
		limit = n
	}
	if pageSize > 0 && pageSize < limit {
		limit = pageSize
	}
	return limit, nil
}

func retrieve(a *account, id string, p url.Values) result {
	if err := allowOnly(p, "expand"); err != nil {
		return err.result()
	}
	_, e := a.find(id)
	if e == nil {
		return notFound(id)
	}
	return ok200(render(e.Endpoint, false))
}

func update(a *account, id string, p url.Values) result {
	// api_version and connect are create-only; Stripe rejects them as unknown on update.
	if err := allowOnly(p, "url", "enabled_events", "description", "disabled", "metadata", "expand"); err != nil {
		return err.result()
	}
	u, setURL, err := urlParam(p)
	if err != nil {
		return err.result()
	}
	events, setEvents, err := listParam(p, "enabled_events")
	if err != nil {
		return err.result()
	}
	desc, setDesc, err := scalar(p, "description")
	if err != nil {
		return err.result()
	}
	disabled, setDisabled, err := boolParam(p, "disabled")
	if err != nil {
		return err.result()
	}
	meta, clearMeta, err := metadataParam(p)
	if err != nil {
		return err.result()
	}

	_, e := a.find(id)
	if e == nil {
		return notFound(id)
	}
	if setURL {
		e.URL = u
	}
	if setEvents {
		e.EnabledEvents = events
	}
	if setDesc {
		e.Description = desc
	}
	if setDisabled {
		e.Status = statusEnabled
		if disabled {
			e.Status = statusDisabled
		}
	}
	if clearMeta {
		e.Metadata = map[string]string{}
	}
	for k, v := range meta {
		if v == "" {
			delete(e.Metadata, k)
		} else {
			e.Metadata[k] = v
		}
	}
	return ok200(render(e.Endpoint, false))
}

func del(a *account, id string, p url.Values) result {
	if err := allowOnly(p, "expand"); err != nil {
		return err.result()
	}
	i, _ := a.find(id)
	if i < 0 {
		return notFound(id)
	}
	a.endpoints = append(a.endpoints[:i:i], a.endpoints[i+1:]...)
	return ok200(struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}{id, "webhook_endpoint", true})
}

func indexOf(all []*entry, id string) int {
	for i, e := range all {
		if e.ID == id {
			return i
		}
	}
	return -1
}

func ok200(v any) result { return result{status: http.StatusOK, body: marshal(v), cache: true} }

func notFound(id string) result {
	res := invalid(http.StatusNotFound, "resource_missing", "id", "No such webhook endpoint: '%s'", id).result()
	res.cache = true
	return res
}

func missing(param string) *apiError {
	return invalid(http.StatusBadRequest, "parameter_missing", param, "Missing required param: %s.", param)
}

// wireEndpoint is the JSON webhook_endpoint object, fields in Stripe's order.
type wireEndpoint struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	APIVersion    *string           `json:"api_version"`
	Application   *string           `json:"application"`
	Created       int64             `json:"created"`
	Description   *string           `json:"description"`
	EnabledEvents []string          `json:"enabled_events"`
	Livemode      bool              `json:"livemode"`
	Metadata      map[string]string `json:"metadata"`
	Secret        string            `json:"secret,omitempty"`
	Status        string            `json:"status"`
	URL           string            `json:"url"`
}

// render is e's JSON object with its quirks applied.
func render(e Endpoint, withSecret bool) json.RawMessage {
	b, err := json.Marshal(wire(e, withSecret))
	if err != nil {
		panic("fake: marshal: " + err.Error()) // only our own plain structs are marshalled
	}
	return fakeapi.ApplyQuirks(b, e.Quirks)
}

// wire renders e; the secret only when withSecret, because Stripe returns it only on create.
func wire(e Endpoint, withSecret bool) wireEndpoint {
	e = e.clone()
	w := wireEndpoint{
		ID:            e.ID,
		Object:        "webhook_endpoint",
		APIVersion:    nullable(e.APIVersion),
		Application:   nullable(e.Application),
		Created:       e.Created.Unix(),
		Description:   nullable(e.Description),
		EnabledEvents: e.EnabledEvents,
		Livemode:      e.Livemode,
		Metadata:      e.Metadata,
		Status:        e.Status,
		URL:           e.URL,
	}
	if withSecret {
		w.Secret = e.Secret
	}
	return w
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// meterRoute names a request for the meter's counters: a collection (endpoints, events) or
// one of its objects.
func meterRoute(method, path string) fakeapi.Route {
	for _, collection := range []string{basePath, eventsPath, destinationsPath} {
		if path != collection && strings.HasPrefix(path, collection+"/") {
			path = collection + "/{id}"
		}
	}
	return fakeapi.Route{Method: method, Pattern: path}
}

// rateLimited is Stripe's answer to a key over its rate: 429, code rate_limit, no Retry-After
// (docs.stripe.com/rate-limits; PROVIDERS.md §1.3).
func rateLimited(time.Duration) *Fault {
	return &Fault{Status: http.StatusTooManyRequests, Code: "rate_limit"}
}

func faultResult(f *Fault) result {
	typ := f.Type
	if typ == "" {
		typ = "invalid_request_error"
		if f.Status >= 500 {
			typ = "api_error"
		}
	}
	msg := f.Message
	if msg == "" {
		msg = fmt.Sprintf("fake: injected HTTP %d.", f.Status)
		if f.Status == http.StatusTooManyRequests {
			msg = "Request rate limit exceeded. You can learn more about rate limits here https://stripe.com/docs/rate-limits."
		}
	}
	res := (&apiError{status: f.Status, Type: typ, Code: f.Code, Message: msg}).result()
	if f.RetryAfter > 0 {
		res.header = map[string]string{"Retry-After": strconv.Itoa(int(math.Ceil(f.RetryAfter.Seconds())))}
	}
	return res
}

func writeResult(w http.ResponseWriter, r *http.Request, res result) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Request-Id", newID("req_", 14))
	if v := r.Header.Get("Stripe-Version"); v != "" {
		h.Set("Stripe-Version", v)
	}
	if k := r.Header.Get("Idempotency-Key"); k != "" && r.Method == http.MethodPost {
		h.Set("Idempotency-Key", k)
	}
	if res.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="Stripe"`)
	}
	for k, v := range res.header {
		h.Set(k, v)
	}
	w.WriteHeader(res.status)
	_, _ = w.Write(res.body)
}

// apiKey takes the key from "Authorization: Bearer" (stripe-go) or basic auth (curl -u key:).
func apiKey(r *http.Request) string {
	if user, _, ok := r.BasicAuth(); ok {
		return user
	}
	auth := r.Header.Get("Authorization")
	if len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		return strings.TrimSpace(auth[7:])
	}
	return ""
}

// maskKey hides all but the mode prefix and last four characters, as Stripe's message does.
func maskKey(k string) string {
	prefix := ""
	if i := strings.LastIndex(k, "_"); i >= 0 && i < 9 {
		prefix, k = k[:i+1], k[i+1:]
	}
	if len(k) <= 4 {
		return prefix + strings.Repeat("*", len(k))
	}
	return prefix + strings.Repeat("*", len(k)-4) + k[len(k)-4:]
}
