package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// proc is a child process the demo started and must stop: the manager, the receiver or the
// fake Stripe.
type proc struct {
	name string
	log  string // its stdout and stderr
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and err is set
	err  error         // cmd.Wait's result
}

// startProc starts bin with args and env, appending its stdout and stderr to logPath. The
// child runs in its own process group, so a Ctrl-C in the terminal reaches only the demo,
// which then stops the children in order.
func startProc(name, logPath string, env []string, bin string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited returns nil while the process runs, and otherwise an error saying how it ended, with
// the end of its log.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited unexpectedly (%s); last lines of %s:\n%s", p.name, p.exitStatus(), p.log, tail(p.log, 10))
	default:
		return nil
	}
}

// waitReady polls GET path on api until it answers 200, giving up at once if the process exits.
func (p *proc) waitReady(ctx context.Context, timeout time.Duration, api fakeAPI, path string) error {
	err := poll(ctx, timeout, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := p.exited(); err != nil {
			return false, fatal(err)
		}
		return api.ok(ctx, path)
	})
	if err != nil {
		return fmt.Errorf("waiting for the %s's GET %s: %w", p.name, path, err)
	}
	return nil
}

// exitStatus describes how the process ended; call it only after it has.
func (p *proc) exitStatus() string {
	if p.err == nil {
		return "exit status 0"
	}
	return p.err.Error()
}

// stop sends SIGTERM and waits up to timeout, then kills. It says how the process ended.
func (p *proc) stop(timeout time.Duration) (string, error) {
	select {
	case <-p.done:
		return p.exitStatus(), nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return "", fmt.Errorf("signalling %s: %w", p.name, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.exitStatus(), nil
	case <-t.C:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return "", fmt.Errorf("killing %s (pid %d): %w", p.name, p.pid(), err)
	}
	select {
	case <-p.done:
		return fmt.Sprintf("did not exit within %s of SIGTERM; killed", timeout), nil
	case <-time.After(5 * time.Second):
		return "", fmt.Errorf("%s (pid %d) still running after SIGKILL", p.name, p.pid())
	}
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// appendLine appends one line to a log file, creating it.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	return errors.Join(err, f.Close())
}

// tail returns the last n lines of a file, or a note why it cannot.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
