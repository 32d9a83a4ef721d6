// Package core is what the REST API fakes (providers/rest/fakes/<api>) share: injected faults,
// a request log, a meter (internal/fakeapi's, for benchmarks), JSON answers and serving on a
// loopback port. Each fake keeps its own state,
// routes and wire format, written from the API's documentation, never from a profile, so a
// profile that misreads the API fails against its fake.
//
// The GitHub provider's branch is extracting the same kind of core from the Stripe fake
// (internal/fakeapi); once it lands these fakes should move onto it.
package core

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
)

// Fault makes matching requests fail, as a rate limiter or load balancer in front of the API
// would: the request is logged and not processed (unless AfterApply).
type Fault struct {
	Method     string // "" matches any method
	PathPrefix string // "" matches any path
	Status     int
	// Header is sent with the failure (Retry-After, ratelimit-reset, ...).
	Header map[string]string
	// Body is sent as is; ContentType defaults to application/json.
	Body        string
	ContentType string
	// Times is how many requests the fault applies to; 0 means until removed.
	Times int
	// AfterApply processes the request first and then answers with the fault instead of the
	// API's answer: a create whose response was lost on the way back.
	AfterApply bool
}

// Request is one logged request.
type Request struct {
	Time   time.Time
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
	Status int
}

// Core holds faults, the request log and the meter; the zero value is ready.
type Core struct {
	mu     sync.Mutex
	faults []*entry
	seq    int
	log    []Request

	// Set by Meter before serving.
	meter   *fakeapi.Meter
	route   func(*http.Request) (credential string, rt fakeapi.Route)
	limited func(rt fakeapi.Route, wait time.Duration) Fault
}

// Meter paces and counts the requests Wrap serves with m (fakeapi.Meter), after the injected
// faults: route names the credential a request was made with and its meter route, and limited
// is the API's own answer to a credential beyond its rate on that route (wait: until it may ask
// again). An injected fault still wins over the rate, and still spends it. Call it before
// serving; a nil m meters nothing.
func (c *Core) Meter(m *fakeapi.Meter, route func(*http.Request) (credential string, rt fakeapi.Route), limited func(rt fakeapi.Route, wait time.Duration) Fault) {
	c.meter, c.route, c.limited = m, route, limited
}

type entry struct {
	id   int
	f    Fault
	left int
}

// Inject adds a fault and returns a function that removes it.
func (c *Core) Inject(f Fault) (remove func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	id := c.seq
	c.faults = append(c.faults, &entry{id: id, f: f, left: f.Times})
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.drop(id)
	}
}

func (c *Core) drop(id int) {
	for i, e := range c.faults {
		if e.id == id {
			c.faults = append(c.faults[:i:i], c.faults[i+1:]...)
			return
		}
	}
}

func (c *Core) take(method, path string) *Fault {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.faults {
		if (e.f.Method == "" || strings.EqualFold(e.f.Method, method)) && strings.HasPrefix(path, e.f.PathPrefix) {
			f := e.f
			if e.f.Times > 0 {
				if e.left--; e.left <= 0 {
					c.drop(e.id)
				}
			}
			return &f
		}
	}
	return nil
}

// Requests returns the log.
func (c *Core) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Request(nil), c.log...)
}

// statusWriter records the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(s int) {
	w.status = s
	w.ResponseWriter.WriteHeader(s)
}

// maxBody bounds request bodies the fakes read.
const maxBody = 1 << 20

// Wrap logs every request (the body is read once and handed on), applies faults and the meter
// and then calls h. A request whose client went away during the meter's latency is not served,
// and is logged with fakeapi.StatusClientGone.
func (c *Core) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		rec := Request{Time: time.Now(), Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.Query(), Header: r.Header.Clone(), Body: body}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		var t fakeapi.Taken[Fault]
		if f := c.take(r.Method, r.URL.EscapedPath()); f != nil {
			t.Fail, t.AfterApply = f, f.AfterApply
		}
		if c.meter != nil {
			credential, rt := c.route(r)
			t = fakeapi.Metered(c.meter, t, credential, rt, func(wait time.Duration) *Fault {
				f := c.limited(rt, wait)
				return &f
			})
		}
		_, served := fakeapi.Serve(r.Context(), t, func() bool {
			if t.Fail != nil {
				h.ServeHTTP(httptest.NewRecorder(), r) // AfterApply: the API's answer is lost
			} else {
				h.ServeHTTP(sw, r)
			}
			return true
		}, func(f *Fault) bool {
			writeFault(sw, f)
			return true
		})
		rec.Status = sw.status
		if !served {
			rec.Status = fakeapi.StatusClientGone
		}
		c.mu.Lock()
		c.log = append(c.log, rec)
		c.mu.Unlock()
	})
}

func writeFault(w http.ResponseWriter, f *Fault) {
	for k, v := range f.Header {
		w.Header().Set(k, v)
	}
	ct := f.ContentType
	if ct == "" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(f.Status)
	_, _ = io.WriteString(w, f.Body)
}

// RateLimit is the usual 429: retryAfter > 0 adds Retry-After in whole seconds.
func RateLimit(retryAfter time.Duration, body string) Fault {
	f := Fault{Status: http.StatusTooManyRequests, Body: body, Times: 1}
	if retryAfter > 0 {
		f.Header = map[string]string{"Retry-After": strconv.Itoa(int((retryAfter + time.Second - 1) / time.Second))}
	}
	return f
}

// JSON writes v with status.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Decode reads a JSON request body into a generic map; ok is false (and a 400 was written
// with msg) when it is not a JSON object.
func Decode(w http.ResponseWriter, r *http.Request, bad func(w http.ResponseWriter, msg string)) (map[string]any, bool) {
	var m map[string]any
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || m == nil {
		bad(w, "the body is not a JSON object")
		return nil, false
	}
	return m, true
}

// Start serves h on a fresh 127.0.0.1 port and returns its base URL and a stop function. It
// panics if it cannot listen, like httptest.NewServer: callers are tests and demos.
func Start(h http.Handler) (baseURL string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("core: listen: " + err.Error())
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
	var once sync.Once
	return "http://" + ln.Addr().String(), func() {
		once.Do(func() {
			_ = hs.Close()
			<-done
		})
	}
}

// Str, Bool and Strings read typed values out of a decoded body; ok reports presence with
// the right type.
func Str(m map[string]any, k string) (string, bool) {
	v, ok := m[k].(string)
	return v, ok
}

func Bool(m map[string]any, k string) (bool, bool) {
	v, ok := m[k].(bool)
	return v, ok
}

func Strings(v any) ([]string, bool) {
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// CursorPage is one page of a cursor-paged list: up to size ids that sort after the cursor
// (all of them from the start when after is ""), and whether more follow. The ids are sorted
// in place.
func CursorPage(ids []string, after string, size int) (page []string, more bool) {
	sort.Strings(ids)
	start := 0
	if after != "" {
		start = sort.SearchStrings(ids, after)
		if start < len(ids) && ids[start] == after {
			start++
		}
	}
	end := min(start+size, len(ids))
	return ids[start:end], end < len(ids)
}
