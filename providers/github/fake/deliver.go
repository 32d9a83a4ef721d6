package fake

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // GitHub still sends the legacy SHA-1 signature beside SHA-256
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Delivery is one delivery the fake attempted, as GitHub's delivery log of the hook keeps it
// (GET .../hooks/{id}/deliveries), and what it recorded as the hook's last_response.
type Delivery struct {
	// ID is the delivery's id (increasing over the fake's life, across hooks): the
	// delivery_id of GET .../deliveries/{delivery_id} and POST .../attempts.
	ID int64 `json:"id"`
	// GUID is X-GitHub-Delivery: shared by every hook the event went to, and kept by a
	// redelivery.
	GUID   string `json:"guid"`
	Target string `json:"target"` // lower-case, "repos/octo/hello"
	HookID int64  `json:"hook_id"`
	Event  string `json:"event"`
	// Action is the payload's "action" ("" when it has none: null on the wire).
	Action string `json:"action,omitempty"`
	// RepositoryID is the payload's repository.id, or the target's id for a repository hook (0:
	// null on the wire).
	RepositoryID int64  `json:"repository_id,omitempty"`
	URL          string `json:"url"`
	// Time is delivered_at: when the delivery was made, by the fake's clock.
	Time time.Time `json:"time"`
	// Redelivery: made by POST .../attempts.
	Redelivery bool `json:"redelivery"`
	// Duration is how long the request took (wall time).
	Duration time.Duration `json:"duration"`
	// Signed: the request carried X-Hub-Signature-256 (the hook has a secret).
	Signed bool `json:"signed"`
	// Code is the status the endpoint answered, 0 when it did not answer (status_code 0).
	Code int `json:"code"`
	// Status is the last_response status ("active", "failed", "timeout"); Message is its
	// message, which is also the delivery log's status ("OK", "Invalid HTTP Response: 502",
	// "failed to connect to host").
	Status  string `json:"status"`
	Message string `json:"message"`
	// Request and Response are what GET .../deliveries/{delivery_id} shows.
	Request  DeliveryRequest  `json:"request"`
	Response DeliveryResponse `json:"response"`
}

// DeliveryRequest is the request of a delivery: its headers (the signatures included, as GitHub
// shows them) and the event's JSON payload (before a form content_type encodes it).
type DeliveryRequest struct {
	Headers map[string]string `json:"headers"`
	Payload json.RawMessage   `json:"payload"`
}

// DeliveryResponse is the endpoint's answer (empty when there was none).
type DeliveryResponse struct {
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
}

func (d Delivery) clone() Delivery {
	d.Request.Headers = maps.Clone(d.Request.Headers)
	d.Request.Payload = slices.Clone(d.Request.Payload)
	d.Response.Headers = maps.Clone(d.Response.Headers)
	return d
}

// job is one delivery to make: a snapshot of the hook (secret included) and the payload; guid
// is the event's (a new one when empty), redelivery marks POST .../attempts.
type job struct {
	key        string
	kind       string
	targetID   int64
	hook       Hook
	event      string
	payload    []byte
	guid       string
	redelivery bool
	at         time.Time // delivered_at; zero: now
}

// userAgent is the shape of GitHub's ("GitHub-Hookshot/<short sha>").
const userAgent = "GitHub-Hookshot/fake0001"

// pingJob builds the ping GitHub sends after a create and on POST .../pings. Callers hold s.mu.
func (s *Server) pingJob(tg *target, h Hook, base string) job {
	payload := map[string]any{
		"zen":     "Design for failure.",
		"hook_id": h.ID,
		"hook":    render(tg, h, base),
		"sender":  map[string]any{"login": "hookwarden-fake", "id": 1, "type": "User"},
	}
	if tg.kind == KindOrganization {
		payload["organization"] = map[string]any{"login": tg.owner, "id": tg.id}
	} else {
		payload["repository"] = map[string]any{
			"id": tg.id, "name": tg.repo, "full_name": tg.owner + "/" + tg.repo,
			"owner": map[string]any{"login": tg.owner},
		}
	}
	b, _ := json.Marshal(payload)
	return job{key: targetKey(tg.kind, tg.owner, tg.repo), kind: tg.kind, targetID: tg.id, hook: h.clone(), event: "ping", payload: b}
}

// launch sends the jobs in the background (GitHub answers the API call first); WaitDeliveries
// waits for them.
func (s *Server) launch(jobs []job) {
	for _, j := range jobs {
		s.inflight.Add(1)
		go func() {
			defer s.inflight.Done()
			s.send(j)
		}()
	}
}

// WaitDeliveries waits until every background delivery (pings after create and on POST
// .../pings) has finished and recorded its last_response.
func (s *Server) WaitDeliveries() { s.inflight.Wait() }

// Deliveries returns every delivery attempted so far, in completion order.
func (s *Server) Deliveries() []Delivery { return s.sent.All() }

// Deliver sends event with payload to hook hookID of target now, as GitHub would when the
// event happens (signed when the hook has a secret, form-encoded when its content_type is
// form), records the outcome as the hook's last_response and returns it. It works whether or
// not WithDeliveries is set. An unknown or inactive hook is an error: GitHub would not deliver.
func (s *Server) Deliver(target string, hookID int64, event string, payload []byte) (Delivery, error) {
	s.mu.Lock()
	tg, i := s.locate(target, hookID)
	if i < 0 {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("fake: no hook %d on %s", hookID, target)
	}
	h := tg.hooks[i]
	if !h.Active {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("fake: hook %d on %s is inactive", hookID, target)
	}
	if payload == nil {
		payload = []byte("{}")
	}
	j := job{key: targetKey(tg.kind, tg.owner, tg.repo), kind: tg.kind, targetID: tg.id, hook: h.clone(), event: event, payload: payload}
	s.mu.Unlock()
	return s.send(j), nil
}

// Emit makes event happen on target, as GitHub does when something happens in a repository or
// organization: one delivery of payload, under one new X-GitHub-Delivery guid, to every active
// hook of target subscribed to event (or "*"), each signed with its hook's secret. It returns
// the deliveries in hook id order (none when no hook is subscribed) after they are made and
// logged; it works whether or not WithDeliveries is set. payload nil is "{}". An unknown
// target is an error.
func (s *Server) Emit(target, event string, payload []byte) ([]Delivery, error) {
	return s.EmitAt(time.Time{}, target, event, payload)
}

// EmitAt is Emit with the deliveries logged as made at at (zero: now), for a process whose clock
// the test cannot move (a manager in a demo): "this happened 80 hours ago" without moving the
// fake's clock. The requests are sent now.
func (s *Server) EmitAt(at time.Time, target, event string, payload []byte) ([]Delivery, error) {
	if payload == nil {
		payload = []byte("{}")
	}
	s.mu.Lock()
	tg := s.lookup(target)
	if tg == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("fake: no target %s", target)
	}
	guid := newGUID()
	var jobs []job
	for _, h := range tg.hooks {
		if h.Active && (slices.Contains(h.Events, "*") || slices.Contains(h.Events, event)) {
			jobs = append(jobs, job{key: targetKey(tg.kind, tg.owner, tg.repo), kind: tg.kind, targetID: tg.id, hook: h.clone(),
				event: event, payload: slices.Clone(payload), guid: guid, at: at.UTC().Truncate(time.Second)})
		}
	}
	s.mu.Unlock()
	out := make([]Delivery, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, s.send(j))
	}
	return out, nil
}

// DeliveryLog returns hook hookID's delivery log on target, newest first, as GET
// .../deliveries lists it (nil for an unknown hook).
func (s *Server) DeliveryLog(target string, hookID int64) []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, i := s.locate(target, hookID); i < 0 {
		return nil
	}
	return s.logOf(hookID)
}

// logOf is hook id's log, newest (highest id) first, copied. Callers hold s.mu.
func (s *Server) logOf(hookID int64) []Delivery {
	src := s.logs[hookID]
	out := make([]Delivery, len(src))
	for i, d := range src {
		out[i] = d.clone()
	}
	slices.SortFunc(out, func(a, b Delivery) int { return cmp.Compare(b.ID, a.ID) })
	return out
}

// redeliveryJob is POST .../attempts of delivery d: the same payload and guid, to the hook as it
// is configured now (its URL and secret: a fresh signature), marked as a redelivery. Callers
// hold s.mu.
func redeliveryJob(tg *target, h Hook, d Delivery) job {
	return job{key: targetKey(tg.kind, tg.owner, tg.repo), kind: tg.kind, targetID: tg.id, hook: h.clone(),
		event: d.Event, payload: slices.Clone(d.Request.Payload), guid: d.GUID, redelivery: true}
}

func (s *Server) send(j job) Delivery {
	if j.guid == "" {
		j.guid = newGUID()
	}
	s.mu.Lock()
	s.nextDeliveryID++
	id := s.nextDeliveryID
	s.mu.Unlock()
	d := Delivery{ID: id, GUID: j.guid, Target: j.key, HookID: j.hook.ID, Event: j.event, URL: j.hook.Config.URL, Time: j.at,
		Redelivery: j.redelivery, Request: DeliveryRequest{Payload: slices.Clone(j.payload)}}
	if d.Time.IsZero() {
		d.Time = s.now()
	}
	d.Action, d.RepositoryID = payloadFacts(j.payload)
	if d.RepositoryID == 0 && j.kind == KindRepository {
		d.RepositoryID = j.targetID
	}
	body, ctype := j.payload, "application/json"
	if j.hook.Config.ContentType == "form" {
		body, ctype = []byte("payload="+url.QueryEscape(string(j.payload))), "application/x-www-form-urlencoded"
	}
	start := time.Now()
	lr := s.post(j, &d, body, ctype)
	d.Duration = time.Since(start)
	d.Code, d.Status, d.Message = lr.Code, lr.Status, lr.Message

	s.mu.Lock()
	if tg := s.targets[j.key]; tg != nil {
		if i := tg.find(j.hook.ID); i >= 0 {
			tg.hooks[i].LastResponse = lr
			s.logs[j.hook.ID] = append(s.logs[j.hook.ID], d.clone())
		}
	}
	s.mu.Unlock()
	s.sent.Add(d)
	return d
}

// payloadFacts reads the payload's action and repository.id, which the delivery log shows.
func payloadFacts(payload []byte) (action string, repositoryID int64) {
	var p struct {
		Action     string `json:"action"`
		Repository struct {
			ID int64 `json:"id"`
		} `json:"repository"`
	}
	_ = json.Unmarshal(payload, &p) // a payload that is not an object has neither
	return p.Action, p.Repository.ID
}

// post makes the HTTP request and describes the outcome as GitHub's last_response would (the
// exact status words for failures are not documented; these are the fake's).
func (s *Server) post(j job, d *Delivery, body []byte, ctype string) LastResponse {
	req, err := http.NewRequest(http.MethodPost, j.hook.Config.URL, bytes.NewReader(body))
	if err != nil {
		return LastResponse{Status: "failed", Message: "invalid URL"}
	}
	h := req.Header
	h.Set("Content-Type", ctype)
	h.Set("User-Agent", userAgent)
	h.Set("X-GitHub-Event", j.event)
	h.Set("X-GitHub-Delivery", d.GUID)
	h.Set("X-GitHub-Hook-ID", strconv.FormatInt(j.hook.ID, 10))
	h.Set("X-GitHub-Hook-Installation-Target-Type", strings.ToLower(j.kind))
	h.Set("X-GitHub-Hook-Installation-Target-ID", strconv.FormatInt(j.targetID, 10))
	if sec := j.hook.Config.Secret; sec != "" {
		h.Set("X-Hub-Signature-256", "sha256="+hexMAC(sha256.New, sec, body))
		h.Set("X-Hub-Signature", "sha1="+hexMAC(sha1.New, sec, body))
		d.Signed = true
	}
	d.Request.Headers = firstValues(h)
	// insecure_ssl is stored, not acted on: the delivery client decides TLS (tests deliver
	// over plain HTTP).
	resp, err := s.httpClient.Do(req)
	if err != nil {
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			return LastResponse{Status: "timeout", Message: "timed out"}
		}
		return LastResponse{Status: "failed", Message: "failed to connect to host"}
	}
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	d.Response = DeliveryResponse{Headers: firstValues(resp.Header), Body: string(answer)}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return LastResponse{Code: resp.StatusCode, Status: "active", Message: "OK"}
	}
	return LastResponse{Code: resp.StatusCode, Status: "failed", Message: "Invalid HTTP Response: " + strconv.Itoa(resp.StatusCode)}
}

// maxResponseBytes is how much of an endpoint's answer the delivery log keeps.
const maxResponseBytes = 64 << 10

func firstValues(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, vs := range h {
		if len(vs) > 0 {
			out[k] = vs[0]
		}
	}
	return out
}

func hexMAC(h func() hash.Hash, secret string, body []byte) string {
	m := hmac.New(h, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// newGUID returns a random version-4 UUID, the shape of X-GitHub-Delivery.
func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}
