//go:build !linux

package clienttest

import "os/exec"

func setProcAttr(cmd *exec.Cmd) {}
