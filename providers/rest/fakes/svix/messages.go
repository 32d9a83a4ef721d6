package svix

// Messages and recovery (Svix's OpenAPI, codegen/lib-openapi.json; docs.svix.com retries and
// recover):
//
//   - Send creates a message (msg_ id) in an application and sends it to every enabled endpoint
//     whose filterTypes include its event type (or that has none), signed as Standard Webhooks
//     with svix-id (the message id, "the same when the same webhook is being resent"),
//     svix-timestamp and svix-signature. A 2xx answer delivers it; anything else fails it. The
//     fake makes one attempt per send, without Svix's retry schedule (immediately, 5 s, 5 min,
//     ... about 27.5 h): a message the endpoint failed stays failed until it is recovered.
//   - POST /api/v1/app/{app_id}/endpoint/{endpoint_id}/recover {"since", "until"?} resends
//     every message created in [since, until) whose delivery to the endpoint failed ("Messages
//     that were sent successfully, even if failed initially, are not resent"), and answers
//     202 {id: qtask_..., status, task: "endpoint.recover"}; the fake resends before it answers.
//     A since that is not an RFC 3339 time answers 422.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
	"github.com/hookwarden/hookwarden/providers/standardwebhooks"
)

// Message is one message as the fake stores it.
type Message struct {
	ID        string
	EventType string
	Payload   []byte
	Created   time.Time
}

// Attempt is one delivery of a message to an endpoint.
type Attempt struct {
	MessageID  string
	EndpointID string
	Status     int // the endpoint's answer; 0 when it could not be reached
	At         time.Time
}

// Delivered reports whether the endpoint answered 2xx.
func (a Attempt) Delivered() bool { return a.Status >= 200 && a.Status < 300 }

type delivery struct {
	e   Endpoint
	msg Message
}

// Send creates a message in an application and sends it to its endpoints; it returns the
// message id.
func (s *Server) Send(token, app, eventType string, payload []byte) string {
	s.mu.Lock()
	s.seq++
	msg := Message{ID: "msg_" + leftPad(strconv.Itoa(s.seq), 10), EventType: eventType, Payload: append([]byte(nil), payload...), Created: s.Clock.Now().UTC()}
	s.messages[token+"/"+app] = append(s.messages[token+"/"+app], msg)
	var ds []delivery
	for _, e := range s.apps[token][app] {
		if e.Disabled || (e.FilterTypes != nil && !contains(e.FilterTypes, eventType)) {
			continue
		}
		ds = append(ds, delivery{*e, msg})
	}
	s.mu.Unlock()
	s.deliver(ds)
	return msg.ID
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// deliver sends each delivery and records its attempt; it is called without s.mu held.
func (s *Server) deliver(ds []delivery) {
	for _, d := range ds {
		status := 0
		if key, err := standardwebhooks.DecodeSecret([]byte(d.e.Secret)); err == nil {
			now := s.Clock.Now()
			req, err := http.NewRequest(http.MethodPost, d.e.URL, bytes.NewReader(d.msg.Payload))
			if err == nil {
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("svix-id", d.msg.ID)
				req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
				req.Header.Set("svix-signature", standardwebhooks.Sign(key, d.msg.ID, now, d.msg.Payload))
				if res, err := s.http.Do(req); err == nil {
					status = res.StatusCode
					_ = res.Body.Close()
				}
			}
		}
		s.mu.Lock()
		s.attempts = append(s.attempts, Attempt{MessageID: d.msg.ID, EndpointID: d.e.ID, Status: status, At: s.Clock.Now().UTC()})
		s.mu.Unlock()
	}
}

// Attempts returns every delivery attempt, in order.
func (s *Server) Attempts() []Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Attempt(nil), s.attempts...)
}

// recover serves POST .../recover. It is called with s.mu held and returns with it released.
func (s *Server) recover(w http.ResponseWriter, r *http.Request, scope string, e *Endpoint) {
	var body struct {
		Since *time.Time `json:"since"`
		Until *time.Time `json:"until"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Since == nil {
		s.mu.Unlock()
		svixError(w, http.StatusUnprocessableEntity, "validation", "since: a date-time is required")
		return
	}
	delivered, failed := map[string]bool{}, map[string]bool{}
	for _, a := range s.attempts {
		if a.EndpointID != e.ID {
			continue
		}
		if a.Delivered() {
			delivered[a.MessageID] = true
		} else {
			failed[a.MessageID] = true
		}
	}
	var ds []delivery
	for _, m := range s.messages[scope] {
		if !failed[m.ID] || delivered[m.ID] || m.Created.Before(*body.Since) || (body.Until != nil && !m.Created.Before(*body.Until)) {
			continue
		}
		ds = append(ds, delivery{*e, m})
	}
	s.seq++
	task := "qtask_" + leftPad(strconv.Itoa(s.seq), 10)
	s.mu.Unlock()
	s.deliver(ds)
	core.JSON(w, http.StatusAccepted, map[string]any{"id": task, "status": "running", "task": "endpoint.recover"})
}
