//go:build unix && !linux

package testcluster

import "syscall"

// procAttr puts the child in its own process group.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
