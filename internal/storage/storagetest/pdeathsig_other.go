//go:build !linux

package storagetest

import "os/exec"

func setPdeathsig(*exec.Cmd) {}
