package main_test

// End-to-end tests of the receiver as real processes: the binary built from this package, a
// real kube-apiserver and etcd (envtest) holding WebhookSubscriptions and their signing Secrets,
// real SQLite files and PostgreSQL databases, a sink in the test that records every delivery by
// Idempotency-Key, and provider-like clients that sign with stripe.SignHeader and retry
// connection errors and 503s. Every scenario asserts what the sink received, not only the
// status codes the clients saw.

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

var (
	receiverBin    string
	kubeconfigPath string
	k8s            client.Client
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if testtier.Short() {
		testtier.SkippingSetup("cmd/receiver", "the receiver binary and the control plane")
		return m.Run()
	}
	logf.SetLogger(logr.Discard())
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "receiver e2e setup: "+format+"\n", args...)
		return 1
	}
	tmp, err := os.MkdirTemp("", "hookwarden-receiver-e2e-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(tmp)

	// The binary under test, built once.
	receiverBin = filepath.Join(tmp, "receiver")
	args := []string{"build", "-o", receiverBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fail("go build ./cmd/receiver: %v", err)
	}

	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		// Its progress lines (a cold build takes minutes) go to stderr, shown with -v.
		cp := exec.Command(filepath.Join("..", "..", "hack", "control-plane.sh"), "--print-dir")
		cp.Stderr = os.Stderr
		out, err := cp.Output()
		if err != nil {
			return fail("hack/control-plane.sh --print-dir: %v", err)
		}
		assets = strings.TrimSpace(string(out))
	}
	testEnv := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := testEnv.Start()
	if err != nil {
		return fail("starting envtest: %v", err)
	}
	defer func() {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
	}()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = hookv1.AddToScheme(scheme)
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return fail("client: %v", err)
	}
	// The receivers are separate processes: they get a kubeconfig of their own user.
	u, err := testEnv.AddUser(envtest.User{Name: "e2e", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fail("adding the e2e user: %v", err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return fail("kubeconfig: %v", err)
	}
	kubeconfigPath = filepath.Join(tmp, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kc, 0o600); err != nil {
		return fail("%v", err)
	}
	return m.Run()
}

// a. One event delivered 200 times at once, spread over three receivers sharing one
// PostgreSQL (or one Redis): exactly one 202, 199 × 200, and the sink sees the event exactly once.
func TestConcurrentDuplicatesAcrossReplicas(t *testing.T) {
	testtier.RequiresServers(t, "the receiver binary and a control plane (envtest)")
	t.Run("postgres", func(t *testing.T) {
		concurrentDuplicates(t, "receiver-a", "PostgreSQL", storetest.PostgresDSN(t))
	})
	t.Run("redis", func(t *testing.T) {
		concurrentDuplicates(t, "receiver-a-redis", "Redis (appendfsync always)", storetest.StartRedis(t, storetest.DurableRedis()...).URL())
	})
}

func concurrentDuplicates(t *testing.T, label, storeName, dsn string) {
	ns := newNamespace(t)
	sk := newSink(t)
	sub := createSubscription(t, ns, "orders", sk.URL(), 10)
	sk.expect(sub)

	rs := make([]*receiverProc, 3)
	for i := range rs {
		rs[i] = newReceiver(t, fmt.Sprintf("replica-%d", i), receiverConfig{Namespace: ns, Store: dsn})
		rs[i].Start()
	}
	for _, r := range rs {
		r.WaitRoute(sub, sub.Secret)
	}
	clients := []*provider{newClient(rs[0].URL()), newClient(rs[1].URL()), newClient(rs[2].URL())}

	const n = 200
	eventID := "evt_a_" + randHex(6)
	statuses := make([]int, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses[i], errs[i] = clients[i%3].Post(sub, stripeEvent(eventID), sub.Secret)
		}()
	}
	close(start)
	wg.Wait()

	byStatus := map[int]int{}
	for i := range n {
		if errs[i] != nil {
			t.Errorf("delivery %d to replica-%d: %v", i, i%3, errs[i])
			continue
		}
		byStatus[statuses[i]]++
	}
	if byStatus[http.StatusAccepted] != 1 || byStatus[http.StatusOK] != n-1 || len(byStatus) != 2 {
		t.Errorf("statuses %v, want exactly one 202 and %d × 200", byStatus, n-1)
	}

	st := openStore(t, dsn)
	l := waitDelivered(t, st, sk, map[string]bool{eventID: true}, nil, 30*time.Second)
	l.check(t)
	if got := len(sk.arrivalsOf(eventID)); got != 1 {
		t.Errorf("the sink received the event %d times, want exactly once", got)
	}
	fmt.Printf("REPORT %s: %d concurrent deliveries of one event over 3 replicas sharing %s: 202=%d, 200=%d, other=%d; sink arrivals=%d, processed=%d\n",
		label, n, storeName, byStatus[http.StatusAccepted], byStatus[http.StatusOK], n-byStatus[http.StatusAccepted]-byStatus[http.StatusOK], l.arrivals, l.processed)
}

// b. 1,000 events plus 30 % duplicates from concurrent clients; the receiver is SIGKILLed after
// about half were acknowledged and restarted on the same store. Every acknowledged event
// reaches the sink, none is processed twice, and no event is accepted (202) twice.
func TestKillMidStream(t *testing.T) {
	testtier.RequiresServers(t, "the receiver binary and a control plane (envtest)")
	t.Run("sqlite", func(t *testing.T) {
		killMidStream(t, "receiver-b", "sqlite://"+filepath.Join(t.TempDir(), "receiver.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		killMidStream(t, "receiver-b-postgres", storetest.PostgresDSN(t))
	})
	t.Run("redis", func(t *testing.T) {
		killMidStream(t, "receiver-b-redis", storetest.StartRedis(t, storetest.DurableRedis()...).URL())
	})
}

func killMidStream(t *testing.T, label, dsn string) {
	const (
		events  = 1000
		dupRate = 0.30
		clients = 16
	)
	ns := newNamespace(t)
	sk := newSink(t)
	sub := createSubscription(t, ns, "orders", sk.URL(), 10)
	sk.expect(sub)
	r := startReceiver(t, "receiver", receiverConfig{Namespace: ns, Store: dsn}, sub)

	// The plan: every event once, 30 % of them twice, shuffled (a duplicate may overtake its
	// original or run concurrently with it).
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	ids := make([]string, events)
	want := map[string]bool{}
	for i := range ids {
		ids[i] = fmt.Sprintf("evt_b_%s_%04d", randHex(3), i)
		want[ids[i]] = true
	}
	plan := append([]string(nil), ids...)
	for _, i := range rng.Perm(events)[:int(events*dupRate)] {
		plan = append(plan, ids[i])
	}
	rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })

	cl := newClient(r.URL())
	var (
		acked         atomic.Int64
		killed        atomic.Bool
		killOnce      sync.Once
		killAt        = int64(len(plan) / 2)
		tally         counter // every attempt by outcome
		mu            sync.Mutex
		results       []*delivery
		firstAckAfter time.Time // first 2xx from the restarted process
		killedAt      time.Time
		restarted     = make(chan struct{})
	)
	kill := func() {
		killOnce.Do(func() {
			go func() {
				r.Kill()
				mu.Lock()
				killedAt = time.Now()
				mu.Unlock()
				killed.Store(true)
				r.Start() // same flags, same store, same port
				close(restarted)
			}()
		})
	}
	work := make(chan string)
	deadline := time.Now().Add(90 * time.Second)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				d := cl.deliverWithRetries(sub, id, deadline, func(a attempt) {
					tally.add(statusLabel(a))
					if killed.Load() {
						if a.status >= 200 && a.status < 300 {
							mu.Lock()
							if firstAckAfter.IsZero() || a.end.Before(firstAckAfter) {
								firstAckAfter = a.end
							}
							mu.Unlock()
						}
					}
				})
				if d.acked() && acked.Add(1) == killAt {
					kill()
				}
				mu.Lock()
				results = append(results, d)
				mu.Unlock()
			}
		}()
	}
	for _, id := range plan {
		work <- id
	}
	close(work)
	wg.Wait()
	select {
	case <-restarted:
	case <-time.After(30 * time.Second):
		t.Fatal("the receiver was never killed and restarted")
	}
	r.WaitReady()

	// What the provider side saw.
	accepted := map[string]int{} // 202s per event
	ackedEvents := map[string]bool{}
	var unacked []string
	attempts := 0
	for _, d := range results {
		attempts += len(d.attempts)
		last := d.attempts[len(d.attempts)-1]
		for _, a := range d.attempts {
			if a.status == http.StatusAccepted {
				accepted[d.eventID]++
			}
		}
		if d.acked() {
			ackedEvents[d.eventID] = true
		} else {
			unacked = append(unacked, fmt.Sprintf("%s (%s)", d.eventID, statusLabel(last)))
		}
	}
	if len(results) != len(plan) {
		t.Fatalf("%d deliveries finished, planned %d", len(results), len(plan))
	}
	if len(unacked) > 0 {
		t.Errorf("%d deliveries never got a 2xx despite retries, e.g. %v", len(unacked), first(unacked, 5))
	}
	for id, n := range accepted {
		if n > 1 {
			t.Errorf("event %s was accepted (202) %d times: the dedupe claim did not survive the kill", id, n)
		}
	}
	if n := tally.get("404") + tally.get("401"); n > 0 {
		t.Errorf("%d attempts were refused (404/401) although the subscription and secret never changed: %s", n, tally.String())
	}

	st := openStore(t, dsn)
	l := waitDelivered(t, st, sk, ackedEvents, want, 60*time.Second)
	l.check(t)
	mu.Lock()
	downtime := firstAckAfter.Sub(killedAt)
	mu.Unlock()
	fmt.Printf("REPORT %s: sent=%d deliveries (%d events + %d duplicates) in %d HTTP attempts; 2xx=%d (202=%d, 200=%d); "+
		"SIGKILL after %d acks, kill to first 2xx of the restarted process %s; connection errors during the kill=%d, 503s=%d; "+
		"acked events=%d, delivered=%d, missing=%d, twice=%d, sink arrivals=%d (redelivered and dropped by Idempotency-Key=%d)\n",
		label, len(plan), events, len(plan)-events, attempts, tally.get("200")+tally.get("202"), tally.get("202"), tally.get("200"),
		killAt, downtime.Round(time.Millisecond), tally.get("conn_error"), tally.get("503"),
		len(ackedEvents), l.processed, len(l.missing), len(l.twice), l.arrivals, l.redelivered)
	if tally.get("conn_error") == 0 {
		t.Errorf("no client saw a connection error: the receiver was not killed mid-stream")
	}
}

// c. Sink failures: retries with backoff, Retry-After, permanent 4xx, exhausted attempts, the
// dead-letters and replay commands.
func TestSinkFailures(t *testing.T) {
	testtier.RequiresServers(t, "the receiver binary and a control plane (envtest)")
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "receiver.db")
	ns := newNamespace(t)
	sk := newSink(t)
	retrying := createSubscription(t, ns, "retrying", sk.URL(), 10)
	capped := createSubscription(t, ns, "capped", sk.URL(), 3)
	sk.expect(retrying)
	sk.expect(capped)

	// --retry-max caps Retry-After as well (it is the longest delay the operator allows), so it
	// must exceed the 1 s the sink asks for.
	r := startReceiver(t, "receiver", receiverConfig{Namespace: ns, Store: dsn, Extra: []string{"--retry-max", "2s"}}, retrying)
	r.WaitRoute(capped, capped.Secret)

	e500 := "evt_c_500x3_" + randHex(4)
	e429 := "evt_c_429_" + randHex(4)
	e400 := "evt_c_400_" + randHex(4)
	e503 := "evt_c_503_" + randHex(4)
	ok := answer{status: http.StatusOK}
	sk.setScript(e500, script{seq: []answer{{status: 500}, {status: 500}, {status: 500}}, then: ok})
	sk.setScript(e429, script{seq: []answer{{status: 429, retryAfter: "1"}}, then: ok})
	sk.setScript(e400, script{then: answer{status: 400}})
	sk.setScript(e503, script{then: answer{status: 503}})

	cl := newClient(r.URL())
	for _, c := range []struct {
		sub subscription
		id  string
	}{{retrying, e500}, {retrying, e429}, {retrying, e400}, {capped, e503}} {
		if status, err := cl.Post(c.sub, stripeEvent(c.id), c.sub.Secret); err != nil || status != http.StatusAccepted {
			t.Fatalf("delivering %s: %d %v", c.id, status, err)
		}
	}

	st := openStore(t, dsn)
	// The two that recover.
	waitDelivered(t, st, sk, map[string]bool{e500: true, e429: true}, nil, 30*time.Second)
	if got := statusesOf(sk.arrivalsOf(e500)); got != "500,500,500,200" {
		t.Errorf("%s: the sink answered %s, want 500,500,500,200 (delivered once after 4 attempts)", e500, got)
	}
	as := sk.arrivalsOf(e429)
	if got := statusesOf(as); got != "429,200" {
		t.Errorf("%s: the sink answered %s, want 429,200", e429, got)
	} else if gap := as[1].at.Sub(as[0].answered); gap < time.Second {
		t.Errorf("%s: retried %s after a 429 with Retry-After: 1", e429, gap)
	} else {
		t.Logf("429 with Retry-After: 1 retried after %s", gap.Round(time.Millisecond))
	}

	// The two that die: wait until both are listed as dead letters.
	deadIDs := map[string]string{}
	var listing string
	eventually(t, 30*time.Second, "two dead letters", func() (bool, string) {
		listing = runCLI(t, "dead-letters", "--store", dsn)
		deadIDs = parseDeadLetters(t, listing)
		return len(deadIDs) == 2, listing
	})
	t.Logf("receiver dead-letters:\n%s", listing)
	for _, want := range []struct {
		id, sub, attempts string
	}{{e400, retrying.Namespace + "/" + retrying.Name, "1"}, {e503, capped.Namespace + "/" + capped.Name, "3"}} {
		if !regexp.MustCompile(`(?m)^` + deadIDs[want.id] + `\s+` + regexp.QuoteMeta(want.sub) + `\s+default\s+` + want.id + `\s+\S+\s+` + want.attempts + `\s`).MatchString(listing) {
			t.Errorf("dead letter %s: want subscription %s, sink default and %s attempts in the listing", want.id, want.sub, want.attempts)
		}
	}
	if got := statusesOf(sk.arrivalsOf(e400)); got != "400" {
		t.Errorf("%s: the sink answered %s, want one 400 (a permanent failure is not retried)", e400, got)
	}
	if got := statusesOf(sk.arrivalsOf(e503)); got != "503,503,503" {
		t.Errorf("%s: the sink answered %s, want 503 three times (maxAttempts 3)", e503, got)
	}

	// Fix the sink and replay.
	sk.setScript(e400, script{then: ok})
	sk.setScript(e503, script{then: ok})
	out := runCLI(t, "replay", "--store", dsn, deadIDs[e400], deadIDs[e503])
	if strings.Count(out, "replayed") != 2 {
		t.Errorf("receiver replay printed %q", out)
	}
	l := waitDelivered(t, st, sk, map[string]bool{e500: true, e429: true, e400: true, e503: true}, nil, 30*time.Second)
	l.check(t)
	if got := statusesOf(sk.arrivalsOf(e400)); got != "400,200" {
		t.Errorf("%s after replay: the sink answered %s, want 400,200", e400, got)
	}
	if got := statusesOf(sk.arrivalsOf(e503)); got != "503,503,503,200" {
		t.Errorf("%s after replay: the sink answered %s, want 503,503,503,200", e503, got)
	}
	if left := parseDeadLetters(t, runCLI(t, "dead-letters", "--store", dsn)); len(left) != 0 {
		t.Errorf("dead letters left after the replay: %v", left)
	}
	if out := runCLIFails(t, "replay", "--store", dsn, deadIDs[e400]); !strings.Contains(out, "not dead-lettered") {
		t.Errorf("replaying a delivered job: %q, want a not-dead-lettered error", out)
	}
}

// runCLIFails runs a subcommand that must fail.
func runCLIFails(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(receiverBin, args...).CombinedOutput()
	if err == nil {
		t.Errorf("receiver %s succeeded, want an error:\n%s", strings.Join(args, " "), out)
	}
	return string(out)
}

func statusesOf(as []arrival) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = strconv.Itoa(a.status)
	}
	return strings.Join(s, ",")
}

// parseDeadLetters maps event ids to dead-letter ids in `receiver dead-letters` output.
func parseDeadLetters(t *testing.T, out string) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("dead-letters printed no header:\n%s", out)
	}
	m := map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 4 {
			t.Fatalf("dead-letters line %q", l)
		}
		m[f[3]] = f[0] // ID SUBSCRIPTION SINK EVENT ...
	}
	return m
}

// e. Rotation through Kubernetes: the signing Secret holds old and new secrets, then only the
// new one; the receiver follows without a restart.
func TestSecretRotation(t *testing.T) {
	testtier.RequiresServers(t, "the receiver binary and a control plane (envtest)")
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "receiver.db")
	ns := newNamespace(t)
	sk := newSink(t)
	sub := createSubscription(t, ns, "orders", sk.URL(), 10)
	sk.expect(sub)
	r := startReceiver(t, "receiver", receiverConfig{Namespace: ns, Store: dsn}, sub)
	cl := newClient(r.URL())
	oldSecret, newSecret := sub.Secret, newSecret()
	post := func(id, secret string) int {
		t.Helper()
		status, err := cl.Post(sub, stripeEvent(id), secret)
		if err != nil {
			t.Fatalf("delivering %s: %v", id, err)
		}
		return status
	}
	want := map[string]bool{}
	expect := func(id, secret string, status int) {
		t.Helper()
		if got := post(id, secret); got != status {
			t.Errorf("%s: status %d, want %d", id, got, status)
		}
		if status == http.StatusAccepted {
			want[id] = true
		}
	}
	expect("evt_e_before_old", oldSecret, http.StatusAccepted)
	expect("evt_e_before_new", newSecret, http.StatusUnauthorized)

	// Overlap: the manager registered a new endpoint and keeps both secrets.
	setSigningSecret(t, sub, signingData(newSecret, map[string]string{"we_test": oldSecret, "we_new": newSecret}))
	r.WaitRoute(sub, newSecret)
	expect("evt_e_overlap_old", oldSecret, http.StatusAccepted)
	expect("evt_e_overlap_new", newSecret, http.StatusAccepted)

	// The old registration is gone: its secret must stop working.
	setSigningSecret(t, sub, signingData(newSecret, map[string]string{"we_new": newSecret}))
	eventually(t, 30*time.Second, "the old secret to be refused", func() (bool, string) {
		status := post(probePrefix+randHex(6), oldSecret)
		return status == http.StatusUnauthorized, strconv.Itoa(status)
	})
	expect("evt_e_after_old", oldSecret, http.StatusUnauthorized)
	expect("evt_e_after_new", newSecret, http.StatusAccepted)

	st := openStore(t, dsn)
	l := waitDelivered(t, st, sk, want, nil, 30*time.Second)
	l.check(t)
	for _, id := range []string{"evt_e_before_new", "evt_e_after_old"} {
		if n := len(sk.arrivalsOf(id)); n != 0 {
			t.Errorf("%s was refused with 401 but reached the sink %d times", id, n)
		}
	}
}

// f. PostgreSQL crashes and comes back under a steady stream: no acknowledgement while it is
// down (503 instead), clients' retries are acknowledged once it is back, and every acknowledged
// event reaches the sink exactly once.
func TestPostgresRestartUnderLoad(t *testing.T) {
	testtier.RequiresServers(t, "the receiver binary and a control plane (envtest)")
	pg := startPrivatePostgres(t)
	l := restartUnderLoad(t, "PostgreSQL", pg.DSN(), nil, false, pg.StopImmediate, pg.Start)
	l.check(t)
	fmt.Printf("REPORT receiver-f: %s\n", l.report)
}

// f, Redis. SIGKILL of a Redis with appendfsync always under a steady stream: 503 while it is
// down, and nothing acknowledged is lost (every acknowledged write was fsynced before the reply).
func TestRedisRestartUnderLoad(t *testing.T) {
	testtier.RequiresServers(t, "the receiver binary and a control plane (envtest)")
	rd := storetest.StartRedis(t, storetest.DurableRedis()...)
	l := restartUnderLoad(t, "Redis (appendfsync always)", rd.URL(), nil, false, func() error { rd.Kill(); return nil }, rd.Start)
	l.check(t)
	fmt.Printf("REPORT receiver-f-redis: %s\n", l.report)
}

// Measured, not asserted: what a Redis with appendfsync everysec loses when Redis itself is
// SIGKILLed under load. The receiver runs with --store-promise=best-effort, as it must to start.
func TestRedisEverysecLossOnKill(t *testing.T) {
	testtier.RequiresServers(t, "the receiver binary and a control plane (envtest)")
	rd := storetest.StartRedis(t, "appendonly", "yes", "appendfsync", "everysec", "maxmemory-policy", "noeviction")
	l := restartUnderLoad(t, "Redis (appendfsync everysec)", rd.URL(), []string{"--store-promise", "best-effort"}, true,
		func() error { rd.Kill(); return nil }, rd.Start)
	if len(l.problems) > 0 || len(l.unexpected) > 0 {
		t.Errorf("malformed or unexpected deliveries: %v %v", first(l.problems, 5), first(l.unexpected, 5))
	}
	// everysec usually writes the AOF before replying and fsyncs once a second: a killed
	// process then leaves its writes in the page cache. While a background fsync is slow (a
	// loaded disk) Redis postpones the write and still replies, and those writes die with the
	// process. A crash of the machine would also lose the unsynced second, which no test here
	// can cause.
	fmt.Printf("REPORT receiver-redis-everysec: acknowledged events lost by a SIGKILL of Redis with appendfsync everysec: %d of %d (twice=%d); "+
		"a machine crash could lose ~1 s of acknowledgements, %.0f at this run's rate; %s\n",
		len(l.missing), l.acked, len(l.twice), l.ackRate, l.report)
}

// restartLedger is what restartUnderLoad saw: the sink's ledger of the acknowledged events and
// a report line.
type restartLedger struct {
	ledger
	acked   int
	ackRate float64 // acknowledgements per second before the stop
	report  string
}

// restartUnderLoad streams deliveries to a receiver on dsn, stops the store's server once 100
// were acknowledged, checks 503s while it is down, starts it again and waits for 100 more; then
// waits until the queue is empty. It checks the provider side; the caller judges the ledger.
//
// lossy: the store may lose acknowledged events; then the wait ends once the queue is empty
// (nothing left to deliver) instead of when every acknowledged event reached the sink.
func restartUnderLoad(t *testing.T, storeName, dsn string, extra []string, lossy bool, stop, start func() error) restartLedger {
	ns := newNamespace(t)
	sk := newSink(t)
	sub := createSubscription(t, ns, "orders", sk.URL(), 10)
	sk.expect(sub)
	r := startReceiver(t, "receiver", receiverConfig{Namespace: ns, Store: dsn, Extra: extra}, sub)
	cl := newClient(r.URL())

	var (
		mu                     sync.Mutex
		results                []*delivery
		all                    []attempt
		seq                    atomic.Int64
		stopped                = make(chan struct{})
		okBefore, okAfterStart atomic.Int64
		downAttempts           atomic.Int64 // 503s of attempts started while PostgreSQL was down
		phase                  atomic.Int32 // 0 up, 1 down, 2 restarted
		stopDone, startBegin   time.Time
	)
	began := time.Now()
	deadline := began.Add(90 * time.Second)
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stopped:
					return
				default:
				}
				id := fmt.Sprintf("evt_f_%d_%05d", w, seq.Add(1))
				d := cl.deliverWithRetries(sub, id, deadline, func(a attempt) {
					ph := phase.Load()
					if a.status >= 200 && a.status < 300 {
						switch ph {
						case 0:
							okBefore.Add(1)
						case 2:
							okAfterStart.Add(1)
						}
					}
					if ph == 1 && a.status == http.StatusServiceUnavailable {
						downAttempts.Add(1)
					}
					mu.Lock()
					all = append(all, a)
					mu.Unlock()
				})
				mu.Lock()
				results = append(results, d)
				mu.Unlock()
			}
		}()
	}
	finish := func() {
		select {
		case <-stopped:
		default:
			close(stopped)
		}
		wg.Wait()
	}
	defer finish()

	eventually(t, 30*time.Second, "acknowledgements before the crash", func() (bool, string) {
		return okBefore.Load() >= 100, strconv.FormatInt(okBefore.Load(), 10)
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	stopDone = time.Now()
	phase.Store(1)
	eventually(t, 30*time.Second, "503s while "+storeName+" is down (at least 30, for at least 2s)", func() (bool, string) {
		return downAttempts.Load() >= 30 && time.Since(stopDone) >= 2*time.Second, strconv.FormatInt(downAttempts.Load(), 10)
	})
	startBegin = time.Now()
	if err := start(); err != nil {
		t.Fatal(err)
	}
	phase.Store(2)
	eventually(t, 60*time.Second, "acknowledgements after "+storeName+" is back", func() (bool, string) {
		return okAfterStart.Load() >= 100, strconv.FormatInt(okAfterStart.Load(), 10)
	})
	finish()

	var (
		tally          counter
		ackedWhileDown int
		ackedEvents    = map[string]bool{}
		answered503    int
		recovered503   int
		unacked        []string
	)
	for _, a := range all {
		tally.add(statusLabel(a))
		if a.start.After(stopDone) && a.end.Before(startBegin) && a.status >= 200 && a.status < 300 {
			ackedWhileDown++
		}
	}
	for _, d := range results {
		had503 := false
		for _, a := range d.attempts {
			had503 = had503 || a.status == http.StatusServiceUnavailable
		}
		if had503 {
			answered503++
		}
		if d.acked() {
			ackedEvents[d.eventID] = true
			if had503 {
				recovered503++
			}
		} else {
			last := d.attempts[len(d.attempts)-1]
			unacked = append(unacked, fmt.Sprintf("%s (%s after %d attempts)", d.eventID, statusLabel(last), len(d.attempts)))
		}
	}
	if ackedWhileDown > 0 {
		t.Errorf("%d requests were acknowledged while %s was down", ackedWhileDown, storeName)
	}
	if tally.get("503") == 0 {
		t.Errorf("no 503 while %s was down: %s", storeName, tally.String())
	}
	if len(unacked) > 0 {
		t.Errorf("%d events were never acknowledged despite retries, e.g. %v", len(unacked), first(unacked, 5))
	}
	if answered503 == 0 || recovered503 != answered503 {
		t.Errorf("%d events were answered 503, %d of them acknowledged later; want all", answered503, recovered503)
	}
	if n := tally.get("404") + tally.get("401") + tally.get("500"); n > 0 {
		t.Errorf("unexpected refusals: %s", tally.String())
	}

	st := openStore(t, dsn, extra...)
	var l ledger
	if lossy {
		eventually(t, 60*time.Second, "the queue to drain", func() (bool, string) {
			n, err := st.Depth(context.Background())
			if err != nil {
				return false, err.Error()
			}
			return n == 0, fmt.Sprintf("queue depth %d", n)
		})
		l = sk.ledgerFor(ackedEvents, nil)
	} else {
		l = waitDelivered(t, st, sk, ackedEvents, nil, 60*time.Second)
	}
	return restartLedger{ledger: l, acked: len(ackedEvents), ackRate: float64(okBefore.Load()) / stopDone.Sub(began).Seconds(), report: fmt.Sprintf("%d events acknowledged (%d before the crash, %d after the restart); %s down %s; "+
		"attempts %s; acknowledged while down=%d; events answered 503 and acknowledged on retry=%d/%d; "+
		"delivered=%d, missing=%d, twice=%d, sink arrivals=%d (redelivered and dropped by Idempotency-Key=%d)",
		len(ackedEvents), okBefore.Load(), okAfterStart.Load(), storeName, startBegin.Sub(stopDone).Round(time.Millisecond),
		tally.String(), ackedWhileDown, recovered503, answered503,
		l.processed, len(l.missing), len(l.twice), l.arrivals, l.redelivered)}
}

// Graceful shutdown: SIGTERM with requests in flight (their handlers are reading the body) →
// they complete with 2xx, the process exits 0, and their events are delivered after a restart.
func TestGracefulShutdown(t *testing.T) {
	testtier.RequiresServers(t, "the receiver binary and a control plane (envtest)")
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "receiver.db")
	ns := newNamespace(t)
	sk := newSink(t)
	sub := createSubscription(t, ns, "orders", sk.URL(), 10)
	sk.expect(sub)
	r := startReceiver(t, "receiver", receiverConfig{Namespace: ns, Store: dsn}, sub)

	const n = 5
	held := make([]*heldRequest, n)
	ids := make([]string, n)
	for i := range held {
		ids[i] = fmt.Sprintf("evt_g_%s_%d", randHex(3), i)
		held[i] = holdRequest(t, r.Bind, sub, ids[i])
	}
	r.Signal(syscall.SIGTERM)
	// Shutdown has begun once the listener is closed.
	eventually(t, 10*time.Second, "the listener to close", func() (bool, string) {
		c, err := net.DialTimeout("tcp", r.Bind, time.Second)
		if err != nil {
			return true, ""
		}
		_ = c.Close()
		return false, "still accepting connections"
	})
	want := map[string]bool{} // the acknowledged ones
	for i, h := range held {
		status, err := h.Finish()
		if err != nil || status != http.StatusAccepted {
			t.Errorf("in-flight delivery %s: status %d, error %v; want 202", ids[i], status, err)
			continue
		}
		want[ids[i]] = true
	}
	if err := r.Wait(30 * time.Second); err != nil {
		t.Errorf("the receiver did not exit cleanly after SIGTERM: %v", err)
	}
	before := sk.ledgerFor(want, nil).processed

	r.Start()
	r.WaitReady()
	st := openStore(t, dsn)
	l := waitDelivered(t, st, sk, want, nil, 30*time.Second)
	l.check(t)
	fmt.Printf("REPORT receiver-graceful: %d of %d in-flight deliveries acknowledged during shutdown (SIGTERM); delivered before the restart=%d, after=%d, twice=%d\n",
		len(want), n, before, l.processed-before, len(l.twice))
}
