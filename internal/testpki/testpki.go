// Package testpki makes a throwaway certificate authority for tests: a CA, a server certificate
// for 127.0.0.1 and a client certificate, all signed by it, in PEM.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a CA and two certificates it signed, valid for an hour around now.
type PKI struct {
	CA                    []byte // the CA certificate
	ServerCert, ServerKey []byte // for 127.0.0.1 (server auth)
	ClientCert, ClientKey []byte // client auth
	Pool                  *x509.CertPool
}

// New makes a PKI, failing t on any error.
func New(t testing.TB) *PKI {
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
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hookwarden test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, name string, usage x509.ExtKeyUsage, ips ...net.IP) ([]byte, []byte) {
		k, keyPEM := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM
	}
	p := &PKI{CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), Pool: x509.NewCertPool()}
	p.Pool.AddCert(ca)
	p.ServerCert, p.ServerKey = issue(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, net.IPv4(127, 0, 0, 1))
	p.ClientCert, p.ClientKey = issue(3, "hookwarden test client", x509.ExtKeyUsageClientAuth)
	return p
}

// WriteServer writes the CA and the server's certificate and key into dir and returns their
// paths, for a server configured by files.
func (p *PKI) WriteServer(t testing.TB, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return write("ca.pem", p.CA), write("server.pem", p.ServerCert), write("server.key", p.ServerKey)
}
