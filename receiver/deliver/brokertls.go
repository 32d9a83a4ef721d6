package deliver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
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
