package childproc

import "syscall"

// sysProcAttr puts a child in its own process group and has Linux send it SIGTERM should the
// starter die without cleaning up (kill -9), so no manager or fake outlives its starter.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
