package testcluster

import "syscall"

// procAttr puts the child in its own process group and makes the kernel
// kill it if the test process dies, so a crashed run leaves no server.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
