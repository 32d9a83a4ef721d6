package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// proc is a child process the demo started and must stop: the manager or the fake Stripe.
type proc struct {
	name string
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
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited returns nil while the process runs, and an error saying how it ended otherwise.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited unexpectedly (%s)", p.name, p.exitStatus())
	default:
		return nil
	}
}

// exitStatus describes how the process ended; call it only after it has.
func (p *proc) exitStatus() string {
	if p.err == nil {
		return "exit status 0"
	}
	return p.err.Error()
}

// stop sends SIGTERM and waits up to timeout, then kills. forced reports the kill.
func (p *proc) stop(timeout time.Duration) (forced bool, err error) {
	select {
	case <-p.done:
		return false, nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return false, fmt.Errorf("signalling %s: %w", p.name, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return false, nil
	case <-t.C:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return true, fmt.Errorf("killing %s (pid %d): %w", p.name, p.pid(), err)
	}
	select {
	case <-p.done:
		return true, nil
	case <-time.After(5 * time.Second):
		return true, fmt.Errorf("%s (pid %d) still running after SIGKILL", p.name, p.pid())
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
