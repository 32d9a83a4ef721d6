package deliver

import (
	"errors"
	"net/http"
)

// Sink is one named sink of a subscription, as the pool delivers to it.
type Sink struct {
	// Name is the sink's name in spec.delivery.sinks (store.DefaultSink for spec.delivery.sink).
	Name string
	// HTTP is where an HTTP sink posts (nil for a sink of another kind).
	HTTP *HTTPTarget
	// Publisher hands events to a broker sink (nil for an HTTP sink).
	Publisher Publisher
	// Filter selects the events the sink gets (nil: all).
	Filter *Filter
	// OrderBy, when set, is the path of the key the sink orders its events by (ordering
	// PerKey, see OrderKey): the receiver records each event's key with its job.
	OrderBy string
	// MaxAttempts is the sink's own budget (spec.delivery.sinks[].maxAttempts); 0 takes the
	// event's (spec.delivery.maxAttempts when it was claimed), then DefaultMaxAttempts.
	MaxAttempts int
	// Problem, when set, says why the sink cannot take events now: a filter that does not
	// compile, credentials the manager has not delivered yet, a kind this receiver cannot send
	// to. Its events wait (released, not counted as attempts) until it is fixed.
	Problem string
	// Gone is set for a sink the subscription no longer has (spec.delivery.sinks changed):
	// its jobs are dead-lettered with a reason, visible and replayable, never dropped.
	Gone bool
}

// HTTPTarget is an HTTP sink: its URL, the headers added to every request and the client that
// carries its TLS settings.
type HTTPTarget struct {
	URL string
	// Header is added to every request (extra headers, Authorization).
	Header http.Header
	// Client, when set, sends this sink's requests (a CA bundle or a client certificate);
	// nil: the Sender's own client.
	Client *http.Client
}

// HTTPAuth is the credential material of an HTTP sink, as the route Secret carries it.
type HTTPAuth struct {
	BearerToken        string
	Username, Password string
	// CertPEM and KeyPEM are the client certificate for mutual TLS; CAPEM the bundle the
	// sink's certificate must chain to.
	CertPEM, KeyPEM, CAPEM []byte
}

// NewHTTPTarget builds the target of an HTTP sink at url with extra headers and auth. A client
// of its own is made only for TLS settings (a CA bundle, a client certificate), on a clone of
// base (the Sender's transport settings).
func NewHTTPTarget(url string, headers http.Header, auth HTTPAuth, base *http.Transport) (*HTTPTarget, error) {
	t := &HTTPTarget{URL: url, Header: headers.Clone()}
	if t.Header == nil {
		t.Header = http.Header{}
	}
	switch {
	case auth.BearerToken != "" && auth.Username != "":
		return nil, errors.New("both a bearer token and a user name are set")
	case auth.BearerToken != "":
		t.Header.Set("Authorization", "Bearer "+auth.BearerToken)
	case auth.Username != "" || auth.Password != "":
		req := http.Request{Header: http.Header{}}
		req.SetBasicAuth(auth.Username, auth.Password)
		t.Header.Set("Authorization", req.Header.Get("Authorization"))
	}
	m := TLSMaterial{CertPEM: auth.CertPEM, KeyPEM: auth.KeyPEM, CAPEM: auth.CAPEM}
	if m.empty() {
		return t, nil
	}
	cfg, err := m.config()
	if err != nil {
		return nil, err
	}
	if base == nil {
		base = http.DefaultTransport.(*http.Transport)
	}
	tr := base.Clone()
	tr.TLSClientConfig = cfg
	t.Client = &http.Client{Transport: tr, CheckRedirect: noRedirects}
	return t, nil
}

// Close lets go of the target's idle connections (its route was rebuilt).
func (t *HTTPTarget) Close() {
	if t != nil && t.Client != nil {
		t.Client.CloseIdleConnections()
	}
}

// noRedirects makes a 3xx the answer: an event is never replayed to a location the
// subscription did not name.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
