package deliver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// KafkaKey says where a Kafka record's key comes from.
type KafkaKey struct {
	// None sends records without a key (spread over the partitions).
	None bool
	// Path, when set, keys a record by that value of the event (see OrderKey); otherwise the
	// event id is the key.
	Path string
}

// KafkaConfig is how a Kafka sink connects: TLS (with the material from the route Secret; the
// system's roots when it holds none) and SASL.
type KafkaConfig struct {
	TLS         bool
	TLSMaterial TLSMaterial
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 ("": none).
	SASLMechanism      string
	Username, Password string
}

// Kafka produces events to a topic with an idempotent producer and acknowledgements from all
// in-sync replicas, each event a CloudEvents Kafka binary-mode record: the payload as the value,
// the attributes as ce_ headers, content-type, the Idempotency-Key as a header (and
// ce_idempotencykey), and with tracing on the attempt's ce_traceparent / ce_tracestate. Kafka drops a repeat only inside one producer's own retries: an event
// produced again after a receiver crash is a second record with the same Idempotency-Key, which
// consumers dedupe on.
type Kafka struct {
	topic  string
	key    KafkaKey
	where  string
	client *kgo.Client
	// conn remembers why the last connection to a broker failed (a refused dial, a SASL
	// failure): the client retries those inside a produce until the context ends, and the
	// context's error alone would not say why.
	conn *connHook
	// saslMechanism and saslUser name the credentials in errors ("": no SASL).
	saslMechanism, saslUser string
}

// connHook records the outcome of the client's latest connection to a broker.
type connHook struct{ last atomic.Pointer[error] }

var _ kgo.HookBrokerConnect = (*connHook)(nil)

func (h *connHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		h.last.Store(nil)
		return
	}
	h.last.Store(&err)
}

// lastErr is why the latest connection failed (nil: it did not).
func (h *connHook) lastErr() error {
	if p := h.last.Load(); p != nil {
		return *p
	}
	return nil
}

var _ Publisher = (*Kafka)(nil)

// NewKafka returns the publisher of a sink producing to topic through the brokers (host:port).
func NewKafka(brokers []string, topic string, key KafkaKey, c KafkaConfig) (*Kafka, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ClientID("hookwarden-receiver"),
		kgo.RequiredAcks(kgo.AllISRAcks()), // the default, said out loud
		kgo.DialTimeout(5 * time.Second),
		// A produce request whose answer was lost with its connection (a broker gone
		// mid-request) may fail when the attempt's context ends. By default the idempotent
		// producer waits for that record's outcome however long the broker stays away, so a
		// Publish outlived the sender's timeout and its job's lease, and held its worker. The
		// record may then be in the topic and produced again by the next attempt: a repeat
		// with the same Idempotency-Key, which at least once already allows.
		kgo.AllowIdempotentProduceCancellation(),
		// A topic the broker does not know fails the produce at its first answer, so the
		// sink is found misconfigured (its events wait, uncounted). franz-go's default, four
		// metadata reloads, could outlast the attempt's timeout on a loaded host: the
		// attempt then ended as a plain timeout, was counted, and the events of a sink that
		// only lacked its topic were dead-lettered.
		kgo.UnknownTopicRetries(0),
	}
	hook := &connHook{}
	opts = append(opts, kgo.WithHooks(hook))
	if c.TLS {
		cfg, err := c.TLSMaterial.config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if c.SASLMechanism != "" {
		m, err := saslMechanism(c)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("the Kafka client: %w", err)
	}
	return &Kafka{topic: topic, key: key, where: strings.Join(brokers, ","), client: client, conn: hook,
		saslMechanism: c.SASLMechanism, saslUser: c.Username}, nil
}

func saslMechanism(c KafkaConfig) (sasl.Mechanism, error) {
	switch c.SASLMechanism {
	case "PLAIN":
		return plain.Auth{User: c.Username, Pass: c.Password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: c.Username, Pass: c.Password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: c.Username, Pass: c.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("unknown SASL mechanism %q (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", c.SASLMechanism)
}

// Record is the Kafka record of ev: CloudEvents binary mode, keyed as key says, with the
// attempt's trace context of ctx (tracing on).
func (s *Kafka) record(ctx context.Context, ev store.Event) *kgo.Record {
	ik := IdempotencyKey(ev)
	rec := &kgo.Record{
		Topic: s.topic,
		Value: ev.Payload,
		Headers: []kgo.RecordHeader{
			{Key: "ce_specversion", Value: []byte("1.0")},
			{Key: "ce_id", Value: []byte(ev.EventID)},
			{Key: "ce_source", Value: []byte(Source(ev))},
			{Key: "ce_type", Value: []byte(cloudEventType(ev))},
			{Key: "ce_time", Value: []byte(ev.ReceivedAt.UTC().Format(time.RFC3339Nano))},
			{Key: "ce_" + IdempotencyKeyAttribute, Value: []byte(ik)},
			{Key: "content-type", Value: []byte(cmp.Or(ev.ContentType, DefaultContentType))},
			{Key: "Idempotency-Key", Value: []byte(ik)},
		},
	}
	if r := replayValue(ev); r != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: "ce_" + ReplayAttribute, Value: []byte(r)})
	}
	switch {
	case s.key.None:
	case s.key.Path != "":
		rec.Key = []byte(OrderKey(s.key.Path, ev))
	default:
		rec.Key = []byte(ev.EventID)
	}
	spanMessaging(ctx, "kafka", s.topic, ik)
	telemetry.Inject(ctx, kafkaTraceHeaders{rec})
	return rec
}

// kafkaTraceHeaders is a record's headers as the carrier telemetry.Inject writes to: the W3C
// traceparent and tracestate go in as ce_traceparent and ce_tracestate, the CloudEvents Kafka
// binding's binary-mode spelling of the Distributed Tracing extension's attributes.
type kafkaTraceHeaders struct{ rec *kgo.Record }

const kafkaAttrPrefix = "ce_"

// Get implements propagation.TextMapCarrier.
func (c kafkaTraceHeaders) Get(key string) string {
	for _, h := range c.rec.Headers {
		if h.Key == kafkaAttrPrefix+key {
			return string(h.Value)
		}
	}
	return ""
}

// Set implements propagation.TextMapCarrier.
func (c kafkaTraceHeaders) Set(key, value string) {
	c.rec.Headers = append(c.rec.Headers, kgo.RecordHeader{Key: kafkaAttrPrefix + key, Value: []byte(value)})
}

// Keys implements propagation.TextMapCarrier: the ce_ headers, without the prefix.
func (c kafkaTraceHeaders) Keys() []string {
	var keys []string
	for _, h := range c.rec.Headers {
		if k, ok := strings.CutPrefix(h.Key, kafkaAttrPrefix); ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// Publish implements Publisher.
func (s *Kafka) Publish(ctx context.Context, ev store.Event) (Published, error) {
	err := s.client.ProduceSync(ctx, s.record(ctx, ev)).FirstErr()
	switch {
	case err == nil:
		return Published{}, nil
	case errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID):
		// Nothing was stored. The user must create the topic; the events wait.
		return Published{}, &Error{Retryable: true, Misconfigured: true,
			Err: fmt.Errorf("Kafka at %s has no topic %q: create it (%w)", s.where, s.topic, err)}
	default:
		// The client retries failed connections inside the produce until the context ends
		// (this record's, or that of the first record of its batch: the batch fails with
		// it); why they failed is only in the connection hook.
		ended := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
		if cerr := s.conn.lastErr(); cerr != nil && ended {
			if refusal := s.refusal(cerr); refusal != nil {
				// The user must fix the sink's credentials or TLS settings; the events wait.
				return Published{}, &Error{Retryable: true, Misconfigured: true,
					Err: fmt.Errorf("producing to Kafka topic %q at %s: %w", s.topic, s.where, refusal)}
			}
			err = fmt.Errorf("%w (the last connection to a broker failed: %v)", err, cerr)
		}
		return Published{}, &Error{Retryable: true, Err: fmt.Errorf("producing to Kafka topic %q at %s: %w", s.topic, s.where, err)}
	}
}

// refusal says what the user must fix when a connection to a broker failed with cerr in a way
// no retry can mend, nil otherwise: the broker refused the SASL credentials or mechanism, or
// closed the connection during SASL, or TLS failed.
//
// A connection closed before the broker's first answer (franz-go's ErrFirstReadEOF, whose text
// guesses at TLS expected and missing) is not one: a load balancer without a broker behind it
// closes connections the same way, and that passes.
func (s *Kafka) refusal(cerr error) error {
	var firstEOF *kgo.ErrFirstReadEOF
	switch {
	case errors.Is(cerr, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("Kafka refused the credentials of SASL %s as %q: fix the username or password in the route Secret (%w)", s.saslMechanism, s.saslUser, cerr)
	case errors.Is(cerr, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("Kafka does not enable SASL %s: choose a mechanism it enables (sasl.mechanism) (%w)", s.saslMechanism, cerr)
	case s.saslMechanism != "" && errors.Is(cerr, io.EOF) && !errors.As(cerr, &firstEOF):
		// The broker answered, then closed the connection during SASL: a broker may do so on
		// credentials it refuses rather than answer SASL_AUTHENTICATION_FAILED (kfake does).
		return fmt.Errorf("Kafka closed the connection during SASL authentication: check the credentials of SASL %s as %q (%w)", s.saslMechanism, s.saslUser, cerr)
	}
	return tlsRefusal("the Kafka broker", cerr)
}

// Close implements Publisher.
func (s *Kafka) Close() { s.client.Close() }
