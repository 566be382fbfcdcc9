package hosts

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"allot.dev/allot/test/internal/testproc"
)

// allotFlag runs the suite against a given allot binary instead of one
// built from this module (a release, or another tree's build).
var allotFlag = flag.String("hosts.allot", "", "run this allot binary instead of building ./cmd/allot")

// Set by TestMain.
var (
	allotBin string // the allot binary built from this module
	// unavailable says why the suite cannot run here (not root, no ip
	// netns); empty when it can.
	unavailable string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if *defaultTimers {
		tm = defaults
	}
	if err := canMakeHosts(); err != nil {
		unavailable = err.Error()
		return m.Run() // every test skips, or fails under CI
	}
	if *allotFlag != "" {
		allotBin = *allotFlag
		return m.Run()
	}
	tmp, err := os.MkdirTemp("", "allot-hosts-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "hosts: create temp dir:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if allotBin, err = testproc.BuildAllot(tmp); err != nil {
		fmt.Fprintln(os.Stderr, "hosts:", err)
		return 1
	}
	return m.Run()
}

// canMakeHosts checks what the suite needs: root, ip netns, nsenter and
// runc.
func canMakeHosts() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces and runc containers need root")
	}
	for _, bin := range []string{"ip", "nsenter", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found: %w", bin, err)
		}
	}
	// A namespace of our own, made and deleted: listing works where
	// making one does not (no CAP_SYS_ADMIN, no /run/netns mount).
	probe := fmt.Sprintf("allot-hosts-probe-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add unavailable: %v: %s", err, out)
	}
	if out, err := exec.Command("ip", "netns", "del", probe).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns del %s: %v: %s", probe, err, out)
	}
	return nil
}

// requireHosts skips the test when the suite cannot run here; under CI
// (CI=true, which runs as root) it fails instead.
func requireHosts(t *testing.T) {
	t.Helper()
	if unavailable == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("separate-hosts suite: %s; CI runs as root with iproute2", unavailable)
	}
	t.Skipf("separate-hosts suite: %s", unavailable)
}
