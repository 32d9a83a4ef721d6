package main

import "syscall"

// sysProcAttr puts a child in its own process group and has Linux send it SIGTERM should the
// demo die without cleaning up (kill -9), so no manager or fake outlives it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
