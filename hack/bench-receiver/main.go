// Command bench-receiver measures the receiver's acknowledgement path on loopback and prints
// the figures side by side (it asserts nothing):
//
//	(i)   a no-op handler on the same HTTP stack (the ceiling of this machine),
//	(ii)  the receiver Handler with the SQLite store through a store.Batcher,
//	(iii) the receiver Handler with PostgreSQL (a scratch database, dropped at the end),
//	(iv)  the receiver Handler with Redis (a redis-server of its own with appendfsync always,
//	      as the tests start one; or the -redis server under a key prefix of the run's),
//
// each with 0 % and 30 % duplicate deliveries, PostgreSQL's single-row insert-and-commit rate
// at the same concurrency (store.InsertRateReference, the physical reference), Redis's rate of
// plain SET NX EX (what deduping with Redis costs without a queue), and the p99 ack latency of
// (ii)-(iv) under an open-loop load at half their maximum throughput.
//
// Usage: go run ./hack/bench-receiver -postgres "$(hack/postgres.sh)"
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// Targets (informational: printed as met / not met).
const (
	targetSQLiteVsNoop   = 0.5                   // (ii) ≥ 0.5× (i)
	targetSQLiteCPU      = 2.0                   // (ii)'s CPU per request ≤ 2.0× (i)'s
	targetPGVsInsertRate = 1.0                   // (iii) ≥ 1.0× the single-row insert rate
	targetP99AtHalfMax   = 25 * time.Millisecond // p99 ack at 50 % of max throughput
)

// noisy is the "other" CPU (cores) above which a phase is flagged as disturbed.
const noisy = 0.25

// Production settings of cmd/receiver that the measured path depends on.
const (
	maxBody      = 5 << 20
	claimTimeout = 10 * time.Second
	secret       = "whsec_bench0123456789abcdefghijklmnopqrstuvwxyz"
)

type config struct {
	postgres    string
	redis       string
	concurrency int
	pacedConns  int
	duration    time.Duration
	warmup      time.Duration
	payload     int
	dups        []int
	pace        float64
	poisson     bool
	raw         bool
	zapLog      bool
	only        map[string]bool
	cpuprofile  string
	committers  int
	pgConns     int
	// -backlog mode (backlog.go)
	backlog     int
	backlogSubs int
	costCalls   int
	drainPaces  []float64
	drainFor    time.Duration
}

func (c config) want(k string) bool { return len(c.only) == 0 || c.only[k] }

func main() {
	var cfg config
	var dups, only, client, arrivals, logger string
	flag.StringVar(&cfg.postgres, "postgres", "", "PostgreSQL DSN (a scratch database is created on its server and dropped); empty skips (iii) and the insert rate")
	flag.StringVar(&cfg.redis, "redis", "", "Redis DSN for (iv), used under a key prefix of the run's that is removed at the end; empty starts a redis-server of the bench's own (appendfsync always); none skips (iv)")
	flag.IntVar(&cfg.concurrency, "concurrency", 32, "concurrent keep-alive clients (closed loop) and the insert-rate connections")
	flag.IntVar(&cfg.pacedConns, "paced-conns", 64, "keep-alive connections serving the paced (open-loop) arrivals")
	flag.DurationVar(&cfg.duration, "duration", 4*time.Second, "measured time per phase")
	flag.DurationVar(&cfg.warmup, "warmup", time.Second, "unmeasured warm-up before each phase")
	flag.IntVar(&cfg.payload, "payload", 1024, "event body size in bytes (a Stripe payment_intent.succeeded event padded to it)")
	flag.StringVar(&dups, "dups", "0,30", "duplicate-delivery percentages to measure")
	flag.Float64Var(&cfg.pace, "pace", 0.5, "paced phase: arrival rate as a fraction of the measured maximum (0 skips)")
	flag.StringVar(&arrivals, "arrivals", "poisson", "paced arrivals: poisson or uniform")
	flag.StringVar(&client, "client", "raw", "load generator: raw (pre-built HTTP/1.1 requests, least client CPU) or nethttp (net/http Client)")
	flag.StringVar(&logger, "log", "zap", "receiver logger: zap (production JSON at info level, to io.Discard, as cmd/receiver) or discard (logr.Discard)")
	flag.StringVar(&only, "only", "", "comma-separated subset of noop,sqlite,postgres,redis (default all)")
	flag.StringVar(&cfg.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.IntVar(&cfg.committers, "committers", 0, "tuning experiment: store.BatcherOptions.Committers (0: the store's Writers(), as cmd/receiver)")
	flag.IntVar(&cfg.pgConns, "pg-conns", 0, "tuning experiment: PostgreSQL pool size, store.WithMaxConns (0: the store's default 8, as cmd/receiver)")
	flag.IntVar(&cfg.backlog, "backlog", 0, "backlog mode: measure SQLite and PostgreSQL empty and holding this many undelivered events, side by side (0: the ack-path benchmark)")
	flag.IntVar(&cfg.backlogSubs, "backlog-subs", 10, "backlog mode: subscriptions the backlog's events are spread over")
	flag.IntVar(&cfg.costCalls, "cost-calls", 200, "backlog mode: Lease calls timed per store (Sweep: a tenth of it)")
	var drainPaces string
	flag.StringVar(&drainPaces, "drain-pace", "200,1000", "backlog mode: deliveries per second the returning sink accepts; the backlog drains at each in turn")
	flag.DurationVar(&cfg.drainFor, "drain-for", 10*time.Second, "backlog mode: how long the backlog drains (0 skips the drain)")
	flag.Parse()

	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "bench-receiver: "+format+"\n", args...)
		os.Exit(2)
	}
	for f := range strings.SplitSeq(drainPaces, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			fail("-drain-pace: %q is not a positive rate", f)
		}
		cfg.drainPaces = append(cfg.drainPaces, v)
	}
	for f := range strings.SplitSeq(dups, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n >= 100 {
			fail("-dups: %q is not a percentage in [0, 100)", f)
		}
		cfg.dups = append(cfg.dups, n)
	}
	if only != "" {
		cfg.only = map[string]bool{}
		for k := range strings.SplitSeq(only, ",") {
			if k = strings.TrimSpace(k); k != "noop" && k != "sqlite" && k != "postgres" && k != "redis" {
				fail("-only: unknown %q", k)
			}
			cfg.only[k] = true
		}
	}
	switch {
	case cfg.concurrency < 1 || cfg.pacedConns < 1:
		fail("-concurrency and -paced-conns must be positive")
	case cfg.duration <= 0 || cfg.warmup < 0:
		fail("-duration must be positive, -warmup not negative")
	case cfg.payload < 1:
		fail("-payload must be positive")
	case cfg.backlog < 0 || cfg.backlogSubs < 1 || cfg.costCalls < 1 || cfg.drainFor < 0:
		fail("-backlog and -drain-for must not be negative, -backlog-subs and -cost-calls must be positive")
	case arrivals != "poisson" && arrivals != "uniform":
		fail("-arrivals: poisson or uniform")
	case client != "raw" && client != "nethttp":
		fail("-client: raw or nethttp")
	case logger != "zap" && logger != "discard":
		fail("-log: zap or discard")
	}
	cfg.poisson, cfg.raw, cfg.zapLog = arrivals == "poisson", client == "raw", logger == "zap"

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench-receiver:", err)
		stop()
		os.Exit(1) //nolint:gocritic // exitAfterDefer: stop ran on the line above

	}
}

// bench holds the results as they come.
type bench struct {
	cfg        config
	noop       map[int]*phaseResult // by dup %
	sqlite     map[int]*phaseResult
	pg         map[int]*phaseResult
	redis      map[int]*phaseResult
	sqlitePace *phaseResult
	pgPace     *phaseResult
	redisPace  *phaseResult
	setNXRate  float64
	setNXErr   error
	setNXCPU   cpuUsage
	redisCPU   func() time.Duration
	insertRate float64
	insertErr  error
	insertCPU  cpuUsage
	order      []*phaseResult
	notes      []string
	pgDatabase string // the scratch database, once created
	// paceBase, when set, is the req/s the paced phase's rate is a fraction of (-backlog: the
	// empty store's, so both columns get the same offered load); else the 0 % phase's.
	paceBase float64
}

//nolint:funlen // a benchmark's phases in the order the report prints them
func run(ctx context.Context, cfg config) error {
	began := time.Now()
	if cfg.cpuprofile != "" {
		f, err := os.Create(cfg.cpuprofile)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if cfg.backlog > 0 {
		return runBacklog(ctx, cfg, receiverLogger(cfg), os.Stdout)
	}
	b := &bench{cfg: cfg, noop: map[int]*phaseResult{}, sqlite: map[int]*phaseResult{}, pg: map[int]*phaseResult{}, redis: map[int]*phaseResult{}}
	var header []string
	add := func(format string, args ...any) { header = append(header, fmt.Sprintf(format, args...)) }

	model := cpuModel()
	if model != "" {
		model = ", " + model
	}
	add("machine: GOMAXPROCS=%d, NumCPU=%d, %s %s/%s%s; load average at start %s",
		runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH, model, loadAvg())
	add("NOTE: the load generator, the server (and PostgreSQL) share the same %d cores on a shared machine;", runtime.NumCPU())
	add("      every figure includes the client's CPU, so (i) is the ceiling of this box, not of the receiver.")
	clientKind := "raw HTTP/1.1 client (pre-built requests, one write each; responses parsed by net/http)"
	if !cfg.raw {
		clientKind = "net/http Client"
	}
	pacing := "Poisson"
	if !cfg.poisson {
		pacing = "evenly spaced"
	}
	add("load: %d keep-alive connections, closed loop, %s; warm-up %s + %s measured per phase; paced: %s arrivals at %.0f%% of max over %d connections",
		cfg.concurrency, clientKind, cfg.warmup, cfg.duration, pacing, cfg.pace*100, cfg.pacedConns)
	probe, err := newGenerator(secret, "127.0.0.1", cfg.payload, false)
	if err != nil {
		return err
	}
	add("requests: POST %s, %d-byte payment_intent.succeeded event, valid Stripe-Signature; fresh events pre-signed before each phase",
		hookPath, len(probe.tmpl))
	add("      (signatures kept off the Go heap so the server's GC runs as in production); duplicates (an acknowledged event re-sent)")
	add("      are re-signed with a fresh t at send time, %.1f µs of client CPU each, before the request's clock starts", signCost(probe))
	logKind := "zap production logger to io.Discard (as cmd/receiver at info level)"
	if !cfg.zapLog {
		logKind = "logr.Discard"
	}
	add("receiver: receiver.Handler.Mux() with cmd/receiver's http.Server timeouts, MaxBody %d, ClaimTimeout %s, Prometheus metrics, %s",
		maxBody, claimTimeout, logKind)

	logger := receiverLogger(cfg)

	// (i) the ceiling.
	if cfg.want("noop") {
		if err := b.target(ctx, "noop", "(i) no-op handler", noopMux(), nil, nil); err != nil {
			return err
		}
	}

	// (ii) SQLite.
	if cfg.want("sqlite") {
		dir, err := os.MkdirTemp("", "hookwarden-bench-*")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		ops, lat, err := fsyncRate(dir, time.Second)
		if err != nil {
			add("SQLite: fdatasync reference failed: %v", err)
		} else {
			comm := "1 committer (store.Writers())"
			if cfg.committers > 0 {
				comm = fmt.Sprintf("%d committers (-committers)", cfg.committers)
			}
			add("SQLite: temp file in %s (WAL, synchronous=FULL as store.OpenSQLite sets it), %s;", dir, comm)
			add("      disk reference: 1 writer, 4 KiB append + fdatasync = %.0f/s (%.2f ms each) — an upper bound on one committer's commits/s", ops, ms(lat))
		}
		st, err := store.OpenSQLite(filepath.Join(dir, "receiver.db"))
		if err != nil {
			return err
		}
		batcher := store.NewBatcher(st, store.BatcherOptions{CommitTimeout: claimTimeout, Committers: cfg.committers})
		err = b.target(ctx, "sqlite", "(ii) Handler+SQLite", newReceiver(batcher, logger).Mux(), st, batcher)
		batcher.Close()
		_ = st.Close()
		if err != nil {
			return err
		}
	}

	// (iii) PostgreSQL, and its physical reference.
	if cfg.want("postgres") {
		if cfg.postgres == "" {
			add("PostgreSQL: skipped (no -postgres DSN)")
		} else if err := b.postgres(ctx, logger, add); err != nil {
			return err
		}
	}

	// (iv) Redis, and its reference.
	if cfg.want("redis") {
		if cfg.redis == "none" {
			add("Redis: skipped (-redis none)")
		} else if err := b.runRedis(ctx, logger, add); err != nil {
			return err
		}
	}

	b.print(os.Stdout, header, time.Since(began))
	return nil
}

func (b *bench) postgres(ctx context.Context, logger logr.Logger, add func(string, ...any)) (err error) {
	cfg := b.cfg
	scratch, err := createScratchDB(ctx, cfg.postgres)
	if err != nil {
		return err
	}
	defer func() {
		if derr := scratch.drop(); derr != nil && err == nil {
			err = derr
		} else if derr == nil {
			b.notes = append(b.notes, "scratch database "+scratch.name+" dropped")
		}
	}()
	b.pgDatabase = scratch.name
	poolDesc, commDesc := "8 connections (default)", "store.Writers() (2 for PostgreSQL)"
	if cfg.pgConns > 0 {
		poolDesc = fmt.Sprintf("%d connections (-pg-conns)", cfg.pgConns)
	}
	if cfg.committers > 0 {
		commDesc = fmt.Sprintf("%d (-committers)", cfg.committers)
	}
	add("PostgreSQL: scratch database %s (%s); store pool %s, Batcher committers %s", scratch.name, scratch.settings(ctx), poolDesc, commDesc)

	progress("insert-rate reference: %d connections × BEGIN; INSERT 1 row; COMMIT for %s", cfg.concurrency, cfg.duration)
	// CPU is sampled inside the run (its backends exit at the end, taking their CPU time along).
	cpuDone := make(chan cpuUsage, 1)
	go func() {
		sleepUntil(ctx, time.Now().Add(300*time.Millisecond))
		cpu0 := readCPU(scratch.name)
		sleepUntil(ctx, time.Now().Add(cfg.duration-500*time.Millisecond))
		cpuDone <- readCPU(scratch.name).since(cpu0)
	}()
	b.insertRate, b.insertErr = store.InsertRateReference(ctx, scratch.dsn, cfg.concurrency, cfg.duration)
	b.insertCPU = <-cpuDone
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if b.insertErr != nil {
		progress("  failed: %v", b.insertErr)
	} else {
		progress("  %.0f commits/s", b.insertRate)
	}

	var opts []store.Option
	if cfg.pgConns > 0 {
		opts = append(opts, store.WithMaxConns(cfg.pgConns))
	}
	st, err := store.OpenPostgres(ctx, scratch.dsn, opts...)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	batcher := store.NewBatcher(st, store.BatcherOptions{CommitTimeout: claimTimeout, Committers: cfg.committers})
	defer batcher.Close()
	return b.target(ctx, "postgres", "(iii) Handler+PostgreSQL", newReceiver(batcher, logger).Mux(), st, batcher)
}

// target measures one server: a closed-loop phase per dup %, then (receiver only) the paced
// phase at cfg.pace of the 0 % maximum.
func (b *bench) target(ctx context.Context, key, label string, h http.Handler, st store.Store, batcher *store.Batcher) error {
	cfg := b.cfg
	addr, stopServer, err := startServer(h)
	if err != nil {
		return err
	}
	defer stopServer()
	gen, err := newGenerator(secret, addr, cfg.payload, cfg.raw)
	if err != nil {
		return err
	}
	results := map[string]map[int]*phaseResult{"noop": b.noop, "sqlite": b.sqlite, "postgres": b.pg, "redis": b.redis}[key]
	spec := phaseSpec{key: key, conns: cfg.concurrency, warmup: cfg.warmup, duration: cfg.duration, pgDatabase: b.pgDatabase}
	if key == "redis" {
		spec.storeCPU = b.redisCPU
	}
	if st != nil {
		spec.strict, spec.depth, spec.commits = true, st.Depth, batcher.Commits
	}
	ceiling := 20000.0
	if r := b.noop[0]; r != nil {
		ceiling = r.rps * 1.2
	}
	window := (cfg.warmup + cfg.duration + 500*time.Millisecond).Seconds()
	for _, dup := range cfg.dups {
		s := spec
		s.scenario, s.dupPct = label, dup
		var p *pool
		if st == nil {
			p = newPool(gen, 16384, true) // the no-op handler does not dedupe: reuse
		} else {
			est := ceiling
			if r := results[0]; r != nil {
				est = r.rps * 1.5
			}
			n := int(est*window*(1-float64(dup)/100)) + 4*cfg.concurrency
			p = newPool(gen, min(n, 400000), false)
		}
		progress("%s, %d%% duplicates: %d connections, %s + %s", label, dup, s.conns, s.warmup, s.duration)
		r, err := runPhase(ctx, cfg, addr, gen, p, s)
		p.close()
		if err != nil {
			return fmt.Errorf("%s %d%%: %w", label, dup, err)
		}
		results[dup] = r
		b.order = append(b.order, r)
		progress("  %.0f req/s, p50 %.2f ms, p99 %.2f ms%s", r.rps, ms(r.p50), ms(r.p99), checkSuffix(r))
	}
	if st == nil || cfg.pace <= 0 {
		return nil
	}
	base := results[0]
	if base == nil || base.rps <= 0 {
		b.notes = append(b.notes, label+": paced phase skipped (needs the 0 % dup measurement)")
		return nil
	}
	s := spec
	s.scenario, s.conns = fmt.Sprintf("%s, paced %.0f%%", label, cfg.pace*100), cfg.pacedConns
	s.rate, s.poisson = base.rps*cfg.pace, cfg.poisson
	if b.paceBase > 0 {
		s.rate = b.paceBase * cfg.pace
	}
	p := newPool(gen, int(s.rate*(cfg.warmup+cfg.duration).Seconds()*1.2)+1000, false)
	progress("%s: %.0f req/s offered over %d connections, %s + %s", s.scenario, s.rate, s.conns, s.warmup, s.duration)
	r, err := runPhase(ctx, cfg, addr, gen, p, s)
	p.close()
	if err != nil {
		return fmt.Errorf("%s: %w", s.scenario, err)
	}
	b.order = append(b.order, r)
	switch key {
	case "sqlite":
		b.sqlitePace = r
	case "postgres":
		b.pgPace = r
	case "redis":
		b.redisPace = r
	}
	progress("  %.0f req/s, p50 %.2f ms, p99 %.2f ms%s", r.rps, ms(r.p50), ms(r.p99), checkSuffix(r))
	return nil
}

func checkSuffix(r *phaseResult) string {
	if ok, why := r.checked(); !ok {
		return " — CHECK FAILED: " + why
	}
	return ""
}

// receiverLogger is the receiver's logger: cmd/receiver's zap at info level, to io.Discard, or
// none (-log discard).
func receiverLogger(cfg config) logr.Logger {
	if cfg.zapLog {
		return crzap.New(crzap.WriteTo(io.Discard))
	}
	return logr.Discard()
}

// newReceiver is the handler as cmd/receiver builds it, with one Stripe route.
func newReceiver(claims receiver.Claimer, log logr.Logger) *receiver.Handler {
	routes := receiver.NewRoutes()
	routes.Set(receiver.Route{
		Namespace: routeNamespace, Name: routeName, UID: "5f0c2a8e-3b7d-4e19-9a61-2d4b8c7e1f03",
		Provider: string(hookv1.ProviderStripe), Secrets: [][]byte{[]byte(secret)},
		Sinks: receiver.OneHTTPSink("http://127.0.0.1:9/unused"), MaxAttempts: receiver.DefaultMaxAttempts, DedupeWindow: receiver.DefaultDedupeWindow,
	})
	return &receiver.Handler{
		Routes: routes, Verifiers: map[string]providers.Verifier{string(hookv1.ProviderStripe): stripe.NewVerifier()},
		Claims: claims, MaxBody: maxBody, ClaimTimeout: claimTimeout,
		Metrics: receiver.NewMetrics(prometheus.NewRegistry()), Log: log, Now: time.Now,
	}
}

// noopMux is the ceiling: the same route pattern, the body read (bounded the same way), the
// same 202 JSON answer; no verification, no store.
func noopMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = r.PathValue("namespace"), r.PathValue("name")
		if _, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]string{"result": "accepted"})
	})
	return mux
}

// startServer serves h on a loopback port with cmd/receiver's server settings.
func startServer(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
	}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// signCost is the client's cost of re-signing one delivery (µs), and a check that the
// generator's signature is the one stripe.SignHeader makes.
func signCost(g *generator) float64 {
	body := g.body(nil, 1)
	t := time.Now()
	if got, want := string(g.appendSig(nil, body, t)), stripe.SignHeader(secret, t, body); got != want {
		panic("bench-receiver: generator signature " + got + " != stripe.SignHeader " + want)
	}
	var buf buffers
	const n = 2000
	for i := range n {
		_ = g.resign(&buf, int64(i))
	}
	return float64(time.Since(t).Microseconds()) / n
}

// fsyncRate measures one writer appending 4 KiB and calling fdatasync, for d.
func fsyncRate(dir string, d time.Duration) (perSec float64, each time.Duration, err error) {
	f, err := os.CreateTemp(dir, "fsync-*")
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = os.Remove(f.Name()); _ = f.Close() }()
	buf := make([]byte, 4096)
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		if _, err := f.Write(buf); err != nil {
			return 0, 0, err
		}
		if err := datasync(f); err != nil {
			return 0, 0, err
		}
		n++
	}
	el := time.Since(start)
	return float64(n) / el.Seconds(), el / time.Duration(n), nil
}

// print writes the report.
//
//nolint:funlen // the report's tables, one after another
func (b *bench) print(out io.Writer, header []string, took time.Duration) {
	cfg := b.cfg
	fmt.Fprintln(out)
	fmt.Fprintln(out, "== hookwarden receiver benchmark (loopback) ==")
	for _, h := range header {
		fmt.Fprintln(out, h)
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tdup %\treq/s\tmin–max ¼\tp50 ms\tp99 ms\t/(i)\t/ref\tclaims/commit\tCPU µs/req\tcores self/store/other, iowait\tchecks\t")
	insertRow := func() {
		v := fmt.Sprintf("%.0f", b.insertRate)
		if b.insertErr != nil {
			v = "error: " + b.insertErr.Error()
		}
		fmt.Fprintf(tw, "insert-rate ref (PG 1-row txn)\t0\t%s\t\t\t\t\t1.00×\t1.0\t%s\t%s\t%d conns\t\n",
			v, cpuPerReq(b.insertCPU, b.insertRate), cpuString(b.insertCPU), cfg.concurrency)
	}
	setNXRow := func() {
		v := fmt.Sprintf("%.0f", b.setNXRate)
		if b.setNXErr != nil {
			v = "error: " + b.setNXErr.Error()
		}
		fmt.Fprintf(tw, "Redis ref (SET NX EX 1 KiB)\t0\t%s\t\t\t\t\t1.00×\t\t%s\t%s\t%d conns\t\n",
			v, cpuPerReq(b.setNXCPU, b.setNXRate), cpuString(b.setNXCPU), cfg.concurrency)
	}
	insertPrinted := b.insertRate == 0 && b.insertErr == nil
	setNXPrinted := b.setNXRate == 0 && b.setNXErr == nil
	for _, r := range b.order {
		if r.spec.key == "postgres" && !insertPrinted {
			insertRow()
			insertPrinted = true
		}
		if r.spec.key == "redis" && !setNXPrinted {
			setNXRow()
			setNXPrinted = true
		}
		ratioNoop, ratioIns := "", ""
		if r.spec.rate == 0 {
			if n := b.noop[r.spec.dupPct]; n != nil && r.spec.key != "noop" && n.rps > 0 {
				ratioNoop = fmt.Sprintf("%.2f×", r.rps/n.rps)
			}
			if r.spec.key == "postgres" && b.insertRate > 0 {
				ratioIns = fmt.Sprintf("%.2f×", r.rps/b.insertRate)
			}
			if r.spec.key == "redis" && b.setNXRate > 0 {
				ratioIns = fmt.Sprintf("%.2f×", r.rps/b.setNXRate)
			}
		}
		perCommit := ""
		if r.commits > 0 {
			perCommit = fmt.Sprintf("%.1f", float64(r.requests-r.transport)/float64(r.commits))
		}
		check := "ok"
		if ok, _ := r.checked(); !ok {
			check = "FAILED"
		}
		if r.cpu.ok && r.cpu.other > noisy {
			check += " !"
		}
		rps := fmt.Sprintf("%.0f", r.rps)
		if r.spec.rate > 0 {
			rps = fmt.Sprintf("%.0f (paced)", r.rps)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f–%.0f\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.spec.scenario, r.spec.dupPct, rps,
			r.slotMin, r.slotMax, ms(r.p50), ms(r.p99), ratioNoop, ratioIns, perCommit, cpuPerReq(r.cpu, r.rps), cpuString(r.cpu), check)
	}
	if !insertPrinted {
		insertRow()
	}
	if !setNXPrinted {
		setNXRow()
	}
	_ = tw.Flush()
	fmt.Fprintln(out, "  req/s: answers completed in the measured window (min–max ¼: the slowest and fastest quarter of it); p50/p99: request")
	fmt.Fprintln(out, "  written → answer read (paced: from the scheduled arrival, so a backlog in the client counts). /(i): req/s over the no-op's at")
	fmt.Fprintln(out, "  the same dup %; /ref: over the store's reference (PostgreSQL: the single-row insert-and-commit rate; Redis: plain SET NX EX).")
	fmt.Fprintf(out, "  !: other tenants of the machine used more than %.2f cores during the phase: its req/s and latency are understated.\n", noisy)
	fmt.Fprintln(out, "  claims/commit: deliveries per ClaimBatch transaction. cores: CPUs' worth used in the measured window by this process (load")
	fmt.Fprintf(out, "  generator + server), by the store's server (PostgreSQL: this run's backends + the WAL writer etc.; Redis: its INFO cpu),\n")
	fmt.Fprintf(out, "  and by anything else (other tenants, kernel threads) out of %d; iowait: share of CPU time. CPU µs/req = (self + store) / req/s:\n", runtime.NumCPU())
	fmt.Fprintln(out, "  the cost of one request, load generator included, which other tenants' load does not distort the way it distorts req/s.")

	fmt.Fprintln(out)
	fmt.Fprintln(out, "checks (per phase: every request answered 2xx, fresh events 202 and duplicates 200, store Depth grew by the number of 202s):")
	for _, r := range b.order {
		ok, why := r.checked()
		var st []string
		for _, s := range slices.Sorted(maps.Keys(r.status)) {
			st = append(st, fmt.Sprintf("%d×%d", r.status[s], s))
		}
		line := fmt.Sprintf("  %-34s %2d%%: %d requests (%d duplicates): %s", r.spec.scenario, r.spec.dupPct, r.requests, r.dups, joinComma(st))
		if r.spec.depth != nil && r.depthErr == nil {
			line += fmt.Sprintf("; Depth %d → %d (+%d)", r.depthBefore, r.depthAfter, r.depthAfter-r.depthBefore)
		}
		if r.inline > 0 {
			line += fmt.Sprintf("; %d fresh events signed in the loop (pool exhausted)", r.inline)
		}
		if r.spec.rate > 0 {
			line += fmt.Sprintf("; offered %.0f req/s; p99 from arrival %.2f ms, from the pacer's hand-out %.2f ms, from the actual send %.2f ms; max from arrival %.1f ms; worst send lag %.2f ms (pacer itself: %d arrivals >1 ms late, worst %.2f ms)",
				r.offered, ms(r.p99), ms(r.handedP99), ms(r.svcP99), ms(r.max), ms(r.maxLag), r.dispatch.late, ms(r.dispatch.maxLate))
		}
		if ok {
			line += " — ok"
		} else {
			line += " — FAILED: " + why
		}
		fmt.Fprintln(out, line)
	}

	fmt.Fprintln(out)
	fmt.Fprintln(out, "targets (informational):")
	var lines [][2]string
	for _, dup := range cfg.dups {
		s, n := b.sqlite[dup], b.noop[dup]
		if s != nil && n != nil && n.rps > 0 {
			x := s.rps / n.rps
			lines = append(lines, [2]string{fmt.Sprintf("(ii) SQLite ≥ %.1f× (i), %d%% dups", targetSQLiteVsNoop, dup),
				fmt.Sprintf("%.2f× (%.0f vs %.0f req/s)  %s%s", x, s.rps, n.rps, met(x >= targetSQLiteVsNoop), noiseNote(s, n))})
		}
	}
	for _, dup := range cfg.dups {
		s, n := b.sqlite[dup], b.noop[dup]
		if s != nil && n != nil && s.rps > 0 && n.rps > 0 && n.cpu.self > 0 {
			sc, nc := cpuPer(s), cpuPer(n)
			x := sc / nc
			lines = append(lines, [2]string{fmt.Sprintf("(ii) SQLite CPU/req ≤ %.1f× (i)'s, %d%% dups", targetSQLiteCPU, dup),
				fmt.Sprintf("%.2f× (%.0f vs %.0f µs/req)  %s", x, sc, nc, met(x <= targetSQLiteCPU))})
		}
	}
	for _, dup := range cfg.dups {
		if p := b.pg[dup]; p != nil && b.insertRate > 0 {
			x := p.rps / b.insertRate
			lines = append(lines, [2]string{fmt.Sprintf("(iii) PostgreSQL ≥ %.1f× insert rate, %d%% dups", targetPGVsInsertRate, dup),
				fmt.Sprintf("%.2f× (%.0f vs %.0f/s)  %s%s", x, p.rps, b.insertRate, met(x >= targetPGVsInsertRate),
					noiseNote(p, &phaseResult{cpu: b.insertCPU}))})
		}
	}
	for _, dup := range cfg.dups {
		if r := b.redis[dup]; r != nil && b.setNXRate > 0 {
			x := r.rps / b.setNXRate
			lines = append(lines, [2]string{fmt.Sprintf("(iv) Redis vs plain SET NX EX, %d%% dups", dup),
				fmt.Sprintf("%.2f× (%.0f vs %.0f/s)  (no target: SET NX alone neither queues nor delivers)%s", x, r.rps, b.setNXRate,
					noiseNote(r, &phaseResult{cpu: b.setNXCPU}))})
		}
	}
	for _, pr := range []struct {
		name string
		r    *phaseResult
	}{{"(ii) SQLite", b.sqlitePace}, {"(iii) PostgreSQL", b.pgPace}, {"(iv) Redis", b.redisPace}} {
		if pr.r == nil {
			continue
		}
		ok, _ := pr.r.checked()
		verdict := met(pr.r.p99 < targetP99AtHalfMax && ok)
		if pr.r.p99 >= targetP99AtHalfMax && pr.r.handedP99 < targetP99AtHalfMax && ok {
			verdict += fmt.Sprintf(" (met without the pacer's own lateness: p99 %.2f ms)", ms(pr.r.handedP99))
		}
		lines = append(lines, [2]string{fmt.Sprintf("%s p99 ack < %s at %.0f%% of max", pr.name, targetP99AtHalfMax, cfg.pace*100),
			fmt.Sprintf("p99 %.2f ms from arrival at %.0f req/s (p50 %.2f ms)  %s%s", ms(pr.r.p99), pr.r.offered, ms(pr.r.p50), verdict, noiseNote(pr.r))})
	}
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, l := range lines {
		fmt.Fprintf(tw, "  %s\t%s\n", l[0], l[1])
	}
	_ = tw.Flush()
	fmt.Fprintln(out)
	for _, n := range b.notes {
		fmt.Fprintln(out, "note:", n)
	}
	fmt.Fprintf(out, "run took %s\n", took.Round(100*time.Millisecond))
}

// noiseNote names the disturbed phases among rs (other tenants' CPU above noisy).
func noiseNote(rs ...*phaseResult) string {
	worst := 0.0
	for _, r := range rs {
		if r != nil && r.cpu.ok {
			worst = max(worst, r.cpu.other)
		}
	}
	if worst <= noisy {
		return ""
	}
	return fmt.Sprintf("  (disturbed: other tenants used up to %.2f cores)", worst)
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT MET"
}

func cpuString(u cpuUsage) string {
	if !u.ok {
		return fmt.Sprintf("%.2f/?/?", u.self)
	}
	return fmt.Sprintf("%.2f/%.2f/%.2f %.0f%%", u.self, u.pg, u.other, u.iowait*100)
}

// cpuPerReq is the CPU (this process + this run's PostgreSQL) per request in µs: the cost of a
// request, which other tenants' load does not change the way it changes req/s.
func cpuPerReq(u cpuUsage, rps float64) string {
	if rps <= 0 || u.self+u.pg <= 0 {
		return ""
	}
	return fmt.Sprintf("%.0f", (u.self+u.pg)*1e6/rps)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench] "+format+"\n", args...)
}

func joinComma(s []string) string { return strings.Join(s, ", ") }
