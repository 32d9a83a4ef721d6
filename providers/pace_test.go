package providers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestPacedTransportPacesEveryRequest(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) }))
	defer srv.Close()
	paced, refuse := 0, false
	hc := &http.Client{Transport: PacedTransport(func(ctx context.Context) error {
		paced++
		if refuse {
			return errors.New("over the rate")
		}
		return nil
	}, nil)}
	for range 3 {
		resp, err := hc.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	refuse = true
	if _, err := hc.Get(srv.URL); err == nil {
		t.Error("a request the pacer refused was sent")
	}
	if paced != 4 || served.Load() != 3 {
		t.Errorf("paced %d, served %d; want 4 paced (every request), 3 served (not the refused one)", paced, served.Load())
	}
	if PacedTransport(nil, http.DefaultTransport) != http.DefaultTransport {
		t.Error("no pacer must leave the transport as it is")
	}
}
