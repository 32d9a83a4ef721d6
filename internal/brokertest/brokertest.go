// Package brokertest gives tests the brokers on this machine's loopback: RabbitMQ (the
// running rabbitmq-server, or one started from Debian's package) and a TCP proxy a test can
// cut to close every client connection without touching the broker or other clients (or that
// terminates TLS in front of a broker that has none).
package brokertest

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// RabbitMQAddr is where the machine's RabbitMQ listens (guest/guest may connect over loopback).
const RabbitMQAddr = "127.0.0.1:5672"

// RabbitMQ returns the amqp:// URL (guest/guest, vhost /) of the RabbitMQ on RabbitMQAddr,
// starting rabbitmq-server when none answers and the binary exists. Without a broker it fails
// under CI=true and skips, loudly, elsewhere.
func RabbitMQ(tb testing.TB) string {
	tb.Helper()
	if err := ensureRabbitMQ(); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatal(err)
		}
		tb.Skip("SKIPPED, NOT PASSED: ", err)
	}
	return "amqp://guest:guest@" + RabbitMQAddr + "/"
}

var (
	rabbitOnce sync.Once
	rabbitErr  error
)

func ensureRabbitMQ() error {
	rabbitOnce.Do(func() {
		if listening(RabbitMQAddr) {
			return
		}
		bin, err := exec.LookPath("rabbitmq-server")
		if err != nil {
			rabbitErr = errors.New("no RabbitMQ on " + RabbitMQAddr + " and no rabbitmq-server to start (apt-get install rabbitmq-server)")
			return
		}
		// -detached returns before the node is up; poll the port (an empty node takes ~7s).
		if out, err := exec.Command(bin, "-detached").CombinedOutput(); err != nil {
			rabbitErr = errors.New("rabbitmq-server -detached: " + err.Error() + ": " + string(out))
			return
		}
		deadline := time.Now().Add(90 * time.Second)
		for !listening(RabbitMQAddr) {
			if time.Now().After(deadline) {
				rabbitErr = errors.New("started rabbitmq-server, but nothing listens on " + RabbitMQAddr + " after 90s")
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	return rabbitErr
}

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// Proxy forwards loopback TCP connections to a target; Cut closes every connection it carries
// (as a broker restart or a network failure would, seen from the client), and Stop/Start stop
// and resume accepting on the same address.
type Proxy struct {
	target string
	addr   string
	// tls, when set, terminates TLS: clients connect over TLS, the target gets the plain stream.
	tls *tls.Config

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	cuts  int
}

// NewProxy starts a proxy to target on a free loopback port; it stops when the test ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	return newProxy(tb, target, nil)
}

// NewTLSProxy starts a proxy to target that clients reach over TLS with cfg (as a broker behind
// a TLS-terminating load balancer): a client that does not verify the proxy's certificate, or
// whose certificate cfg refuses, never reaches target.
func NewTLSProxy(tb testing.TB, target string, cfg *tls.Config) *Proxy {
	tb.Helper()
	return newProxy(tb, target, cfg)
}

func newProxy(tb testing.TB, target string, cfg *tls.Config) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), tls: cfg, conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	tb.Cleanup(p.Stop)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

func (p *Proxy) serve(ln net.Listener) {
	if p.tls != nil {
		ln = tls.NewListener(ln, p.tls)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *Proxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	_ = c.Close()
	_ = up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// Cut closes every connection the proxy carries now; new ones are accepted as before.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.cuts++
}

// Cuts is how many times Cut was called.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Stop stops accepting and cuts every connection (the broker is down, seen from the client).
func (p *Proxy) Stop() {
	p.mu.Lock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	p.mu.Unlock()
	p.Cut()
}

// Start accepts again on the same address after Stop.
func (p *Proxy) Start() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}

// Name is a name unique to this run for a test's broker objects (exchanges, queues, topics):
// prefix followed by random hex.
func Name(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}
