package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
)

// fakeClient reads and seeds a fake provider through its /_fake endpoints, and reads the
// managers' metrics.
type fakeClient struct{ base string }

type fakeChaos = fakeapi.ChaosCounts

func (f *fakeClient) chaos(ctx context.Context) (fakeChaos, error) {
	var out fakeChaos
	return out, f.do(ctx, http.MethodGet, "/_fake/chaos", nil, &out)
}

func (f *fakeClient) get(ctx context.Context, path string) ([]byte, error) {
	var out json.RawMessage
	err := f.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// do sends a request with in as its JSON body (nil: none); the answer is decoded into out as
// JSON (nil: dropped; a *json.RawMessage: taken whole).
// Errors name the path without its query, which may carry an API key.
func (f *fakeClient) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.base+path, body)
	if err != nil {
		return err
	}
	what := method + " " + req.URL.Path
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("%s: %s: %s", what, resp.Status, b)
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = b
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// chaosFigures is what TestChaos prints for one provider: a block of lines starting "REPORT
// chaos-manager <provider>".
type chaosFigures struct {
	provider                       string
	size                           chaosSizing
	kills, stormKills, deleteKills kills
	requests                       []request
	chaos                          fakeChaos
	dupes, wrongSecrets, orphans   int
	foreignTouched                 int
	converged, deleted             time.Duration
}

// createsApplied counts the creates the fake carried out (answered with success or failed
// after applying them). Under a correct manager it is one per subscription.
func (f chaosFigures) createsApplied() int {
	n := 0
	for _, r := range f.requests {
		if r.kind == "create" && r.applied {
			n++
		}
	}
	return n
}

func (f chaosFigures) report() string {
	kinds := map[string]int{}
	replays := 0
	for _, r := range f.requests {
		kinds[r.kind]++
		if r.replayed {
			replays++
		}
	}
	var faults []string
	for _, k := range f.chaos.Keys() {
		faults = append(faults, fmt.Sprintf("%s %d", k, f.chaos.Injected[k]))
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, args...)) }
	row("seed", "%d (-chaos.seed=%d repeats the faults' and the kills' choices)", f.size.seed, f.size.seed)
	row("subscriptions", "%d over %d accounts; %d foreign endpoints per account (%d unrelated, 3 look-alikes)", f.size.subs, f.size.accounts, f.size.foreign+3, f.size.foreign)
	row("manager kills (SIGKILL)", "%d: leader %d, standby %d (storm %d, the first at %.0f %% of the endpoints created; deletion %d, the first at %.0f %% deleted)",
		f.kills.total(), f.kills.leader, f.kills.standby, f.stormKills.total(), 100*f.stormKills.firstAt, f.deleteKills.total(), 100*f.deleteKills.firstAt)
	row("exits on their own", "%d %s", len(f.kills.selfExits), strings.Join(f.kills.selfExits, "; "))
	row("provider requests", "%d (list %d, create %d, update %d, delete %d, other %d)", len(f.requests), kinds["list"], kinds["create"], kinds["update"], kinds["delete"], kinds["other"])
	row("faults injected", "%d = %.1f %% (rate %.2f): %s", f.chaos.Total(), 100*float64(f.chaos.Total())/float64(max(f.chaos.Requests, 1)), f.chaos.Rate, strings.Join(faults, ", "))
	row("creates applied", "%d for %d subscriptions (create requests %d, idempotent replays %d)", f.createsApplied(), f.size.subs, kinds["create"], replays)
	row("duplicates at the provider", "%d", f.dupes)
	row("signing secrets wrong", "%d", f.wrongSecrets)
	row("orphans after deletion", "%d", f.orphans)
	row("foreign touched", "%d", f.foreignTouched)
	row("time to converge", "%s (storm: create to all Ready); deletion: %s", f.converged.Round(100*time.Millisecond), f.deleted.Round(100*time.Millisecond))
	_ = tw.Flush()
	// Every line says REPORT, so hack/test-summary.sh keeps the block in `make test`'s output.
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	for i, l := range lines {
		lines[i] = "REPORT chaos-manager " + f.provider + "  " + l
	}
	return strings.Join(lines, "\n") + "\n"
}
