package deliver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// Published is what a broker said about an event it took.
type Published struct {
	// Duplicate is set when the broker recognised the event (its Idempotency-Key) as one it
	// already holds and dropped this copy: NATS JetStream inside its duplicate window.
	Duplicate bool
}

// Publisher hands an event to a broker sink and waits for the broker's acknowledgement. Its
// errors are *Error: Retryable for what may pass (the broker unreachable, a timeout),
// Misconfigured for what the user must fix (no stream captures the subject): the event waits.
type Publisher interface {
	Publish(ctx context.Context, ev store.Event) (Published, error)
	// Close lets go of the connection (the sink's route was rebuilt).
	Close()
}

// JetStreamAuth is how a JetStream sink authenticates and secures its connection (from the
// route Secret): one of Creds, Token, or Username and Password, and TLS.
type JetStreamAuth struct {
	// Creds is the content of a NATS credentials file (user.creds, as nsc or the NATS account
	// server writes it): the user's JWT and its nkey seed, for servers in operator (JWT) mode.
	Creds              []byte
	Token              string
	Username, Password string
	// TLS connects over TLS (a tls:// URL does too) with TLSMaterial: the CA bundle the
	// server's certificate must chain to (default: the system's) and a client certificate for
	// mutual TLS.
	TLS         bool
	TLSMaterial TLSMaterial
}

// JetStream publishes events to a subject of a NATS JetStream stream, each with Nats-Msg-Id
// set to the Idempotency-Key, so that the stream drops a repeat inside its duplicate window
// (2 minutes by default), and waits for the stream's acknowledgement. Headers follow the
// CloudEvents NATS binding (ce-id, ce-source, ce-type, ce-specversion, ce-time, content-type).
// It connects on first use and again after the connection is lost.
type JetStream struct {
	url     string
	subject string
	opts    []nats.Option

	mu sync.Mutex
	nc *nats.Conn
	js jetstream.JetStream
}

var _ Publisher = (*JetStream)(nil)

// NewJetStream returns the publisher of a sink at servers (nats:// or tls:// URLs) and subject.
// Credentials that do not parse and TLS material that does not load are errors here: nothing
// can be sent until the user fixes them.
func NewJetStream(servers []string, subject string, auth JetStreamAuth) (*JetStream, error) {
	opts := []nats.Option{nats.Name("hookwarden-receiver"), nats.Timeout(5 * time.Second), nats.MaxReconnects(-1)}
	switch {
	case len(auth.Creds) > 0:
		o, err := credsOption(auth.Creds)
		if err != nil {
			return nil, err
		}
		opts = append(opts, o)
	case auth.Token != "":
		opts = append(opts, nats.Token(auth.Token))
	case auth.Username != "":
		opts = append(opts, nats.UserInfo(auth.Username, auth.Password))
	}
	if auth.TLS {
		cfg, err := auth.TLSMaterial.config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(cfg))
	}
	return &JetStream{url: strings.Join(servers, ","), subject: subject, opts: opts}, nil
}

// credsOption authenticates with the user JWT and nkey seed of a credentials file (the
// decorated "-----BEGIN NATS USER JWT-----" and "-----BEGIN USER NKEY SEED-----" blocks),
// checked here so that a file that does not parse, or whose seed is not its JWT's user, is
// said at once rather than as an authorization violation at every attempt. Nothing of the
// file's content goes into an error.
func credsOption(creds []byte) (nats.Option, error) {
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return nil, fmt.Errorf("the NATS credentials file (user.creds) holds no user JWT: %w", err)
	}
	claims, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return nil, fmt.Errorf("the NATS credentials file (user.creds) holds no user JWT: %w", err)
	}
	kp, err := jwt.ParseDecoratedUserNKey(creds)
	if err != nil {
		return nil, fmt.Errorf("the NATS credentials file (user.creds) holds no user nkey seed: %w", err)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("the NATS credentials file (user.creds): %w", err)
	}
	if pub != claims.Subject {
		return nil, fmt.Errorf("the NATS credentials file (user.creds): its seed is the key of %s, not of its JWT's user %s", pub, claims.Subject)
	}
	return nats.UserCredentialBytes(creds), nil
}

// conn is the current JetStream context, connecting first when there is none.
func (s *JetStream) conn() (jetstream.JetStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nc != nil && !s.nc.IsClosed() {
		return s.js, nil
	}
	nc, err := nats.Connect(s.url, s.opts...)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	s.nc, s.js = nc, js
	return js, nil
}

// Publish implements Publisher.
func (s *JetStream) Publish(ctx context.Context, ev store.Event) (Published, error) {
	js, err := s.conn()
	if err != nil {
		return Published{}, connectError(err)
	}
	msg := nats.NewMsg(s.subject)
	msg.Data = ev.Payload
	h := msg.Header
	h.Set("ce-specversion", "1.0")
	h.Set("ce-id", HeaderValue(ev.EventID))
	h.Set("ce-source", HeaderValue(Source(ev)))
	h.Set("ce-type", HeaderValue(cloudEventType(ev)))
	h.Set("ce-time", ev.ReceivedAt.UTC().Format(time.RFC3339Nano))
	h.Set("ce-"+IdempotencyKeyAttribute, IdempotencyKey(ev))
	h.Set("content-type", cmp.Or(ev.ContentType, DefaultContentType))
	h.Set("Idempotency-Key", IdempotencyKey(ev))
	if r := replayValue(ev); r != "" {
		h.Set("ce-"+ReplayAttribute, r)
	}
	// The attempt's traceparent/tracestate as NATS headers, in lower case (tracing on).
	telemetry.Inject(ctx, telemetry.MapCarrier(h))
	spanMessaging(ctx, "nats", s.subject, IdempotencyKey(ev))
	ack, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(IdempotencyKey(ev)))
	switch {
	case err == nil:
		return Published{Duplicate: ack.Duplicate}, nil
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		// No stream captures the subject (or its leader is being elected): nothing was
		// stored. The user must add the stream; the events wait.
		return Published{}, &Error{Retryable: true, Misconfigured: true,
			Err: fmt.Errorf("no JetStream stream answered for subject %q: create a stream that captures it (%w)", s.subject, err)}
	default:
		return Published{}, &Error{Retryable: true, Err: fmt.Errorf("publishing to NATS subject %q: %w", s.subject, err)}
	}
}

// connectError classifies a failed connection: a refusal the user must fix (the server
// refused the credentials, or TLS failed: see tlsRefusal) is Misconfigured, its events waiting
// uncounted; anything else (the server unreachable) is retried.
func connectError(err error) *Error {
	refusal := tlsRefusal("the NATS server", err)
	switch {
	case errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) ||
		errors.Is(err, nats.ErrAccountAuthExpired):
		refusal = fmt.Errorf("NATS refused the sink's credentials (token, username and password, or user.creds): %w", err)
	case refusal == nil && errors.Is(err, nats.ErrTLS):
		// The handshake failed without a reason crypto/tls names (the server closed the
		// connection during it).
		refusal = handshakeRefused("the NATS server", err)
	}
	if refusal == nil {
		return &Error{Retryable: true, Err: fmt.Errorf("connecting to NATS: %w", err)}
	}
	return &Error{Retryable: true, Misconfigured: true, Err: refusal}
}

// Close implements Publisher.
func (s *JetStream) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nc != nil {
		s.nc.Close()
		s.nc, s.js = nil, nil
	}
}
