package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDriverDemos runs the shapes of the example DRA driver's demos
// (kubernetes-sigs/dra-example-driver, demo/examples), written as the
// project's own manifests in testdata/demos, against the test driver
// built on the upstream library (test/upstreamdriver), one cluster for
// all of them. Each subtest asserts what that demo's README says happens.
func TestDriverDemos(t *testing.T) {
	t.Parallel()
	u := newUpstreamCluster(t, "demos-node")
	waitFor(t, "the driver's v1 slice", func() bool {
		return u.jsonpath(t, "{.items[*].spec.driver}", "resourceslices", "--field-selector", "spec.nodeName="+u.nodeName) == upstreamDriverName
	})
	u.applyYAML(t, upstreamClass)

	// initcontainer-shared-gpu: "Both the initContainer and main container
	// should show the same GPU ID".
	t.Run("initcontainer-shared-gpu", func(t *testing.T) {
		u.applyYAML(t, demoManifest(t, "initcontainer-shared-gpu"))
		init0 := devicesSeen(u.logLine(t, "initcontainer-shared-gpu", "pod0", "init0"))
		ctr0 := devicesSeen(u.logLine(t, "initcontainer-shared-gpu", "pod0", "ctr0"))
		if len(init0) != 1 || len(ctr0) != 1 || init0[0] != ctr0[0] {
			t.Fatalf("init0 sees %q, ctr0 sees %q; want the same one GPU", init0, ctr0)
		}
		waitFor(t, "pod0 Running", func() bool {
			return u.jsonpath(t, "{.status.phase}", "pod", "pod0", "-n", "initcontainer-shared-gpu") == "Running"
		})
		u.kubectl(t, "delete", "namespace", "initcontainer-shared-gpu", "--wait=true", "--timeout=60s")
	})
}

func demoManifest(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "demos", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
