package gpudriver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// maxCommandOutput bounds the output quoted in an error.
const maxCommandOutput = 2048

// runInitCommand runs a class's initCommand with env added to the
// driver's environment, killing it and its children after timeout. A
// failure carries the command's output.
func runInitCommand(ctx context.Context, argv, env []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	// Its own process group, so that a timeout also ends what a shell
	// started (which would otherwise hold the output pipe open).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("timed out after %s", timeout)
	}
	return fmt.Errorf("class initCommand %q: %w; output: %q", argv, err, truncate(strings.TrimSpace(string(out))))
}

func truncate(s string) string {
	if len(s) <= maxCommandOutput {
		return s
	}
	return s[:maxCommandOutput] + "..."
}
