//go:build !linux

package testproc

import "syscall"

// procAttr puts a child in its own process group, so that stopping it
// reaches everything it started and nothing else.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
