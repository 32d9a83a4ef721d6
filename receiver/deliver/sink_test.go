package deliver

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/testpki"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// An HTTP sink gets its extra headers and its credentials: a bearer token or basic auth, a
// client certificate for mutual TLS, and is checked against its CA bundle.
func TestHTTPSinkAuth(t *testing.T) {
	pki := testpki.New(t)
	var mu sync.Mutex
	var got []http.Header
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	cert, err := tls.X509KeyPair(pki.ServerCert, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pki.Pool, ClientAuth: tls.RequireAndVerifyClientCert}
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
	mtls := HTTPAuth{CAPEM: pki.CA, CertPEM: pki.ClientCert, KeyPEM: pki.ClientKey}

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

	noClientCert := HTTPAuth{CAPEM: pki.CA}
	if _, err := send(noClientCert); err == nil {
		t.Errorf("Send without the client certificate succeeded, want the handshake refused")
	}
	if _, err := send(HTTPAuth{CertPEM: pki.ClientCert, KeyPEM: pki.ClientKey}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Send without the CA bundle = %v, want the server's certificate refused", err)
	}
	if _, err := NewHTTPTarget(srv.URL, nil, HTTPAuth{CAPEM: []byte("not PEM")}, nil); err == nil {
		t.Errorf("NewHTTPTarget with a CA bundle that holds no certificate succeeded")
	}
	if _, err := NewHTTPTarget(srv.URL, nil, HTTPAuth{CertPEM: pki.ClientCert, KeyPEM: pki.ServerKey}, nil); err == nil {
		t.Errorf("NewHTTPTarget with a certificate and a key that do not match succeeded")
	}
}
