package childproc

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestKillStopExited(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "sh.log")
	if err := AppendLine(log, "before"); err != nil {
		t.Fatal(err)
	}
	p, err := Start("sh", log, nil, "/bin/sh", "-c", "echo started; exec sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Exited(); err != nil {
		t.Fatalf("a running process reports %v", err)
	}
	// The log keeps what was there, then gets the child's output.
	for deadline := time.Now().Add(10 * time.Second); Tail(log, 2) != "before\nstarted"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("log tail %q, want before and started", Tail(log, 2))
		}
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Kill returned before the process was gone")
	}
	err = p.Exited()
	if err == nil || !strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("after SIGKILL Exited() = %v, want the kill named", err)
	}

	// Stop: SIGTERM is enough for sleep.
	q, err := Start("sleep", filepath.Join(dir, "sleep.log"), nil, "/bin/sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	status, err := q.Stop(10 * time.Second)
	if err != nil || status != "signal: terminated" {
		t.Errorf("Stop = %q, %v; want signal: terminated", status, err)
	}
	if status, err := q.Stop(time.Second); err != nil || status != "signal: terminated" {
		t.Errorf("a second Stop = %q, %v; want the same status", status, err)
	}
	if q.Killed() {
		t.Error("Killed() after a process that obeyed SIGTERM")
	}

	// Stop kills what ignores SIGTERM, and says so.
	r, err := Start("stubborn", filepath.Join(dir, "stubborn.log"), nil, "/bin/sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); Tail(r.Log, 1) != "ready"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stubborn shell never started")
		}
	}
	status, err = r.Stop(200 * time.Millisecond)
	if err != nil || !strings.HasSuffix(status, "killed") || !r.Killed() {
		t.Errorf("Stop of a process ignoring SIGTERM = %q, %v, Killed() = %v; want killed", status, err, r.Killed())
	}
}
