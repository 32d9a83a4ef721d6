package deliver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// AMQPHeaderPrefix prefixes the CloudEvent attributes in an AMQP message's headers. AMQP 0-9-1
// has no CloudEvents binding; the AMQP 1.0 binding allows "cloudEvents_" and "cloudEvents:" and
// prefers the underscore (it is a valid JMS property name, so JMS and selector-based consumers
// read it too).
const AMQPHeaderPrefix = "cloudEvents_"

// AMQP publishes events to a RabbitMQ exchange with publisher confirms: each message is
// persistent, mandatory (a message no queue takes comes back, and is an error, not a loss),
// carries message_id = the Idempotency-Key and the CloudEvent attributes as cloudEvents_
// headers (with tracing on, the attempt's cloudEvents_traceparent / cloudEvents_tracestate too),
// and counts as delivered only once the broker confirmed it. RabbitMQ drops no repeat:
// consumers dedupe on message_id. It connects on first use and again after the connection or
// channel is lost (a broker restart, a closed connection).
type AMQP struct {
	url        string
	exchange   string
	routingKey string
	cfg        amqp.Config
	// where names the broker in errors, without the URL's password.
	where string

	mu   sync.Mutex
	sess *amqpSession
}

var _ Publisher = (*AMQP)(nil)

// amqpSession is one connection and its confirming channel.
type amqpSession struct {
	conn *amqp.Connection
	ch   *amqp.Channel
	// closed gets the reason the broker closed the channel (a missing exchange).
	closed chan *amqp.Error
	// returns gets the messages the broker returned as unroutable; the library hands a return
	// to it before it resolves the message's confirmation, so a publisher that got its confirm
	// finds its return here (see returned).
	returns chan amqp.Return

	mu       sync.Mutex
	reason   *amqp.Error
	returned map[string]amqp.Return
}

// NewAMQP returns the publisher of a sink at rawURL (amqp:// or amqps://, credentials and vhost
// included), publishing to exchange ("" is the default exchange) with routingKey; tls adds a
// CA bundle or a client certificate to an amqps:// URL.
func NewAMQP(rawURL, exchange, routingKey string, tls TLSMaterial) (*AMQP, error) {
	u, err := amqp.ParseURI(rawURL)
	if err != nil {
		return nil, fmt.Errorf("the RabbitMQ URL: %w", err)
	}
	cfg := amqp.Config{
		Heartbeat:  10 * time.Second,
		Locale:     "en_US",
		Properties: amqp.Table{"connection_name": "hookwarden-receiver"},
		Dial:       amqp.DefaultDial(5 * time.Second),
	}
	if !tls.empty() {
		if cfg.TLSClientConfig, err = tls.config(); err != nil {
			return nil, err
		}
	}
	where := fmt.Sprintf("%s://%s:%d/", u.Scheme, u.Host, u.Port)
	if u.Vhost != "/" {
		where += url.PathEscape(u.Vhost)
	}
	return &AMQP{url: rawURL, exchange: exchange, routingKey: routingKey, cfg: cfg, where: where}, nil
}

// session is the current session, connecting or opening a channel first when there is none;
// its error is a *Error.
func (s *AMQP) session() (*amqpSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil && !s.sess.ch.IsClosed() {
		return s.sess, nil
	}
	var conn *amqp.Connection
	if s.sess != nil && !s.sess.conn.IsClosed() {
		conn = s.sess.conn // only the channel was closed (by a channel error)
	} else {
		if s.sess != nil {
			_ = s.sess.conn.Close()
		}
		s.sess = nil
		c, err := amqp.DialConfig(s.url, s.cfg)
		if err != nil {
			return nil, s.dialError(err)
		}
		conn = c
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		_ = conn.Close()
		s.sess = nil
		return nil, &Error{Retryable: true, Err: fmt.Errorf("connecting to RabbitMQ at %s: %w", s.where, err)}
	}
	s.sess = &amqpSession{conn: conn, ch: ch,
		closed:   ch.NotifyClose(make(chan *amqp.Error, 1)),
		returns:  ch.NotifyReturn(make(chan amqp.Return, 1024)),
		returned: map[string]amqp.Return{}}
	return s.sess, nil
}

// dialError classifies a failed connection: a refusal the user must fix is Misconfigured, its
// events waiting uncounted; anything else (the broker unreachable) is retried. RabbitMQ refuses
// at connection open the credentials (403 ACCESS_REFUSED) or the vhost (530 NOT_ALLOWED: it does
// not exist, the user may not access it, or the user's or vhost's connection limit is reached;
// 402 INVALID_PATH); or TLS failed.
func (s *AMQP) dialError(err error) *Error {
	refusal := tlsRefusal("RabbitMQ", err)
	var refused *amqp.Error
	if errors.As(err, &refused) {
		switch {
		case refused.Code == amqp.AccessRefused:
			refusal = fmt.Errorf("RabbitMQ refused the credentials (the user and password of the sink's URL): %w", err)
		case refused.Code == amqp.NotAllowed || refused.Code == amqp.InvalidPath:
			refusal = fmt.Errorf("RabbitMQ refused the vhost of the sink's URL: does it exist, and may the user open it? %w", err)
		case refused.Code == amqp.FrameError && strings.HasPrefix(refused.Reason, "remote error: tls: "):
			// The server's TLS alert (see tlsRefusal), which amqp091 keeps only as text.
			refusal = handshakeRefused("RabbitMQ", err)
		}
	}
	if refusal == nil {
		return &Error{Retryable: true, Err: fmt.Errorf("connecting to RabbitMQ at %s: %w", s.where, err)}
	}
	return &Error{Retryable: true, Misconfigured: true, Err: fmt.Errorf("connecting to RabbitMQ at %s: %w", s.where, refusal)}
}

// closeReason is why the broker closed the session's channel (nil: it did not, or not yet).
func (ss *amqpSession) closeReason() *amqp.Error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.reason == nil {
		select {
		case ss.reason = <-ss.closed: // nil when closed without a reason
		default:
		}
	}
	return ss.reason
}

// returnedMessage reports whether the broker returned the message id as unroutable, and how.
func (ss *amqpSession) returnedMessage(id string) (amqp.Return, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for drained := false; !drained; {
		select {
		case r, ok := <-ss.returns:
			if !ok { // the channel was closed: no more returns
				drained = true
				break
			}
			ss.returned[r.MessageId] = r
		default:
			drained = true
		}
	}
	r, ok := ss.returned[id]
	delete(ss.returned, id)
	if len(ss.returned) > 4096 {
		clear(ss.returned) // returns of publishers that gave up waiting
	}
	return r, ok
}

// Publish implements Publisher.
func (s *AMQP) Publish(ctx context.Context, ev store.Event) (Published, error) {
	ss, err := s.session()
	if err != nil {
		return Published{}, err
	}
	key := IdempotencyKey(ev)
	msg := amqp.Publishing{
		MessageId:    key,
		DeliveryMode: amqp.Persistent,
		ContentType:  cmp.Or(ev.ContentType, DefaultContentType),
		Timestamp:    ev.ReceivedAt,
		AppId:        "hookwarden",
		Body:         ev.Payload,
		Headers: amqp.Table{
			AMQPHeaderPrefix + "specversion":           "1.0",
			AMQPHeaderPrefix + "id":                    ev.EventID,
			AMQPHeaderPrefix + "source":                Source(ev),
			AMQPHeaderPrefix + "type":                  cloudEventType(ev),
			AMQPHeaderPrefix + "time":                  ev.ReceivedAt.UTC().Format(time.RFC3339Nano),
			AMQPHeaderPrefix + IdempotencyKeyAttribute: key,
			"Idempotency-Key":                          key,
		},
	}
	if r := replayValue(ev); r != "" {
		msg.Headers[AMQPHeaderPrefix+ReplayAttribute] = r
	}
	spanMessaging(ctx, "rabbitmq", s.exchange, key)
	telemetry.Inject(ctx, amqpTraceHeaders(msg.Headers))
	dc, err := ss.ch.PublishWithDeferredConfirmWithContext(ctx, s.exchange, s.routingKey, true, false, msg)
	if err != nil {
		return Published{}, &Error{Retryable: true, Err: fmt.Errorf("publishing to RabbitMQ exchange %q: %w", s.exchange, err)}
	}
	acked, err := dc.WaitContext(ctx)
	if err != nil {
		return Published{}, &Error{Retryable: true, Err: fmt.Errorf("waiting for RabbitMQ to confirm the message to exchange %q: %w", s.exchange, err)}
	}
	if !acked {
		reason := ss.closeReason()
		if reason != nil && reason.Code == amqp.NotFound {
			// The exchange does not exist: nothing was stored. The user must declare it; the
			// events wait.
			return Published{}, &Error{Retryable: true, Misconfigured: true,
				Err: fmt.Errorf("RabbitMQ has no exchange %q at %s: declare it (%s)", s.exchange, s.where, reason.Reason)}
		}
		if reason != nil {
			return Published{}, &Error{Retryable: true, Err: fmt.Errorf("RabbitMQ closed the channel before confirming the message to exchange %q: %d %s", s.exchange, reason.Code, reason.Reason)}
		}
		return Published{}, &Error{Retryable: true, Err: fmt.Errorf("RabbitMQ did not confirm the message to exchange %q (refused, or the connection was lost)", s.exchange)}
	}
	if r, ok := ss.returnedMessage(key); ok {
		// Confirmed, but no queue took it: without an error it would be lost.
		return Published{}, &Error{Retryable: true, Err: fmt.Errorf("RabbitMQ returned the message as unroutable (%d %s): no queue is bound to exchange %q for routing key %q",
			r.ReplyCode, r.ReplyText, s.exchange, s.routingKey)}
	}
	return Published{}, nil
}

// amqpTraceHeaders is a message's headers as the carrier telemetry.Inject writes to: the W3C
// traceparent and tracestate go in as cloudEvents_traceparent and cloudEvents_tracestate, the
// Distributed Tracing extension's attributes under the prefix of the other attributes.
type amqpTraceHeaders amqp.Table

// Get implements propagation.TextMapCarrier.
func (c amqpTraceHeaders) Get(key string) string {
	v, _ := c[AMQPHeaderPrefix+key].(string)
	return v
}

// Set implements propagation.TextMapCarrier.
func (c amqpTraceHeaders) Set(key, value string) { c[AMQPHeaderPrefix+key] = value }

// Keys implements propagation.TextMapCarrier: the cloudEvents_ headers, without the prefix.
func (c amqpTraceHeaders) Keys() []string {
	var keys []string
	for k := range c {
		if a, ok := strings.CutPrefix(k, AMQPHeaderPrefix); ok {
			keys = append(keys, a)
		}
	}
	return keys
}

// Close implements Publisher.
func (s *AMQP) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		_ = s.sess.conn.Close()
		s.sess = nil
	}
}
