package deliver

import (
	"crypto/tls"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/hookwarden/hookwarden/internal/brokertest"
	"github.com/hookwarden/hookwarden/internal/testpki"
	"github.com/hookwarden/hookwarden/internal/testtier"
)

// streamIDs is the ce-id of every message in st.
func streamIDs(t *testing.T, st jetstream.Stream) []string {
	t.Helper()
	var ids []string
	for _, m := range messages(t, st) {
		ids = append(ids, m.Header.Get("ce-id"))
	}
	return ids
}

// startNATSWith runs an embedded nats-server with JetStream and the options o.
func startNATSWith(t *testing.T, o *server.Options) *server.Server {
	t.Helper()
	testtier.RequiresServers(t, "a NATS JetStream server")
	o.Port, o.StoreDir = server.RANDOM_PORT, t.TempDir()
	return brokertest.StartNATSWith(t, o)
}

// Issue 30: a NATS sink over mutual TLS: it verifies the server against its CA bundle and
// presents its client certificate. A CA bundle the server's certificate does not chain to, or
// no client certificate, is refused with a readable reason; the events wait, and are published
// once the sink has the right material.
func TestJetStreamSinkTLS(t *testing.T) {
	pki := testpki.New(t)
	cert, err := tls.X509KeyPair(pki.ServerCert, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	ns := startNATSWith(t, &server.Options{TLS: true, TLSVerify: true, TLSTimeout: 5,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientCAs: pki.Pool, ClientAuth: tls.RequireAndVerifyClientCert}})
	url := "tls://127.0.0.1:" + strconv.Itoa(ns.Addr().(*net.TCPAddr).Port)
	good := TLSMaterial{CAPEM: pki.CA, CertPEM: pki.ClientCert, KeyPEM: pki.ClientKey}
	adminTLS, err := good.config()
	if err != nil {
		t.Fatal(err)
	}
	hooks, _ := brokertest.StreamAt(t, url, []nats.Option{nats.Secure(adminTLS)}, "HOOKS", "hooks.>")

	bus := newJetStream(t, url, "hooks.orders", JetStreamAuth{TLS: true, TLSMaterial: good})
	if de, err := publishOnce(t, bus, "evt_mtls"); err != nil {
		t.Fatalf("publishing over mutual TLS: %v (%+v)", err, de)
	}

	otherCA := good
	otherCA.CAPEM = testpki.New(t).CA
	wrongCA := newJetStream(t, url, "hooks.orders", JetStreamAuth{TLS: true, TLSMaterial: otherCA})
	de, err := publishOnce(t, wrongCA, "evt_wrong_ca")
	if de == nil || !de.Misconfigured || !de.Retryable || !strings.Contains(err.Error(), "does not verify against the sink's CA bundle") {
		t.Errorf("publishing with a CA bundle the server's certificate does not chain to = %v; want a misconfigured sink, retried, saying so", err)
	}
	noCert := newJetStream(t, url, "hooks.orders", JetStreamAuth{TLS: true, TLSMaterial: TLSMaterial{CAPEM: pki.CA}})
	de, err = publishOnce(t, noCert, "evt_no_cert")
	if de == nil || !de.Misconfigured || !de.Retryable || !strings.Contains(err.Error(), "the TLS handshake with the NATS server failed") {
		t.Errorf("publishing without the client certificate = %v; want a misconfigured sink, retried, saying the server refused it", err)
	}
	if n := count(t, hooks); n != 1 {
		t.Fatalf("the stream holds %d messages, want the one published over mutual TLS", n)
	}
	if _, err := NewJetStream([]string{url}, "hooks.orders", JetStreamAuth{TLS: true, TLSMaterial: TLSMaterial{CAPEM: []byte("not PEM")}}); err == nil {
		t.Errorf("NewJetStream with a CA bundle that holds no certificate succeeded")
	}

	stream, _ := brokertest.StreamAt(t, url, []nats.Option{nats.Secure(adminTLS)}, "LATER", "later.>")
	refusedThenFixed(t,
		newJetStream(t, url, "later.orders", JetStreamAuth{TLS: true, TLSMaterial: otherCA}),
		newJetStream(t, url, "later.orders", JetStreamAuth{TLS: true, TLSMaterial: good}),
		"certificate signed by unknown authority", func() []string { return streamIDs(t, stream) })
}

// Issue 30: a NATS sink authenticates with a user credentials file (user.creds: a JWT and an
// nkey seed) to a server in operator mode. Credentials of an account the server does not know
// are refused with a readable reason, and the events wait until the sink has good ones; a
// file that does not parse, or whose seed is not its JWT's user, is said when the sink is
// built, never a crash.
func TestJetStreamSinkCreds(t *testing.T) {
	op := brokertest.NewNATSOperator(t)
	o := &server.Options{}
	op.Configure(o)
	ns := startNATSWith(t, o)
	url := ns.ClientURL()
	good := op.Creds(t, op.Account)
	hooks, _ := brokertest.StreamAt(t, url, []nats.Option{nats.UserCredentialBytes(good)}, "HOOKS", "hooks.>")

	bus := newJetStream(t, url, "hooks.orders", JetStreamAuth{Creds: good})
	if de, err := publishOnce(t, bus, "evt_creds"); err != nil {
		t.Fatalf("publishing with the user's credentials: %v (%+v)", err, de)
	}
	if n := count(t, hooks); n != 1 {
		t.Fatalf("the stream holds %d messages, want 1", n)
	}

	stranger, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	unknown := op.Creds(t, stranger)
	de, err := publishOnce(t, newJetStream(t, url, "hooks.orders", JetStreamAuth{Creds: unknown}), "evt_unknown")
	if de == nil || !de.Misconfigured || !de.Retryable || !strings.Contains(err.Error(), "NATS refused the sink's credentials") {
		t.Errorf("publishing with credentials of an account the server does not know = %v; want a misconfigured sink, retried, saying so", err)
	}
	de, err = publishOnce(t, newJetStream(t, url, "hooks.orders", JetStreamAuth{}), "evt_none")
	if de == nil || !de.Misconfigured || !strings.Contains(err.Error(), "Authorization Violation") {
		t.Errorf("publishing without credentials = %v; want the server's authorization violation", err)
	}

	other := op.Creds(t, op.Account)
	goodJWT, _ := jwt.ParseDecoratedJWT(good)
	otherSeed, _ := jwt.ParseDecoratedUserNKey(other)
	seed, _ := otherSeed.Seed()
	mixed := brokertest.CredsFile(goodJWT, seed)
	accSeed, _ := op.Account.Seed()
	accountSeed := brokertest.CredsFile(goodJWT, accSeed)
	for _, c := range []struct {
		reason string
		creds  []byte
		want   string
	}{
		{"not a credentials file", []byte("hello"), "the NATS credentials file (user.creds) holds no user JWT"},
		{"a JWT without a seed", []byte(goodJWT), "the NATS credentials file (user.creds) holds no user nkey seed"},
		{"an account's seed", accountSeed, "the NATS credentials file (user.creds) holds no user nkey seed"},
		{"another user's seed", mixed, "its seed is the key of"},
	} {
		_, err := NewJetStream([]string{url}, "hooks.orders", JetStreamAuth{Creds: c.creds})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: NewJetStream = %v, want an error containing %q", c.reason, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), string(seed)) {
			t.Errorf("%s: the error shows the seed", c.reason)
		}
	}

	later, _ := brokertest.StreamAt(t, url, []nats.Option{nats.UserCredentialBytes(good)}, "LATER", "later.>")
	refusedThenFixed(t,
		newJetStream(t, url, "later.orders", JetStreamAuth{Creds: unknown}),
		newJetStream(t, url, "later.orders", JetStreamAuth{Creds: good}),
		"Authorization Violation", func() []string { return streamIDs(t, later) })
}
