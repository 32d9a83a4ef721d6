package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of /proc's CPU times (100 on every Linux architecture Go
// supports).
const clockTick = 100

// cpuSample is the machine's CPU time (/proc/stat), this process's (getrusage) and the
// PostgreSQL server processes' (/proc/<pid>/stat of every process named postgres).
type cpuSample struct {
	at                  time.Time
	total, idle, iowait float64 // ticks, all CPUs
	self, pg            time.Duration
	ok                  bool
}

// cpuUsage is the CPU use between two samples, in CPUs' worth (cores) and fractions.
type cpuUsage struct {
	busy   float64 // cores busy, any process or the kernel
	self   float64 // cores used by this process (load generator + server)
	pg     float64 // cores used by PostgreSQL's processes
	other  float64 // busy - self - pg: other tenants of the machine, kernel threads
	iowait float64 // fraction of all CPUs idle waiting for I/O
	ok     bool
}

// readCPU samples the CPU times; the backends connected to pgDatabase (the run's scratch
// database, "" before it exists) count as this run's PostgreSQL.
func readCPU(pgDatabase string) cpuSample {
	s := cpuSample{at: time.Now()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	s.pg = postgresCPU(pgDatabase)
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return s
	}
	for i, v := range f[1:] {
		if i >= 8 { // guest time is already counted in user
			break
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return s
		}
		s.total += n
		switch i {
		case 3:
			s.idle = n
		case 4:
			s.iowait = n
		}
	}
	s.ok = true
	return s
}

// postgresCPU sums the CPU time of the PostgreSQL processes that work for this run: the
// backends connected to the scratch database and the server's auxiliary processes (WAL writer,
// checkpointer, ...). Backends of other databases (other users of a shared server) are left to
// "other". Ended backends are not counted.
func postgresCPU(db string) time.Duration {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || closing < open || string(b[open+1:closing]) != "postgres" {
			continue
		}
		if title, err := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline")); err == nil {
			t := string(title)
			backend := strings.Contains(t, "(") || strings.Contains(t, "[local]")
			if backend && (db == "" || !strings.Contains(t, " "+db+" ")) {
				continue
			}
		}
		f := strings.Fields(string(b[closing+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64) // utime (field 14)
		k, _ := strconv.ParseInt(f[12], 10, 64) // stime (field 15)
		ticks += u + k
	}
	return time.Duration(ticks) * time.Second / clockTick
}

// addStore counts d (a store server's CPU time) with PostgreSQL's.
func (s cpuSample) addStore(d time.Duration) cpuSample {
	s.pg += d
	return s
}

func (s cpuSample) since(s0 cpuSample) cpuUsage {
	u := cpuUsage{}
	wall := s.at.Sub(s0.at)
	if wall <= 0 {
		return u
	}
	u.self = float64(s.self-s0.self) / float64(wall)
	u.pg = max(float64(s.pg-s0.pg)/float64(wall), 0) // < 0 when backends exited in between
	if s.ok && s0.ok && s.total > s0.total {
		d := s.total - s0.total
		u.iowait = (s.iowait - s0.iowait) / d
		u.busy = (1 - (s.idle-s0.idle)/d - u.iowait) * float64(runtime.NumCPU())
		u.other = max(u.busy-u.self-u.pg, 0)
		u.ok = true
	}
	return u
}

// cpuModel is the processor's name, or "".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAvg is the load averages, or "".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// offHeap returns n bytes of anonymous memory outside the Go heap, and its release.
func offHeap(n int) ([]byte, func()) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n), func() {}
	}
	return b, func() { _ = syscall.Munmap(b) }
}

// datasync flushes f's data (what SQLite's unix VFS calls on commit).
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
