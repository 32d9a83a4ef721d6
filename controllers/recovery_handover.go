package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/providers"
)

// What a recovery run asks of the receiver's endpoint, and the memo of the provider's health
// answers.

// healthMemo keeps each subscription's last HealthReporter answer, so the provider is asked at
// most once per resync interval.
type healthMemo struct {
	mu sync.Mutex
	m  map[string]healthAnswer
}

type healthAnswer struct {
	at time.Time
	h  providers.DeliveryHealth
}

func (hm *healthMemo) get(key string, now time.Time, ttl time.Duration) (providers.DeliveryHealth, bool) {
	hm.mu.Lock()
	defer hm.mu.Unlock()
	a, ok := hm.m[key]
	if !ok || now.Sub(a.at) >= ttl || now.Before(a.at) {
		return providers.DeliveryHealth{}, false
	}
	return a.h, true
}

func (hm *healthMemo) put(key string, now time.Time, h providers.DeliveryHealth) {
	hm.mu.Lock()
	defer hm.mu.Unlock()
	if hm.m == nil {
		hm.m = map[string]healthAnswer{}
	}
	hm.m[key] = healthAnswer{at: now, h: h}
}

// forgetSubscription drops the answers kept for subscription sub ("namespace/name").
func (hm *healthMemo) forgetSubscription(sub string) {
	hm.mu.Lock()
	defer hm.mu.Unlock()
	for k := range hm.m {
		if strings.HasPrefix(k, sub+"\x00") {
			delete(hm.m, k)
		}
	}
}

// errUnreachable says the registration's endpoint does not answer (a connection error or 5xx).
var errUnreachable = errors.New("receiver unreachable")

// probe asks the registration's URL whether it answers: any HTTP answer below 500 is an
// endpoint that would take a delivery (a 405 to a GET included).
func (r *Reconciler) probe(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", errUnreachable, err)
	}
	resp, err := r.deliveryClient().Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", errUnreachable, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("%w: %s answers %d", errUnreachable, url, resp.StatusCode)
	}
	return nil
}

// handOver POSTs a recovered event to the registration's URL, signed as the provider signs
// it, and returns the receiver's status code.
func (r *Reconciler) handOver(ctx context.Context, url string, header http.Header, payload []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return 0, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := r.deliveryClient().Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// deliveryClient is the Reconciler's DeliveryClient, or one that never follows a redirect: a
// delivery goes to the registered URL only, as the provider's would.
func (r *Reconciler) deliveryClient() *http.Client {
	if r.DeliveryClient != nil {
		return r.DeliveryClient
	}
	return &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
