package fake

import (
	"bytes"
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
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Delivery is one delivery the fake attempted, and what it recorded as the hook's
// last_response.
type Delivery struct {
	GUID   string    `json:"guid"`
	Target string    `json:"target"` // lower-case, "repos/octo/hello"
	HookID int64     `json:"hook_id"`
	Event  string    `json:"event"`
	URL    string    `json:"url"`
	Time   time.Time `json:"time"`
	// Signed: the request carried X-Hub-Signature-256 (the hook has a secret).
	Signed bool `json:"signed"`
	// Code is the status the endpoint answered, 0 when it did not answer.
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

// job is one delivery to make: a snapshot of the hook (secret included) and the payload.
type job struct {
	key      string
	kind     string
	targetID int64
	hook     Hook
	event    string
	payload  []byte
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

func (s *Server) send(j job) Delivery {
	d := Delivery{GUID: newGUID(), Target: j.key, HookID: j.hook.ID, Event: j.event, URL: j.hook.Config.URL, Time: s.now()}
	body, ctype := j.payload, "application/json"
	if j.hook.Config.ContentType == "form" {
		body, ctype = []byte("payload="+url.QueryEscape(string(j.payload))), "application/x-www-form-urlencoded"
	}
	lr := s.post(j, &d, body, ctype)
	d.Code, d.Status, d.Message = lr.Code, lr.Status, lr.Message

	s.mu.Lock()
	if tg := s.targets[j.key]; tg != nil {
		if i := tg.find(j.hook.ID); i >= 0 {
			tg.hooks[i].LastResponse = lr
		}
	}
	s.mu.Unlock()
	s.sent.Add(d)
	return d
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
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return LastResponse{Code: resp.StatusCode, Status: "active", Message: "OK"}
	}
	return LastResponse{Code: resp.StatusCode, Status: "failed", Message: "Invalid HTTP Response: " + strconv.Itoa(resp.StatusCode)}
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
