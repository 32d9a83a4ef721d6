package receiver

import (
	"context"
	"crypto/tls"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/brokertest"
	"github.com/hookwarden/hookwarden/internal/routesecret"
	"github.com/hookwarden/hookwarden/internal/testpki"
	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/receiver/deliver"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// A subscription's sinks as the receiver delivers to them: what it can send to, and, for each
// one it cannot send to yet, why (its events wait; the others go on).
func TestBuildSinks(t *testing.T) {
	key := routesecret.SinkKey
	pki := testpki.New(t)
	op := brokertest.NewNATSOperator(t)
	creds := op.Creds(t, op.Account)
	natsSink := func(name string, creds *hookv1.SinkSecretRef, tls *hookv1.BrokerTLS) hookv1.Sink {
		return hookv1.Sink{Name: name, NATS: &hookv1.NATSSink{URLs: []string{"tls://n:4222"}, Subject: "a.b", Credentials: creds, TLS: tls}}
	}
	http1 := func(name string, mod func(*hookv1.Sink)) hookv1.Sink {
		s := hookv1.Sink{Name: name, HTTP: &hookv1.HTTPSink{URL: "https://" + name + ".shop.svc/events"}}
		if mod != nil {
			mod(&s)
		}
		return s
	}
	cases := []struct {
		reason   string
		delivery *hookv1.DeliverySpec
		data     map[string][]byte
		want     map[string]string // sink name → its Problem ("" ready)
		check    func(t *testing.T, sinks []deliver.Sink)
	}{
		{reason: "no delivery spec: no sinks, the events wait", delivery: nil, want: map[string]string{}},
		{
			reason:   "the older sink is one HTTP sink named default",
			delivery: &hookv1.DeliverySpec{Sink: &hookv1.SinkSpec{URL: "http://w/"}},
			want:     map[string]string{store.DefaultSink: ""},
			check: func(t *testing.T, sinks []deliver.Sink) {
				if sinks[0].HTTP == nil || sinks[0].HTTP.URL != "http://w/" {
					t.Errorf("default sink = %+v, want an HTTP sink at http://w/", sinks[0])
				}
			},
		},
		{
			reason: "headers, a bearer token and a filter; maxAttempts of its own",
			delivery: &hookv1.DeliverySpec{Sinks: []hookv1.Sink{http1("worker", func(s *hookv1.Sink) {
				s.HTTP.Headers = []hookv1.HTTPHeader{{Name: "X-Team", Value: "payments"}}
				s.HTTP.Auth = &hookv1.HTTPAuth{BearerToken: &hookv1.SinkSecretKey{Name: "tok", Key: "token"}}
				s.Filter, s.MaxAttempts = "type.startsWith('invoice.')", 4
			})}},
			data: map[string][]byte{key("worker", routesecret.SinkFieldBearerToken): []byte("t0k")},
			want: map[string]string{"worker": ""},
			check: func(t *testing.T, sinks []deliver.Sink) {
				s := sinks[0]
				want := http.Header{"X-Team": {"payments"}, "Authorization": {"Bearer t0k"}}
				if diff := cmp.Diff(want, s.HTTP.Header); diff != "" || s.Filter == nil || s.MaxAttempts != 4 {
					t.Errorf("worker: headers (-want +got):\n%s\nfilter %v, maxAttempts %d", diff, s.Filter, s.MaxAttempts)
				}
			},
		},
		{
			reason: "credentials the manager has not copied yet, a filter that does not compile, a ref not resolved, brokers: each waits with its reason",
			delivery: &hookv1.DeliverySpec{Sinks: []hookv1.Sink{
				http1("ok", nil),
				http1("nocreds", func(s *hookv1.Sink) {
					s.HTTP.Auth = &hookv1.HTTPAuth{Basic: &hookv1.SinkSecretRef{Name: "b"}}
				}),
				http1("typo", func(s *hookv1.Sink) { s.Filter = "typ == 'x'" }),
				{Name: "broker", Ref: &hookv1.RefSink{APIVersion: "eventing.knative.dev/v1", Kind: "Broker", Name: "default"}},
				{Name: "resolved", Ref: &hookv1.RefSink{APIVersion: "v1", Kind: "Service", Name: "worker"}},
				{Name: "bus", NATS: &hookv1.NATSSink{URLs: []string{"nats://n:4222"}, Subject: "a.b"}},
				{Name: "natsauth", NATS: &hookv1.NATSSink{URLs: []string{"nats://n:4222"}, Subject: "a.b", Credentials: &hookv1.SinkSecretRef{Name: "n"}}},
				{Name: "kafka", Kafka: &hookv1.KafkaSink{BootstrapServers: []string{"k:9092"}, Topic: "t"}},
				{Name: "kafkasasl", Kafka: &hookv1.KafkaSink{BootstrapServers: []string{"k:9092"}, Topic: "t",
					SASL: &hookv1.KafkaSASL{Mechanism: "SCRAM-SHA-512", Credentials: hookv1.SinkSecretRef{Name: "k"}}}},
				{Name: "kafkanosasl", Kafka: &hookv1.KafkaSink{BootstrapServers: []string{"k:9092"}, Topic: "t",
					SASL: &hookv1.KafkaSASL{Mechanism: "PLAIN", Credentials: hookv1.SinkSecretRef{Name: "k"}}}},
				{Name: "kafkatls", Kafka: &hookv1.KafkaSink{BootstrapServers: []string{"k:9093"}, Topic: "t", TLS: &hookv1.BrokerTLS{}}},
				{Name: "rabbit", AMQP: &hookv1.AMQPSink{URL: hookv1.SinkSecretKey{Name: "r", Key: "url"}, Exchange: "hooks"}},
				{Name: "rabbitnourl", AMQP: &hookv1.AMQPSink{URL: hookv1.SinkSecretKey{Name: "r", Key: "url"}}},
				{Name: "rabbitnoca", AMQP: &hookv1.AMQPSink{URL: hookv1.SinkSecretKey{Name: "r", Key: "url"}, TLS: &hookv1.BrokerTLS{CABundle: &hookv1.SinkSecretKey{Name: "ca", Key: "ca.crt"}}}},
				{Name: "rabbitbadurl", AMQP: &hookv1.AMQPSink{URL: hookv1.SinkSecretKey{Name: "r", Key: "url"}}},
			}},
			data: map[string][]byte{
				key("resolved", routesecret.SinkFieldURL):       []byte("http://worker.shop.svc.cluster.local"),
				key("rabbit", routesecret.SinkFieldURL):         []byte("amqp://u:p@rabbit:5672/"),
				key("kafkasasl", routesecret.SinkFieldUsername): []byte("u"),
				key("kafkasasl", routesecret.SinkFieldPassword): []byte("p"),
				key("rabbitnoca", routesecret.SinkFieldURL):     []byte("amqps://u:p@rabbit:5671/"),
				key("rabbitbadurl", routesecret.SinkFieldURL):   []byte("http://rabbit/"),
			},
			want: map[string]string{
				"ok":           "",
				"nocreds":      "the route Secret holds no [sink.nocreds.username sink.nocreds.password] yet",
				"typo":         "filter does not compile: ERROR: <input>:1:1: undeclared reference to 'typ'",
				"broker":       "the manager has not resolved Broker default to a URL yet",
				"resolved":     "",
				"natsauth":     "the route Secret holds no sink.natsauth.user.creds, sink.natsauth.token nor sink.natsauth.username yet",
				"kafka":        "",
				"kafkasasl":    "",
				"kafkanosasl":  "the route Secret holds no sink.kafkanosasl.username and sink.kafkanosasl.password yet",
				"kafkatls":     "",
				"bus":          "",
				"rabbit":       "",
				"rabbitnourl":  "the route Secret holds no sink.rabbitnourl.url yet",
				"rabbitnoca":   "the route Secret holds no [sink.rabbitnoca.ca.crt] yet",
				"rabbitbadurl": "sink rabbitbadurl: the RabbitMQ URL: AMQP scheme must be either 'amqp://' or 'amqps://'",
			},
		},
		{
			reason: "NATS sinks: the credentials file, token or username, and TLS material the route Secret holds; a file that does not parse or a CA bundle without a certificate waits with its reason",
			delivery: &hookv1.DeliverySpec{Sinks: []hookv1.Sink{
				natsSink("creds", &hookv1.SinkSecretRef{Name: "n"}, nil),
				natsSink("badcreds", &hookv1.SinkSecretRef{Name: "n"}, nil),
				natsSink("token", &hookv1.SinkSecretRef{Name: "n"}, nil),
				natsSink("mtls", &hookv1.SinkSecretRef{Name: "n"}, &hookv1.BrokerTLS{CABundle: &hookv1.SinkSecretKey{Name: "ca", Key: "ca.crt"}, ClientCertificate: &hookv1.SinkSecretRef{Name: "c"}}),
				natsSink("systemroots", nil, &hookv1.BrokerTLS{}),
				natsSink("nocert", nil, &hookv1.BrokerTLS{ClientCertificate: &hookv1.SinkSecretRef{Name: "c"}}),
				natsSink("badca", nil, &hookv1.BrokerTLS{CABundle: &hookv1.SinkSecretKey{Name: "ca", Key: "ca.crt"}}),
			}},
			data: map[string][]byte{
				key("creds", routesecret.SinkFieldCreds):    creds,
				key("badcreds", routesecret.SinkFieldCreds): []byte("not a credentials file"),
				key("token", routesecret.SinkFieldToken):    []byte("t0k"),
				key("mtls", routesecret.SinkFieldCreds):     creds,
				key("mtls", routesecret.SinkFieldCA):        pki.CA,
				key("mtls", routesecret.SinkFieldCert):      pki.ClientCert,
				key("mtls", routesecret.SinkFieldKey):       pki.ClientKey,
				key("badca", routesecret.SinkFieldCA):       []byte("not PEM"),
			},
			want: map[string]string{
				"creds":       "",
				"badcreds":    "sink badcreds: the NATS credentials file (user.creds) holds no user JWT",
				"token":       "",
				"mtls":        "",
				"systemroots": "",
				"nocert":      "the route Secret holds no [sink.nocert.tls.crt sink.nocert.tls.key] yet",
				"badca":       "sink badca: the CA bundle holds no PEM certificate",
			},
		},
	}
	for _, tc := range cases {
		sinks := buildSinks(tc.delivery, tc.data)
		for _, s := range sinks {
			if s.Publisher != nil {
				t.Cleanup(s.Publisher.Close)
			}
		}
		got := map[string]string{}
		for _, s := range sinks {
			got[s.Name] = s.Problem
			if want, ok := tc.want[s.Name]; ok && want != "" && strings.HasPrefix(s.Problem, want) {
				got[s.Name] = want
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: problems by sink (-want +got):\n%s", tc.reason, diff)
			continue
		}
		if tc.check != nil {
			tc.check(t, sinks)
		}
	}
}

// Issue 30: a NATS sink built from what the manager copied into the route Secret (its user.creds
// and its TLS material) publishes to a server in operator (JWT) mode that requires mutual TLS;
// a rotated credentials file in the route Secret makes a new publisher that uses it.
func TestNATSSinkFromRouteSecret(t *testing.T) {
	testtier.RequiresServers(t, "a NATS JetStream server")
	pki := testpki.New(t)
	cert, err := tls.X509KeyPair(pki.ServerCert, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	op := brokertest.NewNATSOperator(t)
	o := &server.Options{Port: server.RANDOM_PORT, StoreDir: t.TempDir(), TLS: true, TLSVerify: true, TLSTimeout: 5,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientCAs: pki.Pool, ClientAuth: tls.RequireAndVerifyClientCert}}
	op.Configure(o)
	ns := brokertest.StartNATSWith(t, o)
	url := ns.ClientURL() // tls://127.0.0.1:port
	creds := op.Creds(t, op.Account)
	adminCert, err := tls.X509KeyPair(pki.ClientCert, pki.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	admin := []nats.Option{nats.UserCredentialBytes(creds), nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pki.Pool, Certificates: []tls.Certificate{adminCert}})}
	st, _ := brokertest.StreamAt(t, url, admin, "HOOKS", "hooks.>")

	key := routesecret.SinkKey
	delivery := &hookv1.DeliverySpec{Sinks: []hookv1.Sink{{Name: "bus", NATS: &hookv1.NATSSink{URLs: []string{url}, Subject: "hooks.orders",
		Credentials: &hookv1.SinkSecretRef{Name: "nats-user"},
		TLS:         &hookv1.BrokerTLS{CABundle: &hookv1.SinkSecretKey{Name: "nats-ca", Key: "ca.crt"}, ClientCertificate: &hookv1.SinkSecretRef{Name: "nats-client"}}}}}}
	data := map[string][]byte{key("bus", routesecret.SinkFieldCreds): creds, key("bus", routesecret.SinkFieldCA): pki.CA,
		key("bus", routesecret.SinkFieldCert): pki.ClientCert, key("bus", routesecret.SinkFieldKey): pki.ClientKey}
	publish := func(data map[string][]byte, id string) {
		t.Helper()
		sinks := buildSinks(delivery, data)
		if len(sinks) != 1 || sinks[0].Problem != "" || sinks[0].Publisher == nil {
			t.Fatalf("sinks %+v, want the bus sink ready", sinks)
		}
		defer sinks[0].Publisher.Close()
		ev := store.Event{Subscription: "shop/orders", SubscriptionUID: "uid", EventID: id, EventType: "invoice.paid", Payload: []byte("{}")}
		if _, err := sinks[0].Publisher.Publish(context.Background(), ev); err != nil {
			t.Fatalf("publishing %s: %v", id, err)
		}
	}
	publish(data, "evt_1")
	rotated := maps.Clone(data)
	rotated[key("bus", routesecret.SinkFieldCreds)] = op.Creds(t, op.Account)
	publish(rotated, "evt_2")
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Errorf("the stream holds %d messages, want the 2 published", info.State.Msgs)
	}
}
