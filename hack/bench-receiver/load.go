package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// requestTimeout bounds one request (the receiver answers 503 after its 10s claim timeout).
const requestTimeout = 15 * time.Second

// doer sends one prepared delivery over its own keep-alive connection.
type doer interface {
	do(it *item) (status int, err error)
	close()
}

// rawConn is a minimal HTTP/1.1 keep-alive client: one write of the pre-built request, the
// response parsed by net/http. It keeps the load generator's CPU small, since it shares the
// cores with the server.
type rawConn struct {
	addr string
	c    net.Conn
	br   *bufio.Reader
}

func dialRaw(addr string) (*rawConn, error) {
	rc := &rawConn{addr: addr}
	return rc, rc.dial()
}

func (rc *rawConn) dial() error {
	c, err := net.DialTimeout("tcp", rc.addr, 5*time.Second)
	if err != nil {
		return err
	}
	rc.c = c
	if rc.br == nil {
		rc.br = bufio.NewReaderSize(c, 4096)
	} else {
		rc.br.Reset(c)
	}
	return nil
}

func (rc *rawConn) do(it *item) (int, error) {
	if rc.c == nil {
		if err := rc.dial(); err != nil {
			return 0, err
		}
	}
	_ = rc.c.SetDeadline(time.Now().Add(requestTimeout))
	if _, err := rc.c.Write(it.raw); err != nil {
		rc.close()
		return 0, err
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		rc.close()
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		rc.close()
		return 0, err
	}
	if resp.Close {
		rc.close()
	}
	return resp.StatusCode, nil
}

func (rc *rawConn) close() {
	if rc.c != nil {
		_ = rc.c.Close()
		rc.c = nil
	}
}

// httpDoer uses net/http's client (shared Transport, one idle connection per worker).
type httpDoer struct {
	client *http.Client
	url    string
}

func newHTTPClient(conns int) *http.Client {
	return &http.Client{Timeout: requestTimeout, Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
		DisableCompression: true, IdleConnTimeout: time.Minute,
	}}
}

func (h *httpDoer) do(it *item) (int, error) {
	req, err := http.NewRequest(http.MethodPost, h.url, bytes.NewReader(it.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Stripe-Signature", string(it.sig))
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, err
}

func (h *httpDoer) close() {}

// phaseSpec describes one measurement.
type phaseSpec struct {
	scenario string // row label
	key      string // noop, sqlite, postgres
	dupPct   int
	conns    int
	warmup   time.Duration
	duration time.Duration
	// paced (open loop) when rate > 0
	rate    float64
	poisson bool
	// strict: the receiver's answers are checked (fresh 202, duplicate 200)
	strict  bool
	depth   func(context.Context) (int, error)
	commits func() int64
	// pgDatabase is the scratch database whose backends count as PostgreSQL's CPU ("" before
	// the PostgreSQL phases).
	pgDatabase string
	// storeCPU, when set, is the CPU time the store's server has used so far (Redis: INFO cpu);
	// it counts in the store column with PostgreSQL's.
	storeCPU func() time.Duration
}

func sampleCPU(spec phaseSpec) cpuSample {
	s := readCPU(spec.pgDatabase)
	if spec.storeCPU != nil {
		s = s.addStore(spec.storeCPU())
	}
	return s
}

// phaseResult is what one measurement found.
type phaseResult struct {
	spec          phaseSpec
	rps           float64 // completions per second in the window (paced: offered rate below)
	offered       float64 // paced: arrivals per second scheduled in the window
	p50, p99, max time.Duration
	svcP99        time.Duration // paced: p99 from the request's actual send (excludes client queueing)
	handedP99     time.Duration // paced: p99 from the pacer handing the arrival out (excludes the pacer's own lateness)
	maxLag        time.Duration // paced: worst lateness of a send behind its scheduled arrival
	requests      int           // all requests, warm-up and tail included
	status        map[int]int
	transport     int
	firstErr      error
	wrongFresh    int // fresh event not answered 202 (receiver only)
	wrongDup      int // duplicate not answered 200 (receiver only)
	accepted      int // 202 answers
	dups          int // duplicate deliveries sent
	dropped       int // paced: arrivals never sent (past the hard stop)
	depthBefore   int
	depthAfter    int
	depthErr      error
	commits       int64
	inline        int64 // fresh events signed inside the loop (pool exhausted)
	cpu           cpuUsage
	dispatch      dispatchStats
	slotMin       float64 // req/s of the slowest and fastest quarter of the window
	slotMax       float64
}

// slots is the number of sub-windows the measured window is cut into, to show the spread.
const slots = 4

// checked reports whether every correctness check passed, and what failed.
func (r *phaseResult) checked() (bool, string) {
	var bad, non2xx []string
	n := 0
	for _, s := range slices.Sorted(maps.Keys(r.status)) {
		if s < 200 || s > 299 {
			n += r.status[s]
			non2xx = append(non2xx, fmt.Sprintf("%d×%d", r.status[s], s))
		}
	}
	if n > 0 {
		bad = append(bad, fmt.Sprintf("%d non-2xx (%s)", n, joinComma(non2xx)))
	}
	if r.transport > 0 {
		bad = append(bad, fmt.Sprintf("%d transport errors (first: %v)", r.transport, r.firstErr))
	}
	if r.wrongFresh > 0 {
		bad = append(bad, fmt.Sprintf("%d fresh events not 202", r.wrongFresh))
	}
	if r.wrongDup > 0 {
		bad = append(bad, fmt.Sprintf("%d duplicates not 200", r.wrongDup))
	}
	if r.dropped > 0 {
		bad = append(bad, fmt.Sprintf("%d arrivals dropped", r.dropped))
	}
	if r.spec.depth != nil {
		switch {
		case r.depthErr != nil:
			bad = append(bad, "depth: "+r.depthErr.Error())
		case r.depthAfter-r.depthBefore != r.accepted:
			bad = append(bad, fmt.Sprintf("depth +%d ≠ %d accepted", r.depthAfter-r.depthBefore, r.accepted))
		}
	}
	if len(bad) == 0 {
		return true, ""
	}
	return false, joinComma(bad)
}

// worker is one client connection and its tallies.
type worker struct {
	d       doer
	gen     *generator
	rng     *rand.Rand
	ring    []int64 // events this worker got acknowledged (duplicates are drawn from here)
	ringPos int
	buf     buffers
	res     phaseResult // only the counters and status are used
	lat     []time.Duration
	svc     []time.Duration
	handed  []time.Duration
	slot    [slots]int
}

// record counts a completion at t1 (closed loop) or an arrival scheduled at t1 (paced) in its
// sub-window.
func (w *worker) record(t1, warmEnd time.Time, duration time.Duration) {
	i := int(t1.Sub(warmEnd) * slots / duration)
	w.slot[min(max(i, 0), slots-1)]++
}

const ringSize = 1024

// next returns the delivery to send: a duplicate (an acknowledged event re-signed now, as a
// Stripe retry) with probability dup, else a fresh pre-signed event.
func (w *worker) next(dup float64, p *pool) (item, bool) {
	if dup > 0 && len(w.ring) > 0 && w.rng.Float64() < dup {
		return w.gen.resign(&w.buf, w.ring[w.rng.IntN(len(w.ring))]), true
	}
	return p.take(&w.buf), false
}

func (w *worker) account(it *item, dup, strict bool, status int, err error) {
	w.res.requests++
	if dup {
		w.res.dups++
	}
	if err != nil {
		w.res.transport++
		if w.res.firstErr == nil {
			w.res.firstErr = err
		}
		return
	}
	w.res.status[status]++
	if status == http.StatusAccepted {
		w.res.accepted++
	}
	if strict {
		switch {
		case dup && status != http.StatusOK:
			w.res.wrongDup++
		case !dup && status != http.StatusAccepted:
			w.res.wrongFresh++
		}
	}
	if !dup && status >= 200 && status <= 299 {
		if len(w.ring) < ringSize {
			w.ring = append(w.ring, it.seq)
		} else {
			w.ring[w.ringPos] = it.seq
			w.ringPos = (w.ringPos + 1) % ringSize
		}
	}
}

// runPhase runs one measurement against the server at addr: closed loop (each worker sends
// its next request when the previous one is answered) or, when spec.rate > 0, open loop
// (arrivals scheduled at spec.rate whatever the answers; latency counts from the scheduled
// arrival, so queueing in the client is charged, not hidden).
//
//nolint:funlen // closed and open loop share the clock and the tallies
func runPhase(ctx context.Context, cfg config, addr string, gen *generator, p *pool, spec phaseSpec) (*phaseResult, error) {
	res := &phaseResult{spec: spec, status: map[int]int{}}
	workers := make([]*worker, spec.conns)
	var client *http.Client
	if !cfg.raw {
		client = newHTTPClient(spec.conns)
		defer client.CloseIdleConnections()
	}
	for i := range workers {
		w := &worker{gen: gen, rng: rand.New(rand.NewPCG(uint64(i)+1, uint64(time.Now().UnixNano()))),
			res: phaseResult{status: map[int]int{}}}
		if cfg.raw {
			rc, err := dialRaw(addr)
			if err != nil {
				return nil, fmt.Errorf("dial %s: %w", addr, err)
			}
			w.d = rc
		} else {
			w.d = &httpDoer{client: client, url: "http://" + addr + hookPath}
		}
		workers[i] = w
	}
	defer func() {
		for _, w := range workers {
			w.d.close()
		}
	}()
	if spec.depth != nil {
		if res.depthBefore, res.depthErr = spec.depth(ctx); res.depthErr != nil {
			return nil, res.depthErr
		}
	}
	var commits0 int64
	if spec.commits != nil {
		commits0 = spec.commits()
	}

	dup := float64(spec.dupPct) / 100
	start := time.Now()
	warmEnd := start.Add(spec.warmup)
	end := warmEnd.Add(spec.duration)
	hardStop := end.Add(5 * time.Second) // paced: arrivals not sent by then are dropped
	var wg sync.WaitGroup
	var arrivals chan arrival
	if spec.rate > 0 {
		arrivals = make(chan arrival, 1<<16)
		go schedule(ctx, arrivals, start, end, spec.rate, spec.poisson, &res.dispatch)
	}
	for _, w := range workers {
		wg.Go(func() {
			if arrivals == nil {
				for ctx.Err() == nil && time.Now().Before(end) {
					it, isDup := w.next(dup, p)
					t0 := time.Now()
					status, err := w.d.do(&it)
					t1 := time.Now()
					w.account(&it, isDup, spec.strict, status, err)
					if !t1.Before(warmEnd) && !t1.After(end) {
						w.lat = append(w.lat, t1.Sub(t0))
						w.record(t1, warmEnd, spec.duration)
					}
				}
				return
			}
			for a := range arrivals {
				sched := a.at
				if ctx.Err() != nil || time.Now().After(hardStop) {
					w.res.dropped++
					continue
				}
				it, isDup := w.next(dup, p)
				t0 := time.Now()
				status, err := w.d.do(&it)
				t1 := time.Now()
				w.account(&it, isDup, spec.strict, status, err)
				if !sched.Before(warmEnd) && sched.Before(end) {
					w.lat = append(w.lat, t1.Sub(sched))
					w.handed = append(w.handed, t1.Sub(a.handed))
					w.svc = append(w.svc, t1.Sub(t0))
					w.res.maxLag = max(w.res.maxLag, t0.Sub(sched))
					w.record(sched, warmEnd, spec.duration)
				}
			}
		})
	}
	sleepUntil(ctx, warmEnd)
	cpu0 := sampleCPU(spec)
	sleepUntil(ctx, end)
	res.cpu = sampleCPU(spec).since(cpu0)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	var lat, svc, handed []time.Duration
	var slot [slots]int
	for _, w := range workers {
		for i, n := range w.slot {
			slot[i] += n
		}
		lat = append(lat, w.lat...)
		svc = append(svc, w.svc...)
		handed = append(handed, w.handed...)
		r := &w.res
		res.requests += r.requests
		res.dups += r.dups
		res.transport += r.transport
		if res.firstErr == nil {
			res.firstErr = r.firstErr
		}
		res.accepted += r.accepted
		res.wrongFresh += r.wrongFresh
		res.wrongDup += r.wrongDup
		res.dropped += r.dropped
		res.maxLag = max(res.maxLag, r.maxLag)
		for s, n := range r.status {
			res.status[s] += n
		}
	}
	res.slotMin, res.slotMax = math.Inf(1), 0
	for _, n := range slot {
		r := float64(n) / (spec.duration.Seconds() / slots)
		res.slotMin, res.slotMax = min(res.slotMin, r), max(res.slotMax, r)
	}
	res.rps = float64(len(lat)) / spec.duration.Seconds()
	if spec.rate > 0 {
		res.offered = res.rps // every arrival scheduled in the window is one sample (or dropped)
	}
	res.p50, res.p99, res.max = quantile(lat, 0.50), quantile(lat, 0.99), quantile(lat, 1)
	res.svcP99 = quantile(svc, 0.99)
	res.handedP99 = quantile(handed, 0.99)
	res.inline = p.inline.Load()
	if spec.commits != nil {
		res.commits = spec.commits() - commits0
	}
	if spec.depth != nil {
		res.depthAfter, res.depthErr = spec.depth(ctx)
	}
	return res, nil
}

// arrival is one paced request: when it was due and when the pacer handed it out.
type arrival struct{ at, handed time.Time }

// dispatchStats is how late the pacer itself handed out arrivals (CPU contention on the
// load generator's side; it is part of the measured latency).
type dispatchStats struct {
	maxLate time.Duration
	late    int // arrivals handed out more than 1 ms late
}

// schedule sends the arrival times of a Poisson (or evenly spaced) process at rate per second
// from start to end, each when it is due, then closes ch.
func schedule(ctx context.Context, ch chan<- arrival, start, end time.Time, rate float64, poisson bool, st *dispatchStats) {
	defer close(ch)
	rng := rand.New(rand.NewPCG(uint64(start.UnixNano()), 7))
	t := start
	for {
		gap := 1 / rate
		if poisson {
			gap = rng.ExpFloat64() / rate
		}
		t = t.Add(time.Duration(gap * float64(time.Second)))
		if !t.Before(end) || ctx.Err() != nil {
			return
		}
		if d := time.Until(t); d > 0 {
			time.Sleep(d)
		}
		now := time.Now()
		if late := now.Sub(t); late > time.Millisecond {
			st.late++
			st.maxLate = max(st.maxLate, late)
		}
		ch <- arrival{at: t, handed: now}
	}
}

func sleepUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// quantile returns the q-quantile (nearest rank) of d, sorting it.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	if !slices.IsSorted(d) {
		slices.Sort(d)
	}
	i := int(math.Ceil(q * float64(len(d))))
	return d[min(max(i-1, 0), len(d)-1)]
}
