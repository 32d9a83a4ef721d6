package fake

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
)

// Stripe's event log and its deliveries, as the fake models them (PROVIDERS.md §1.5, §1.6).
//
//   - Emit records an event (evt_..., created on the fake's clock, the account's API version)
//     and delivers it at once to every enabled endpoint of the account subscribed to its type
//     ("*" or the exact name), signed with that endpoint's secret. pending_webhooks starts at
//     the number of those endpoints and drops by one per endpoint that answers 2xx.
//   - A failed attempt (no answer, or not 2xx) is retried on retrySchedule, measured on the
//     fake's clock, but only when a test calls RetryDue: no background goroutine, no real
//     timer. Retries stop once the next one would fall more than RetryWindow (3 days, Stripe's
//     live-mode window) after the event was created, and a retry found due only after the
//     window (the clock was moved past it) is not made: the delivery is then "failed" and the
//     event stays pending for good, which is what delivery_success=false lists ("still pending
//     or have failed all delivery attempts").
//   - An endpoint disabled or deleted while a retry is due gets no more retries for that event
//     (Stripe: "no further retries"); nor does an endpoint disabled when an event is created
//     receive it, and then the event never counts it as pending.
//   - With WithAutoDisable, the fake disables an endpoint when a delivery to it has failed for
//     the whole retry window and no delivery to it succeeded since that event was created, as
//     Stripe "may" do: Stripe publishes no exact rule, so the default is to leave it enabled.
//   - /v1/events and /v1/events/{id} serve only events created within EventRetention (30
//     days) of the fake's clock; the log (Events) keeps them all.

const (
	// EventRetention is how long Stripe keeps events listable and retrievable.
	EventRetention = 30 * 24 * time.Hour
	// RetryWindow is how long Stripe (live mode) retries an undelivered event.
	RetryWindow = 3 * 24 * time.Hour
	// MaxEventTypes is how many names one types[] filter may hold.
	MaxEventTypes = 20
	// DefaultAPIVersion is the API version events are rendered in unless WithAPIVersion says
	// otherwise: stripe-go v76's, so webhook.ConstructEvent accepts the fake's deliveries.
	DefaultAPIVersion = "2023-10-16"
	// DeliveryUserAgent and DeliveryContentType are the headers Stripe sends a delivery with.
	DeliveryUserAgent   = "Stripe/1.0 (+https://stripe.com/docs/webhooks)"
	DeliveryContentType = "application/json; charset=utf-8"
)

// Delivery states of one event to one endpoint.
const (
	DeliveryPending   = "pending"   // not delivered yet; a retry is due at NextAttempt
	DeliverySucceeded = "succeeded" // an attempt was answered 2xx
	DeliveryFailed    = "failed"    // every attempt within RetryWindow failed
	DeliveryStopped   = "stopped"   // the endpoint was disabled or deleted before a retry
)

// retrySchedule is the wait after the first, second, ... failed attempt; the last wait
// repeats. Stripe documents only "exponential backoff for up to three days"; these waits are
// the fake's.
var retrySchedule = []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour}

// retryDelay is the wait after the n-th failed attempt (n from 1).
func retryDelay(n int) time.Duration {
	return retrySchedule[min(max(n, 1), len(retrySchedule))-1]
}

// Event is one event in an account's log, with where it was delivered.
type Event struct {
	ID              string         `json:"id"`
	Type            string         `json:"type"`
	Created         time.Time      `json:"created"` // whole seconds, as the wire has it
	APIVersion      string         `json:"api_version"`
	Livemode        bool           `json:"livemode"`
	PendingWebhooks int            `json:"pending_webhooks"`
	Object          map[string]any `json:"object"` // data.object
	// Quirks change how the event is rendered in lists, retrieves and deliveries (an event
	// without an id, say); the stored event is untouched.
	Quirks []fakeapi.Quirk `json:"quirks,omitempty"`
	// Deliveries is the state per endpoint the event was sent to, in the order it was sent.
	Deliveries []EventDelivery `json:"deliveries"`
}

// EventDelivery is the state of one event's delivery to one endpoint.
type EventDelivery struct {
	Endpoint string `json:"endpoint"` // we_...
	State    string `json:"state"`    // DeliveryPending, DeliverySucceeded, DeliveryFailed, DeliveryStopped
	Attempts int    `json:"attempts"`
	// NextAttempt is when RetryDue next tries (zero unless pending).
	NextAttempt time.Time `json:"next_attempt,omitzero"`
}

// Attempt is one delivery attempt the fake made.
type Attempt struct {
	Account  string    `json:"account"` // AccountLabel of the key, never the key
	Event    string    `json:"event"`   // evt_...
	Type     string    `json:"type"`
	Endpoint string    `json:"endpoint"` // we_...
	URL      string    `json:"url"`
	N        int       `json:"attempt"` // 1 for the first attempt of this event to this endpoint
	Time     time.Time `json:"time"`    // the fake's clock when sent (the signature's t)
	// Code is the status the endpoint answered, 0 when it did not answer (Error says why).
	Code  int    `json:"code"`
	Error string `json:"error,omitempty"`
	OK    bool   `json:"ok"`
}

type eventEntry struct {
	Event
	seq        uint64
	deliveries []*delivery
}

type delivery struct {
	endpoint string
	state    string
	attempts int
	next     time.Time
	inflight bool
}

// job is one attempt to make: a snapshot taken under s.mu, sent without it.
type job struct {
	key    string
	ev     *eventEntry
	d      *delivery
	url    string
	secret string
	body   []byte
}

// WithAPIVersion sets the API version new events are created (and rendered) in: the
// account's default version, which may differ from an endpoint's pinned api_version.
func WithAPIVersion(v string) Option { return func(s *Server) { s.apiVersion = v } }

// WithAutoDisable disables an endpoint whose deliveries failed for a whole RetryWindow (see
// the package's event notes).
func WithAutoDisable() Option { return func(s *Server) { s.autoDisable = true } }

// WithDeliveryClient sets the HTTP client deliveries are sent with (default: 10 s timeout,
// no redirects followed, as a failed delivery should not be rescued by one).
func WithDeliveryClient(c *http.Client) Option { return func(s *Server) { s.deliveryClient = c } }

func defaultDeliveryClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Now is the fake's clock.
func (s *Server) Now() time.Time { return s.now() }

// AdvanceClock moves the fake's clock d ahead ("four days later"); due retries are made by
// the next RetryDue, not by the move.
func (s *Server) AdvanceClock(d time.Duration) { s.clock.Advance(d) }

// Emit records an event of type typ with data.object object on apiKey's account (created on
// first use), delivers it to every enabled endpoint subscribed to typ before returning, and
// returns the event as it stands after those first attempts.
func (s *Server) Emit(apiKey, typ string, object map[string]any) Event {
	s.mu.Lock()
	a := s.acct(apiKey, true)
	now := s.now().UTC().Truncate(time.Second)
	s.seq++
	obj := maps.Clone(object)
	if obj == nil {
		obj = map[string]any{}
	}
	e := &eventEntry{Event: Event{ID: newID("evt_", 24), Type: typ, Created: now, APIVersion: s.apiVersion, Object: obj}, seq: s.seq}
	for _, ep := range slices.Backward(a.ordered()) { // oldest endpoint first
		if ep.Status == statusEnabled && subscribed(ep.EnabledEvents, typ) {
			e.deliveries = append(e.deliveries, &delivery{endpoint: ep.ID, state: DeliveryPending, next: now})
		}
	}
	e.PendingWebhooks = len(e.deliveries)
	a.events = append(a.events, e)
	jobs := s.due(apiKey, a, e, now)
	s.mu.Unlock()

	s.send(jobs)
	s.mu.Lock()
	defer s.mu.Unlock()
	return e.snapshot()
}

// RetryDue makes every retry that is due on the fake's clock, one attempt per pending
// delivery, and returns the attempts made, in event order. Retries to an endpoint that is
// disabled or gone are stopped instead.
func (s *Server) RetryDue() []Attempt {
	s.mu.Lock()
	now := s.now()
	keys := slices.Sorted(maps.Keys(s.accounts))
	var jobs []job
	for _, k := range keys {
		a := s.accounts[k]
		for _, e := range a.events {
			jobs = append(jobs, s.due(k, a, e, now)...)
		}
	}
	s.mu.Unlock()
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].ev.seq < jobs[j].ev.seq })
	return s.send(jobs)
}

// due snapshots the attempts of e that are due at now, marking them in flight (the body shows
// pending_webhooks as it stands now, before any of these attempts); a delivery to
// an endpoint that is no longer enabled is stopped. Callers hold s.mu.
func (s *Server) due(key string, a *account, e *eventEntry, now time.Time) []job {
	var jobs []job
	for _, d := range e.deliveries {
		if d.state != DeliveryPending || d.inflight || d.next.After(now) {
			continue
		}
		_, ep := a.find(d.endpoint)
		if ep == nil || ep.Status != statusEnabled {
			d.state, d.next = DeliveryStopped, time.Time{}
			continue
		}
		if now.After(e.Created.Add(RetryWindow)) {
			// The clock jumped past the window: Stripe would have made its last attempt by now.
			s.giveUp(a, e, d)
			continue
		}
		d.inflight = true
		jobs = append(jobs, job{key: key, ev: e, d: d, url: ep.URL, secret: ep.Secret, body: marshal(e.wire())})
	}
	return jobs
}

// send makes the attempts one after another, outside s.mu (an endpoint may call the fake), and
// records each outcome.
func (s *Server) send(jobs []job) []Attempt {
	var out []Attempt
	for _, j := range jobs {
		at := s.now()
		code, err := s.post(j, at)
		ok := err == nil && code >= 200 && code < 300

		s.mu.Lock()
		j.d.inflight = false
		j.d.attempts++
		att := Attempt{Account: AccountLabel(j.key), Event: j.ev.ID, Type: j.ev.Type, Endpoint: j.d.endpoint, URL: j.url, N: j.d.attempts, Time: at, Code: code, OK: ok}
		if err != nil {
			att.Error = err.Error()
		}
		a := s.acct(j.key, true)
		switch next := at.Add(retryDelay(j.d.attempts)); {
		case ok:
			j.d.state, j.d.next = DeliverySucceeded, time.Time{}
			j.ev.PendingWebhooks--
			if a.lastOK == nil {
				a.lastOK = map[string]time.Time{}
			}
			a.lastOK[j.d.endpoint] = at
		case next.After(j.ev.Created.Add(RetryWindow)):
			s.giveUp(a, j.ev, j.d)
		default:
			j.d.next = next
		}
		s.mu.Unlock()
		s.attempts.Add(att)
		out = append(out, att)
	}
	return out
}

// giveUp ends the retries of d: failed for good, and with WithAutoDisable its endpoint disabled
// when nothing was delivered to it since e was created. Callers hold s.mu.
func (s *Server) giveUp(a *account, e *eventEntry, d *delivery) {
	d.state, d.next = DeliveryFailed, time.Time{}
	if _, ep := a.find(d.endpoint); s.autoDisable && ep != nil && a.lastOK[d.endpoint].Before(e.Created) {
		ep.Status = statusDisabled
	}
}

// post sends one delivery as Stripe does and returns the status answered.
func (s *Server) post(j job, at time.Time) (int, error) {
	req, err := http.NewRequest(http.MethodPost, j.url, bytes.NewReader(j.body))
	if err != nil {
		return 0, errors.New("invalid URL")
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(j.secret))
	mac.Write([]byte(ts + "."))
	mac.Write(j.body)
	req.Header.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("Content-Type", DeliveryContentType)
	req.Header.Set("User-Agent", DeliveryUserAgent)
	resp, err := s.deliveryClient.Do(req)
	if err != nil {
		return 0, errors.New("no answer: " + err.Error())
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Events returns apiKey's event log oldest first, deliveries included, events past
// EventRetention too (the API no longer serves those).
func (s *Server) Events(apiKey string) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.acct(apiKey, false)
	if a == nil {
		return nil
	}
	out := make([]Event, 0, len(a.events))
	for _, e := range a.events {
		out = append(out, e.snapshot())
	}
	return out
}

// EditEvent changes an event out of band (Quirks, say) and reports whether it existed. fn
// gets a copy; ID, Created and the deliveries cannot be changed. fn runs with the Server's
// lock held, so it must not call back into s.
func (s *Server) EditEvent(apiKey, id string, fn func(*Event)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.acct(apiKey, false)
	if a == nil {
		return false
	}
	e := a.event(id)
	if e == nil {
		return false
	}
	c := e.snapshot()
	fn(&c)
	e.Type, e.APIVersion, e.Livemode, e.PendingWebhooks = c.Type, c.APIVersion, c.Livemode, c.PendingWebhooks
	e.Object, e.Quirks = maps.Clone(c.Object), fakeapi.CloneQuirks(c.Quirks)
	return true
}

// Attempts returns every delivery attempt made so far, in the order they were made.
func (s *Server) Attempts() []Attempt { return s.attempts.All() }

// snapshot copies e with its delivery states. Callers hold s.mu.
func (e *eventEntry) snapshot() Event {
	c := e.Event
	c.Object = maps.Clone(e.Object)
	c.Quirks = fakeapi.CloneQuirks(e.Quirks)
	c.Deliveries = make([]EventDelivery, 0, len(e.deliveries))
	for _, d := range e.deliveries {
		c.Deliveries = append(c.Deliveries, EventDelivery{Endpoint: d.endpoint, State: d.state, Attempts: d.attempts, NextAttempt: d.next})
	}
	return c
}

func (a *account) event(id string) *eventEntry {
	for _, e := range a.events {
		if e.ID == id {
			return e
		}
	}
	return nil
}

// subscribed reports whether an endpoint with enabled events receives typ.
func subscribed(enabled []string, typ string) bool {
	return slices.Contains(enabled, "*") || slices.Contains(enabled, typ)
}

// wireEvent is the JSON event object, fields in Stripe's order.
type wireEvent struct {
	ID         string  `json:"id"`
	Object     string  `json:"object"`
	APIVersion *string `json:"api_version"`
	Created    int64   `json:"created"`
	Data       struct {
		Object map[string]any `json:"object"`
	} `json:"data"`
	Livemode        bool `json:"livemode"`
	PendingWebhooks int  `json:"pending_webhooks"`
	Request         struct {
		ID             *string `json:"id"`
		IdempotencyKey *string `json:"idempotency_key"`
	} `json:"request"`
	Type string `json:"type"`
}

// wire renders e with its quirks applied. Callers hold s.mu.
func (e *eventEntry) wire() json.RawMessage {
	w := wireEvent{ID: e.ID, Object: "event", APIVersion: nullable(e.APIVersion), Created: e.Created.Unix(), Livemode: e.Livemode, PendingWebhooks: e.PendingWebhooks, Type: e.Type}
	w.Data.Object = e.Object
	b, err := json.Marshal(w)
	if err != nil {
		panic("fake: marshal event: " + err.Error()) // a test put something unmarshalable in the object
	}
	return fakeapi.ApplyQuirks(b, e.Quirks)
}
