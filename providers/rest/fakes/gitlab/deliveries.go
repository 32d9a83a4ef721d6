package gitlab

// Deliveries, the hook event log and auto-disabling, as GitLab does them (REST-PROVIDERS.md §1.5
// and GitLab's source: app/services/web_hook_service.rb, app/services/web_hooks/
// log_execution_service.rb, app/models/concerns/web_hooks/auto_disabling.rb,
// app/models/hooks/web_hook_log.rb, app/finders/web_hooks/web_hook_logs_finder.rb,
// lib/api/hooks/events.rb and resend_hook.rb, app/services/web_hooks/events/resend_service.rb):
//
//   - Emit sends an event to every hook of a project that subscribes to it and is executable,
//     once (GitLab never retries), with Content-Type, User-Agent, Idempotency-Key (new per
//     event), X-Gitlab-Event, X-Gitlab-Webhook-UUID (new per request), X-Gitlab-Instance,
//     X-Gitlab-Event-UUID and X-Gitlab-Token. Each request is logged: id, url, trigger,
//     request_headers (the token [REDACTED]), request_data, response_headers, response_body,
//     response_status (a string; "internal error" when the endpoint could not be reached),
//     execution_duration and created_at, from the fake's Clock.
//   - A 2xx or 3xx answer enables the hook (recent_failures 0, disabled_until null); any other
//     outcome counts a failure. A project hook's 4th failure in a row disables it for 1 minute,
//     each later one for twice as long, up to 24 hours (alert_status temporarily_disabled,
//     disabled_until); the 40th disables it for good (alert_status disabled). A disabled hook
//     is not executed: events emitted meanwhile are neither sent nor logged, so nothing can
//     bring them back. Group hooks are not auto-disabled (ENABLED_HOOK_TYPES is ProjectHook).
//   - GET .../hooks/:hook_id/events lists the log of the last 7 days (from the start of the
//     day, UTC, 7 days ago), newest first, with status (comma-separated codes or successful,
//     client_failure, server_failure) and page/per_page (1..20, default 20) paging with Link
//     headers; other values answer 400.
//   - POST .../events/:hook_event_id/resend sends the logged request again, with the same
//     Idempotency-Key, and logs it: 201 {"response_status": <code>}; 5 a minute per project
//     and user (fixed one-minute windows of the Clock), 429 beyond with Retry-After: 60;
//     422 {"message": "Hook disabled"} while the hook is disabled, 422 with the error when
//     the endpoint cannot be reached, 404 for an unknown entry.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
)

// HookEvent is one logged delivery (GitLab's WebHookLog).
type HookEvent struct {
	ID                int
	URL               string
	Trigger           string
	RequestHeaders    map[string]string
	RequestData       json.RawMessage
	ResponseHeaders   map[string]string
	ResponseBody      string
	ResponseStatus    string
	ExecutionDuration float64
	Created           time.Time
}

// IdempotencyKey is the Idempotency-Key the delivery carried.
func (e HookEvent) IdempotencyKey() string { return e.RequestHeaders["Idempotency-Key"] }

// internalError is GitLab's response_status for a delivery that got no answer.
const internalError = "internal error"

// Auto-disabling (WebHooks::AutoDisabling).
const (
	temporarilyDisabledThreshold = 3
	permanentlyDisabledThreshold = 39
	initialBackoff               = time.Minute
	maxBackoff                   = 24 * time.Hour
	logDays                      = 7
	resendLimit                  = 5
)

// triggers maps an event flag onto the log's trigger and the X-Gitlab-Event header.
var triggers = map[string][2]string{
	"push_events":                  {"push_hooks", "Push Hook"},
	"tag_push_events":              {"tag_push_hooks", "Tag Push Hook"},
	"issues_events":                {"issue_hooks", "Issue Hook"},
	"confidential_issues_events":   {"confidential_issue_hooks", "Issue Hook"},
	"merge_requests_events":        {"merge_request_hooks", "Merge Request Hook"},
	"note_events":                  {"note_hooks", "Note Hook"},
	"confidential_note_events":     {"confidential_note_hooks", "Confidential Note Hook"},
	"job_events":                   {"job_hooks", "Job Hook"},
	"pipeline_events":              {"pipeline_hooks", "Pipeline Hook"},
	"wiki_page_events":             {"wiki_page_hooks", "Wiki Page Hook"},
	"deployment_events":            {"deployment_hooks", "Deployment Hook"},
	"feature_flag_events":          {"feature_flag_hooks", "Feature Flag Hook"},
	"releases_events":              {"release_hooks", "Release Hook"},
	"milestone_events":             {"milestone_hooks", "Milestone Hook"},
	"emoji_events":                 {"emoji_hooks", "Emoji Hook"},
	"resource_access_token_events": {"resource_access_token_hooks", "Resource Access Token Hook"},
}

func trigger(flag string) (string, string) {
	if t, ok := triggers[flag]; ok {
		return t[0], t[1]
	}
	base := strings.TrimSuffix(flag, "_events")
	words := strings.Split(base, "_")
	for i, w := range words {
		if w != "" {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return base + "_hooks", strings.Join(words, " ") + " Hook"
}

func uuid() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Hook state, callers hold s.mu.

func (h *Hook) temporarilyDisabled(now time.Time) bool {
	return h.DisabledUntil != nil && !h.DisabledUntil.Before(now) &&
		h.RecentFailures > temporarilyDisabledThreshold && h.RecentFailures <= permanentlyDisabledThreshold
}

func (h *Hook) permanentlyDisabled() bool {
	return h.RecentFailures > permanentlyDisabledThreshold || (h.RecentFailures > temporarilyDisabledThreshold && h.DisabledUntil == nil)
}

func (s *Server) executable(ns *namespace, h *Hook, now time.Time) bool {
	if ns.kind == groupKind {
		return true
	}
	return !h.temporarilyDisabled(now) && !h.permanentlyDisabled()
}

func (s *Server) alertStatus(ns *namespace, h *Hook, now time.Time) string {
	switch {
	case ns.kind == groupKind:
		return "executable"
	case h.temporarilyDisabled(now):
		return "temporarily_disabled"
	case h.permanentlyDisabled():
		return "disabled"
	}
	return "executable"
}

// record updates the failure state after a delivery (LogExecutionService).
func (s *Server) record(ns *namespace, h *Hook, ok bool, now time.Time) {
	if ns.kind == groupKind {
		return
	}
	if ok {
		h.RecentFailures, h.DisabledUntil = 0, nil
		return
	}
	if !s.executable(ns, h, now) {
		return
	}
	prev := h.RecentFailures
	h.RecentFailures = min(prev+1, permanentlyDisabledThreshold+1)
	if h.RecentFailures > temporarilyDisabledThreshold {
		wait := initialBackoff
		for range prev - temporarilyDisabledThreshold {
			if wait *= 2; wait >= maxBackoff {
				wait = maxBackoff
				break
			}
		}
		until := now.Add(wait)
		h.DisabledUntil = &until
	}
}

// request is one delivery to be sent.
type request struct {
	ns      *namespace
	hook    *Hook
	url     string
	trigger string
	headers map[string]string
	data    json.RawMessage
}

// outcome is what the endpoint answered.
type outcome struct {
	status   string
	ok       bool
	headers  map[string]string
	body     string
	err      error
	duration float64
}

func (s *Server) newRequest(ns *namespace, h *Hook, trig, event, key string, data json.RawMessage) request {
	hdr := map[string]string{
		"Content-Type": "application/json", "User-Agent": "GitLab/17.4.0-fake",
		"Idempotency-Key": key, "X-Gitlab-Event": event, "X-Gitlab-Webhook-UUID": uuid(),
		"X-Gitlab-Instance": "https://gitlab.example.com", "X-Gitlab-Event-UUID": uuid(),
	}
	if h.Token != "" {
		hdr["X-Gitlab-Token"] = h.Token
	}
	return request{ns: ns, hook: h, url: h.URL, trigger: trig, headers: hdr, data: data}
}

// send delivers one request; it must be called without s.mu held (the endpoint may be slow).
func (s *Server) send(r request) outcome {
	req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(r.data))
	if err != nil {
		return outcome{status: internalError, err: err}
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	start := time.Now()
	res, err := s.http.Do(req)
	dur := time.Since(start).Seconds()
	if err != nil {
		return outcome{status: internalError, err: err, body: err.Error(), duration: dur}
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 8<<10))
	hdr := map[string]string{}
	for k := range res.Header {
		hdr[k] = res.Header.Get(k)
	}
	return outcome{status: strconv.Itoa(res.StatusCode), ok: res.StatusCode >= 200 && res.StatusCode < 400, headers: hdr, body: string(body), duration: dur}
}

// log appends a delivery to the hook's log and updates its failure state; callers hold s.mu.
func (s *Server) log(r request, o outcome) HookEvent {
	now := s.Clock.Now().UTC()
	hdr := map[string]string{}
	for k, v := range r.headers {
		hdr[k] = v
	}
	e := HookEvent{ID: s.nextEvent, URL: r.url, Trigger: r.trigger, RequestHeaders: hdr, RequestData: r.data,
		ResponseHeaders: o.headers, ResponseBody: o.body, ResponseStatus: o.status, ExecutionDuration: o.duration, Created: now}
	s.nextEvent++
	r.hook.Events = append(r.hook.Events, e)
	s.record(r.ns, r.hook, o.ok, now)
	return e
}

// Emit sends an event (flag is the hook flag that subscribes to it: push_events) with body
// data to every hook of the project (a numeric id) that subscribes to it, as GitLab does when
// the event happens: once, to executable hooks only. It returns how many hooks were sent the
// event and how many subscribed but were disabled (those deliveries are lost for good).
func (s *Server) Emit(project, flag string, data []byte) (sent, skipped int) {
	trig, event := trigger(flag)
	s.mu.Lock()
	ns := s.spaces["projects/"+project]
	var reqs []request
	if ns != nil {
		now := s.Clock.Now()
		for _, id := range sortedHookIDs(ns) {
			h := ns.hooks[id]
			if !h.Flags[flag] {
				continue
			}
			if !s.executable(ns, h, now) {
				skipped++
				continue
			}
			reqs = append(reqs, s.newRequest(ns, h, trig, event, uuid(), json.RawMessage(data)))
		}
	}
	s.mu.Unlock()
	for _, r := range reqs {
		o := s.send(r)
		s.mu.Lock()
		s.log(r, o)
		s.mu.Unlock()
	}
	return len(reqs), skipped
}

// Events returns a copy of a project hook's event log, oldest first (every entry, also those
// older than the 7 days the API lists).
func (s *Server) Events(project string, hook int) []HookEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.spaces["projects/"+project]
	if ns == nil || ns.hooks[hook] == nil {
		return nil
	}
	return append([]HookEvent(nil), ns.hooks[hook].Events...)
}

func (e HookEvent) json() map[string]any {
	hdr := map[string]string{}
	for k, v := range e.RequestHeaders {
		hdr[k] = v
	}
	if _, ok := hdr["X-Gitlab-Token"]; ok {
		hdr["X-Gitlab-Token"] = "[REDACTED]"
	}
	var data any = map[string]any{}
	_ = json.Unmarshal(e.RequestData, &data)
	resp := e.ResponseHeaders
	if resp == nil {
		resp = map[string]string{}
	}
	return map[string]any{
		"id": e.ID, "url": e.URL, "trigger": e.Trigger, "request_headers": hdr, "request_data": data,
		"response_headers": resp, "response_body": e.ResponseBody, "execution_duration": e.ExecutionDuration,
		"response_status": e.ResponseStatus, "created_at": e.Created.Format("2006-01-02T15:04:05.000Z07:00"),
	}
}

// statusMatches is WebHookLogsFinder's filter: a code, or a category.
func statusMatches(filters []string, status string) bool {
	code, _ := strconv.Atoi(status)
	for _, f := range filters {
		switch f {
		case "successful":
			if code >= 200 && code <= 299 {
				return true
			}
		case "client_failure":
			if code >= 400 && code <= 499 {
				return true
			}
		case "server_failure":
			if code >= 500 && code <= 599 || status == internalError {
				return true
			}
		default:
			if f == status {
				return true
			}
		}
	}
	return false
}

func validStatus(f string) bool {
	switch f {
	case "successful", "client_failure", "server_failure":
		return true
	}
	code, err := strconv.Atoi(f)
	return err == nil && strconv.Itoa(code) == f && http.StatusText(code) != ""
}

// listEvents serves GET .../hooks/:hook_id/events; callers hold s.mu.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, h *Hook) {
	q := r.URL.Query()
	var filters []string
	if raw, ok := q["status"]; ok {
		for _, v := range raw {
			for _, f := range strings.Split(v, ",") {
				if f = strings.TrimSpace(f); !validStatus(f) {
					badRequest(w, "status does not have a valid value")
					return
				}
				filters = append(filters, f)
			}
		}
	}
	perPage := 20
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 20 {
			badRequest(w, "per_page does not have a valid value")
			return
		}
		perPage = n
	}
	perPage = s.capPage(perPage)
	page := 1
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		page = v
	}
	now := s.Clock.Now().UTC()
	y, m, d := now.AddDate(0, 0, -logDays).Date()
	from := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	var rows []HookEvent
	for i := len(h.Events) - 1; i >= 0; i-- { // newest first: created_at desc
		e := h.Events[i]
		if e.Created.Before(from) || e.Created.After(now) || (filters != nil && !statusMatches(filters, e.ResponseStatus)) {
			continue
		}
		rows = append(rows, e)
	}
	out := []map[string]any{}
	for i := (page - 1) * perPage; i < min(page*perPage, len(rows)); i++ {
		out = append(out, rows[i].json())
	}
	pageHeaders(w, r, page, perPage, len(rows))
	core.JSON(w, http.StatusOK, out)
}

// resend serves POST .../events/:hook_event_id/resend. It is called with s.mu held and
// returns with it released.
func (s *Server) resend(w http.ResponseWriter, r *http.Request, tok, key string, ns *namespace, h *Hook, eventID string) {
	now := s.Clock.Now()
	window := fmt.Sprintf("%s|%s|%d", key, tok, now.Unix()/60)
	s.resends[window]++
	if s.resends[window] > resendLimit {
		s.mu.Unlock()
		w.Header().Set("Retry-After", "60")
		core.JSON(w, http.StatusTooManyRequests, map[string]any{"message": map[string]string{"error": tooManyRequests}})
		return
	}
	id, _ := strconv.Atoi(eventID)
	var logged *HookEvent
	for i := range h.Events {
		if h.Events[i].ID == id {
			logged = &h.Events[i]
		}
	}
	switch {
	case logged == nil:
		s.mu.Unlock()
		message(w, http.StatusNotFound, "404 Not found")
		return
	case logged.URL != h.URL:
		s.mu.Unlock()
		message(w, http.StatusUnprocessableEntity, "The hook URL has changed, and this log entry cannot be retried")
		return
	case !s.executable(ns, h, now):
		s.mu.Unlock()
		message(w, http.StatusUnprocessableEntity, "Hook disabled")
		return
	}
	// The same request again: the logged data, trigger and Idempotency-Key (fresh UUIDs).
	req := s.newRequest(ns, h, logged.Trigger, logged.RequestHeaders["X-Gitlab-Event"], logged.IdempotencyKey(), logged.RequestData)
	s.mu.Unlock()
	o := s.send(req)
	s.mu.Lock()
	s.log(req, o)
	s.mu.Unlock()
	if o.err != nil {
		message(w, http.StatusUnprocessableEntity, o.err.Error())
		return
	}
	code, _ := strconv.Atoi(o.status)
	core.JSON(w, http.StatusCreated, map[string]int{"response_status": code})
}
