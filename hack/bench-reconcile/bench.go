package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/internal/testenv"
)

// namespace holds every object of a row (each row has a control plane of its own).
const namespace = "default"

// row is one line of the table: N subscriptions spread evenly over M accounts of a provider.
type row struct {
	Provider string
	N, M     int
}

func (r row) file() string { return fmt.Sprintf("-%s-%d-%d", r.Provider, r.N, r.M) }

func (r row) String() string { return fmt.Sprintf("%s N=%d M=%d", r.Provider, r.N, r.M) }

// setup is what every row shares.
type setup struct {
	Assets  string // kube-apiserver, etcd
	Manager string // the manager binary
	CRDs    string
	// Profiles is the folder of the shipped REST profiles (config/samples/rest), for GitLab.
	Profiles string
	// Resync is every subscription's spec.resyncInterval, the period of the waves: at least
	// this, and perSubscriptionWave for each subscription of the row (resyncFor).
	Resync time.Duration
	// PageCap caps the fake's list pages below the clients' 100 (0: no cap).
	PageCap int
	Timeout time.Duration // per row
	// Profile, when set, is the prefix of the manager's profiles per row: a 30 s CPU profile
	// from the first apply, and the heap after the waves.
	Profile string
	// ManagerFlags are added to the manager's command line (its defaults otherwise).
	ManagerFlags []string
	Log          io.Writer // progress
}

// result is what one row measured.
type result struct {
	Row row
	// Bound is the rate-limit bound of the cold start: the most requests the meter limits that
	// any one credential must make (fakeProvider.boundRequests) over its rate.
	BoundRequests int
	Bound         time.Duration
	Cold          time.Duration
	ColdCounts    []fakeapi.RouteCount
	// PagesPerAccount is the most list pages one account needs once every registration exists;
	// Pages is their sum over the accounts, what one list of each costs.
	PagesPerAccount int
	Pages           int
	// WaveCalls are the provider requests of one steady-state resync wave (every subscription
	// reconciled once by its timer), each account's counted in its own wave (waitWave),
	// WaveCounts by route.
	WaveCalls  int
	WaveCounts []fakeapi.RouteCount
	// Wave is how long the measured wave took on the slowest account, first of its
	// subscriptions synced to last; Resync the interval of the waves.
	Wave, Resync time.Duration
	// WaveLists are the wave's list pages, WaveLooks its looks at missed events (one per
	// account where the provider keeps them account-wide, one per subscription where it keeps
	// them per hook); the same by account, and the list pages and subscriptions of each
	// account (AccountPages, AccountSubs), so one account listing or looking twice cannot hide
	// behind another that did not.
	WaveLists, WaveLooks                                int
	WaveListsBy, WaveLooksBy, AccountPages, AccountSubs []int

	Creates    int // creates the fake accepted, cold
	Limited    int // requests the meter refused, over the row
	Held       int // registrations at the provider after the row
	Duplicates int // registrations beyond one per URL
	Missing    int // subscriptions with no registration for their URL
	// APIBound is the API server's own time for the cold start's writes (apibound.go), by
	// Workers workers (the manager's concurrency), with Events Events; APIRequests are the
	// manager's requests to the API server during the cold start, by method.
	APIBound    time.Duration
	Workers     int
	Events      int
	APIRequests map[string]int
	CPU         time.Duration
	HeapBase    uint64
	HeapAfter   uint64
	QueuePeak   int
}

// perSubscriptionWave is the part of a resync interval given to each subscription of a row: a
// steady wave costs the API server a status patch per subscription, and a wave that outlasts its
// interval runs into the next one, so the lists of two waves would fall into one measured wave.
// 2,000 subscriptions get 40 s.
const perSubscriptionWave = 20 * time.Millisecond

// resyncFor is the resync interval of row r's subscriptions.
func (s setup) resyncFor(r row) time.Duration {
	return max(s.Resync, time.Duration(r.N)*perSubscriptionWave)
}

// runRow runs one row on a control plane, a fake and a manager of its own, and stops them all.
//
//nolint:funlen // one row's set-up, load and teardown read top to bottom
func runRow(ctx context.Context, s setup, r row) (res result, err error) {
	res.Row = r
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	fp, err := newFakeProvider(r.Provider)
	if err != nil {
		return res, err
	}
	if r.M < 1 || r.N < r.M {
		return res, fmt.Errorf("%s: want 1 <= M <= N", r)
	}
	shared, err := fp.objects(s.Profiles)
	if err != nil {
		return res, err
	}
	perAccount := (r.N + r.M - 1) / r.M
	limit := fp.limit()
	calls := newCallLog(fp, r.M)
	limit.Observe = calls.observe
	meter := fakeapi.NewMeter(limit)
	base, stopFake := fp.start(meter, s.PageCap, r.M, perAccount)
	defer stopFake()
	ep, err := startEndpoints()
	if err != nil {
		return res, err
	}
	defer ep.stop()

	tmp, err := os.MkdirTemp("", "bench-reconcile-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	env, err := testenv.StartWith(testenv.Options{Assets: s.Assets, CRDs: s.CRDs, Dir: tmp, User: "bench"})
	if err != nil {
		return res, fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() { err = errors.Join(err, env.Stop()) }()
	k8s, cfg, scheme, kcPath := env.Client, env.Config, env.Scheme, env.Kubeconfig

	mgr, err := startManager(ctx, s.Manager, kcPath, filepath.Join(tmp, "manager.log"), s.ManagerFlags)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, mgr.stop()) }()
	if res.HeapBase, err = mgr.heap(ctx); err != nil {
		return res, err
	}
	cpu0, err := mgr.cpu()
	if err != nil {
		return res, err
	}
	sampler := mgr.sampleQueue(ctx, time.Second)

	// The informer stops before the control plane does (a watch left open holds up its
	// shutdown).
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	subs, err := follow(followCtx, cfg, scheme, r)
	if err != nil {
		return res, err
	}

	workers, err := mgr.metric(ctx, "controller_runtime_max_concurrent_reconciles", `controller="webhooksubscription"`)
	if err != nil {
		return res, err
	}
	res.Workers = int(workers)
	api0, err := mgr.apiRequests(ctx)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(s.Log, "  %s: applying %d credential Secrets and %d subscriptions\n", r, r.M, r.N)
	started := time.Now()
	var profiled chan error
	if s.Profile != "" {
		profiled = make(chan error, 1)
		go func() {
			profiled <- mgr.profile(ctx, "/debug/pprof/profile?seconds=30", s.Profile+r.file()+".cpu.pprof")
		}()
	}
	resync := s.resyncFor(r)
	res.Resync = resync
	if err := apply(ctx, k8s, fp, shared, base, ep, resync, r); err != nil {
		return res, err
	}
	if err := subs.waitReady(ctx, r.N, mgr); err != nil {
		return res, fmt.Errorf("cold start: %w", err)
	}
	res.Cold = time.Since(started)
	res.ColdCounts = meter.Counts()
	api1, err := mgr.apiRequests(ctx)
	if err != nil {
		return res, err
	}
	res.APIRequests = map[string]int{}
	for method, n := range api1 {
		if d := n - api0[method]; d > 0 {
			res.APIRequests[method] = d
		}
	}
	fmt.Fprintf(s.Log, "  %s: all Ready in %s; waiting for three resync waves (every %s)\n", r, res.Cold.Round(100*time.Millisecond), resync)

	// The third wave is measured: the first may find a list a late create refreshed moments
	// before, and may also hold the last subscriptions of the cold start, which joined their
	// account's grid in it; the second then starts one interval after them, the third from a
	// wave that had all of them on the grid.
	for _, n := range []string{"first", "second"} {
		if _, err := subs.waitWave(ctx, mgr); err != nil {
			return res, fmt.Errorf("%s wave: %w", n, err)
		}
	}
	w, err := subs.waitWave(ctx, mgr)
	if err != nil {
		return res, fmt.Errorf("third wave: %w", err)
	}
	res.Wave = w.took
	fmt.Fprintf(s.Log, "  %s: the third wave took %s on its slowest account; subscriptions by the time of the list they used: %v\n", r, w.took.Round(100*time.Millisecond), w.lists)
	res.WaveCounts = calls.during(w)
	cpu1, err := mgr.cpu()
	if err != nil {
		return res, err
	}
	res.CPU = cpu1 - cpu0
	if res.HeapAfter, err = mgr.heap(ctx); err != nil {
		return res, err
	}
	res.QueuePeak = sampler()
	if profiled != nil {
		if err := errors.Join(<-profiled, mgr.profile(ctx, "/debug/pprof/heap", s.Profile+r.file()+".heap.pprof")); err != nil {
			return res, err
		}
	}

	fmt.Fprintf(s.Log, "  %s: a steady wave sent %v; the cold start sent the API server %v; the endpoints saw %d checks and %d recovered events\n",
		r, res.WaveCounts, res.APIRequests, ep.probes.Load(), ep.events.Load())
	var sent eventsv1.EventList
	if err := k8s.List(ctx, &sent, client.InNamespace(namespace)); err != nil {
		return res, err
	}
	res.Events = len(sent.Items)
	reasons := map[string]int{}
	for _, e := range sent.Items {
		reasons[e.Reason]++
	}
	fmt.Fprintf(s.Log, "  %s: Events by reason: %v\n", r, reasons)
	if err := mgr.stop(); err != nil {
		return res, err
	}
	fmt.Fprintf(s.Log, "  %s: measuring the API bound: %d subscriptions' writes by %d workers, %d Events\n", r, r.N, res.Workers, res.Events)
	if res.APIBound, err = measureAPIBound(ctx, cfg, scheme, fp, apiWork{N: r.N, Workers: res.Workers, Events: res.Events}); err != nil {
		return res, err
	}

	_, createRoute := fp.routes()
	for _, c := range res.ColdCounts {
		if c.Route == createRoute {
			res.Creates += c.Requests - c.Limited
		}
	}
	for _, c := range meter.Counts() {
		res.Limited += c.Limited
	}
	listRoute, _ := fp.routes()
	lookRoute, _ := fp.look()
	for _, c := range res.WaveCounts {
		res.WaveCalls += c.Requests
		switch c.Route {
		case listRoute:
			res.WaveLists += c.Requests
		case lookRoute:
			res.WaveLooks += c.Requests
		}
	}
	pageCap := clientPageSize
	if s.PageCap > 0 {
		pageCap = min(pageCap, s.PageCap)
	}
	byAccount := make([]int, r.M)
	for i := range r.N {
		byAccount[i%r.M]++
	}
	res.WaveListsBy, res.WaveLooksBy, res.AccountSubs = calls.byAccount(w, listRoute), calls.byAccount(w, lookRoute), byAccount
	for a, n := range byAccount {
		res.BoundRequests = max(res.BoundRequests, fp.boundRequests(n))
		pages := max(1, (n+pageCap-1)/pageCap)
		res.PagesPerAccount = max(res.PagesPerAccount, pages)
		res.AccountPages = append(res.AccountPages, pages)
		res.Pages += pages
		urls := fp.held(a)
		res.Held += len(urls)
		seen := map[string]bool{}
		for _, u := range urls {
			if seen[u] {
				res.Duplicates++
			}
			seen[u] = true
		}
		for i := a; i < r.N; i += r.M {
			if !seen[ep.subURL(i)] {
				res.Missing++
			}
		}
	}
	res.Bound = time.Duration(float64(res.BoundRequests) / limit.Rate * float64(time.Second))
	return res, nil
}

// callLog keeps every provider request the meter counted with the account that made it, so a
// wave's requests can be counted account by account, each in its own wave.
type callLog struct {
	account map[string]int // by credential

	mu    sync.Mutex
	calls []call
}

type call struct {
	account int
	route   fakeapi.Route
	at      time.Time
	limited bool
}

func newCallLog(fp fakeProvider, accounts int) *callLog {
	l := &callLog{account: map[string]int{}}
	for a := range accounts {
		l.account[fp.credential(a)] = a
	}
	return l
}

// observe is the meter's MeterOptions.Observe. A request with no account's credential (the
// manager sends none such) belongs to no account's wave.
func (l *callLog) observe(credential string, rt fakeapi.Route, at time.Time, limited bool) {
	a, ok := l.account[credential]
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, call{account: a, route: rt, at: at, limited: limited})
}

// byAccount counts each account's requests on route rt in its own part of wave w.
func (l *callLog) byAccount(w wave, rt fakeapi.Route) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	counts := make([]int, len(w.from))
	for _, c := range l.calls {
		if c.route == rt && w.holds(c) {
			counts[c.account]++
		}
	}
	return counts
}

// during counts, route by route, each account's requests in its own part of wave w.
func (l *callLog) during(w wave) []fakeapi.RouteCount {
	l.mu.Lock()
	defer l.mu.Unlock()
	counts := map[fakeapi.Route]*fakeapi.RouteCount{}
	for _, c := range l.calls {
		if !w.holds(c) {
			continue
		}
		rc := counts[c.route]
		if rc == nil {
			rc = &fakeapi.RouteCount{Route: c.route}
			counts[c.route] = rc
		}
		rc.Requests++
		if c.limited {
			rc.Limited++
		}
	}
	out := make([]fakeapi.RouteCount, 0, len(counts))
	for _, rc := range counts {
		out = append(out, *rc)
	}
	slices.SortFunc(out, func(a, b fakeapi.RouteCount) int {
		return cmp.Or(cmp.Compare(a.Pattern, b.Pattern), cmp.Compare(a.Method, b.Method))
	})
	return out
}

func subName(i int) string { return fmt.Sprintf("sub-%04d", i) }

// apply creates the objects the subscriptions share (a profile's ConfigMap), one credential
// Secret per account and the subscriptions, subscription i on account i mod M, in parallel as
// kubectl apply of a big manifest would.
func apply(ctx context.Context, k8s client.Client, fp fakeProvider, shared []client.Object, base string, ep *endpoints, resync time.Duration, r row) error {
	for _, o := range shared {
		if err := k8s.Create(ctx, o); err != nil {
			return err
		}
	}
	for a := range r.M {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("account-%d", a)},
			StringData: map[string]string{"apiKey": fp.credential(a), "token": fp.credential(a)}}
		if err := k8s.Create(ctx, sec); err != nil {
			return err
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range r.N {
		g.Go(func() error { return k8s.Create(ctx, benchSubscription(fp, base, ep.subURL(i), resync, i, i%r.M)) })
	}
	return g.Wait()
}

// benchSubscription is subscription i of the row, on account a.
func benchSubscription(fp fakeProvider, base, url string, resync time.Duration, i, a int) *hookv1.WebhookSubscription {
	sub := &hookv1.WebhookSubscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: subName(i)},
		Spec: hookv1.WebhookSubscriptionSpec{
			Provider:       fp.spec(a, base, fmt.Sprintf("account-%d", a)),
			Endpoint:       hookv1.EndpointSpec{URL: url, AllowInsecureHTTP: true},
			Events:         []string{"push"},
			SigningSecret:  hookv1.SigningSecretSpec{Name: subName(i) + "-signing"},
			ResyncInterval: &metav1.Duration{Duration: resync},
		},
	}
	if _, ok := fp.(*stripeBench); ok {
		sub.Spec.Events = []string{"invoice.paid"}
	}
	return sub
}

// tracker follows the subscriptions through an informer (which lists and watches again when
// the API server ends a watch): which are Ready, and when each was last synced with the
// provider.
type tracker struct {
	// accounts are the names of each account's subscriptions.
	accounts [][]string

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every event
	ready   map[string]bool
	synced  map[string]time.Time
	// seen is when the bench saw each subscription's lastSyncTime change.
	seen map[string]time.Time
	err  error
}

// follow starts the informer on row r's subscriptions; it stops with ctx.
func follow(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, r row) (*tracker, error) {
	t := &tracker{accounts: make([][]string, r.M), changed: make(chan struct{}), ready: map[string]bool{}, synced: map[string]time.Time{}, seen: map[string]time.Time{}}
	for i := range r.N {
		t.accounts[i%r.M] = append(t.accounts[i%r.M], subName(i)) // as apply puts them
	}
	c, err := crcache.New(cfg, crcache.Options{Scheme: scheme, DefaultNamespaces: map[string]crcache.Config{namespace: {}}})
	if err != nil {
		return nil, err
	}
	inf, err := c.GetInformer(ctx, &hookv1.WebhookSubscription{})
	if err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.update(o, false) },
		UpdateFunc: func(_, o any) { t.update(o, false) },
		DeleteFunc: func(o any) { t.update(o, true) },
	}); err != nil {
		return nil, err
	}
	go func() {
		err := c.Start(ctx)
		t.mu.Lock()
		defer t.mu.Unlock()
		if err == nil {
			err = errors.New("the informer of subscriptions stopped")
		}
		t.err = err
		close(t.changed)
		t.changed = make(chan struct{})
	}()
	if !c.WaitForCacheSync(ctx) {
		return nil, errors.New("the informer of subscriptions did not sync")
	}
	return t, nil
}

func (t *tracker) update(o any, deleted bool) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	sub, ok := o.(*hookv1.WebhookSubscription)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if deleted {
		delete(t.ready, sub.Name)
		delete(t.synced, sub.Name)
	} else {
		c := meta.FindStatusCondition(sub.Status.Conditions, hookv1.ConditionReady)
		t.ready[sub.Name] = c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == sub.Generation
		if ls := sub.Status.LastSyncTime; ls != nil {
			if !ls.Time.Equal(t.synced[sub.Name]) {
				t.seen[sub.Name] = time.Now()
			}
			t.synced[sub.Name] = ls.Time
		}
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// until waits for cond (called with the lock held) to hold after some event.
func (t *tracker) until(ctx context.Context, m *manager, cond func() bool) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		t.mu.Lock()
		if cond() {
			t.mu.Unlock()
			return nil
		}
		if t.err != nil {
			defer t.mu.Unlock()
			return t.err
		}
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (manager log %s)", ctx.Err(), m.Log)
		case <-ch:
		case <-tick.C:
			if err := m.Exited(); err != nil {
				return err
			}
		}
	}
}

func (t *tracker) waitReady(ctx context.Context, n int, m *manager) error {
	return t.until(ctx, m, func() bool {
		count := 0
		for _, ok := range t.ready {
			if ok {
				count++
			}
		}
		return count == n
	})
}

// wave is one resync wave as waitWave saw it, account by account.
type wave struct {
	// from and to are, per account, the ends of its part of the wave: from when the bench saw
	// the last of its subscriptions synced with the newest list the account had when the wave
	// began (the end of its previous wave), to when it saw the last of them synced with a newer
	// one. An account is quiet between its waves, so its requests in (from, to] are its wave's,
	// including a list read just before the wave began that none of its subscriptions had used
	// yet.
	from, to []time.Time
	// took is the longest account's wave, from the first of its subscriptions seen synced in it
	// to the last.
	took time.Duration
	// lists are the times of the lists the wave used, with how many subscriptions used each.
	lists map[string]int
}

// holds reports whether request c falls in its account's part of the wave.
func (w wave) holds(c call) bool {
	return c.at.After(w.from[c.account]) && !c.at.After(w.to[c.account])
}

// waitWave waits for one wave of every account, each on its own: an account's wave is done
// when all its subscriptions have been synced with a list newer than every sync of the account
// seen when the wave began. Each account lists on a grid of its own, counted from its first
// list, and the grids are seconds apart: a wave counted from the newest sync of any account
// would wait, on an account that listed before that sync, for its next grid point, and so hold
// two of its lists. The grids may spread over much of the interval, so the wave may begin
// while an account is part way through a wave of its own (some subscriptions synced with a
// new list, some not yet): that account's measured wave is its next, and its part (wave.from)
// begins when the one under way ends.
func (t *tracker) waitWave(ctx context.Context, m *manager) (w wave, err error) {
	n := len(t.accounts)
	w.from, w.to, w.lists = make([]time.Time, n), make([]time.Time, n), map[string]int{}
	var latest []time.Time
	pending := n
	err = t.until(ctx, m, func() bool {
		if latest == nil {
			// Under the same lock as the first look at the accounts, so no sync falls between.
			latest = make([]time.Time, n)
			for a, names := range t.accounts {
				for _, name := range names {
					latest[a] = later(latest[a], t.synced[name])
				}
			}
		}
		for a, names := range t.accounts {
			if w.from[a].IsZero() && t.all(names, func(ls time.Time) bool { return !ls.Before(latest[a]) }) {
				_, w.from[a] = t.seenSpan(names)
			}
			if !w.from[a].IsZero() && w.to[a].IsZero() && t.all(names, func(ls time.Time) bool { return ls.After(latest[a]) }) {
				first, last := t.seenSpan(names)
				w.to[a], w.took = last, max(w.took, last.Sub(first))
				for _, name := range names {
					w.lists[t.synced[name].Format("15:04:05")]++
				}
				pending--
			}
		}
		return pending == 0
	})
	return w, err
}

// all reports whether the last sync of every one of the subscriptions satisfies ok (called
// with the lock held).
func (t *tracker) all(names []string, ok func(synced time.Time) bool) bool {
	for _, name := range names {
		if !ok(t.synced[name]) {
			return false
		}
	}
	return true
}

// seenSpan is when the bench saw the first and the last of the subscriptions synced (called
// with the lock held).
func (t *tracker) seenSpan(names []string) (first, last time.Time) {
	for _, name := range names {
		at := t.seen[name]
		if first.IsZero() || at.Before(first) {
			first = at
		}
		last = later(last, at)
	}
	return first, last
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// goBuild builds the manager into dir, for the test (make bench-reconcile builds it first).
func goBuild(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "manager")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/hookwarden/hookwarden/cmd/manager")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/manager: %v\n%s", err, b)
	}
	return out, nil
}
