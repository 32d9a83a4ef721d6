package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/internal/testtier"
)

// TestSmallRows is make bench-reconcile in small, as a correctness test: it checks what must
// hold whatever the machine's speed (every subscription Ready with one registration, one
// create each, no duplicate, no request over the provider's rate, one list of each account
// per resync wave, page by page, on Stripe one shared look at each account's missed events,
// on GitLab one look at each hook's failure log, and nothing else in a wave) and never how
// long anything took. Its subscribers' endpoints answer, so recovery's looks are made, not cut
// short by an unreachable URL. GitLab's row has 5 hooks a project, as many as GitLab lets a
// project create at once.
func TestSmallRows(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the manager binary")
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("KUBEBUILDER_ASSETS is not set (hack/control-plane.sh --print-dir)")
		}
		t.Skip("KUBEBUILDER_ASSETS is not set: run through make test, or export it from hack/control-plane.sh --print-dir")
	}
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin, err := goBuild(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := setup{
		Assets: assets, Manager: bin, CRDs: filepath.Join("..", "..", "config", "crd", "bases"),
		Profiles: filepath.Join("..", "..", "config", "samples", "rest"),
		// Pages of 4 make every account's list several pages, so a wave that re-listed per
		// subscription, or lost its place in a page, would show.
		PageCap: 4, Resync: 10 * time.Second, Timeout: 4 * time.Minute, Log: io.Discard,
	}
	if testing.Verbose() {
		s.Log = os.Stderr
	}
	for _, r := range []row{{"stripe", 40, 4}, {"github", 12, 2}, {"gitlab", 15, 3}} {
		t.Run(r.Provider, func(t *testing.T) {
			res, err := runRow(ctx, s, r)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range res.problems() {
				t.Error(p)
			}
			if res.Limited != 0 {
				t.Errorf("the fake refused %d requests over the provider's rate; the manager must pace each credential below it", res.Limited)
			}
			if want := r.M * ((r.N/r.M + 3) / 4); res.Pages != want {
				t.Fatalf("pages = %d, want %d (%d accounts of %d in pages of 4)", res.Pages, want, r.M, r.N/r.M)
			}
			if res.WaveLists != res.Pages {
				t.Errorf("a resync wave listed %d pages (%v), want %d: one list of each account, page by page", res.WaveLists, res.WaveCounts, res.Pages)
			}
			fp, _ := newFakeProvider(r.Provider)
			listRoute, _ := fp.routes()
			lookRoute, looks := fp.look()
			wantLooks := map[string]int{"stripe": r.M, "gitlab": r.N}[r.Provider] // one per account, one per subscription, none
			if res.WaveLooks != wantLooks {
				t.Errorf("a resync wave looked at missed events %d times (%v), want %d", res.WaveLooks, res.WaveCounts, wantLooks)
			}
			for a := range r.M {
				if res.WaveListsBy[a] != res.AccountPages[a] {
					t.Errorf("account %d listed %d pages in its wave, want %d", a, res.WaveListsBy[a], res.AccountPages[a])
				}
				if want := looks.per(res.AccountSubs[a]); res.WaveLooksBy[a] != want {
					t.Errorf("account %d (%d subscriptions) looked at missed events %d times in its wave, want %d", a, res.AccountSubs[a], res.WaveLooksBy[a], want)
				}
			}
			// Only lists and looks: no create, update or get, and on GitLab no resend, and no
			// listing of successful deliveries (which shares the look's route, so it would have
			// made a second look per hook above).
			for _, c := range res.WaveCounts {
				if c.Route != listRoute && c.Route != lookRoute {
					t.Errorf("a steady-state wave sent %d × %s %s; it should only list (and look at missed events)", c.Requests, c.Method, c.Pattern)
				}
			}
			t.Logf("%s: cold %s (bound %s), cold requests %v, wave %v, CPU %s, heap +%d KiB, queue peak %d",
				r, res.Cold.Round(time.Millisecond), res.Bound.Round(time.Millisecond), res.ColdCounts, res.WaveCounts, res.CPU, (int64(res.HeapAfter)-int64(res.HeapBase))/1024, res.QueuePeak)
		})
	}
}

// TestDuring: a wave's requests are each account's within its own part of the wave, so an
// account that finished early does not have its next list counted while another account's wave
// is still running, nor its previous one.
func TestDuring(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the manager binary")
	fp := &stripeBench{}
	list, _ := fp.routes()
	look, _ := fp.look()
	l := newCallLog(fp, 2)
	start := time.Unix(1_700_000_000, 0)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	for _, c := range []struct {
		acct    int
		route   fakeapi.Route
		at      float64
		limited bool
	}{
		{0, list, -1, false},  // account 0's previous wave, which ended at 0 s
		{0, list, 1, false},   // account 0's wave, done at 2 s
		{0, look, 1.1, true},  // refused for the rate
		{0, look, 1.2, false}, // its retry
		{1, list, 3, false},   // account 1's previous wave, which ended at 4 s
		{1, list, 5, false},   // account 1's wave, done at 6 s
		{0, list, 41, false},  // account 0's next wave
	} {
		l.observe(fp.credential(c.acct), c.route, at(c.at), c.limited)
	}
	l.observe("sk_test_other", list, at(1), false) // no account's credential

	got := l.during(wave{from: []time.Time{at(0), at(4)}, to: []time.Time{at(2), at(6)}})
	want := []fakeapi.RouteCount{{Route: look, Requests: 2, Limited: 1}, {Route: list, Requests: 2}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("during: -want +got\n%s", d)
	}
}
