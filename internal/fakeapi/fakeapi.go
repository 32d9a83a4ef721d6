// Package fakeapi is the provider-independent core of the stateful provider fakes
// (providers/stripe/fake, providers/github/fake): injected faults (latency, failures, the
// "applied but the response was lost" case), the request log, a settable clock, labels that
// name a credential without revealing it, and serving on a loopback port.
//
// Each fake keeps its own state, wire format and error envelope; what is here is the part that
// would otherwise be copied into every one of them.
package fakeapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// StatusClientGone is the status a request log records when the client went away before the
// response (for example during injected latency), after nginx's 499.
const StatusClientGone = 499

// Label is the stable, non-secret name a request log uses for a credential: prefix and the
// first 12 hex digits of its SHA-256, so logs can be printed or served without leaking it. ""
// stays "" (no credential sent).
func Label(prefix, credential string) string {
	if credential == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(credential))
	return prefix + hex.EncodeToString(sum[:6])
}

// Clock is a replaceable time source, so tests can move a fake's notion of now (creation
// times, expiry windows, rate-limit resets) without sleeping.
type Clock struct {
	mu     sync.Mutex
	now    func() time.Time
	offset time.Duration
}

// Now returns the current time of the clock (time.Now until Set), moved by Advance.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now == nil {
		return time.Now().Add(c.offset)
	}
	return c.now().Add(c.offset)
}

// Set replaces the time source and forgets any Advance; nil restores time.Now. now is called
// with the clock's lock held, and by fakes with their own lock held, so it must not call back
// into the fake.
func (c *Clock) Set(now func() time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
	c.offset = 0
}

// Advance moves the clock d ahead of its source (time.Now, or what Set gave), so a fake binary
// driven from a shell can say "four days later" without a source of its own.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// Rule says which requests a fault applies to, how often, and how.
type Rule struct {
	Method     string // "" matches any method
	PathPrefix string // "" matches any path
	// Credential, when set, limits the fault to requests made with that credential (an API
	// whose paths do not name the account, Stripe's): other tenants of the fake are untouched.
	Credential string
	// Latency delays the request. The delay ends early if the client gives up, and then the
	// request is not processed at all.
	Latency time.Duration
	// Times is how many requests the fault applies to; 0 means until removed.
	Times int
	// AfterApply processes the request normally (state changes) and only then answers with
	// the failure: the "response lost" case.
	AfterApply bool
}

// Faults is a set of injected faults; F is the provider's description of the failure a fault
// answers with. The zero value is empty and ready to use; it is safe for concurrent use.
type Faults[F any] struct {
	// FoldCase matches Rule.PathPrefix case-insensitively, for APIs whose paths are.
	FoldCase bool

	mu      sync.Mutex
	seq     uint64
	entries []*faultEntry[F]
}

type faultEntry[F any] struct {
	id   uint64
	rule Rule
	fail *F
	left int
}

// Taken is what the faults decided for one request.
type Taken[F any] struct {
	Latency time.Duration
	// Fail is the failure to answer with, nil for none.
	Fail       *F
	AfterApply bool
}

// Inject adds a fault and returns a function that removes it (safe to call more than once).
// fail nil makes a latency-only fault. All matching latency-only faults apply; of the faults
// with a failure, the earliest injected one that matches wins. Each applied fault uses up one
// of its Times.
func (fs *Faults[F]) Inject(r Rule, fail *F) (remove func()) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.seq++
	id := fs.seq
	fs.entries = append(fs.entries, &faultEntry[F]{id: id, rule: r, fail: fail, left: r.Times})
	return func() {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		fs.drop(id)
	}
}

// Clear removes every injected fault.
func (fs *Faults[F]) Clear() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.entries = nil
}

func (fs *Faults[F]) drop(id uint64) {
	for i, fe := range fs.entries {
		if fe.id == id {
			fs.entries = append(fs.entries[:i:i], fs.entries[i+1:]...)
			return
		}
	}
}

// Take picks the faults for one request and uses them up.
func (fs *Faults[F]) Take(method, path string) Taken[F] { return fs.TakeFor(method, path, "") }

// TakeFor is Take for a request made with credential: faults limited to another credential
// pass it by.
func (fs *Faults[F]) TakeFor(method, path, credential string) Taken[F] {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var t Taken[F]
	var used []uint64
	for _, fe := range fs.entries {
		if !fs.matches(fe.rule, method, path) || (fe.rule.Credential != "" && fe.rule.Credential != credential) {
			continue
		}
		if fe.fail != nil {
			if t.Fail != nil {
				continue
			}
			t.Fail, t.AfterApply = fe.fail, fe.rule.AfterApply
		}
		t.Latency += fe.rule.Latency
		if fe.rule.Times > 0 {
			fe.left--
			if fe.left <= 0 {
				used = append(used, fe.id)
			}
		}
	}
	for _, id := range used {
		fs.drop(id)
	}
	return t
}

func (fs *Faults[F]) matches(r Rule, method, path string) bool {
	if fs.FoldCase {
		return Matches(r.Method, strings.ToLower(r.PathPrefix), method, strings.ToLower(path))
	}
	return Matches(r.Method, r.PathPrefix, method, path)
}

// Matches reports whether a request (method, path) is selected by wantMethod ("" = any,
// case-insensitive) and a path prefix.
func Matches(wantMethod, prefix, method, path string) bool {
	return (wantMethod == "" || strings.EqualFold(wantMethod, method)) && strings.HasPrefix(path, prefix)
}

// Serve runs the fault-dependent part of answering one request: it waits out t.Latency
// (ok is false if the client gave up first, and nothing is applied), then answers with the
// failure before applying, or applies and then answers with the failure when t.AfterApply.
func Serve[F, R any](ctx context.Context, t Taken[F], apply func() R, fail func(*F) R) (res R, ok bool) {
	if t.Latency > 0 {
		timer := time.NewTimer(t.Latency)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return res, false
		case <-timer.C:
		}
	}
	if t.Fail != nil && !t.AfterApply {
		return fail(t.Fail), true
	}
	res = apply()
	if t.Fail != nil {
		res = fail(t.Fail)
	}
	return res, true
}

// Log is a request log. R is the provider's record type; clone deep-copies one (nil: records
// are plain values). It is safe for concurrent use.
type Log[R any] struct {
	mu      sync.Mutex
	clone   func(R) R
	entries []R
}

// NewLog returns an empty log that copies records with clone when handing them out.
func NewLog[R any](clone func(R) R) *Log[R] { return &Log[R]{clone: clone} }

// Add appends a record.
func (l *Log[R]) Add(r R) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, r)
}

// All returns copies of the records in the order they were added.
func (l *Log[R]) All() []R {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]R, len(l.entries))
	for i, r := range l.entries {
		if l.clone != nil {
			r = l.clone(r)
		}
		out[i] = r
	}
	return out
}

// Count counts the records for which match is true. match runs with the log's lock held.
func (l *Log[R]) Count(match func(R) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.entries {
		if match(r) {
			n++
		}
	}
	return n
}

// Reset empties the log, so a test can count only what happens next.
func (l *Log[R]) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = nil
}

// CloneValues deep-copies query or form values (nil stays nil), for request logs that hand
// out copies.
func CloneValues(v url.Values) url.Values {
	if v == nil {
		return nil
	}
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// Run serves h on addr until ctx is cancelled, then shuts down gracefully and calls drain (if
// not nil) to wait for the fake's own background work. It prints "NAME listening on
// http://ADDR" to log once listening, so -addr 127.0.0.1:0 is usable. It is the body of the
// fake binaries (cmd/fakestripe, cmd/fakegithub).
func Run(ctx context.Context, name, addr string, h http.Handler, log io.Writer, drain func()) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(log, "%s listening on http://%s\n", name, ln.Addr())

	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = hs.Shutdown(shutdownCtx)
	if drain != nil {
		drain()
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// WriteJSON answers with v as indented JSON, for the fakes' admin endpoints.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client may have gone; nothing useful to do
}

// Start serves h on a fresh 127.0.0.1 port and returns its base URL and a function that stops
// it. It panics if it cannot listen, like httptest.NewServer, because callers are tests and
// demos with no way to recover.
func Start(h http.Handler) (baseURL string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("fakeapi: listen: " + err.Error())
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln) // always http.ErrServerClosed after Close
	}()
	var once sync.Once
	return "http://" + ln.Addr().String(), func() {
		once.Do(func() {
			_ = hs.Close()
			<-done
		})
	}
}
