package fake

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The v2 event destinations API (/v2/core/event_destinations), written from Stripe's published
// description of it (docs.stripe.com/api/v2/core/event_destinations, and stripe-go's generated
// v2core_eventdestination*.go, "generated from our OpenAPI spec"): stripe-mock has no v2.
//
//   - JSON bodies both ways; every request names a Stripe-Version, 2024-09-30.acacia or later
//     (v2 is not served to older versions: 400).
//   - create: name, type, event_payload and enabled_events required; webhook_endpoint.url for
//     type webhook_endpoint; snapshot_api_version only with event_payload snapshot. include
//     takes webhook_endpoint.url and webhook_endpoint.signing_secret (this one on create only:
//     the secret is never shown again).
//   - list: limit (default 10, at most 20), newest first, {data, next_page_url,
//     previous_page_url}; next_page_url carries the query the list was asked with and an
//     opaque page token, and a token the fake did not hand out is 400. Without
//     include=webhook_endpoint.url (include[0]=… as stripe-go sends it, or include=…) a
//     destination shows no URL.
//   - update (POST /{id}): name, description, enabled_events, metadata (a null value removes a
//     key), webhook_endpoint.url, include; type, event_payload, events_from and
//     snapshot_api_version cannot change (400).
//   - enable, disable (POST /{id}/enable|disable) answer the destination (without its URL);
//     delete answers {id, object}; an unknown id is 404.
//   - One cap for v1 endpoints and v2 destinations together (the docs: "up to 16 event
//     destinations"); idempotent replay of POSTs as in v1.
//   - Errors are {"error": {"type", "code", "message"}}.
//   - Destinations made elsewhere: Workbench ones (no metadata, description null) and Amazon
//     EventBridge ones (no webhook_endpoint), with SeedDestination. WithV1InV2List shows v1
//     endpoints among the destinations too, which Stripe's documents neither promise nor rule
//     out.

const (
	destinationsPath = "/v2/core/event_destinations"
	v2MinVersion     = "2024-09-30.acacia"
	v2DefaultLimit   = 10
	v2MaxLimit       = 20
)

// Destination is the fake's stored state of one v2 event destination; unlike the API it
// always carries URL and Secret.
type Destination struct {
	ID                 string
	Type               string // webhook_endpoint (default) or amazon_eventbridge
	Name               string
	Description        string // "" is null on the wire
	EventPayload       string // thin (default) or snapshot
	EnabledEvents      []string
	SnapshotAPIVersion string
	Metadata           map[string]string
	Status             string // enabled or disabled
	URL                string
	Secret             string
	AWSAccountID       string
	Created, Updated   time.Time
}

// WithV1InV2List makes the v2 list show the account's v1 webhook endpoints as destinations
// (ids we_…, snapshot payload), which a v2 client must not take for its own.
func WithV1InV2List() Option { return func(s *Server) { s.v1InV2 = true } }

// RestrictKey makes v2 requests with apiKey fail with 403, as a restricted key without the
// event destinations permission does (v1 routes keep working).
func (s *Server) RestrictKey(apiKey string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restricted[apiKey] = true
}

// SeedDestination stores d in apiKey's account out of band, as Workbench would make it, and
// returns what was stored. Empty ID, Type, EventPayload, Status, Name and zero times are filled.
func (s *Server) SeedDestination(apiKey string, d Destination) Destination {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.ID == "" {
		d.ID = newID("ed_test_", 40)
	}
	if d.Type == "" {
		d.Type = "webhook_endpoint"
	}
	if d.EventPayload == "" {
		d.EventPayload = "thin"
	}
	if d.Status == "" {
		d.Status = statusEnabled
	}
	if d.Name == "" {
		d.Name = "My event destination"
	}
	if d.Created.IsZero() {
		d.Created = s.now()
		d.Updated = d.Created
	}
	if d.Type == "webhook_endpoint" && d.Secret == "" {
		d.Secret = newID("whsec_", 32)
	}
	a := s.acct(apiKey, true)
	a.destinations = append(a.destinations, d.clone())
	return d.clone()
}

// Destinations returns apiKey's destinations, newest first, URLs and secrets included.
func (s *Server) Destinations(apiKey string) []Destination {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.acct(apiKey, false)
	if a == nil {
		return nil
	}
	var out []Destination
	for _, d := range a.newestDestinations() {
		out = append(out, d.clone())
	}
	return out
}

// EditDestination changes a destination out of band and reports whether it existed.
func (s *Server) EditDestination(apiKey, id string, fn func(*Destination)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.acct(apiKey, false)
	if a == nil {
		return false
	}
	if i := a.findDestination(id); i >= 0 {
		fn(&a.destinations[i])
		a.destinations[i].ID = id
		return true
	}
	return false
}

func (d Destination) clone() Destination {
	d.EnabledEvents = slices.Clone(d.EnabledEvents)
	d.Metadata = maps.Clone(d.Metadata)
	if d.Metadata == nil {
		d.Metadata = map[string]string{}
	}
	return d
}

func (a *account) findDestination(id string) int {
	return slices.IndexFunc(a.destinations, func(d Destination) bool { return d.ID == id })
}

// newestDestinations are the account's destinations newest first (creation order breaks ties).
func (a *account) newestDestinations() []Destination {
	out := slices.Clone(a.destinations)
	slices.Reverse(out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out
}

// v2Err is a v2 error answer.
func v2Err(status int, typ, code, format string, args ...any) result {
	e := map[string]string{"type": typ, "message": fmt.Sprintf(format, args...)}
	if code != "" {
		e["code"] = code
	}
	return result{status: status, body: marshal(map[string]any{"error": e})}
}

func badV2(format string, args ...any) result {
	return v2Err(http.StatusBadRequest, "invalid_request_error", "", format, args...)
}

// v2Fault is an injected fault in the v2 error shape.
func v2Fault(f *Fault) result {
	res := faultResult(f)
	var v1 struct {
		Error apiError `json:"error"`
	}
	_ = json.Unmarshal(res.body, &v1)
	out := v2Err(res.status, v1.Error.Type, v1.Error.Code, "%s", v1.Error.Message)
	out.header = res.header
	return out
}

// includes reads include (include=a&include=b, or include[0]=a as stripe-go sends it).
func includes(q url.Values) []string {
	var out []string
	for k, vs := range q {
		if k == "include" || (strings.HasPrefix(k, "include[") && strings.HasSuffix(k, "]")) {
			out = append(out, vs...)
		}
	}
	return out
}

// handleV2 serves the v2 routes; body is the raw JSON body of a POST.
func (s *Server) handleV2(r *http.Request, key string, rec *Request, body []byte) result {
	if key == "" {
		return v2Err(http.StatusUnauthorized, "invalid_request_error", "", "You did not provide an API key.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rejected[key] {
		return v2Err(http.StatusUnauthorized, "invalid_request_error", "", "Invalid API Key provided: %s", maskKey(key))
	}
	if s.restricted[key] {
		return v2Err(http.StatusForbidden, "invalid_request_error", "", "The provided key '%s' does not have the required permissions for this endpoint.", maskKey(key))
	}
	if v := r.Header.Get("Stripe-Version"); v == "" || v < v2MinVersion {
		return badV2("v2 endpoints need a Stripe-Version of %s or later; this request has %q.", v2MinVersion, v)
	}
	a := s.acct(key, true)
	now := s.now()
	var fields map[string]json.RawMessage
	if r.Method == http.MethodPost {
		if len(bytes.TrimSpace(body)) == 0 {
			fields = map[string]json.RawMessage{}
		} else if json.Unmarshal(body, &fields) != nil || fields == nil {
			return badV2("The request body is not a JSON object.")
		}
	}
	fp := r.Method + " " + r.URL.Path + "\n" + string(body)
	return s.idempotent(a, r, rec, fp, now, func() result { return s.routeV2(r, a, fields, now) })
}

func (s *Server) routeV2(r *http.Request, a *account, fields map[string]json.RawMessage, now time.Time) result {
	q := r.URL.Query()
	if r.URL.Path == destinationsPath {
		switch r.Method {
		case http.MethodGet:
			return s.listDestinations(a, q)
		case http.MethodPost:
			return s.createDestination(a, fields, now)
		}
	}
	rest, ok := strings.CutPrefix(r.URL.Path, destinationsPath+"/")
	parts := strings.Split(rest, "/")
	if !ok || rest == "" || len(parts) > 2 {
		return v2Err(http.StatusNotFound, "invalid_request_error", "", "Unrecognized request URL (%s: %s).", r.Method, r.URL.Path)
	}
	i := a.findDestination(parts[0])
	if i < 0 {
		return notFoundV2(parts[0])
	}
	d := &a.destinations[i]
	switch {
	case len(parts) == 2 && r.Method == http.MethodPost && (parts[1] == "enable" || parts[1] == "disable"):
		d.Status, d.Updated = parts[1]+"d", now
		return cached(http.StatusOK, renderDestination(*d, false, false))
	case len(parts) == 2 && r.Method == http.MethodPost && parts[1] == "ping":
		return cached(http.StatusOK, map[string]any{"id": newID("evt_test_", 40), "object": "v2.core.event", "type": "v2.core.event_destination.ping",
			"created": now.UTC().Format(time.RFC3339Nano), "livemode": false, "related_object": map[string]any{"id": d.ID, "type": "v2.core.event_destination", "url": destinationsPath + "/" + d.ID}})
	case len(parts) == 2:
		return v2Err(http.StatusNotFound, "invalid_request_error", "", "Unrecognized request URL (%s: %s).", r.Method, r.URL.Path)
	case r.Method == http.MethodGet:
		if bad := checkIncludes(includes(q), false); bad != "" {
			return badV2("%s", bad)
		}
		return cached(http.StatusOK, renderDestination(*d, slices.Contains(includes(q), "webhook_endpoint.url"), false))
	case r.Method == http.MethodPost:
		return updateDestination(d, fields, now)
	case r.Method == http.MethodDelete:
		a.destinations = slices.Delete(a.destinations, i, i+1)
		return cached(http.StatusOK, map[string]any{"id": parts[0], "object": "v2.core.event_destination"})
	}
	return v2Err(http.StatusNotFound, "invalid_request_error", "", "Unrecognized request URL (%s: %s).", r.Method, r.URL.Path)
}

func notFoundV2(id string) result {
	res := v2Err(http.StatusNotFound, "invalid_request_error", "resource_missing", "No such event destination: '%s'", id)
	res.cache = true
	return res
}

func cached(status int, v any) result { return result{status: status, body: marshal(v), cache: true} }

// checkIncludes refuses include values Stripe does not know, and the secret outside a create.
func checkIncludes(inc []string, create bool) string {
	for _, v := range inc {
		switch {
		case v == "webhook_endpoint.url":
		case v == "webhook_endpoint.signing_secret" && create:
		case v == "webhook_endpoint.signing_secret":
			return "include: webhook_endpoint.signing_secret is only includable on creation."
		default:
			return fmt.Sprintf("include: %q is not an includable field.", v)
		}
	}
	return ""
}

// renderDestination is a destination as the API shows it: the URL only when included, the
// secret only when included on create.
func renderDestination(d Destination, withURL, withSecret bool) map[string]any {
	out := map[string]any{
		"id": d.ID, "object": "v2.core.event_destination", "type": d.Type, "name": d.Name,
		"description": nil, "event_payload": d.EventPayload, "events_from": []string{"@self"},
		"enabled_events": slices.Clone(d.EnabledEvents), "metadata": maps.Clone(d.Metadata), "status": d.Status,
		"created": d.Created.UTC().Format(time.RFC3339Nano), "updated": d.Updated.UTC().Format(time.RFC3339Nano),
		"livemode": false,
	}
	if out["metadata"] == nil {
		out["metadata"] = map[string]string{}
	}
	if d.Description != "" {
		out["description"] = d.Description
	}
	if d.EventPayload == "snapshot" {
		out["snapshot_api_version"] = d.SnapshotAPIVersion
	}
	if d.Status == statusDisabled {
		out["status_details"] = map[string]any{"disabled": map[string]string{"reason": "user"}}
	}
	switch d.Type {
	case "webhook_endpoint":
		we := map[string]string{}
		if withURL {
			we["url"] = d.URL
		}
		if withSecret {
			we["signing_secret"] = d.Secret
		}
		out["webhook_endpoint"] = we
	case "amazon_eventbridge":
		out["amazon_eventbridge"] = map[string]string{"aws_account_id": d.AWSAccountID,
			"aws_event_source_arn": "arn:aws:events:us-east-1::event-source/aws.partner/stripe.com/" + d.ID, "aws_event_source_status": "active"}
	}
	return out
}

// v1AsDestination is a v1 endpoint as WithV1InV2List shows it.
func v1AsDestination(e Endpoint) Destination {
	return Destination{ID: e.ID, Type: "webhook_endpoint", Name: e.ID, Description: e.Description, EventPayload: "snapshot",
		EnabledEvents: e.EnabledEvents, SnapshotAPIVersion: e.APIVersion, Metadata: e.Metadata, Status: e.Status, URL: e.URL,
		Created: e.Created, Updated: e.Created}
}

func pageToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("ed-page:" + strconv.Itoa(offset)))
}

func (s *Server) listDestinations(a *account, q url.Values) result {
	inc := includes(q)
	if bad := checkIncludes(inc, false); bad != "" {
		return badV2("%s", bad)
	}
	limit := v2DefaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > v2MaxLimit {
			return badV2("limit must be an integer between 1 and %d.", v2MaxLimit)
		}
		limit = n
	}
	if s.pageSize > 0 {
		limit = min(limit, s.pageSize)
	}
	all := a.newestDestinations()
	if s.v1InV2 {
		for _, e := range a.ordered() {
			all = append(all, v1AsDestination(e.Endpoint))
		}
	}
	offset := 0
	if tok := q.Get("page"); tok != "" {
		b, decodeErr := base64.RawURLEncoding.DecodeString(tok)
		n, ok := strings.CutPrefix(string(b), "ed-page:")
		var err error
		if offset, err = strconv.Atoi(n); decodeErr != nil || err != nil || !ok || offset < 0 {
			return badV2("page: invalid page token.")
		}
	}
	end := min(offset+limit, len(all))
	data := []any{}
	for _, d := range all[min(offset, end):end] {
		data = append(data, renderDestination(d, slices.Contains(inc, "webhook_endpoint.url"), false))
	}
	var next any
	if end < len(all) {
		nq := maps.Clone(q)
		nq.Set("page", pageToken(end))
		next = destinationsPath + "?" + nq.Encode()
	}
	return result{status: http.StatusOK, body: marshal(map[string]any{"data": data, "next_page_url": next, "previous_page_url": nil})}
}

// decodeField unmarshals fields[name] into v when present; it reports a type mismatch.
func decodeField(fields map[string]json.RawMessage, name string, v any) (present bool, problem string) {
	raw, ok := fields[name]
	if !ok {
		return false, ""
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Sprintf("%s: invalid value.", name)
	}
	return true, ""
}

func unknownField(fields map[string]json.RawMessage, allowed ...string) string {
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(allowed, k) {
			return "Received unknown parameter: " + k
		}
	}
	return ""
}

func (s *Server) createDestination(a *account, fields map[string]json.RawMessage, now time.Time) result {
	if bad := unknownField(fields, "name", "description", "type", "event_payload", "enabled_events", "events_from", "metadata",
		"snapshot_api_version", "webhook_endpoint", "amazon_eventbridge", "azure_event_grid", "include"); bad != "" {
		return badV2("%s", bad)
	}
	d := Destination{Status: statusEnabled, Created: now, Updated: now, Metadata: map[string]string{}}
	var we struct {
		URL string `json:"url"`
	}
	var inc []string
	for _, f := range []struct {
		name     string
		v        any
		required bool
	}{
		{"name", &d.Name, true}, {"type", &d.Type, true}, {"event_payload", &d.EventPayload, true},
		{"enabled_events", &d.EnabledEvents, true}, {"description", &d.Description, false}, {"metadata", &d.Metadata, false},
		{"snapshot_api_version", &d.SnapshotAPIVersion, false}, {"webhook_endpoint", &we, false}, {"include", &inc, false},
	} {
		present, problem := decodeField(fields, f.name, f.v)
		if problem != "" {
			return badV2("%s", problem)
		}
		if !present && f.required {
			return badV2("Missing required param: %s.", f.name)
		}
	}
	switch {
	case d.Type != "webhook_endpoint" && d.Type != "amazon_eventbridge" && d.Type != "azure_event_grid":
		return badV2("type: must be one of webhook_endpoint, amazon_eventbridge or azure_event_grid.")
	case d.EventPayload != "thin" && d.EventPayload != "snapshot":
		return badV2("event_payload: must be one of thin or snapshot.")
	case d.EventPayload == "thin" && d.SnapshotAPIVersion != "":
		return badV2("snapshot_api_version: only for event_payload snapshot.")
	case len(d.EnabledEvents) == 0:
		return badV2("enabled_events: must not be empty.")
	case d.Type == "webhook_endpoint" && !validURL(we.URL):
		return badV2("webhook_endpoint.url: must be a valid http(s) URL.")
	}
	if bad := checkIncludes(inc, true); bad != "" {
		return badV2("%s", bad)
	}
	if len(a.endpoints)+len(a.destinations) >= s.maxEndpoints {
		res := badV2("You have reached the maximum of %d event destinations.", s.maxEndpoints)
		res.cache = true
		return res
	}
	d.URL = we.URL
	d.ID = newID("ed_test_", 40)
	d.Secret = newID("whsec_", 32)
	a.destinations = append(a.destinations, d.clone())
	return cached(http.StatusOK, renderDestination(d, slices.Contains(inc, "webhook_endpoint.url"), slices.Contains(inc, "webhook_endpoint.signing_secret")))
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

func updateDestination(d *Destination, fields map[string]json.RawMessage, now time.Time) result {
	if bad := unknownField(fields, "name", "description", "enabled_events", "metadata", "webhook_endpoint", "include"); bad != "" {
		return badV2("%s", bad)
	}
	next := d.clone()
	var desc *string
	var md map[string]*string
	var we *struct {
		URL string `json:"url"`
	}
	var inc []string
	for _, f := range []struct {
		name string
		v    any
	}{{"name", &next.Name}, {"description", &desc}, {"enabled_events", &next.EnabledEvents}, {"metadata", &md}, {"webhook_endpoint", &we}, {"include", &inc}} {
		if _, problem := decodeField(fields, f.name, f.v); problem != "" {
			return badV2("%s", problem)
		}
	}
	if bad := checkIncludes(inc, false); bad != "" {
		return badV2("%s", bad)
	}
	if _, ok := fields["description"]; ok {
		next.Description = ""
		if desc != nil {
			next.Description = *desc
		}
	}
	for k, v := range md {
		if v == nil || *v == "" {
			delete(next.Metadata, k)
		} else {
			next.Metadata[k] = *v
		}
	}
	if we != nil {
		if !validURL(we.URL) {
			return badV2("webhook_endpoint.url: must be a valid http(s) URL.")
		}
		next.URL = we.URL
	}
	if len(next.EnabledEvents) == 0 {
		return badV2("enabled_events: must not be empty.")
	}
	next.Updated = now
	*d = next
	return cached(http.StatusOK, renderDestination(*d, slices.Contains(inc, "webhook_endpoint.url"), false))
}

// DeliverThin sends a thin event of type typ about relatedObject (id, type, url) to v2
// destination id now, signed with its secret as Stripe signs v1 deliveries (Stripe-Signature
// t=,v1=), and returns the event id and the status answered. snapshotEvent, when set, is the
// snapshot event the thin one stands in for during a migration. A disabled destination or one
// of another type gets nothing (an error).
func (s *Server) DeliverThin(apiKey, id, typ string, relatedObject map[string]string, snapshotEvent string) (eventID string, status int, err error) {
	s.mu.Lock()
	a := s.acct(apiKey, false)
	i := -1
	if a != nil {
		i = a.findDestination(id)
	}
	if i < 0 || a.destinations[i].Type != "webhook_endpoint" || a.destinations[i].Status != statusEnabled {
		s.mu.Unlock()
		return "", 0, fmt.Errorf("fake: no enabled webhook destination %s", id)
	}
	d, now := a.destinations[i], s.now()
	s.mu.Unlock()
	ev := map[string]any{"id": newID("evt_test_", 40), "object": "v2.core.event", "type": typ, "livemode": false,
		"created": now.UTC().Format(time.RFC3339Nano), "related_object": relatedObject}
	if snapshotEvent != "" {
		ev["snapshot_event"] = snapshotEvent
	}
	body, _ := json.Marshal(ev)
	status, err = s.post(job{url: d.URL, secret: d.Secret, body: body}, now)
	return ev["id"].(string), status, err
}
