package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden/internal/childproc"
)

// manager is the manager binary running as its own process, so its CPU and heap are its own.
type manager struct {
	*childproc.Proc
	metrics string // base URL of --metrics-bind-address
	pprof   string // base URL of --pprof-bind-address
}

// startManager starts bin with its defaults (rates, concurrency, list TTL) and extra, and waits
// for /readyz.
func startManager(ctx context.Context, bin, kubeconfig, logPath string, extra []string) (*manager, error) {
	var addrs [3]string
	for i := range addrs {
		a, err := childproc.FreeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	args := []string{"--leader-elect=false", "--cluster-name=bench",
		"--metrics-bind-address=" + addrs[0], "--health-probe-bind-address=" + addrs[1], "--pprof-bind-address=" + addrs[2]}
	p, err := childproc.Start("manager", logPath, append(os.Environ(), "KUBECONFIG="+kubeconfig), bin, append(args, extra...)...)
	if err != nil {
		return nil, err
	}
	m := &manager{Proc: p, metrics: "http://" + addrs[0], pprof: "http://" + addrs[2]}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := m.Exited(); err != nil {
			return nil, err
		}
		if code, err := get(ctx, "http://"+addrs[1]+"/readyz", io.Discard); err == nil && code == http.StatusOK {
			return m, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(errors.New("the manager was not ready within 60s; log "+logPath), m.stop())
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), m.stop())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits; a manager that does not stop in 20 s is killed, and that is
// an error.
func (m *manager) stop() error {
	status, err := m.Stop(20 * time.Second)
	if err == nil && m.Killed() {
		err = errors.New("the manager " + status)
	}
	return err
}

// clockTick is USER_HZ, the unit of /proc's CPU times (100 on every Linux Go supports).
const clockTick = 100

// cpu is the manager's user and system CPU time so far (/proc/PID/stat utime + stime).
func (m *manager) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.Pid()))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after its ")" are fixed.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", m.Pid(), len(f))
	}
	var ticks int64
	for _, v := range f[11:13] { // utime, stime: fields 14 and 15
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTick, nil
}

// heap is the manager's in-use heap right after a collection: the heap profile endpoint with
// gc=1 collects first, then the metrics endpoint reports go_memstats_heap_inuse_bytes.
func (m *manager) heap(ctx context.Context) (uint64, error) {
	if code, err := get(ctx, m.pprof+"/debug/pprof/heap?gc=1", io.Discard); err != nil || code != http.StatusOK {
		return 0, fmt.Errorf("forcing a collection through pprof: status %d: %v", code, err)
	}
	v, err := m.metric(ctx, "go_memstats_heap_inuse_bytes", "")
	return uint64(v), err
}

// metric reads one sample of the manager's metrics: the first series of name whose labels
// contain label ("" for any).
func (m *manager) metric(ctx context.Context, name, label string) (float64, error) {
	all, err := m.series(ctx, name)
	if err != nil {
		return 0, err
	}
	for _, s := range all {
		if strings.Contains(s.labels, label) {
			return s.value, nil
		}
	}
	return 0, fmt.Errorf("metric %s{%s} not found", name, label)
}

// sample is one series of a metric: its labels as the exposition prints them, and its value.
type sample struct {
	labels string
	value  float64
}

// series reads every series of metric name from the manager's metrics, in the order served.
func (m *manager) series(ctx context.Context, name string) ([]sample, error) {
	// Only the one metric, uncompressed: the manager serves several series per subscription,
	// and gathering and gzipping all of them several times a second would be a good part of the
	// CPU this bench reports as the manager's (a third of it at 2,000 subscriptions, sampled
	// every 200 ms). Prometheus scrapes every 15 to 60 s.
	var body strings.Builder
	if code, err := get(ctx, m.metrics+"/metrics?name[]="+name, &body); err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: status %d: %v", code, err)
	}
	var out []sample
	sc := bufio.NewScanner(strings.NewReader(body.String()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		series, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		metric, labels, _ := strings.Cut(series, "{")
		if metric != name {
			continue
		}
		value, _, _ = strings.Cut(value, " ")
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s{%s: %w", name, labels, err)
		}
		out = append(out, sample{labels: labels, value: v})
	}
	return out, sc.Err()
}

// apiRequests are the manager's requests to the API server so far, by HTTP method
// (client-go's rest_client_requests_total).
func (m *manager) apiRequests(ctx context.Context) (map[string]int, error) {
	all, err := m.series(ctx, "rest_client_requests_total")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, s := range all {
		_, rest, ok := strings.Cut(s.labels, `method="`)
		if !ok {
			continue
		}
		method, _, _ := strings.Cut(rest, `"`)
		out[method] += int(s.value)
	}
	return out, nil
}

// sampleQueue samples the controller's workqueue depth every period until ctx ends; peak
// stops sampling and returns the largest depth seen.
func (m *manager) sampleQueue(ctx context.Context, period time.Duration) (peak func() int) {
	ctx, cancel := context.WithCancel(ctx)
	result := make(chan int, 1)
	go func() {
		best := 0
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			if v, err := m.metric(ctx, "workqueue_depth", `name="webhooksubscription"`); err == nil {
				best = max(best, int(v))
			}
			select {
			case <-ctx.Done():
				result <- best
				return
			case <-t.C:
			}
		}
	}()
	return func() int {
		cancel()
		return <-result
	}
}

// profile saves the pprof endpoint path to file.
func (m *manager) profile(ctx context.Context, path, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	code, err := fetch(ctx, m.pprof+path, f, time.Minute)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET %s: status %d", path, code)
	}
	return errors.Join(err, f.Close())
}

func get(ctx context.Context, url string, w io.Writer) (int, error) {
	return fetch(ctx, url, w, 10*time.Second)
}

func fetch(ctx context.Context, url string, w io.Writer, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return resp.StatusCode, err
}
