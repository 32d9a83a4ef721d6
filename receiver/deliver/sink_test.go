package deliver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/receiver/store"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client certificate, in PEM.
type testPKI struct {
	caPEM, serverCert, serverKey, clientCert, clientKey []byte
	pool                                                *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	key := func() (*ecdsa.PrivateKey, []byte) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return k, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	caKey, _ := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage, ips ...net.IP) ([]byte, []byte) {
		k, keyPEM := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "test"}, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM
	}
	p := &testPKI{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.serverCert, p.serverKey = issue(2, x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1"))
	p.clientCert, p.clientKey = issue(3, x509.ExtKeyUsageClientAuth)
	return p
}

// An HTTP sink gets its extra headers and its credentials: a bearer token or basic auth, a
// client certificate for mutual TLS, and is checked against its CA bundle.
func TestHTTPSinkAuth(t *testing.T) {
	pki := newTestPKI(t)
	var mu sync.Mutex
	var got []http.Header
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	cert, err := tls.X509KeyPair(pki.serverCert, pki.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pki.pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	defer srv.Close()

	headers := http.Header{"X-Team": {"payments"}}
	ev := store.Event{Subscription: "shop/orders", SubscriptionUID: "uid", EventID: "evt_1", EventType: "invoice.paid", Payload: []byte("{}"), ReceivedAt: time.Now()}
	send := func(auth HTTPAuth) (int, error) {
		t.Helper()
		target, err := NewHTTPTarget(srv.URL, headers, auth, nil)
		if err != nil {
			t.Fatalf("NewHTTPTarget: %v", err)
		}
		defer target.Close()
		return NewSender(SenderOptions{Timeout: 5 * time.Second}).Send(context.Background(), target, ev)
	}
	mtls := HTTPAuth{CAPEM: pki.caPEM, CertPEM: pki.clientCert, KeyPEM: pki.clientKey}

	bearer := mtls
	bearer.BearerToken = "s3cret-token"
	if status, err := send(bearer); err != nil || status != http.StatusAccepted {
		t.Fatalf("Send with mTLS, CA bundle and a bearer token = %d, %v; want 202", status, err)
	}
	basic := mtls
	basic.Username, basic.Password = "hook", "warden"
	if status, err := send(basic); err != nil || status != http.StatusAccepted {
		t.Fatalf("Send with basic auth = %d, %v; want 202", status, err)
	}
	mu.Lock()
	if len(got) != 2 || got[0].Get("Authorization") != "Bearer s3cret-token" || got[1].Get("Authorization") != "Basic aG9vazp3YXJkZW4=" ||
		got[0].Get("X-Team") != "payments" || got[0].Get("Idempotency-Key") != "uid:evt_1" {
		t.Errorf("the sink saw %v, want the bearer token, then basic auth, each with X-Team and the Idempotency-Key", got)
	}
	mu.Unlock()

	noClientCert := HTTPAuth{CAPEM: pki.caPEM}
	if _, err := send(noClientCert); err == nil {
		t.Errorf("Send without the client certificate succeeded, want the handshake refused")
	}
	if _, err := send(HTTPAuth{CertPEM: pki.clientCert, KeyPEM: pki.clientKey}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Send without the CA bundle = %v, want the server's certificate refused", err)
	}
	if _, err := NewHTTPTarget(srv.URL, nil, HTTPAuth{CAPEM: []byte("not PEM")}, nil); err == nil {
		t.Errorf("NewHTTPTarget with a CA bundle that holds no certificate succeeded")
	}
	if _, err := NewHTTPTarget(srv.URL, nil, HTTPAuth{CertPEM: pki.clientCert, KeyPEM: pki.serverKey}, nil); err == nil {
		t.Errorf("NewHTTPTarget with a certificate and a key that do not match succeeded")
	}
}
