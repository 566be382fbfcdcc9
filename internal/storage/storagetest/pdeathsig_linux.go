package storagetest

import (
	"os/exec"
	"syscall"
)

// setPdeathsig makes the kernel kill the child if the test process dies,
// so a crashed test run leaves no etcd behind.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
