package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// fakeAPI speaks to the fakes' admin endpoints (/_fake/...), and reads the manager's and the
// receiver's /readyz and /metrics.
type fakeAPI struct {
	base string
	http *http.Client
}

func newFakeAPI(base string) fakeAPI {
	return fakeAPI{base: base, http: &http.Client{Timeout: 5 * time.Second}}
}

// logLen returns the length of the fake's whole request log, to count what comes after.
func (f fakeAPI) logLen(ctx context.Context) (int, error) {
	var all []json.RawMessage
	err := f.getJSON(ctx, "/_fake/requests", &all)
	return len(all), err
}

// post sends v as JSON to one of the fake's admin endpoints and wants a 2xx answer.
func (f fakeAPI) post(ctx context.Context, path string, v any) error {
	return f.postJSON(ctx, path, v, nil)
}

// postJSON is post, decoding the answer into into (unless nil).
func (f fakeAPI) postJSON(ctx context.Context, path string, v, into any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	p, _, _ := strings.Cut(path, "?") // the query may carry the API key
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s %s", p, resp.Status, bytes.TrimSpace(msg[:min(len(msg), 4<<10)]))
	}
	if into != nil {
		if err := json.Unmarshal(msg, into); err != nil {
			return fmt.Errorf("decoding POST %s: %w", p, err)
		}
	}
	return nil
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
