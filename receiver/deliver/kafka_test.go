package deliver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/hookwarden/hookwarden/internal/testpki"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// startKafka runs a kfake cluster (one broker, no topic auto-creation) until the test ends.
func startKafka(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// createTopic creates topic with partitions on the cluster at addrs.
func createTopic(t *testing.T, addrs []string, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err == nil {
		err = kerrOf(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
}

func kerrOf(code int16) error {
	if code == 0 {
		return nil
	}
	return fmt.Errorf("kafka error code %d", code)
}

// records reads topic from the start until it has read want records (or 10 s passed), with the
// client options opts besides.
func records(t *testing.T, addrs []string, topic string, want int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want && ctx.Err() == nil {
		f := cl.PollFetches(ctx)
		f.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func newKafka(t *testing.T, addrs []string, topic string, key KafkaKey, c KafkaConfig) *Kafka {
	t.Helper()
	k, err := NewKafka(addrs, topic, key, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

// Issue 30: Kafka sinks produce each event their filter selects once, as a CloudEvents
// binary-mode record (ce_ headers, content-type, Idempotency-Key), keyed by the event id, by a
// path into the payload (one key, one partition) or not at all; a topic that does not exist
// (kfake, like a Kafka without auto-creation, refuses it) makes the sink misconfigured: its
// events wait, uncounted, and are produced once the topic exists.
func TestKafkaSink(t *testing.T) {
	kc := startKafka(t, kfake.SeedTopics(3, "invoices", "by-object", "unkeyed"))
	addrs := kc.ListenAddrs()
	invoices, err := CompileFilter("type.startsWith('invoice.')")
	if err != nil {
		t.Fatal(err)
	}
	r := newSinkRig(t, Options{Workers: 4})
	byID := newKafka(t, addrs, "invoices", KafkaKey{}, KafkaConfig{})
	byObject := newKafka(t, addrs, "by-object", KafkaKey{Path: "data.data.object.id"}, KafkaConfig{})
	unkeyed := newKafka(t, addrs, "unkeyed", KafkaKey{None: true}, KafkaConfig{})
	missing := newKafka(t, addrs, "not-yet", KafkaKey{}, KafkaConfig{})
	r.set("invoices", func(s *Sink) { *s = Sink{Name: "invoices", Publisher: byID, Filter: invoices} })
	r.set("by-object", func(s *Sink) { *s = Sink{Name: "by-object", Publisher: byObject} })
	r.set("unkeyed", func(s *Sink) { *s = Sink{Name: "unkeyed", Publisher: unkeyed} })
	r.set("missing", func(s *Sink) { *s = Sink{Name: "missing", Publisher: missing} })
	ids := r.claim(t, []string{"invoices", "by-object", "unkeyed", "missing"}, slices.Repeat([]string{"invoice.paid", "charge.succeeded"}, 5)...)
	r.run(t)

	eventually(t, "the missing topic's events were offered and wait, the others delivered", func() bool {
		return r.logs.contains(`has no topic \"not-yet\": create it`) && r.depth(t) == 10
	})
	var got []string
	for _, rec := range records(t, addrs, "invoices", 5) {
		id := header(rec, "ce_id")
		got = append(got, id)
		want := map[string]string{"ce_specversion": "1.0", "ce_type": "invoice.paid", "ce_source": "hookwarden/shop/orders",
			"ce_idempotencykey": "uid:" + id, "Idempotency-Key": "uid:" + id, "content-type": "application/json"}
		for k, v := range want {
			if header(rec, k) != v {
				t.Errorf("record %s: header %s = %q, want %q", id, k, header(rec, k), v)
			}
		}
		if header(rec, "ce_time") == "" || string(rec.Key) != id {
			t.Errorf("record %s: ce_time %q, key %q (want the event id)", id, header(rec, "ce_time"), rec.Key)
		}
	}
	wantInvoices := invoiceIDs(ids)
	if !slices.Equal(sorted(got), wantInvoices) {
		t.Errorf("topic invoices holds %v, want %v", got, wantInvoices)
	}
	partitionOf := map[string]int32{}
	byObj := records(t, addrs, "by-object", 10)
	for _, rec := range byObj {
		k := string(rec.Key)
		if k != "obj_0" && k != "obj_1" {
			t.Errorf("record %s keyed %q, want its data.object.id", header(rec, "ce_id"), k)
		}
		if p, ok := partitionOf[k]; ok && p != rec.Partition {
			t.Errorf("key %s in partitions %d and %d", k, p, rec.Partition)
		}
		partitionOf[k] = rec.Partition
	}
	un := records(t, addrs, "unkeyed", 10)
	for _, rec := range un {
		if rec.Key != nil {
			t.Errorf("unkeyed record %s has key %q", header(rec, "ce_id"), rec.Key)
		}
	}
	if len(byObj) != 10 || len(un) != 10 {
		t.Errorf("by-object holds %d records, unkeyed %d; want 10 each", len(byObj), len(un))
	}

	createTopic(t, addrs, "not-yet", 1)
	eventually(t, "once the topic exists every event is produced", func() bool { return r.depth(t) == 0 })
	if n := len(records(t, addrs, "not-yet", 10)); n != 10 {
		t.Errorf("the new topic holds %d records, want 10", n)
	}
}

// startKafkaAnsweringSASL runs a kfake cluster with SASL PLAIN for user and pass that answers a
// wrong password as Kafka does, SASL_AUTHENTICATION_FAILED with Kafka's message, where kfake
// itself closes the connection.
func startKafkaAnsweringSASL(t *testing.T, user, pass string, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	kc := startKafka(t, append([]kfake.Opt{kfake.EnableSASL(), kfake.Superuser("PLAIN", user, pass)}, opts...)...)
	kc.ControlKey(kmsg.SASLAuthenticate.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		auth := req.(*kmsg.SASLAuthenticateRequest)
		if string(auth.SASLAuthBytes) == "\x00"+user+"\x00"+pass {
			return nil, nil, false // kfake authenticates it
		}
		kc.KeepControl()
		resp := auth.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authentication failed: Invalid username or password")
		return resp, nil, true
	})
	return kc
}

// Issue 30: SASL (PLAIN and SCRAM here; SCRAM-SHA-512 alike): the right password produces; a
// wrong one makes the sink misconfigured, its events waiting uncounted until the route Secret
// has the right one, whether the broker answers SASL_AUTHENTICATION_FAILED (Kafka; kfake made to
// answer so) or closes the connection (kfake itself); the error says which credentials to fix,
// never the password.
func TestKafkaSinkSASL(t *testing.T) {
	kc := startKafka(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "hooks", "s3cret"), kfake.SeedTopics(1, "events"))
	addrs := kc.ListenAddrs()
	good := newKafka(t, addrs, "events", KafkaKey{}, KafkaConfig{SASLMechanism: "SCRAM-SHA-256", Username: "hooks", Password: "s3cret"})
	if de, err := publishOnce(t, good, "evt_scram"); err != nil {
		t.Fatalf("producing with the right password: %v (%+v)", err, de)
	}
	publishRefused(t, newKafka(t, addrs, "events", KafkaKey{}, KafkaConfig{SASLMechanism: "SCRAM-SHA-256", Username: "hooks", Password: "wrong-pw"}),
		"a wrong password, the connection closed", "wrong-pw",
		`Kafka closed the connection during SASL authentication: check the credentials of SASL SCRAM-SHA-256 as "hooks"`)
	if _, err := NewKafka(addrs, "events", KafkaKey{}, KafkaConfig{SASLMechanism: "GSSAPI"}); err == nil {
		t.Error("an unknown SASL mechanism was accepted")
	}

	answering := startKafkaAnsweringSASL(t, "hooks", "s3cret", kfake.SeedTopics(1, "events"))
	addrs = answering.ListenAddrs()
	bad := newKafka(t, addrs, "events", KafkaKey{}, KafkaConfig{SASLMechanism: "PLAIN", Username: "hooks", Password: "wrong-pw"})
	publishRefused(t, bad, "a wrong password, answered", "wrong-pw",
		`Kafka refused the credentials of SASL PLAIN as "hooks": fix the username or password in the route Secret`,
		"SASL_AUTHENTICATION_FAILED", "Invalid username or password")
	refusedThenFixed(t, bad,
		newKafka(t, addrs, "events", KafkaKey{}, KafkaConfig{SASLMechanism: "PLAIN", Username: "hooks", Password: "s3cret"}),
		"SASL_AUTHENTICATION_FAILED", func() []string { return recordIDs(t, answering, "events", plain.Auth{User: "hooks", Pass: "s3cret"}) })
}

// recordIDs is the ce_id of every record of topic (one partition) on kc, read with SASL PLAIN
// as auth.
func recordIDs(t *testing.T, kc *kfake.Cluster, topic string, auth plain.Auth) []string {
	t.Helper()
	var ids []string
	n := int(kc.PartitionInfo(topic, 0).HighWatermark)
	for _, rec := range records(t, kc.ListenAddrs(), topic, n, kgo.SASL(auth.AsMechanism())) {
		ids = append(ids, header(rec, "ce_id"))
	}
	return ids
}

// Issue 30: TLS to a broker that requires a client certificate: the right CA bundle and
// certificate produce; a CA bundle the broker's certificate does not chain to, or no client
// certificate, make the sink misconfigured, saying what to fix; no TLS at all is retried.
func TestKafkaSinkTLS(t *testing.T) {
	pki := testpki.New(t)
	cert, err := tls.X509KeyPair(pki.ServerCert, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	kc := startKafka(t, kfake.TLS(&tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientCAs: pki.Pool, ClientAuth: tls.RequireAndVerifyClientCert}),
		kfake.SeedTopics(1, "events"))
	addrs := kc.ListenAddrs()
	good := TLSMaterial{CAPEM: pki.CA, CertPEM: pki.ClientCert, KeyPEM: pki.ClientKey}
	if de, err := publishOnce(t, newKafka(t, addrs, "events", KafkaKey{}, KafkaConfig{TLS: true, TLSMaterial: good}), "evt_mtls"); err != nil {
		t.Fatalf("producing over mutual TLS: %v (%+v)", err, de)
	}
	otherCA := good
	otherCA.CAPEM = testpki.New(t).CA
	publishRefused(t, newKafka(t, addrs, "events", KafkaKey{}, KafkaConfig{TLS: true, TLSMaterial: otherCA}), "another CA", "",
		"the Kafka broker's certificate does not verify against the sink's CA bundle (tls.caBundle)", "certificate signed by unknown authority")
	publishRefused(t, newKafka(t, addrs, "events", KafkaKey{}, KafkaConfig{TLS: true, TLSMaterial: TLSMaterial{CAPEM: pki.CA}}), "no client certificate", "",
		"the TLS handshake with the Kafka broker failed: does it require a client certificate (tls.clientCertificate)", "certificate required")

	// Without TLS the broker closes the connection before it answers, as a load balancer
	// without a broker behind it does: that passes, so it is retried, with franz-go's guess.
	de, err := publishWithin(t, newKafka(t, addrs, "events", KafkaKey{}, KafkaConfig{}), "evt_plain", 3*time.Second)
	if de == nil || de.Misconfigured || !de.Retryable || !strings.Contains(err.Error(), "is TLS missing?") {
		t.Errorf("producing without TLS = %v, want a retryable *Error with franz-go's guess", err)
	}
}

// Issue 30: the Kafka broker down while events arrive: they are retried, and produced once each
// when it is back on the same port; the HTTP sink beside it got every event meanwhile.
func TestKafkaSinkDownThenCatchingUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	addrs := []string{fmt.Sprintf("127.0.0.1:%d", port)}
	bus := newKafka(t, addrs, "events", KafkaKey{}, KafkaConfig{})

	r := newSinkRig(t, Options{Workers: 4})
	web := r.add(t, "web", "", reply{status: 200})
	r.set("bus", func(s *Sink) { *s = Sink{Name: "bus", Publisher: bus, MaxAttempts: 1000} })
	ids := r.claim(t, []string{"bus", "web"}, slices.Repeat([]string{"invoice.paid"}, 20)...)
	r.run(t)
	eventually(t, "the HTTP sink has every event while Kafka is down", func() bool { return len(web.received2xx()) == 20 })
	eventually(t, "producing to the stopped broker failed", func() bool { return r.logs.contains(`producing to Kafka topic \"events\"`) })
	eventually(t, "only the bus sink's 20 jobs wait", func() bool { return r.depth(t) == 20 })

	startKafka(t, kfake.Ports(port), kfake.SeedTopics(1, "events"))
	deadline := time.Now().Add(30 * time.Second)
	for r.depth(t) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the bus sink did not catch up within 30s of the broker's return")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var got []string
	for _, rec := range records(t, addrs, "events", 20) {
		got = append(got, header(rec, "ce_id"))
	}
	if !slices.Equal(sorted(got), ids) {
		t.Errorf("the topic holds %d records %v, want each of the %d events once", len(got), got, len(ids))
	}
	fmt.Printf("REPORT kafka-down: %d events, the HTTP sink got them all while Kafka was down; after its return the topic holds %d, each once\n", len(ids), len(got))
}

// Issue 31: a replay's record carries ce_hookwardenreplay and, with a fresh key, the replay's
// Idempotency-Key; a first delivery's record carries neither.
func TestKafkaRecordOfAReplay(t *testing.T) {
	k := &Kafka{topic: "t"}
	headers := func(ev store.Event) map[string]string {
		m := map[string]string{}
		for _, h := range k.record(context.Background(), ev).Headers {
			m[h.Key] = string(h.Value)
		}
		return m
	}
	ev := store.Event{Subscription: "shop/orders", SubscriptionUID: "uid", EventID: "evt_1", EventType: "invoice.paid", Payload: []byte("{}")}
	if h := headers(ev); h["ce_"+ReplayAttribute] != "" || h["Idempotency-Key"] != "uid:evt_1" {
		t.Errorf("a first delivery's headers %v", h)
	}
	ev.Replays, ev.FreshKey = 3, true
	if h := headers(ev); h["ce_"+ReplayAttribute] != "3" || h["Idempotency-Key"] != "uid:evt_1:replay-3" || h["ce_id"] != "evt_1" {
		t.Errorf("a replay's headers %v: want ce_hookwardenreplay 3, Idempotency-Key uid:evt_1:replay-3, ce_id evt_1", h)
	}
}
