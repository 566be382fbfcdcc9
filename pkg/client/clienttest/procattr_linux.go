package clienttest

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the child in its own process group, so a terminal's
// Ctrl-C reaches only the test, and has the kernel kill it if the test
// process dies.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
