package node

import (
	"testing"
	"time"

	"allot.dev/allot/internal/node/runtime/fake"
	"allot.dev/allot/internal/version"
	"allot.dev/allot/pkg/client"
)

// TestNodeReportsAllotVersion: the node status carries the one allot
// version, in the form the API server's /version gives it.
func TestNodeReportsAllotVersion(t *testing.T) {
	rt, _ := fake.New(fake.Options{})
	a, err := New(Config{NodeName: "n1", Client: &client.Client{}, Runtime: rt, MaxPods: 7})
	if err != nil {
		t.Fatal(err)
	}
	got := a.desiredNode(nil, time.Now()).Status.NodeInfo.KubeletVersion
	if want := version.Get().GitVersion; got != want {
		t.Errorf("kubeletVersion %q, want the API server's gitVersion %q", got, want)
	}
	if v, ok := version.FromGitVersion(got); !ok || v != version.Version() {
		t.Errorf("kubeletVersion %q carries allot version %q (%v), want %q", got, v, ok, version.Version())
	}
}
