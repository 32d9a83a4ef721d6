package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/childproc"
	"github.com/hookwarden/hookwarden/internal/testenv"
)

// The size of TestChaos. The defaults are the small run `make test` includes; -chaos.full (or
// HOOKWARDEN_CHAOS_FULL=1) is the run `make chaos` prints; the other flags override either.
var (
	chaosFull      = flag.Bool("chaos.full", os.Getenv("HOOKWARDEN_CHAOS_FULL") == "1", "run the full manager chaos (Stripe: 200 subscriptions over 8 accounts; GitHub: 100 over 4 repositories)")
	chaosSubs      = flag.Int("chaos.subscriptions", 0, "subscriptions in each row's create storm (default 24; full: Stripe 200, GitHub 100)")
	chaosAccounts  = flag.Int("chaos.accounts", 0, "accounts (credential Secrets; GitHub: repositories) they are spread over (default 3; full: Stripe 8, GitHub 4)")
	chaosForeign   = flag.Int("chaos.foreign", 2, "unrelated foreign endpoints seeded per account, besides three look-alikes")
	chaosRate      = flag.Float64("chaos.fault-rate", 0.2, "share of provider requests failed (429, 5xx, timeouts)")
	chaosProviders = flag.String("chaos.providers", "stripe,github", "the providers whose fakes the managers run against, one row each")
	chaosSeed      = flag.Uint64("chaos.seed", 0, "seed of the faults and of the kills (0: from the clock; printed)")
	chaosTimeout   = flag.Duration("chaos.timeout", 0, "longest wait for each phase to converge (default 3m, full 6m)")
)

const (
	chaosNamespace  = "default"
	chaosCluster    = "chaos"
	chaosLease      = "hookwarden-manager.hookwarden.io"
	providerTimeout = 2 * time.Second
	killGapMin      = 3 * time.Second
	killGapMax      = 9 * time.Second
	chaosPollEvery  = time.Second
)

// TestChaos is the manager half of `make chaos`: two leader-elected manager processes on one
// API server, SIGKILLed at random points of a create storm and of the deletion that follows,
// against a provider's fake (Stripe, then GitHub, one row each) failing 20 % of requests (429, 500/502/503, timeouts, before or after
// applying them). It checks what a user would notice: no endpoint twice, every signing secret
// stored, nothing left after deletion, and the foreign endpoints on the same accounts never
// changed. It prints a REPORT block with its figures; it asserts no timings.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the chaos test starts a control plane and four processes per provider")
	}
	// envtest logs through controller-runtime; without a logger it prints a stack trace.
	ctrllog.SetLogger(logr.Discard())
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	for _, name := range strings.Split(*chaosProviders, ",") {
		p, ok := map[string]chaosProvider{"stripe": stripeChaos{}, "github": githubChaos{}}[name]
		if !ok {
			t.Fatalf("-chaos.providers: unknown provider %q (stripe, github)", name)
		}
		t.Run(name, func(t *testing.T) { chaosRow(t, p, chaosSize(p, seed)) })
	}
}

// chaosRow is one provider's run: its own control plane, fake and managers.
func chaosRow(t *testing.T, p chaosProvider, size chaosSizing) {
	h := newChaosHarness(t, size, p)
	h.seedForeign()
	h.startManagers()

	// Phase 1: the create storm.
	rng := rand.New(rand.NewPCG(size.seed, size.seed+1))
	stormStart := time.Now()
	storm := h.runChaos(rng, h.stormProgress)
	h.createSubscriptions()
	h.waitAllReady(size.timeout)
	converged := time.Since(stormStart)
	storm.stop()

	dupes, wrongSecrets := h.checkOnePerSubscription()
	foreignAfterStorm := h.foreignTouched()

	// Phase 2: delete everything, still killing.
	delStart := time.Now()
	deletion := h.runChaos(rng, h.deletionProgress)
	h.deleteSubscriptions()
	h.waitAllGone(size.timeout)
	deleted := time.Since(delStart)
	deletion.stop()

	orphans := h.orphans()
	foreignAfterDelete := h.foreignTouched()
	reqs := h.requests()
	counts := h.chaosCounts()

	kills := storm.kills.add(deletion.kills)
	fig := chaosFigures{
		provider: p.name(), size: size, kills: kills, stormKills: storm.kills, deleteKills: deletion.kills,
		requests: reqs, chaos: counts, dupes: dupes, wrongSecrets: wrongSecrets, orphans: orphans,
		foreignTouched: max(len(foreignAfterStorm), len(foreignAfterDelete)) + countForeignWrites(reqs, h.foreignIDs()),
		converged:      converged, deleted: deleted,
	}
	fmt.Print(fig.report())

	if n := fig.createsApplied(); n != size.subs {
		t.Errorf("the fake applied %d creates for %d subscriptions: an endpoint was created more than once (even if pruned later)", n, size.subs)
	}
	if dupes != 0 {
		t.Errorf("duplicates at the provider: %d, want 0", dupes)
	}
	if wrongSecrets != 0 {
		t.Errorf("signing Secrets not holding their endpoint's secret: %d, want 0", wrongSecrets)
	}
	if orphans != 0 {
		t.Errorf("orphans after deletion: %d, want 0", orphans)
	}
	for _, d := range append(foreignAfterStorm, foreignAfterDelete...) {
		t.Errorf("foreign endpoint touched: %s", d)
	}
	if n := countForeignWrites(reqs, h.foreignIDs()); n != 0 {
		t.Errorf("the manager sent %d writes to foreign endpoints, want 0", n)
	}
	if counts.Total() == 0 {
		t.Errorf("the fake injected no fault")
	}
	h.checkLogs()
}

// checkLogs fails the test on a data race (the binaries are built with -race under -race) or
// a panic in any process's log: SIGKILL is the only way a process may end.
func (h *chaosHarness) checkLogs() {
	logs, err := filepath.Glob(filepath.Join(h.tmp, "*.log"))
	if err != nil {
		h.t.Fatal(err)
	}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, bad := range []string{"WARNING: DATA RACE", "panic:"} {
			if i := strings.Index(string(b), bad); i >= 0 {
				h.t.Errorf("%s in %s:\n%s", bad, filepath.Base(l), string(b[i:min(len(b), i+3000)]))
			}
		}
	}
}

// chaosSizing is one run's size.
type chaosSizing struct {
	subs, accounts, foreign int
	rate                    float64
	seed                    uint64
	timeout                 time.Duration
}

// chaosSize is a row's size: small, or with -chaos.full the provider's full size (Stripe 200
// subscriptions over 8 accounts, GitHub 100 over 4, so that both rows fit the time make chaos
// may take), the flags overriding either.
func chaosSize(p chaosProvider, seed uint64) chaosSizing {
	s := chaosSizing{subs: 24, accounts: 3, foreign: *chaosForeign, rate: *chaosRate, seed: seed, timeout: 3 * time.Minute}
	if *chaosFull {
		s.subs, s.accounts = p.fullSize()
		s.timeout = 6 * time.Minute
	}
	if *chaosSubs > 0 {
		s.subs = *chaosSubs
	}
	if *chaosAccounts > 0 {
		s.accounts = *chaosAccounts
	}
	if *chaosTimeout > 0 {
		s.timeout = *chaosTimeout
	}
	return s
}

// chaosHarness is one run: the control plane, a provider's fake, two manager replicas, and
// what the test seeded and created.
type chaosHarness struct {
	t    *testing.T
	size chaosSizing
	p    chaosProvider
	tmp  string
	k8s  client.Client
	fake *fakeClient

	kubeconfig string
	managerBin string
	replicas   [2]*replica

	accts   []chaosAccount
	foreign [][]endpoint // by account: the foreign endpoints as seeded
	subs    []string     // subscription names
}

func newChaosHarness(t *testing.T, size chaosSizing, p chaosProvider) *chaosHarness {
	t.Helper()
	h := &chaosHarness{t: t, size: size, p: p, tmp: t.TempDir()}
	t.Logf("chaos: %d subscriptions over %d accounts, fault rate %.2f, seed %d (rerun with -chaos.seed=%d)", size.subs, size.accounts, size.rate, size.seed, size.seed)

	h.managerBin = h.build(".", "manager")
	fakeName := "fake" + p.name()
	fakeBin := h.build(p.pkg(), fakeName)
	h.startControlPlane()

	addr, err := childproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	fp := h.start(fakeName, fakeBin, os.Environ(), append(p.args(), "-addr", addr,
		"-fault-rate", fmt.Sprint(size.rate), "-fault-seed", fmt.Sprint(size.seed), "-fault-hold", "30s")...)
	h.fake = &fakeClient{base: "http://" + addr}
	h.eventually("the fake answering", 30*time.Second, func(ctx context.Context) error {
		if err := fp.Exited(); err != nil {
			return stopWaiting{err}
		}
		_, err := h.fake.chaos(ctx)
		return err
	})
	return h
}

// build compiles a binary of this module into the test's folder, with -race when the test has
// it (the manager's own data races then show in its log).
func (h *chaosHarness) build(pkg, name string) string {
	out := filepath.Join(h.tmp, name)
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		h.t.Fatalf("go build %s: %v", pkg, err)
	}
	return out
}

func (h *chaosHarness) startControlPlane() {
	env, err := testenv.Start(filepath.Join("..", ".."), h.tmp, "chaos")
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			h.t.Logf("stopping envtest: %v", err)
		}
	})
	h.k8s, h.kubeconfig = env.Client, env.Kubeconfig
}

// start starts a process that is stopped when the test ends.
func (h *chaosHarness) start(name, bin string, env []string, args ...string) *childproc.Proc {
	p, err := childproc.Start(name, filepath.Join(h.tmp, name+".log"), env, bin, args...)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _, _ = p.Stop(10 * time.Second) })
	return p
}

// seedForeign stores, on every account and before any subscription exists, endpoints no
// subscription owns: unrelated ones, and three look-alikes of a subscription of that account
// (its URL with a trailing slash, its URL over http, and its namespace and name in another
// cluster's marker). None may ever be changed or deleted.
func (h *chaosHarness) seedForeign() {
	ctx := context.Background()
	for a := range h.size.accounts {
		acct, err := h.p.account(ctx, h.fake, a)
		if err != nil {
			h.t.Fatalf("setting up account %d: %v", a, err)
		}
		h.accts = append(h.accts, acct)
		var seeds []endpoint
		for i := range h.size.foreign {
			seeds = append(seeds, unrelated(a, i, []string{"*"}))
		}
		// Look-alikes of this account's first subscription (sub-00a).
		seeds = append(seeds, h.p.lookAlikes(h.subscriptionURL(a), h.subscriptionName(a))...)
		var stored []endpoint
		for _, s := range seeds {
			e, err := h.p.seed(ctx, h.fake, acct, s)
			if err != nil {
				h.t.Fatalf("seeding a foreign endpoint: %v", err)
			}
			stored = append(stored, e)
		}
		h.foreign = append(h.foreign, stored)
	}
}

func (h *chaosHarness) subscriptionName(i int) string { return fmt.Sprintf("sub-%03d", i) }

func (h *chaosHarness) subscriptionURL(i int) string {
	return fmt.Sprintf("https://hooks.chaos.example/a%d/%s", i%h.size.accounts, h.subscriptionName(i))
}

func (h *chaosHarness) foreignIDs() map[string]bool {
	ids := map[string]bool{}
	for _, eps := range h.foreign {
		for _, e := range eps {
			ids[e.ID] = true
		}
	}
	return ids
}

// startManagers starts both replicas and waits until one leads.
func (h *chaosHarness) startManagers() {
	for i := range h.replicas {
		metrics, err := childproc.FreeAddr()
		if err != nil {
			h.t.Fatal(err)
		}
		probe, err := childproc.FreeAddr()
		if err != nil {
			h.t.Fatal(err)
		}
		r := &replica{
			name: fmt.Sprintf("manager-%d", i), bin: h.managerBin, log: filepath.Join(h.tmp, fmt.Sprintf("manager-%d.log", i)),
			metrics: &fakeClient{base: "http://" + metrics},
			env:     append(os.Environ(), "KUBECONFIG="+h.kubeconfig),
			args: []string{
				"--leader-elect=true", "--leader-election-namespace=" + chaosNamespace,
				"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
				"--metrics-bind-address=" + metrics, "--health-probe-bind-address=" + probe,
				"--cluster-name=" + chaosCluster, "--provider-timeout=" + providerTimeout.String(),
				"--provider-qps=25", "--provider-burst=5", "--zap-log-level=info",
			},
		}
		if err := r.start(); err != nil {
			h.t.Fatal(err)
		}
		h.t.Cleanup(r.stop)
		h.replicas[i] = r
	}
	h.eventually("a leader", 60*time.Second, func(ctx context.Context) error {
		for _, r := range h.replicas {
			if err := r.proc.Exited(); err != nil {
				return stopWaiting{err}
			}
			if r.leads(ctx) {
				return nil
			}
		}
		return errors.New("no replica leads yet")
	})
}

// createSubscriptions creates the storm: the credential Secrets, then every subscription, from
// several goroutines at once.
func (h *chaosHarness) createSubscriptions() {
	ctx := context.Background()
	for _, acct := range h.accts {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: chaosNamespace, Name: acct.secretName}, StringData: map[string]string{acct.secretKey: acct.credential}}
		if err := h.k8s.Create(ctx, sec); err != nil {
			h.t.Fatal(err)
		}
	}
	work := make(chan int)
	errs := make(chan error, h.size.subs)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				errs <- h.k8s.Create(ctx, h.subscription(i))
			}
		})
	}
	for i := range h.size.subs {
		h.subs = append(h.subs, h.subscriptionName(i))
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			h.t.Fatalf("creating a subscription: %v", err)
		}
	}
}

func (h *chaosHarness) subscription(i int) *hookv1.WebhookSubscription {
	name := h.subscriptionName(i)
	return &hookv1.WebhookSubscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: chaosNamespace, Name: name},
		Spec: hookv1.WebhookSubscriptionSpec{
			Provider:       h.p.providerSpec(h.accts[i%h.size.accounts], h.fake.base),
			Endpoint:       hookv1.EndpointSpec{URL: h.subscriptionURL(i)},
			Events:         h.p.events(),
			Description:    "chaos " + name,
			SigningSecret:  hookv1.SigningSecretSpec{Name: name + "-signing"},
			Policies:       hookv1.Policies{Adoption: hookv1.AdoptionAdopt, Twins: hookv1.TwinsPrune, Deletion: hookv1.DeletionDelete},
			ResyncInterval: &metav1.Duration{Duration: time.Minute},
		},
	}
}

// waitAllReady waits until every subscription is Ready for its generation. A Stalled one ends
// the wait: it needs a human, and under nothing but transient faults it is a bug.
func (h *chaosHarness) waitAllReady(timeout time.Duration) {
	start, lastLog := time.Now(), time.Now()
	h.eventually("every subscription Ready", timeout, func(ctx context.Context) error {
		var list hookv1.WebhookSubscriptionList
		if err := h.k8s.List(ctx, &list, client.InNamespace(chaosNamespace)); err != nil {
			return err
		}
		var pending []string
		for _, s := range list.Items {
			if c := meta.FindStatusCondition(s.Status.Conditions, hookv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
				return stopWaiting{fmt.Errorf("%s is Stalled (%s): %s", s.Name, c.Reason, c.Message)}
			}
			c := meta.FindStatusCondition(s.Status.Conditions, hookv1.ConditionReady)
			if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != s.Generation {
				why := "no Ready condition"
				if c != nil {
					why = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
				}
				pending = append(pending, s.Name+" "+why)
			}
		}
		if len(list.Items) == len(h.subs) && len(pending) == 0 {
			return nil
		}
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			h.t.Logf("t+%s: %d of %d Ready", time.Since(start).Round(time.Second), len(list.Items)-len(pending), len(h.subs))
		}
		if len(pending) > 3 {
			pending = append(pending[:3], fmt.Sprintf("and %d more", len(pending)-3))
		}
		return fmt.Errorf("%d of %d not Ready: %s", len(pending), len(h.subs), strings.Join(pending, "; "))
	})
}

// checkOnePerSubscription counts, for each subscription, the endpoints at the fake for its URL
// that are not foreign (each subscription has a URL of its own): more than one is a duplicate.
// It also checks that status.endpointID names the one, and that the signing Secret holds its
// secret.
func (h *chaosHarness) checkOnePerSubscription() (duplicates, wrongSecrets int) {
	ctx := context.Background()
	byURL := map[string][]endpoint{}
	for _, e := range h.ownEndpoints(ctx) {
		byURL[e.URL] = append(byURL[e.URL], e)
	}
	for i, name := range h.subs {
		eps := byURL[h.subscriptionURL(i)]
		if len(eps) == 0 {
			h.t.Errorf("%s is Ready but the fake holds no endpoint of it", name)
			continue
		}
		duplicates += len(eps) - 1
		if len(eps) > 1 {
			ids := make([]string, len(eps))
			for i, e := range eps {
				ids[i] = e.ID
			}
			h.t.Errorf("%s has %d endpoints at the provider: %s", name, len(eps), strings.Join(ids, ", "))
		}
		var sub hookv1.WebhookSubscription
		if err := h.k8s.Get(ctx, client.ObjectKey{Namespace: chaosNamespace, Name: name}, &sub); err != nil {
			h.t.Fatal(err)
		}
		var ep *endpoint
		for i := range eps {
			if eps[i].ID == sub.Status.EndpointID {
				ep = &eps[i]
			}
		}
		if ep == nil {
			h.t.Errorf("%s: status.endpointID %q is not its endpoint at the provider", name, sub.Status.EndpointID)
			continue
		}
		var sec corev1.Secret
		err := h.k8s.Get(ctx, client.ObjectKey{Namespace: chaosNamespace, Name: sub.Spec.SigningSecret.Name}, &sec)
		if err != nil || ep.Secret == "" || string(sec.Data[hookv1.SecretKeyCurrent]) != ep.Secret {
			wrongSecrets++
			h.t.Errorf("%s: signing Secret %s does not hold endpoint %s's secret (read error: %v)", name, sub.Spec.SigningSecret.Name, ep.ID, err)
		}
	}
	return duplicates, wrongSecrets
}

// foreignTouched compares every foreign endpoint with its seeded self, field by field.
func (h *chaosHarness) foreignTouched() []string {
	var diffs []string
	for a, acct := range h.accts {
		eps, err := h.p.endpoints(context.Background(), h.fake, acct)
		if err != nil {
			h.t.Fatal(err)
		}
		now := map[string]endpoint{}
		for _, e := range eps {
			now[e.ID] = e
		}
		for _, before := range h.foreign[a] {
			after, ok := now[before.ID]
			switch {
			case !ok:
				diffs = append(diffs, before.ID+" ("+before.Description+") was deleted")
			case !cmp.Equal(before.raw, after.raw):
				diffs = append(diffs, before.ID+" ("+before.Description+") changed (-seeded +now):\n"+cmp.Diff(before.raw, after.raw))
			}
		}
	}
	return diffs
}

// countForeignWrites counts requests that would change a foreign endpoint.
func countForeignWrites(reqs []request, foreign map[string]bool) int {
	n := 0
	for _, r := range reqs {
		if (r.kind == "update" || r.kind == "delete") && foreign[r.id] {
			n++
		}
	}
	return n
}

func (h *chaosHarness) deleteSubscriptions() {
	ctx := context.Background()
	for _, name := range h.subs {
		sub := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: chaosNamespace, Name: name}}
		if err := h.k8s.Delete(ctx, sub); err != nil {
			h.t.Fatalf("deleting %s: %v", name, err)
		}
	}
}

// waitAllGone waits until every subscription's finalizer has run and it is gone.
func (h *chaosHarness) waitAllGone(timeout time.Duration) {
	h.eventually("every subscription deleted", timeout, func(ctx context.Context) error {
		var list hookv1.WebhookSubscriptionList
		if err := h.k8s.List(ctx, &list, client.InNamespace(chaosNamespace)); err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return nil
		}
		s := list.Items[0]
		why := ""
		if c := meta.FindStatusCondition(s.Status.Conditions, hookv1.ConditionReady); c != nil {
			why = fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
		}
		return fmt.Errorf("%d left, e.g. %s%s", len(list.Items), s.Name, why)
	})
}

// orphans counts the endpoints left at the fake that are not foreign: every other one was
// created for a subscription, and all are deleted.
func (h *chaosHarness) orphans() int {
	left := h.ownEndpoints(context.Background())
	for _, e := range left {
		h.t.Errorf("orphan: %s %s", e.ID, e.URL)
	}
	return len(left)
}

func (h *chaosHarness) requests() []request {
	reqs, err := h.p.requests(context.Background(), h.fake)
	if err != nil {
		h.t.Fatal(err)
	}
	return reqs
}

func (h *chaosHarness) chaosCounts() fakeChaos {
	c, err := h.fake.chaos(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// stopWaiting ends an eventually at once: waiting longer cannot help.
type stopWaiting struct{ error }

// eventually calls check every chaosPollEvery until it returns nil, and fails the test when it
// returns stopWaiting or timeout passes (with the last error).
func (h *chaosHarness) eventually(what string, timeout time.Duration, check func(context.Context) error) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return
		}
		var sw stopWaiting
		if errors.As(err, &sw) {
			h.t.Fatalf("waiting for %s: %v", what, sw.error)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("waiting for %s: not after %s: %v", what, timeout, err)
		}
		time.Sleep(chaosPollEvery)
	}
}

// replica is one manager process, restarted with the same flags after each kill.
type replica struct {
	name, bin, log string
	env, args      []string
	metrics        *fakeClient // its metrics endpoint
	proc           *childproc.Proc
	starts         int
}

func (r *replica) start() error {
	r.starts++
	if err := childproc.AppendLine(r.log, fmt.Sprintf("----- chaos: %s start #%d at %s -----", r.name, r.starts, time.Now().Format(time.RFC3339Nano))); err != nil {
		return err
	}
	p, err := childproc.Start(r.name, r.log, r.env, r.bin, r.args...)
	if err != nil {
		return err
	}
	r.proc = p
	return nil
}

func (r *replica) stop() { _, _ = r.proc.Stop(10 * time.Second) }

// leads reports whether the replica holds the lease, from its leader_election_master_status.
func (r *replica) leads(ctx context.Context) bool {
	body, err := r.metrics.get(ctx, "/metrics")
	if err != nil {
		return false
	}
	return strings.Contains(string(body), `leader_election_master_status{name="`+chaosLease+`"} 1`)
}

// kills counts what the chaos loop did.
type kills struct {
	leader, standby int
	// firstAt is how far the phase had got (its progress, 0 to 1) at its first kill.
	firstAt float64
	// selfExits are replicas that exited on their own (a leader that could not renew its
	// lease in time exits), restarted like the killed ones.
	selfExits []string
}

func (k kills) total() int { return k.leader + k.standby }

func (k kills) add(o kills) kills {
	return kills{leader: k.leader + o.leader, standby: k.standby + o.standby, selfExits: append(append([]string(nil), k.selfExits...), o.selfExits...)}
}

// chaosLoop SIGKILLs a replica at random points until stopped.
type chaosLoop struct {
	cancel    context.CancelFunc
	done      chan struct{}
	firstKill chan struct{} // closed at the first kill
	kills     kills
}

// stop waits for the phase's first kill (should the phase have finished before it, that kill
// lands on the finished state, which must stay as it is), then stops killing.
func (l *chaosLoop) stop() {
	select {
	case <-l.firstKill:
	case <-l.done:
	}
	l.cancel()
	<-l.done
}

// runChaos starts killing. The first kill comes when the phase's progress (0 to 1, from
// progress) passes a point drawn from rng between 10 % and 60 %, so it lands amid the work at
// any size; the next ones every 3 to 9 s, which leaves a new leader time to take over (the
// lease) and do some. Each kill takes the leader three times in four, else a replica at random,
// and restarts it at once, so there is always a standby. Replicas that exit on their own are
// restarted too. rng is used by this loop only: a seed repeats the same points and choices.
func (h *chaosHarness) runChaos(rng *rand.Rand, progress func(context.Context) (float64, error)) *chaosLoop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &chaosLoop{cancel: cancel, done: make(chan struct{}), firstKill: make(chan struct{})}
	h.t.Cleanup(func() { l.cancel(); <-l.done }) // before the replicas are stopped
	gap := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	threshold := 0.1 + 0.5*rng.Float64()
	go func() {
		defer close(l.done)
		var next time.Time // zero until the first kill
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, r := range h.replicas {
				if r.proc.Exited() != nil {
					l.kills.selfExits = append(l.kills.selfExits, fmt.Sprintf("%s start #%d: %s", r.name, r.starts, r.proc.ExitStatus()))
					if err := r.start(); err != nil {
						h.t.Errorf("restarting %s: %v", r.name, err)
						return
					}
				}
			}
			if next.IsZero() {
				done, err := progress(ctx)
				if err != nil || done < threshold {
					continue
				}
				l.kills.firstAt = done
			} else if time.Now().Before(next) {
				continue
			}
			next = time.Now().Add(gap(killGapMin, killGapMax))
			if err := h.kill(ctx, rng, &l.kills); err != nil {
				h.t.Errorf("%v", err)
				return
			}
			if l.kills.total() == 1 {
				close(l.firstKill)
			}
		}
	}()
	return l
}

// kill SIGKILLs the leader (three times in four, when one leads) or a random replica, and
// starts it again.
func (h *chaosHarness) kill(ctx context.Context, rng *rand.Rand, k *kills) error {
	victim := h.replicas[rng.IntN(len(h.replicas))]
	wantLeader := rng.IntN(4) < 3
	leader := -1
	for i, r := range h.replicas {
		if r.leads(ctx) {
			leader = i
		}
	}
	if wantLeader && leader >= 0 {
		victim = h.replicas[leader]
	}
	if leader >= 0 && victim == h.replicas[leader] {
		k.leader++
	} else {
		k.standby++
	}
	if err := victim.proc.Kill(); err != nil {
		return err
	}
	if err := victim.start(); err != nil {
		return fmt.Errorf("restarting %s: %w", victim.name, err)
	}
	return nil
}

// ownEndpoints are the endpoints at the fake that are not foreign (failing the test when the
// fake cannot be read).
func (h *chaosHarness) ownEndpoints(ctx context.Context) []endpoint {
	eps, err := h.tryOwnEndpoints(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return eps
}

func (h *chaosHarness) tryOwnEndpoints(ctx context.Context) ([]endpoint, error) {
	foreign := h.foreignIDs()
	var out []endpoint
	for _, acct := range h.accts {
		eps, err := h.p.endpoints(ctx, h.fake, acct)
		if err != nil {
			return nil, err
		}
		for _, e := range eps {
			if !foreign[e.ID] {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// stormProgress is the share of subscriptions with an endpoint at the provider.
func (h *chaosHarness) stormProgress(ctx context.Context) (float64, error) {
	eps, err := h.tryOwnEndpoints(ctx)
	return float64(len(eps)) / float64(h.size.subs), err
}

// deletionProgress is the share of the subscriptions' endpoints deleted at the provider.
func (h *chaosHarness) deletionProgress(ctx context.Context) (float64, error) {
	eps, err := h.tryOwnEndpoints(ctx)
	return 1 - float64(len(eps))/float64(h.size.subs), err
}
