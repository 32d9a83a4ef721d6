// Package childproc runs the real binaries that the demo and the chaos test start and stop (the
// manager, the receiver, the fake providers): each with its log file, in its own process group,
// and stopped with SIGTERM, or killed, by whoever started it.
package childproc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a child process that its starter must stop.
type Proc struct {
	Name string
	Log  string // its stdout and stderr
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and err is set
	err  error         // cmd.Wait's result
	// killed: Stop had to kill it (written before done is waited on by Stop's caller).
	killed bool
}

// Start starts bin with args and env, appending its stdout and stderr to logPath. The child
// runs in its own process group, so a Ctrl-C in the terminal reaches only the starter, which
// then stops the children in order; on Linux it also gets SIGTERM should the starter die
// without cleaning up.
func Start(name, logPath string, env []string, bin string, args ...string) (*Proc, error) {
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
	p := &Proc{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited returns nil while the process runs, and otherwise an error saying how it ended, with
// the end of its log.
func (p *Proc) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited unexpectedly (%s); last lines of %s:\n%s", p.Name, p.ExitStatus(), p.Log, Tail(p.Log, 10))
	default:
		return nil
	}
}

// ExitStatus describes how the process ended; call it only after it has.
func (p *Proc) ExitStatus() string {
	if p.err == nil {
		return "exit status 0"
	}
	return p.err.Error()
}

// Kill sends SIGKILL (no chance to clean up: no lease released, no request finished) and waits
// for the process to be gone.
func (p *Proc) Kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s (pid %d): %w", p.Name, p.Pid(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) still running after SIGKILL", p.Name, p.Pid())
	}
}

// Stop sends SIGTERM and waits up to timeout, then kills. It says how the process ended.
func (p *Proc) Stop(timeout time.Duration) (string, error) {
	select {
	case <-p.done:
		return p.ExitStatus(), nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return "", fmt.Errorf("signalling %s: %w", p.Name, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.ExitStatus(), nil
	case <-t.C:
	}
	if err := p.Kill(); err != nil {
		return "", err
	}
	p.killed = true
	return fmt.Sprintf("did not exit within %s of SIGTERM; killed", timeout), nil
}

// Killed reports whether Stop had to kill the process. Call it after Stop.
func (p *Proc) Killed() bool { return p.killed }

// handedOut are the addresses FreeAddr returned in this process: the kernel may offer a port it
// just gave back (a test asking for a delivery and a probe address in a row got the same one).
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// FreeAddr returns a 127.0.0.1 address with a port that was free a moment ago and that it has
// not returned before in this process.
func FreeAddr() (string, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("finding a free port: %w", err)
		}
		addr := ln.Addr().String()
		if err := ln.Close(); err != nil {
			return "", err
		}
		if !handedOut.addrs[addr] {
			handedOut.addrs[addr] = true
			return addr, nil
		}
	}
	return "", errors.New("finding a free port: the kernel kept offering ports already handed out")
}

// AppendLine appends one line to a log file, creating it.
func AppendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	return errors.Join(err, f.Close())
}

// Tail returns the last n lines of a file, or a note why it cannot.
func Tail(path string, n int) string {
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
