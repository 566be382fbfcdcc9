package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"allot.dev/allot/pkg/client/clienttest"
	"allot.dev/allot/test/internal/testproc"
)

// Set by TestMain.
var (
	allotBin   string // the allot binary built from this module
	binDir     string // where test binaries go; removed after the run
	kubectlBin string // kubectl from PATH or _output/bin (clienttest.Kubectl)
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
	binDir = tmp
	if allotBin, err = testproc.BuildAllot(tmp); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	kctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	kubectlBin, err = clienttest.Kubectl(kctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}
