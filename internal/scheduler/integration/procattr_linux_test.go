package integration

import (
	"os/exec"
	"syscall"
)

// setProcAttr gives a child its own process group and has the kernel kill
// it if the test process dies.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
