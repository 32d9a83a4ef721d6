package deliver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
)

// TLSMaterial is the PEM material of a sink's TLS settings, as the route Secret carries it: a
// CA bundle the server's certificate must chain to, and a client certificate for mutual TLS.
type TLSMaterial struct {
	CertPEM, KeyPEM, CAPEM []byte
}

// empty reports whether m holds nothing (the system's roots, no client certificate).
func (m TLSMaterial) empty() bool { return len(m.CAPEM) == 0 && len(m.CertPEM) == 0 }

// config builds the TLS configuration of m (TLS 1.2 or later).
func (m TLSMaterial) config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(m.CAPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(m.CAPEM) {
			return nil, errors.New("the CA bundle holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	if len(m.CertPEM) > 0 {
		cert, err := tls.X509KeyPair(m.CertPEM, m.KeyPEM)
		if err != nil {
			return nil, errors.New("the client certificate and key do not make a key pair")
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// tlsRefusal is why a connection to server ("the NATS server") failed, when it failed at TLS: the
// server's certificate does not verify, the server refused the handshake, or it does not speak
// TLS; nil for any other failure. Retrying cannot help: the user must fix the sink's TLS settings
// (or the broker's), so the caller makes the sink misconfigured.
func tlsRefusal(server string, err error) error {
	var (
		verify *tls.CertificateVerificationError
		remote *net.OpError
		notTLS tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &verify):
		return fmt.Errorf("%s's certificate does not verify against the sink's CA bundle (tls.caBundle): %w", server, err)
	case errors.As(err, &remote) && remote.Op == "remote error":
		// The server sent a TLS alert (crypto/tls's "remote error"; with TLS 1.3 it comes at
		// the first read after the handshake): typically it did not take the client's certificate.
		return handshakeRefused(server, err)
	case errors.As(err, &notTLS):
		return fmt.Errorf("%s does not answer in TLS: does its port take TLS connections? %w", server, err)
	}
	return nil
}

// handshakeRefused says that server refused the TLS handshake (err), and what to check.
func handshakeRefused(server string, err error) error {
	return fmt.Errorf("the TLS handshake with %s failed: does it require a client certificate (tls.clientCertificate), or refuse this one? %w", server, err)
}
