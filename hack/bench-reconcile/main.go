// Command bench-reconcile is the program behind `make bench-reconcile`: it measures how the
// manager's cost grows with the number of subscriptions (N) and of provider accounts (M).
//
// Each row gets a control plane of its own (envtest), the fake provider in this process with a
// meter that limits every credential like the real provider (Stripe test mode 25 requests/s,
// GitHub's 80 content-creating requests a minute, GitLab's hook creation 5 a minute per
// project; 20 ms a request; 100 registrations a page) and the manager binary as a process of
// its own with its default flags, and applies N subscriptions over M credential Secrets (on
// GitLab one project and token each). It prints, per row:
//
//   - cold÷bound: the time from the first apply to all Ready, over the rate-limit bound, the
//     fewest requests the meter limits that any correct operator must make with the busiest
//     credential (one list of the empty account where lists are limited, one create per
//     subscription) divided by the credential's rate;
//   - wave÷pages: list requests in one steady-state resync wave (every subscription
//     reconciled once by its timer) over the list pages of all accounts (target 1.00), each
//     account's counted in its own wave, since each account resyncs on a grid of its own;
//   - looks/acct, looks/sub: that wave's looks at missed events per account and per
//     subscription (Stripe one per account, GitLab one per subscription, GitHub none);
//   - the manager's CPU (/proc/PID/stat) and heap growth (in use after a collection, less the
//     idle manager's) per subscription, and the reconcile queue's peak depth.
//
// It checks as it goes: every subscription Ready with exactly one registration for its URL,
// one accepted create per subscription, no duplicates; a row that fails them is marked FAILED
// and the exit status is 1.
//
//	go build -o bin/manager ./cmd/manager
//	go run ./hack/bench-reconcile -assets "$(hack/control-plane.sh --print-dir)" -manager bin/manager
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// defaultRows fit in twenty minutes on a 2-core machine: 2,000 creates on one Stripe test key
// alone take 80 s. GitLab's has as many hooks per project as GitLab lets a project create at
// once.
var defaultRows = []row{
	{"stripe", 100, 1}, {"stripe", 500, 10}, {"stripe", 2000, 1}, {"stripe", 2000, 10}, {"stripe", 2000, 100},
	{"github", 100, 5}, {"gitlab", 100, 20},
}

// fullRows (-full) fill in the grid.
var fullRows = []row{
	{"stripe", 100, 1}, {"stripe", 100, 10}, {"stripe", 500, 1}, {"stripe", 500, 10}, {"stripe", 500, 100},
	{"stripe", 1000, 1}, {"stripe", 1000, 10}, {"stripe", 1000, 100},
	{"stripe", 2000, 1}, {"stripe", 2000, 10}, {"stripe", 2000, 100},
	{"github", 100, 5}, {"github", 400, 20},
	{"gitlab", 100, 20}, {"gitlab", 100, 10},
}

func main() {
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-reconcile:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-reconcile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	s := setup{Log: stderr}
	fs.StringVar(&s.Assets, "assets", os.Getenv("KUBEBUILDER_ASSETS"), "folder with kube-apiserver and etcd (hack/control-plane.sh --print-dir)")
	fs.StringVar(&s.Manager, "manager", filepath.Join("bin", "manager"), "the manager binary")
	fs.StringVar(&s.CRDs, "crds", filepath.Join("config", "crd", "bases"), "folder with the CRD manifests")
	fs.StringVar(&s.Profiles, "profiles", filepath.Join("config", "samples", "rest"), "folder with the shipped REST profiles (the GitLab rows use gitlab-project-hooks.profile.yaml)")
	fs.DurationVar(&s.Resync, "resync", 20*time.Second, "spec.resyncInterval of every subscription, the period of the waves: at least this, and 20 ms per subscription of the row (so a wave fits its interval: 40 s for 2,000)")
	fs.IntVar(&s.PageCap, "page-cap", 0, "cap the fake's list pages below the clients' 100 (0: no cap)")
	fs.DurationVar(&s.Timeout, "row-timeout", 8*time.Minute, "give up on a row after this long")
	fs.Func("manager-flag", "add a flag to the manager's command line (repeatable), e.g. -manager-flag=--max-concurrent-reconciles=16", func(v string) error {
		s.ManagerFlags = append(s.ManagerFlags, v)
		return nil
	})
	fs.StringVar(&s.Profile, "cpu-profile", "", "write a 30 s CPU profile of the manager, taken during the cold start, to this file")
	full := fs.Bool("full", false, "run the whole grid (N 100 to 2,000 by M 1, 10, 100; two GitHub rows, two GitLab rows): about thirty-five minutes")
	only := fs.String("rows", "", "run these rows instead, e.g. stripe:2000:10,github:100:5,gitlab:100:20 (provider:N:M)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if s.Assets == "" {
		return errors.New("-assets (or KUBEBUILDER_ASSETS) is required: the folder hack/control-plane.sh --print-dir prints")
	}
	rows := defaultRows
	if *full {
		rows = fullRows
	}
	if *only != "" {
		var err error
		if rows, err = parseRows(*only); err != nil {
			return err
		}
	}
	start := time.Now()
	var results []result
	failed := 0
	for _, r := range rows {
		fmt.Fprintf(stderr, "== %s\n", r)
		res, err := runRow(ctx, s, r)
		if err != nil {
			return fmt.Errorf("%s: %w", r, err)
		}
		if problems := res.problems(); len(problems) > 0 {
			failed++
			fmt.Fprintf(stderr, "  %s FAILED: %s\n", r, strings.Join(problems, "; "))
		}
		results = append(results, res)
	}
	printTable(stdout, results)
	flags := "its default flags"
	if len(s.ManagerFlags) > 0 {
		flags = strings.Join(s.ManagerFlags, " ")
	}
	fmt.Fprintf(stdout, "\n%d rows in %s; resync waves every %s (at least; 20 ms per subscription); manager with %s\n", len(results), time.Since(start).Round(time.Second), s.Resync, flags)
	if failed > 0 {
		return fmt.Errorf("%d of %d rows failed their checks", failed, len(results))
	}
	return nil
}

func parseRows(s string) ([]row, error) {
	var rows []row
	for _, item := range strings.Split(s, ",") {
		parts := strings.Split(strings.TrimSpace(item), ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("row %q: want provider:N:M", item)
		}
		n, err1 := strconv.Atoi(parts[1])
		m, err2 := strconv.Atoi(parts[2])
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("row %q: %w", item, err)
		}
		if _, err := newFakeProvider(parts[0]); err != nil {
			return nil, err
		}
		rows = append(rows, row{parts[0], n, m})
	}
	return rows, nil
}

// problems are the correctness facts a row broke.
func (r result) problems() []string {
	var out []string
	if r.Creates != r.Row.N {
		out = append(out, fmt.Sprintf("%d creates accepted by the provider, want %d (one per subscription)", r.Creates, r.Row.N))
	}
	if r.Duplicates > 0 {
		out = append(out, fmt.Sprintf("%d duplicate registrations at the provider", r.Duplicates))
	}
	if r.Missing > 0 {
		out = append(out, fmt.Sprintf("%d subscriptions without a registration", r.Missing))
	}
	if r.Held != r.Row.N {
		out = append(out, fmt.Sprintf("the provider holds %d registrations, want %d", r.Held, r.Row.N))
	}
	return out
}

func printTable(w io.Writer, results []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "provider\tN\tM\tpages/acct\tbound\tAPI bound\tcold\tcold÷bound\tcold÷max\tcold calls\tAPI req/sub\tresync\twave\twave calls\twave÷pages\tlooks/acct\tlooks/sub\t429s\tCPU ms/sub\theap KiB/sub\tqueue peak\tchecks\t")
	for _, r := range results {
		check := "ok"
		if len(r.problems()) > 0 {
			check = "FAILED"
		}
		cold := 0
		for _, c := range r.ColdCounts {
			cold += c.Requests
		}
		api := 0
		for _, n := range r.APIRequests {
			api += n
		}
		heapPerSub := (float64(r.HeapAfter) - float64(r.HeapBase)) / float64(r.Row.N) / 1024
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1fs\t%.1fs\t%.1fs\t%.2f\t%.2f\t%d\t%.2f\t%.0fs\t%.1fs\t%d\t%.2f\t%.2f\t%.2f\t%d\t%.2f\t%.1f\t%d\t%s\t\n",
			r.Row.Provider, r.Row.N, r.Row.M, r.PagesPerAccount, r.Bound.Seconds(), r.APIBound.Seconds(), r.Cold.Seconds(),
			r.Cold.Seconds()/r.Bound.Seconds(), r.Cold.Seconds()/max(r.Bound, r.APIBound).Seconds(),
			cold, float64(api)/float64(r.Row.N), r.Resync.Seconds(), r.Wave.Seconds(), r.WaveCalls, float64(r.WaveLists)/float64(r.Pages),
			float64(r.WaveLooks)/float64(r.Row.M), float64(r.WaveLooks)/float64(r.Row.N), r.Limited,
			float64(r.CPU.Microseconds())/1000/float64(r.Row.N), heapPerSub, r.QueuePeak, check)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nbound: the requests the meter limits of the busiest credential (Stripe, GitHub: 1 list of the empty account + per subscription its create, and on GitHub the ping status.ping reports; GitLab: the creates, 5 a minute per project) ÷ its rate, burst not counted; cold calls: every provider request until all Ready")
	fmt.Fprintln(w, "API bound: the same control plane taking the cold start's writes alone (N applied subscriptions, and per subscription the finalizer patch, the signing Secret read and create, the status patch; the Events the manager sent) by as many workers as the manager's, watched as the cold start is (the subscriptions by the manager and the bench, the Secrets' metadata by the manager); cold÷max: cold ÷ max(bound, API bound)")
	fmt.Fprintln(w, "API req/sub: the manager's requests to the API server during the cold start ÷ N (reads and writes; its informers' lists and watches too)")
	fmt.Fprintln(w, "resync: the subscriptions' resync interval; one steady-state resync wave is measured account by account, each from the end of its previous wave until all its subscriptions are synced with a newer list: wave: how long it took on the slowest account, first of its subscriptions synced to last; wave calls: the accounts' provider requests in their waves; wave÷pages: their list requests ÷ list pages of all accounts (target 1.00); looks/acct, looks/sub: their looks at missed events per account and per subscription (Stripe 1.00 per account: one shared listing of undelivered events; GitLab 1.00 per subscription: one page of each hook's failure log; GitHub 0)")
	fmt.Fprintln(w, "CPU: manager user+system over the row; heap: in use after GC, less the idle manager's")
}
