package deliver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/hookwarden/hookwarden/internal/brokertest"
	"github.com/hookwarden/hookwarden/internal/testtier"
)

// The harness of the sink scenarios run on every kind of sink (sinkmatrix_test.go): for each
// kind, a destination of its own per sink, a consumer reading back what reached it, a way to
// take it away and bring it back, and one event it refuses for good.

// sinkKinds are the kinds of sink the scenarios run on.
var sinkKinds = []string{"http", "nats", "kafka", "amqp"}

// The poison event: every kind's destination refuses it, each in its own way, on every
// attempt. HTTP: the fake answers 500 to its type. NATS: its payload is over the stream's
// MaxMsgSize (the server answers "message size exceeds maximum allowed"). Kafka: over the
// topic's max.message.bytes (kfake answers MESSAGE_TOO_LARGE; random hex, so the producer's
// compression cannot shrink it under). RabbitMQ: the sink's headers exchange is bound only for
// the other types, so the broker returns it as unroutable (mandatory).
const (
	poisonType = "poison.pill"
	// maxMessageBytes is the stream's MaxMsgSize and the topic's max.message.bytes: far over
	// a batch of ordinary events, far under the poison.
	maxMessageBytes = 16 << 10
)

// goodTypes are the types of the ordinary events (the RabbitMQ bindings).
var goodTypes = []string{"invoice.paid", "charge.succeeded", "customer.created"}

// poisonPad is the poison's padding, 64 KiB of random hex.
var poisonPad = func() string {
	b := make([]byte, 32<<10)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// copyOf is one message a sink's consumer got: the event id and the key it carried
// (Idempotency-Key, Nats-Msg-Id, Kafka's Idempotency-Key header, AMQP message_id).
type copyOf struct{ id, key string }

// endpoint is the destination of one sink of some kind, with its consumer.
type endpoint interface {
	// sink is the sink delivering to it (HTTP or Publisher set).
	sink() Sink
	// received is every message its consumer got so far, in the order it got them.
	received(t *testing.T) []copyOf
	// down takes the destination away as the sink sees it; up brings it back, its messages
	// kept.
	down(t *testing.T)
	up(t *testing.T)
	// fix creates what a misconfigured endpoint lacks (its stream, topic or exchange).
	fix(t *testing.T)
	// misconfiguredLog is what the log says of a sink whose destination does not exist (""
	// for a kind that has no such case).
	misconfiguredLog() string
}

// kindEnv is what the endpoints of one kind in one test share (RabbitMQ's management
// connection).
type kindEnv struct {
	kind string
	rb   *rabbit
}

func newKindEnv(t *testing.T, kind string) *kindEnv {
	t.Helper()
	e := &kindEnv{kind: kind}
	switch kind {
	case "nats":
		testtier.RequiresServers(t, "a NATS JetStream server")
	case "amqp":
		e.rb = newRabbit(t)
	}
	return e
}

// endpoint makes the destination of sink name; missing: its stream, topic or exchange does
// not exist (until fix).
func (e *kindEnv) endpoint(t *testing.T, name string, missing bool) endpoint {
	t.Helper()
	switch e.kind {
	case "http":
		return newHTTPEndpoint(t)
	case "nats":
		return newNATSEndpoint(t, missing)
	case "kafka":
		return newKafkaEndpoint(t, missing)
	case "amqp":
		return newAMQPEndpoint(t, e.rb, name, missing)
	}
	t.Fatalf("no sink kind %q", e.kind)
	return nil
}

// httpEndpoint is an HTTP sink's server: 2xx and the copy recorded, 503 while down, 500 for
// the poison.
type httpEndpoint struct {
	srv    *httptest.Server
	mu     sync.Mutex
	isDown bool
	got    []copyOf
}

func newHTTPEndpoint(t *testing.T) *httpEndpoint {
	t.Helper()
	e := &httpEndpoint{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		e.mu.Lock()
		defer e.mu.Unlock()
		switch {
		case e.isDown:
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.Header.Get("ce-type") == poisonType:
			w.WriteHeader(http.StatusInternalServerError)
		default:
			e.got = append(e.got, copyOf{r.Header.Get("ce-id"), r.Header.Get("Idempotency-Key")})
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *httpEndpoint) sink() Sink { return Sink{HTTP: &HTTPTarget{URL: e.srv.URL}} }

func (e *httpEndpoint) received(*testing.T) []copyOf {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

func (e *httpEndpoint) setDown(down bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.isDown = down
}

func (e *httpEndpoint) down(*testing.T)          { e.setDown(true) }
func (e *httpEndpoint) up(*testing.T)            { e.setDown(false) }
func (e *httpEndpoint) fix(*testing.T)           {}
func (e *httpEndpoint) misconfiguredLog() string { return "" }

// natsEndpoint is an embedded nats-server of its own with the stream HOOKS capturing hooks.>
// (MaxMsgSize maxMessageBytes); down shuts the server down, up starts it again on the same
// port and store directory.
type natsEndpoint struct {
	dir  string
	port int
	srv  *server.Server
	pub  *JetStream
}

const natsSubject = "hooks.orders"

func newNATSEndpoint(t *testing.T, missing bool) *natsEndpoint {
	t.Helper()
	e := &natsEndpoint{dir: t.TempDir()}
	e.srv = startNATS(t, e.dir, server.RANDOM_PORT)
	e.port = e.srv.Addr().(*net.TCPAddr).Port
	if !missing {
		e.fix(t)
	}
	e.pub = newJetStream(t, e.srv.ClientURL(), natsSubject, JetStreamAuth{})
	return e
}

// stream calls f with the stream HOOKS on a connection of its own, creating the stream first
// when create is set.
func (e *natsEndpoint) stream(t *testing.T, create bool, f func(jetstream.Stream)) {
	t.Helper()
	nc, err := nats.Connect(e.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var st jetstream.Stream
	if create {
		st, err = js.CreateOrUpdateStream(context.Background(), jetstream.StreamConfig{Name: "HOOKS", Subjects: []string{"hooks.>"}, MaxMsgSize: maxMessageBytes})
	} else {
		st, err = js.Stream(context.Background(), "HOOKS")
	}
	if err != nil {
		t.Fatal(err)
	}
	f(st)
}

func (e *natsEndpoint) sink() Sink { return Sink{Publisher: e.pub} }

func (e *natsEndpoint) received(t *testing.T) []copyOf {
	t.Helper()
	var out []copyOf
	e.stream(t, false, func(st jetstream.Stream) {
		for _, m := range messages(t, st) {
			out = append(out, copyOf{m.Header.Get("ce-id"), m.Header.Get("Nats-Msg-Id")})
		}
	})
	return out
}

func (e *natsEndpoint) down(*testing.T) {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

func (e *natsEndpoint) up(t *testing.T) {
	t.Helper()
	e.srv = startNATS(t, e.dir, e.port)
}

func (e *natsEndpoint) fix(t *testing.T) {
	t.Helper()
	e.stream(t, true, func(jetstream.Stream) {})
}

func (e *natsEndpoint) misconfiguredLog() string {
	return `no JetStream stream answered for subject \"` + natsSubject + `\"`
}

// kafkaEndpoint is a kfake cluster of its own, behind a listener that can refuse service: down
// closes every connection and closes each new one at once (what a client sees of a broker
// that went away), up serves again; the cluster, in memory, keeps its records. Its topic
// events has one partition (so the consumer reads in produce order) and max.message.bytes
// maxMessageBytes.
type kafkaEndpoint struct {
	gate    *gateListener
	cluster *kfake.Cluster
	pub     *Kafka
}

const kafkaTopic = "events"

func newKafkaEndpoint(t *testing.T, missing bool) *kafkaEndpoint {
	t.Helper()
	e := &kafkaEndpoint{gate: &gateListener{conns: map[net.Conn]struct{}{}}}
	e.cluster = startKafka(t, kfake.ListenFn(e.gate.listen))
	if !missing {
		e.fix(t)
	}
	e.pub = newKafka(t, e.cluster.ListenAddrs(), kafkaTopic, KafkaKey{}, KafkaConfig{})
	return e
}

func (e *kafkaEndpoint) sink() Sink { return Sink{Publisher: e.pub} }

func (e *kafkaEndpoint) received(t *testing.T) []copyOf {
	t.Helper()
	p := e.cluster.PartitionInfo(kafkaTopic, 0)
	if p == nil || p.HighWatermark == 0 {
		return nil
	}
	var out []copyOf
	for _, rec := range records(t, e.cluster.ListenAddrs(), kafkaTopic, int(p.HighWatermark)) {
		out = append(out, copyOf{header(rec, "ce_id"), header(rec, "Idempotency-Key")})
	}
	return out
}

func (e *kafkaEndpoint) down(*testing.T) { e.gate.setDown(true) }
func (e *kafkaEndpoint) up(*testing.T)   { e.gate.setDown(false) }

func (e *kafkaEndpoint) fix(t *testing.T) {
	t.Helper()
	if err := e.cluster.CreateTopic(kafkaTopic, 1, map[string]string{"max.message.bytes": strconv.Itoa(maxMessageBytes)}); err != nil {
		t.Fatal(err)
	}
}

func (e *kafkaEndpoint) misconfiguredLog() string {
	return `has no topic \"` + kafkaTopic + `\": create it`
}

// gateListener wraps kfake's listener (kfake.ListenFn): while down, it closes the connections
// it accepted and every new one. Accept never fails while down, or kfake's broker would stop.
type gateListener struct {
	net.Listener
	mu     sync.Mutex
	isDown bool
	conns  map[net.Conn]struct{}
}

func (g *gateListener) listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	g.Listener = ln
	return g, err
}

func (g *gateListener) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		down := g.isDown
		if !down {
			g.conns[c] = struct{}{}
		}
		g.mu.Unlock()
		if !down {
			return c, nil
		}
		_ = c.Close()
	}
}

func (g *gateListener) setDown(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.isDown = down
	if down {
		for c := range g.conns {
			_ = c.Close()
		}
		clear(g.conns)
	}
}

// amqpEndpoint is a durable queue on the machine's RabbitMQ, bound to a headers exchange of
// its own for the good types (not the poison's), reached through a loopback proxy: down
// stops the proxy (every connection cut, new ones refused), up starts it again on the same
// port. A missing endpoint's sink names an exchange that does not exist; fix points the sink
// at the right one (a corrected spec: declaring the missing exchange and then binding its
// queue would leave a moment in which its messages are unroutable and counted).
type amqpEndpoint struct {
	rb       *rabbit
	proxy    *brokertest.Proxy
	ex, q    string
	pub      *AMQP
	mu       sync.Mutex
	got      []copyOf
	wrongEx  string
	fixedPub *AMQP
}

func newAMQPEndpoint(t *testing.T, rb *rabbit, name string, missing bool) *amqpEndpoint {
	t.Helper()
	e := &amqpEndpoint{rb: rb, proxy: brokertest.NewProxy(t, brokertest.RabbitMQAddr), ex: rb.prefix + "-" + name, q: rb.queue(name)}
	if err := rb.ch.ExchangeDeclare(e.ex, amqp.ExchangeHeaders, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rb.ch.ExchangeDelete(e.ex, false, false) })
	if _, err := rb.ch.QueueDeclare(e.q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = rb.ch.QueueDelete(e.q, false, false, false) })
	for _, typ := range goodTypes {
		if err := rb.ch.QueueBind(e.q, "", e.ex, false, amqp.Table{"x-match": "all", AMQPHeaderPrefix + "type": typ}); err != nil {
			t.Fatal(err)
		}
	}
	url := "amqp://guest:guest@" + e.proxy.Addr() + "/"
	if missing {
		e.wrongEx = e.ex + "-missing"
		e.pub = newAMQP(t, url, e.wrongEx, name)
		e.fixedPub = newAMQP(t, url, e.ex, name)
	} else {
		e.pub = newAMQP(t, url, e.ex, name)
	}
	return e
}

func (e *amqpEndpoint) sink() Sink {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Sink{Publisher: e.pub}
}

// received drains the queue into the copies read so far.
func (e *amqpEndpoint) received(t *testing.T) []copyOf {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		d, ok, err := e.rb.ch.Get(e.q, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return slices.Clone(e.got)
		}
		id, _ := d.Headers[AMQPHeaderPrefix+"id"].(string)
		e.got = append(e.got, copyOf{id, d.MessageId})
	}
}

func (e *amqpEndpoint) down(*testing.T) { e.proxy.Stop() }

func (e *amqpEndpoint) up(t *testing.T) {
	t.Helper()
	if err := e.proxy.Start(); err != nil {
		t.Fatal(err)
	}
}

func (e *amqpEndpoint) fix(*testing.T) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fixedPub != nil {
		e.pub = e.fixedPub
	}
}

func (e *amqpEndpoint) misconfiguredLog() string {
	return `RabbitMQ has no exchange \"` + e.wrongEx + `\"`
}
