package e2e

import (
	"allot.dev/allot/test/internal/testproc"

	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Set by TestMain.
var (
	allotBin   string // the allot binary built from this module
	kubectlBin string // kubectl found on PATH
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "allot-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: create temp dir:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if allotBin, err = testproc.BuildAllot(tmp); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if kubectlBin, err = findKubectl(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

// findKubectl returns kubectl from PATH. When it is missing and the tests
// run as root, it installs Debian's kubectl package first.
func findKubectl() (string, error) {
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p, nil
	}
	if os.Geteuid() == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if err := aptInstall(ctx, "kubectl"); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
		}
		if p, err := exec.LookPath("kubectl"); err == nil {
			return p, nil
		}
	}
	return "", errors.New("kubectl not found on PATH: the e2e tests drive allot with kubectl " +
		"(Debian: apt-get install kubectl; CI installs it)")
}

// aptInstall installs a Debian package, updating the package lists once if
// the first attempt fails.
func aptInstall(ctx context.Context, pkg string) error {
	out, err := exec.CommandContext(ctx, "apt-get", "install", "-y", pkg).CombinedOutput()
	if err == nil {
		return nil
	}
	if upd, uerr := exec.CommandContext(ctx, "apt-get", "update").CombinedOutput(); uerr != nil {
		return fmt.Errorf("apt-get update: %w\n%s", uerr, upd)
	}
	if out, err = exec.CommandContext(ctx, "apt-get", "install", "-y", pkg).CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install -y %s: %w\n%s", pkg, err, out)
	}
	return nil
}
