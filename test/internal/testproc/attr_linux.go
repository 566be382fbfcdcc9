package testproc

import "syscall"

// procAttr puts a child in its own process group, so that stopping it
// reaches everything it started and nothing else, and makes the kernel kill
// it if the test binary dies first.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
