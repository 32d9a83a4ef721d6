package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"

	"github.com/hookwarden/hookwarden/receiver/deliver"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// backlogSpan is how long the preloaded backlog took to arrive (its received_at spread).
const backlogSpan = 24 * time.Hour

// depthPoll is cmd/receiver's queue-depth poll period (pollDepth), run alongside the load.
const depthPoll = 5 * time.Second

// storeFigures is one store measured at one backlog size.
type storeFigures struct {
	kind     string
	backlog  int
	preload  time.Duration
	ack      map[int]*phaseResult // closed loop, by dup %
	paced    *phaseResult
	lease    callCost
	sweep    callCost
	depth    callCost
	plans    map[string][]string
	bytes    int64
	rows     int
	drains   []*drainResult // one per -drain-pace
	drainErr error
}

// callCost is the time of repeated calls of one store method.
type callCost struct {
	times []time.Duration
	rows  int // rows the calls returned or removed, in total
}

func (c callCost) mean() time.Duration {
	if len(c.times) == 0 {
		return 0
	}
	var sum time.Duration
	for _, t := range c.times {
		sum += t
	}
	return sum / time.Duration(len(c.times))
}

func (c callCost) p99() time.Duration { return quantile(slices.Clone(c.times), 0.99) }

// runBacklog measures each SQL store empty and holding cfg.backlog undelivered events, under
// the same load, and prints them side by side.
func runBacklog(ctx context.Context, cfg config, logger logr.Logger, out io.Writer) error {
	began := time.Now()
	kinds := []string{"sqlite"}
	if cfg.postgres != "" {
		kinds = append(kinds, "postgres")
	}
	var figs []*storeFigures
	for _, kind := range kinds {
		if !cfg.want(kind) {
			continue
		}
		paceBase := 0.0
		for _, n := range []int{0, cfg.backlog} {
			f, err := measureBacklog(ctx, cfg, logger, kind, n, paceBase)
			if err != nil {
				return fmt.Errorf("%s, backlog %d: %w", kind, n, err)
			}
			figs = append(figs, f)
			if r := f.ack[0]; r != nil {
				paceBase = r.rps // the backlog's paced phase gets the empty store's load
			}
		}
	}
	printBacklog(out, cfg, figs, time.Since(began))
	return nil
}

// measureBacklog opens a fresh store of kind, preloads n events, runs the ack load with
// cmd/receiver's depth poll alongside, then times Lease, Sweep and Depth, reads the plans and
// the size on disk, and (n > 0) drains the backlog for cfg.drainFor.
//
//nolint:funlen // a benchmark's steps in the order the report prints them
func measureBacklog(ctx context.Context, cfg config, logger logr.Logger, kind string, n int, paceBase float64) (f *storeFigures, err error) {
	f = &storeFigures{kind: kind, backlog: n, plans: map[string][]string{}}
	var st *store.SQL
	var size func(context.Context) (int64, error)
	var vacuum func(context.Context) error
	var pgDatabase string
	switch kind {
	case "sqlite":
		dir, err := os.MkdirTemp("", "hookwarden-backlog-*")
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		path := filepath.Join(dir, "receiver.db")
		if st, err = store.OpenSQLite(path); err != nil {
			return nil, err
		}
		size = func(context.Context) (int64, error) { return filesSize(path, path+"-wal") }
	case "postgres":
		scratch, err := createScratchDB(ctx, cfg.postgres)
		if err != nil {
			return nil, err
		}
		defer func() {
			if derr := scratch.drop(); derr != nil && err == nil {
				err = derr
			}
		}()
		pgDatabase = scratch.name
		db, err := sql.Open("pgx", scratch.dsn)
		if err != nil {
			return nil, err
		}
		defer func() { _ = db.Close() }()
		if st, err = store.OpenPostgres(ctx, scratch.dsn); err != nil {
			return nil, err
		}
		size = func(ctx context.Context) (int64, error) {
			var b int64
			err := db.QueryRowContext(ctx, `SELECT pg_total_relation_size('hw_events') + pg_total_relation_size('hw_sink_jobs')`).Scan(&b)
			return b, err
		}
		// What autovacuum does on its own after a bulk insert, done at once so that the
		// figures do not depend on when it wakes: statistics and the visibility map.
		vacuum = func(ctx context.Context) error {
			_, err := db.ExecContext(ctx, `VACUUM (ANALYZE) hw_events, hw_sink_jobs`)
			return err
		}
	default:
		return nil, fmt.Errorf("unknown store %q", kind)
	}
	defer func() { _ = st.Close() }()
	if n > 0 {
		if err := preloadTimed(ctx, f, st, cfg, n); err != nil {
			return nil, err
		}
		if vacuum != nil {
			if err := vacuum(ctx); err != nil {
				return nil, fmt.Errorf("vacuum: %w", err)
			}
		}
	}

	// The ack load, with the depth poll cmd/receiver runs.
	pollCtx, stopPoll := context.WithCancel(ctx)
	polled := make(chan callCost, 1)
	go func() {
		var c callCost
		t := time.NewTicker(depthPoll)
		defer t.Stop()
		for {
			select {
			case <-pollCtx.Done():
				polled <- c
				return
			case <-t.C:
			}
			t0 := time.Now()
			if _, err := st.Depth(pollCtx); err == nil {
				c.times = append(c.times, time.Since(t0))
			}
		}
	}()
	batcher := store.NewBatcher(st, store.BatcherOptions{CommitTimeout: claimTimeout})
	b := &bench{cfg: cfg, noop: map[int]*phaseResult{}, sqlite: map[int]*phaseResult{}, pg: map[int]*phaseResult{},
		redis: map[int]*phaseResult{}, pgDatabase: pgDatabase, paceBase: paceBase}
	label := fmt.Sprintf("%s, backlog %d", kind, n)
	err = b.target(ctx, kind, label, newReceiver(batcher, logger).Mux(), st, batcher)
	batcher.Close()
	stopPoll()
	f.depth = <-polled
	if err != nil {
		return nil, err
	}
	f.ack, f.paced = b.sqlite, b.sqlitePace
	if kind == "postgres" {
		f.ack, f.paced = b.pg, b.pgPace
	}

	if f.lease, err = leaseCost(ctx, st, cfg.costCalls); err != nil {
		return nil, err
	}
	if f.sweep, err = sweepCost(ctx, st, max(cfg.costCalls/10, 3)); err != nil {
		return nil, err
	}
	for _, op := range plannedOps {
		if f.plans[op], err = st.Explain(ctx, op, time.Now()); err != nil {
			return nil, err
		}
	}
	if f.rows, err = st.Depth(ctx); err != nil {
		return nil, err
	}
	if f.bytes, err = size(ctx); err != nil {
		return nil, err
	}
	for _, pace := range cfg.drainPaces {
		if n == 0 || cfg.drainFor == 0 {
			break
		}
		progress("%s: drain: sink back at %.0f/s, %d workers, for up to %s", label, pace, deliver.DefaultWorkers, cfg.drainFor)
		d, err := drain(ctx, st, drainOptions{workers: deliver.DefaultWorkers, pace: pace, window: cfg.drainFor})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			f.drainErr = err
			break
		}
		f.drains = append(f.drains, d)
	}
	return f, nil
}

func preloadTimed(ctx context.Context, f *storeFigures, st store.Store, cfg config, n int) error {
	g, err := newGenerator(secret, "127.0.0.1", cfg.payload, false)
	if err != nil {
		return err
	}
	progress("%s: preloading %d undelivered events over %d subscriptions (%d per ClaimBatch)", f.kind, n, cfg.backlogSubs, preloadBatch)
	t0 := time.Now()
	if err := preload(ctx, st, n, cfg.backlogSubs, g.body(nil, 0), time.Now(), backlogSpan); err != nil {
		return err
	}
	f.preload = time.Since(t0)
	progress("  %s (%.0f events/s)", f.preload.Round(100*time.Millisecond), float64(n)/f.preload.Seconds())
	return nil
}

// leaseCost times calls Lease calls of 8 jobs (the pool's default workers), each leased job then
// retried with the pool's default backoff, as with the sink down.
func leaseCost(ctx context.Context, st store.Store, calls int) (callCost, error) {
	var c callCost
	var bo deliver.Backoff
	for range calls {
		now := time.Now()
		jobs, err := st.Lease(ctx, deliver.DefaultWorkers, now, deliver.DefaultLease)
		c.times = append(c.times, time.Since(now))
		if err != nil {
			return c, err
		}
		c.rows += len(jobs)
		for _, j := range jobs {
			if err := st.Retry(ctx, j, now.Add(bo.Delay(j.Attempt, 0)), "sink down (bench)"); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

// sweepCost times Sweep with the cutoff at now: every event qualifies by age, none by state
// (nothing was delivered), so the sweep must find that out without reading the backlog.
func sweepCost(ctx context.Context, st store.Store, calls int) (callCost, error) {
	var c callCost
	for range calls {
		t0 := time.Now()
		n, err := st.Sweep(ctx, time.Now())
		c.times = append(c.times, time.Since(t0))
		if err != nil {
			return c, err
		}
		c.rows += n
	}
	return c, nil
}

func filesSize(paths ...string) (int64, error) {
	var total int64
	for _, p := range paths {
		fi, err := os.Stat(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return 0, err
		}
		total += fi.Size()
	}
	return total, nil
}

// printBacklog writes one table per store: empty and backlog side by side, and their ratio.
func printBacklog(out io.Writer, cfg config, figs []*storeFigures, took time.Duration) {
	fmt.Fprintln(out)
	fmt.Fprintf(out, "== hookwarden receiver under a backlog (loopback): each store empty, then holding %d undelivered events ==\n", cfg.backlog)
	fmt.Fprintf(out, "backlog: preloaded through the store's ClaimBatch (%d events per transaction), %d subscriptions, arrived over %s, %d-byte payloads;\n",
		preloadBatch, cfg.backlogSubs, backlogSpan, cfg.payload)
	fmt.Fprintln(out, "         PostgreSQL then VACUUM (ANALYZE) hw_events, as autovacuum would. Load: bench-receiver's phases on bench/orders,")
	fmt.Fprintf(out, "         with cmd/receiver's Depth poll every %s alongside; lease: %d Lease(8) calls, each job retried with the default backoff;\n", depthPoll, cfg.costCalls)
	fmt.Fprintln(out, "         sweep: Sweep(cutoff = now), nothing delivered so nothing to remove.")
	byKind := map[string][]*storeFigures{}
	var kinds []string
	for _, f := range figs {
		if byKind[f.kind] == nil {
			kinds = append(kinds, f.kind)
		}
		byKind[f.kind] = append(byKind[f.kind], f)
	}
	for _, kind := range kinds {
		fs := byKind[kind]
		if len(fs) != 2 {
			continue
		}
		e, bl := fs[0], fs[1]
		fmt.Fprintln(out)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%s\tempty\tbacklog %d\tbacklog/empty\ttarget\t\n", kind, cfg.backlog)
		row := func(name string, ev, bv float64, format, target string) {
			ratio := ""
			if ev > 0 {
				ratio = fmt.Sprintf("%.2f×", bv/ev)
			}
			fmt.Fprintf(tw, "%s\t"+format+"\t"+format+"\t%s\t%s\t\n", name, ev, bv, ratio, target)
		}
		for _, dup := range cfg.dups {
			if e.ack[dup] != nil && bl.ack[dup] != nil {
				row(fmt.Sprintf("ack req/s, %d%% dups", dup), e.ack[dup].rps, bl.ack[dup].rps, "%.0f", "≥ 0.83× (1/1.2)")
				row(fmt.Sprintf("ack p99 ms, closed loop, %d%% dups", dup), ms(e.ack[dup].p99), ms(bl.ack[dup].p99), "%.2f", "")
				row(fmt.Sprintf("CPU µs/req, %d%% dups", dup), cpuPer(e.ack[dup]), cpuPer(bl.ack[dup]), "%.0f", "")
			}
		}
		if e.paced != nil && bl.paced != nil {
			row(fmt.Sprintf("ack p99 ms, paced at %.0f%% of empty max", cfg.pace*100), ms(e.paced.p99), ms(bl.paced.p99), "%.2f", "≤ 1.2×")
			row("  offered req/s", e.paced.offered, bl.paced.offered, "%.0f", "")
		}
		for _, dup := range cfg.dups {
			if r, s := e.ack[dup], bl.ack[dup]; r != nil && s != nil && r.cpu.ok && s.cpu.ok {
				row(fmt.Sprintf("  other tenants' cores, closed loop %d%%", dup), r.cpu.other, s.cpu.other, "%.2f", "")
			}
		}
		if e.paced != nil && bl.paced != nil && e.paced.cpu.ok && bl.paced.cpu.ok {
			row("  other tenants' cores, paced", e.paced.cpu.other, bl.paced.cpu.other, "%.2f", "")
		}
		row("lease µs per Lease(8), mean", us(e.lease.mean()), us(bl.lease.mean()), "%.0f", "flat")
		row("lease µs, p99", us(e.lease.p99()), us(bl.lease.p99()), "%.0f", "")
		row("sweep µs per Sweep, mean", us(e.sweep.mean()), us(bl.sweep.mean()), "%.0f", "flat")
		row("Depth ms (cmd/receiver polls it every 5 s), mean", ms(e.depth.mean()), ms(bl.depth.mean()), "%.2f", "")
		row("events stored at the end", float64(e.rows), float64(bl.rows), "%.0f", "")
		row("disk bytes per event", float64(e.bytes)/float64(max(e.rows, 1)), float64(bl.bytes)/float64(max(bl.rows, 1)), "%.0f", "")
		_ = tw.Flush()
		for _, f := range fs {
			for _, r := range f.order() {
				if ok, why := r.checked(); !ok {
					fmt.Fprintf(out, "  CHECK FAILED %s %d%%: %s\n", r.spec.scenario, r.spec.dupPct, why)
				}
			}
		}
		if bl.preload > 0 {
			fmt.Fprintf(out, "  preload: %d events in %s (%.0f/s); lease calls took %d + %d jobs; sweeps removed %d + %d events\n",
				bl.backlog, bl.preload.Round(100*time.Millisecond), float64(bl.backlog)/bl.preload.Seconds(), e.lease.rows, bl.lease.rows, e.sweep.rows, bl.sweep.rows)
		}
		for _, op := range plannedOps {
			fmt.Fprintf(out, "  plan of %s with the backlog:\n", op)
			for _, l := range bl.plans[op] {
				fmt.Fprintf(out, "    %s\n", l)
			}
		}
		printDrain(out, bl)
	}
	fmt.Fprintf(out, "\nrun took %s\n", took.Round(100*time.Millisecond))
}

func printDrain(out io.Writer, f *storeFigures) {
	for _, d := range f.drains {
		printDrainAt(out, d)
	}
	if f.drainErr != nil {
		fmt.Fprintf(out, "  drain: FAILED: %v\n", f.drainErr)
	}
}

func printDrainAt(out io.Writer, d *drainResult) {
	rate := float64(d.accepted) / d.window.Seconds()
	full := d.perSecond
	if len(full) > 1 {
		full = full[:len(full)-1] // the last second is cut short
	}
	lo, hi := 0, 0
	if len(full) > 0 {
		lo, hi = slices.Min(full), slices.Max(full)
	}
	fmt.Fprintf(out, "  drain (sink back, accepting %.0f/s, %d workers, %s): %d delivered = %.0f/s (%.2f× the sink's pace); %d attempts (%.2f per delivery);\n",
		d.pace, d.workers, d.window.Round(100*time.Millisecond), d.accepted, rate, rate/d.pace, d.attempts, float64(d.attempts)/float64(max(d.accepted, 1)))
	fmt.Fprintf(out, "    attempts per whole second %d–%d; at most %d attempts at the sink at once (workers: %d); %d backlog events out of arrival order\n",
		lo, hi, d.maxInflight, d.workers, d.totalOutOfOrder())
	fmt.Fprintf(out, "    within their subscription (worst %d events behind), %d delivered twice; queue %d → %d", d.maxBehind, d.redelivered, d.depthBefore, d.left)
	if d.left > 0 && rate > 0 {
		fmt.Fprintf(out, " (the rest drains in ~%s at this pace)", (time.Duration(float64(d.left)/rate) * time.Second).Round(time.Second))
	}
	fmt.Fprintln(out)
	var secs []string
	for _, n := range d.perSecond {
		secs = append(secs, fmt.Sprint(n))
	}
	fmt.Fprintf(out, "    attempts per second: %s\n", strings.Join(secs, " "))
}

func (f *storeFigures) order() []*phaseResult {
	var rs []*phaseResult
	for _, r := range f.ack {
		rs = append(rs, r)
	}
	if f.paced != nil {
		rs = append(rs, f.paced)
	}
	return rs
}

func cpuPer(r *phaseResult) float64 {
	if r.rps <= 0 {
		return 0
	}
	return (r.cpu.self + r.cpu.pg) * 1e6 / r.rps
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// plannedOps are the statements whose plan the backlog phase shows.
var plannedOps = []string{store.PlanLease, store.PlanSweep, store.PlanDepth, store.PlanSinkDepths}
