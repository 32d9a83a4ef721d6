package deliver

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/hookwarden/hookwarden/internal/brokertest"
	"github.com/hookwarden/hookwarden/internal/testpki"
)

// rabbit is a management connection to the test's RabbitMQ, declaring names unique to the test
// and deleting them when it ends.
type rabbit struct {
	url    string
	prefix string
	ch     *amqp.Channel
}

func newRabbit(t *testing.T) *rabbit {
	t.Helper()
	url := brokertest.RabbitMQ(t)
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return &rabbit{url: url, prefix: brokertest.Name("hw-test"), ch: ch}
}

// exchange declares a durable direct exchange and, for each key, a durable queue bound to it
// with that key; it returns the exchange's name.
func (r *rabbit) exchange(t *testing.T, name string, keys ...string) string {
	t.Helper()
	ex := r.prefix + "-" + name
	if err := r.ch.ExchangeDeclare(ex, amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.ch.ExchangeDelete(ex, false, false) })
	for _, k := range keys {
		q := r.queue(k)
		if _, err := r.ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = r.ch.QueueDelete(q, false, false, false) })
		if err := r.ch.QueueBind(q, k, ex, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	return ex
}

// queue is the name of the queue bound with key.
func (r *rabbit) queue(key string) string { return r.prefix + "-q-" + key }

// length is how many messages the queue bound with key holds.
func (r *rabbit) length(t *testing.T, key string) int {
	t.Helper()
	q, err := r.ch.QueueDeclarePassive(r.queue(key), true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

// drain takes every message of the queue bound with key.
func (r *rabbit) drain(t *testing.T, key string) []amqp.Delivery {
	t.Helper()
	var out []amqp.Delivery
	for {
		d, ok, err := r.ch.Get(r.queue(key), true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

func newAMQP(t *testing.T, url, exchange, key string) *AMQP {
	t.Helper()
	p, err := NewAMQP(url, exchange, key, TLSMaterial{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Issue 30: a RabbitMQ sink publishes each event its filter selects once, persistent, with
// message_id = the Idempotency-Key and the CloudEvent attributes as cloudEvents_ headers; a
// message no queue takes (RabbitMQ returns it and still confirms it) is an error, retried and
// then dead-lettered with the reason, never a silent loss; an exchange that does not exist makes
// the sink misconfigured: its events wait, uncounted, and are published once it exists.
func TestAMQPSink(t *testing.T) {
	rb := newRabbit(t)
	ex := rb.exchange(t, "hooks", "orders")
	invoices, err := CompileFilter("type.startsWith('invoice.')")
	if err != nil {
		t.Fatal(err)
	}
	r := newSinkRig(t, Options{Workers: 4})
	bus := newAMQP(t, rb.url, ex, "orders")
	nowhere := newAMQP(t, rb.url, ex, "nobody-listens")
	missingEx := rb.prefix + "-missing"
	missing := newAMQP(t, rb.url, missingEx, "orders")
	r.set("bus", func(s *Sink) { *s = Sink{Name: "bus", Publisher: bus, Filter: invoices} })
	r.set("nowhere", func(s *Sink) { *s = Sink{Name: "nowhere", Publisher: nowhere, MaxAttempts: 2} })
	// Between the exchange's declaration and the queue's binding below, its messages are
	// unroutable: retried.
	r.set("missing", func(s *Sink) { *s = Sink{Name: "missing", Publisher: missing, MaxAttempts: 1000} })
	ids := r.claim(t, []string{"bus", "nowhere", "missing"}, slices.Repeat([]string{"invoice.paid", "charge.succeeded"}, 5)...)
	r.run(t)

	eventually(t, "the queue holds the five invoices", func() bool { return rb.length(t, "orders") == 5 })
	var got []string
	for _, d := range rb.drain(t, "orders") {
		id, _ := d.Headers["cloudEvents_id"].(string)
		got = append(got, id)
		want := amqp.Table{
			"cloudEvents_specversion": "1.0", "cloudEvents_id": id, "cloudEvents_source": "hookwarden/shop/orders",
			"cloudEvents_type": "invoice.paid", "cloudEvents_idempotencykey": "uid:" + id, "Idempotency-Key": "uid:" + id,
		}
		for k, v := range want {
			if d.Headers[k] != v {
				t.Errorf("message %s: header %s = %v, want %v", id, k, d.Headers[k], v)
			}
		}
		if _, ok := d.Headers["cloudEvents_time"].(string); !ok {
			t.Errorf("message %s has no cloudEvents_time", id)
		}
		if d.MessageId != "uid:"+id || d.DeliveryMode != amqp.Persistent || d.ContentType != "application/json" || d.Exchange != ex || d.RoutingKey != "orders" {
			t.Errorf("message %s: message_id %q, delivery mode %d, content type %q, exchange %q, key %q",
				id, d.MessageId, d.DeliveryMode, d.ContentType, d.Exchange, d.RoutingKey)
		}
	}
	wantInvoices := invoiceIDs(ids)
	if !slices.Equal(sorted(got), wantInvoices) {
		t.Errorf("queue held %v, want %v", got, wantInvoices)
	}

	eventually(t, "the unroutable events are dead-lettered for their sink, with the reason", func() bool {
		letters, err := r.st.DeadLetters(context.Background(), 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(letters) == 10
	})
	letters, _ := r.st.DeadLetters(context.Background(), 100)
	for _, l := range letters {
		if l.Sink != "nowhere" || !strings.Contains(l.LastError, `returned the message as unroutable (312 NO_ROUTE): no queue is bound to exchange "`+ex+`" for routing key "nobody-listens"`) {
			t.Errorf("dead letter of sink %s: %s", l.Sink, l.LastError)
		}
	}

	eventually(t, "the missing exchange's events were offered and wait", func() bool {
		return r.logs.contains(`RabbitMQ has no exchange \"`+missingEx+`\"`) && r.depth(t) == 10
	})
	rb.ch.ExchangeDeclare(missingEx, amqp.ExchangeDirect, true, false, false, false, nil) //nolint:errcheck // checked by the bind below
	t.Cleanup(func() { _ = rb.ch.ExchangeDelete(missingEx, false, false) })
	q := rb.queue("late")
	if _, err := rb.ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = rb.ch.QueueDelete(q, false, false, false) })
	if err := rb.ch.QueueBind(q, "orders", missingEx, false, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "once the exchange exists every event is published", func() bool { return r.depth(t) == 0 })
	if n := rb.length(t, "late"); n != 10 {
		t.Errorf("the new exchange's queue holds %d messages, want 10", n)
	}
}

// Issue 30: RabbitMQ refusing the sink at connection open makes it misconfigured, its events
// waiting uncounted, with RabbitMQ's reason and the broker's address, never the password: a wrong
// password (403 ACCESS_REFUSED) or a vhost that does not exist (530 NOT_ALLOWED). Once the URL has
// the right password, the events that waited are published, each once.
func TestAMQPSinkRefused(t *testing.T) {
	rb := newRabbit(t)
	publishRefused(t, newAMQP(t, "amqp://guest:not-the-password@"+brokertest.RabbitMQAddr+"/", "amq.direct", "orders"), "a wrong password", "not-the-password",
		"connecting to RabbitMQ at amqp://"+brokertest.RabbitMQAddr+"/: RabbitMQ refused the credentials (the user and password of the sink's URL)",
		"username or password not allowed")
	nowhere := brokertest.Name("hw-test-no-vhost")
	publishRefused(t, newAMQP(t, "amqp://guest:guest@"+brokertest.RabbitMQAddr+"/"+nowhere, "amq.direct", "orders"), "a vhost that does not exist", "",
		"RabbitMQ refused the vhost of the sink's URL: does it exist, and may the user open it?", "NOT_ALLOWED - vhost "+nowhere+" not found")

	ex := rb.exchange(t, "hooks", "orders")
	refusedThenFixed(t,
		newAMQP(t, "amqp://guest:not-the-password@"+brokertest.RabbitMQAddr+"/", ex, "orders"),
		newAMQP(t, rb.url, ex, "orders"),
		"RabbitMQ refused the credentials", func() []string { return messageIDs(rb.drain(t, "orders")) })
}

// messageIDs is the cloudEvents_id of each message.
func messageIDs(ds []amqp.Delivery) []string {
	var ids []string
	for _, d := range ds {
		id, _ := d.Headers["cloudEvents_id"].(string)
		ids = append(ids, id)
	}
	return ids
}

// Issue 30: amqps:// to RabbitMQ behind a TLS terminator that requires a client certificate:
// the right CA bundle and certificate publish; a CA bundle the server's certificate does not
// chain to, or TLS to RabbitMQ's plain port make the sink misconfigured, saying what to fix.
func TestAMQPSinkTLS(t *testing.T) {
	rb := newRabbit(t)
	ex := rb.exchange(t, "hooks", "orders")
	pki := testpki.New(t)
	cert, err := tls.X509KeyPair(pki.ServerCert, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	proxy := brokertest.NewTLSProxy(t, brokertest.RabbitMQAddr,
		&tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientCAs: pki.Pool, ClientAuth: tls.RequireAndVerifyClientCert})
	newAMQPS := func(addr string, m TLSMaterial) *AMQP {
		p, err := NewAMQP("amqps://guest:guest@"+addr+"/", ex, "orders", m)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	good := TLSMaterial{CAPEM: pki.CA, CertPEM: pki.ClientCert, KeyPEM: pki.ClientKey}
	if de, err := publishOnce(t, newAMQPS(proxy.Addr(), good), "evt_mtls"); err != nil {
		t.Fatalf("publishing over mutual TLS: %v (%+v)", err, de)
	}
	if got := messageIDs(rb.drain(t, "orders")); !slices.Equal(got, []string{"evt_mtls"}) {
		t.Fatalf("the queue held %v, want the event published over mutual TLS", got)
	}
	otherCA := good
	otherCA.CAPEM = testpki.New(t).CA
	publishRefused(t, newAMQPS(proxy.Addr(), otherCA), "another CA", "",
		"RabbitMQ's certificate does not verify against the sink's CA bundle (tls.caBundle)", "certificate signed by unknown authority")
	// No client certificate is not asserted: over TLS 1.3 the server refuses it after the
	// handshake, and amqp091 reports either the server's alert (misconfigured) or only that the
	// connection closed (504, retried), a race inside the client (a fresh-clone make test saw
	// the 504 once in three runs).
	publishRefused(t, newAMQPS(brokertest.RabbitMQAddr, good), "TLS to the plain port", "",
		"RabbitMQ does not answer in TLS: does its port take TLS connections?")
}

// Issue 30: the connection to RabbitMQ closed again and again while events are published (a
// proxy the test controls cuts every connection; once the broker is unreachable for a while):
// the publisher reconnects, and every event reaches the queue, a repeat (published, then the
// confirmation lost with the connection) carrying the same message_id.
func TestAMQPSinkConnectionLost(t *testing.T) {
	rb := newRabbit(t)
	ex := rb.exchange(t, "hooks", "orders")
	proxy := brokertest.NewProxy(t, brokertest.RabbitMQAddr)
	bus := newAMQP(t, "amqp://guest:guest@"+proxy.Addr()+"/", ex, "orders")
	r := newSinkRig(t, Options{Workers: 8})
	r.set("bus", func(s *Sink) { *s = Sink{Name: "bus", Publisher: bus, MaxAttempts: 1000} })
	const events = 400
	ids := r.claim(t, []string{"bus"}, slices.Repeat([]string{"invoice.paid"}, events)...)
	r.run(t)

	for at := 60; at < events; at += 80 {
		eventually(t, fmt.Sprintf("%d messages in the queue", at), func() bool { return rb.length(t, "orders") >= at || r.depth(t) == 0 })
		if at == 220 {
			proxy.Stop()
			eventually(t, "publishing failed while the broker was unreachable", func() bool { return r.logs.contains("connecting to RabbitMQ at amqp://" + proxy.Addr()) })
			if err := proxy.Start(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		proxy.Cut()
	}
	eventually(t, "every event is published", func() bool { return r.depth(t) == 0 })
	seen := map[string]int{}
	for _, d := range rb.drain(t, "orders") {
		id, _ := d.Headers["cloudEvents_id"].(string)
		seen[id]++
		if d.MessageId != "uid:"+id || d.Headers["Idempotency-Key"] != "uid:"+id {
			t.Errorf("message of %s carries message_id %q, Idempotency-Key %v", id, d.MessageId, d.Headers["Idempotency-Key"])
		}
	}
	lost, repeats := 0, 0
	for _, id := range ids {
		switch n := seen[id]; {
		case n == 0:
			lost++
		case n > 1:
			repeats += n - 1
		}
	}
	if lost != 0 || len(seen) != len(ids) {
		t.Errorf("%d of %d events never reached the queue (%d distinct ids in it)", lost, len(ids), len(seen))
	}
	fmt.Printf("REPORT amqp-connection-lost: %d events, %d connection cuts and one outage: lost=%d, repeats (same message_id)=%d\n",
		len(ids), proxy.Cuts(), lost, repeats)
}
