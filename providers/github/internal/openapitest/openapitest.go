// Package openapitest validates HTTP exchanges with the GitHub webhook API against GitHub's own
// OpenAPI description (github-webhooks.json beside this file; see README.md for provenance),
// so tests can show that the client sends and the fake answers what GitHub documents.
package openapitest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

//go:embed github-webhooks.json
var description []byte

// server is the description's servers entry; requests are matched as if sent there.
const server = "https://api.github.com"

// undocumented are statuses GitHub sends on any endpoint without listing them per operation
// (authentication, permissions, a resource that does not exist, rate limits, outages). Such a
// response must still be GitHub's basic-error object. 404 is here because the delivery routes
// list only 400 and 422, yet a delivery or hook that does not exist (or one the token may not
// see) is GitHub's 404 "Not Found" as on every other route.
var undocumented = []int{
	http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusTooManyRequests,
	http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable,
}

// Validator records every exchange it sees and what did not conform. It is safe for
// concurrent use.
type Validator struct {
	router     routers.Router
	basicError *openapi3.Schema
	options    *openapi3filter.Options

	mu           sync.Mutex
	violations   []string
	operations   map[string]int
	undocumented []string
}

// parsed is the loaded description, shared read-only by every Validator: loading and
// validating it costs far more than a test that uses it.
var parsed = sync.OnceValues(func() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(description)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the OpenAPI description does not validate: %w", err)
	}
	return doc, nil
})

// New returns a Validator with nothing recorded.
func New() (*Validator, error) {
	doc, err := parsed()
	if err != nil {
		return nil, err
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	be := doc.Components.Schemas["basic-error"]
	if be == nil || be.Value == nil {
		return nil, errors.New("the description has no basic-error schema")
	}
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{
			openapi3.EnableFormatValidation(),
			openapi3.WithStringFormatValidator("uri", openapi3.NewCallbackValidator(func(s string) error {
				u, err := url.Parse(s)
				if err != nil || !u.IsAbs() || u.Host == "" {
					return fmt.Errorf("%q is not an absolute URI", s)
				}
				return nil
			})),
		},
	}
	return &Validator{router: router, basicError: be.Value, options: opts, operations: map[string]int{}}, nil
}

// Handler serves h and validates each request before and each response after it. A GitHub
// Enterprise /api/v3 prefix is stripped for matching.
func (v *Validator) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		// A client that gave up (a timeout) got no answer to validate; its request still is.
		v.check(r, body, rec, r.Context().Err() == nil)
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

func (v *Validator) check(r *http.Request, body []byte, rec *httptest.ResponseRecorder, answered bool) {
	what := r.Method + " " + r.URL.Path
	path := r.URL.Path
	if len(path) >= 7 && strings.EqualFold(path[:7], "/api/v3") {
		path = path[7:]
	}
	u, err := url.Parse(server + path)
	if err != nil {
		v.violate("%s: %v", what, err)
		return
	}
	u.RawQuery = r.URL.RawQuery
	vr := r.Clone(context.Background())
	vr.URL, vr.Host, vr.RequestURI = u, u.Host, ""
	vr.Body = io.NopCloser(bytes.NewReader(body))

	route, params, err := v.router.FindRoute(vr)
	if err != nil {
		v.violate("%s: no operation in the description: %v", what, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route, Options: v.options}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		v.violate("%s: request: %v", what, err)
	}

	op := route.Operation.OperationID
	if !answered {
		return
	}
	status := rec.Code
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: rec.Header(), Options: v.options}
	out.SetBodyBytes(rec.Body.Bytes())
	err = openapi3filter.ValidateResponse(context.Background(), out)
	switch {
	case status == http.StatusNotModified:
		// kin-openapi never validates a 304; the description does not mention conditional
		// requests. What HTTP requires: an answer to If-None-Match, without a body.
		if r.Header.Get("If-None-Match") == "" {
			v.violate("%s: 304 to a request without If-None-Match", what)
		}
		if rec.Body.Len() > 0 {
			v.violate("%s: 304 with a body", what)
		}
		v.note(op, fmt.Sprintf("%s %d", op, status))
	case err != nil && route.Operation.Responses.Status(status) == nil && slices.Contains(undocumented, status):
		if verr := v.basicError.VisitJSON(decode(rec.Body.Bytes())); verr != nil {
			v.violate("%s: undocumented %d is not a basic-error: %v", what, status, verr)
		}
		v.note(op, fmt.Sprintf("%s %d", op, status))
	case err != nil:
		v.violate("%s: response %d: %v", what, status, err)
	default:
		v.note(op, "")
	}
}

func decode(b []byte) any {
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		return string(b)
	}
	return x
}

func (v *Validator) violate(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.violations = append(v.violations, fmt.Sprintf(format, args...))
}

func (v *Validator) note(op, undocumented string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.operations[op]++
	if undocumented != "" && !slices.Contains(v.undocumented, undocumented) {
		v.undocumented = append(v.undocumented, undocumented)
	}
}

// Violations returns what did not conform, in the order seen.
func (v *Validator) Violations() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.violations)
}

// Operations returns how many exchanges of each operationId ("repos/list-webhooks", ...) were
// validated.
func (v *Validator) Operations() map[string]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]int, len(v.operations))
	for k, n := range v.operations {
		out[k] = n
	}
	return out
}

// Undocumented lists "operationId status" pairs answered with a status the operation does not
// document (checked against basic-error, or a 304 checked as HTTP requires).
func (v *Validator) Undocumented() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.undocumented)
}
