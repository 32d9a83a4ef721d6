package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// fakeAPI reads the fake Stripe's debugging endpoints (and the manager's and the receiver's
// /readyz and /metrics).
type fakeAPI struct {
	base string
	http *http.Client
}

func newFakeAPI(base string) fakeAPI {
	return fakeAPI{base: base, http: &http.Client{Timeout: 5 * time.Second}}
}

// endpoints returns the account's endpoints, secrets included.
func (f fakeAPI) endpoints(ctx context.Context, apiKey string) ([]fake.Endpoint, error) {
	var out []fake.Endpoint
	err := f.getJSON(ctx, "/_fake/endpoints?key="+url.QueryEscape(apiKey), &out)
	return out, err
}

// requests returns the whole request log (account labels, never keys).
func (f fakeAPI) requests(ctx context.Context) ([]fake.Request, error) {
	var out []fake.Request
	err := f.getJSON(ctx, "/_fake/requests", &out)
	return out, err
}

func (f fakeAPI) getJSON(ctx context.Context, path string, v any) error {
	body, err := f.get(ctx, path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		p, _, _ := strings.Cut(path, "?") // the query may carry the API key
		return fmt.Errorf("decoding GET %s: %w", p, err)
	}
	return nil
}

// ok reports whether GET path answers 200.
func (f fakeAPI) ok(ctx context.Context, path string) (bool, error) {
	_, err := f.get(ctx, path)
	return err == nil, err
}

func (f fakeAPI) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base+path, nil)
	if err != nil {
		return nil, err
	}
	// Errors name the path without its query: the query may carry the API key.
	what := "GET " + req.URL.Path
	resp, err := f.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", what, resp.Status)
	}
	return body, nil
}
