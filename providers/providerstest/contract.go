package providerstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Exchange is one request a fake served and its answer, as a contract check sees it.
type Exchange struct {
	Request *http.Request
	Body    []byte // the request body
	Answer  *httptest.ResponseRecorder
}

// Contract serves a fake through check, which holds each exchange against the provider's
// published description: it names the operation and what does not conform ("" when all does).
// Tests read the outcome with Result.
type Contract struct {
	next  http.Handler
	check func(Exchange) (op, problem string)

	mu         sync.Mutex
	violations []string
	seen       map[string]int
}

// NewContract wraps next.
func NewContract(next http.Handler, check func(Exchange) (op, problem string)) *Contract {
	return &Contract{next: next, check: check, seen: map[string]int{}}
}

func (c *Contract) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body bytes.Buffer
	if r.Body != nil {
		_, _ = body.ReadFrom(r.Body)
		r.Body.Close()
	}
	r.Body = http.NoBody
	if body.Len() > 0 {
		r.Body = readCloser{bytes.NewReader(body.Bytes())}
	}
	rec := httptest.NewRecorder()
	c.next.ServeHTTP(rec, r)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
	op, problem := c.check(Exchange{Request: r, Body: body.Bytes(), Answer: rec})
	c.mu.Lock()
	defer c.mu.Unlock()
	if op != "" {
		c.seen[fmt.Sprintf("%s %d", op, rec.Code)]++
	}
	if problem != "" {
		c.violations = append(c.violations, fmt.Sprintf("%s %s -> %d: %s", r.Method, r.URL.Path, rec.Code, problem))
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// Result fails t with every exchange that did not conform and returns how often each operation
// answered each status ("create 201").
func (c *Contract) Result(t testing.TB) map[string]int {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.violations {
		t.Errorf("not as the provider's description says: %s", v)
	}
	return c.seen
}

// DecodeJSON decodes b for a schema check, numbers kept as json.Number.
func DecodeJSON(b []byte) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return v, dec.Decode(&v)
}
