package stripe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
)

// TestContractStripeMock sends every request the Client makes to stripe-mock, which validates each
// one against Stripe's OpenAPI spec for 2023-10-16 and answers 400 on any unknown, missing or
// create-only parameter. stripe-mock is stateless, so this checks request shape, not behaviour.
func TestContractStripeMock(t *testing.T) {
	apiURL := startStripeMock(t)
	c, err := stripe.New(providers.Config{APIURL: apiURL, Credential: "sk_test_123", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx := t.Context()

	// Negative control: if stripe-mock stopped validating, every check below would pass vacuously.
	_, err = c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/x", Events: []string{"not.an.event"}}, "contract-invalid")
	if providers.KindOf(err) != providers.Permanent {
		t.Fatalf("Create with an unknown event type = %v, want a Permanent 400 from stripe-mock's validation", err)
	}

	if _, err := c.List(ctx); err != nil {
		t.Errorf("List: %v", err)
	}

	enabled, err := c.Create(ctx, providers.Desired{
		URL:         "https://hooks.example.com/stripe",
		Events:      []string{"charge.succeeded", "invoice.paid"},
		Description: "checkout events",
		Owner:       owner,
	}, "6f1c9a52-8d3e-4b7a-9f0e-2c4d5e6f7a8b-gen1-create")
	if err != nil {
		t.Fatalf("Create (marker, api_version, idempotency key): %v", err)
	}
	if enabled.ID == "" {
		t.Errorf("Create returned no endpoint ID")
	}

	if _, err := c.Create(ctx, providers.Desired{
		URL:      "https://hooks.example.com/stripe-disabled",
		Events:   []string{"*"},
		Disabled: true,
		Owner:    providers.Owner{Namespace: "payments", Name: "paused", UID: "uid-2"},
	}, "uid-2-gen1-create"); err != nil {
		t.Errorf("Create disabled (create, then update disabled=true): %v", err)
	}

	updates := []struct {
		name string
		d    providers.Desired
	}{
		{"clear description, disable, partial owner", providers.Desired{
			URL: "https://hooks.example.com/stripe-v2", Events: []string{"charge.succeeded"}, Disabled: true,
			Owner: providers.Owner{Namespace: "payments", Name: "checkout", UID: "uid-1"},
		}},
		{"enable, set description, full owner", providers.Desired{
			URL: "https://hooks.example.com/stripe", Events: []string{"*"}, Description: "d", Owner: owner,
		}},
		{"zero owner", providers.Desired{URL: "https://hooks.example.com/stripe", Events: []string{"*"}}},
	}
	for _, u := range updates {
		if _, err := c.Update(ctx, enabled.ID, u.d); err != nil {
			t.Errorf("Update (%s): %v", u.name, err)
		}
	}

	if err := c.Delete(ctx, enabled.ID); err != nil {
		t.Errorf("Delete: %v", err)
	}
}

// TestContractStripeMockEvents sends Missed's /v1/events requests (types[] in batches of 20,
// created[gte], delivery_success, limit) to stripe-mock, which checks them against the 2023-10-16
// spec, and reads its fixture event as Stripe renders one.
func TestContractStripeMockEvents(t *testing.T) {
	apiURL := startStripeMock(t)
	c, err := stripe.New(providers.Config{APIURL: apiURL, Credential: "sk_test_123", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}

	// Negative controls: stripe-mock does validate /v1/events parameters, so a wrong encoding of
	// types or delivery_success would fail below.
	for _, q := range []string{"types=invoice.paid", "delivery_success=maybe"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, apiURL+"/v1/events?"+q, nil)
		req.SetBasicAuth("sk_test_123", "")
		req.Header.Set("Stripe-Version", "2023-10-16")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("GET /v1/events?%s = %d, want stripe-mock's 400", q, res.StatusCode)
		}
	}

	var types []string
	for _, e := range []string{"charge", "invoice", "customer", "payout", "transfer"} {
		for _, v := range []string{"created", "updated", "deleted", "failed", "paid"} {
			types = append(types, e+"."+v) // 25: two listings; stripe-mock checks the shape, not the names
		}
	}
	page, err := c.Missed(t.Context(), providers.Registration{}, types, time.Now().Add(-72*time.Hour), 0)
	if err != nil {
		t.Fatalf("Missed: %v", err)
	}
	// Both listings answer stripe-mock's one fixture event; the merge keeps it once.
	if len(page.Missed) != 1 || page.Malformed != 0 || page.More {
		t.Fatalf("Missed = %+v, want stripe-mock's fixture event once", page)
	}
	m := page.Missed[0]
	var fixture struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
	}
	if err := json.Unmarshal(m.Payload, &fixture); err != nil || fixture.ID != m.ID || fixture.Object != "event" || fixture.Created != m.At.Unix() ||
		!strings.HasPrefix(m.ID, "evt_") || m.Type == "" {
		t.Errorf("missed event = %s at %v type %q, payload %.80s...; want the fixture's id, created, type and JSON", m.ID, m.At, m.Type, m.Payload)
	}
	if _, err := c.Missed(t.Context(), providers.Registration{}, []string{"*"}, time.Time{}, 0); err != nil {
		t.Errorf("Missed(*) without since: %v", err)
	}
}

// startStripeMock installs stripe-mock with hack/stripe-mock.sh, starts it on loopback and returns
// its HTTP base URL. Any failure fails the test: a contract test that skips proves nothing.
func startStripeMock(t *testing.T) string {
	t.Helper()
	testtier.RequiresServers(t, "stripe-mock")
	root := repoRoot(t)

	installCtx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	install := exec.CommandContext(installCtx, "bash", filepath.Join(root, "hack", "stripe-mock.sh"))
	install.Stdout, install.Stderr = &stdout, &stderr
	start := time.Now()
	if err := install.Run(); err != nil {
		t.Fatalf("hack/stripe-mock.sh: %v\n%s", err, stderr.String())
	}
	t.Logf("hack/stripe-mock.sh took %v:\n%s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr.String()))
	bin := strings.TrimSpace(stdout.String())

	// Both addresses are explicit: with -http-addr alone, stripe-mock still opens HTTPS on
	// :12112 on all interfaces.
	httpAddr, httpsAddr := closedAddr(t), closedAddr(t) // free a moment ago
	var out lockedBuffer
	cmd := exec.Command(bin, "-http-addr", httpAddr, "-https-addr", httpsAddr, "-strict-version-check")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("stripe-mock output:\n%s", out.String())
		}
	})

	base := "http://" + httpAddr
	if err := waitReady(t.Context(), base, exited); err != nil {
		t.Fatalf("stripe-mock on %s: %v\n%s", httpAddr, err, out.String())
	}
	return base
}

// waitReady polls until stripe-mock answers any HTTP request, it exits, or 30s pass.
func waitReady(ctx context.Context, base string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/webhook_endpoints", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer sk_test_123")
		if res, err := http.DefaultClient.Do(req); err == nil {
			return res.Body.Close()
		}
		select {
		case <-exited:
			return errors.New("process exited before answering")
		case <-ctx.Done():
			return errors.New("no answer within 30s")
		case <-tick.C:
		}
	}
}

// repoRoot walks up from the test's working directory (the package folder) to go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's working directory")
		}
		dir = parent
	}
}

// lockedBuffer collects a child process's output, which exec writes from its own goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
