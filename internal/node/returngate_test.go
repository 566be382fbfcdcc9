package node_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	drapb "allot.dev/allot/api/dra/v1alpha1"
	"allot.dev/allot/internal/node/dra/dratest"
	"allot.dev/allot/internal/node/metrics"
)

// callLog is the order of a test driver's prepare and unprepare calls.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(what string, claims []*drapb.Claim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range claims {
		l.calls = append(l.calls, what+" "+c.GetName())
	}
}

func (l *callLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// TestReturningNodeStopsEvictedPodsFirst: a node away from the API server
// while its pod is evicted (deleted) and a new pod is bound to it stops the
// evicted pod and unprepares its claim before it prepares anything for
// the new pod: when its network comes back (reconnect), and when its
// agent starts again (restart).
func TestReturningNodeStopsEvictedPodsFirst(t *testing.T) {
	for _, how := range []string{"reconnect", "restart"} {
		t.Run(how, func(t *testing.T) { testReturningNode(t, how == "restart") })
	}
}

func testReturningNode(t *testing.T, restart bool) {
	needCluster(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	name := testName(t)
	ac, proxy := proxiedClient(t)
	cfg := agentConfig(t, ac, name, t.TempDir())
	registry := dratest.ShortTempDir(t)
	cfg.PluginsRegistryDir = registry
	cfg.DRAPrepareBackoffInitial, cfg.DRAPrepareBackoffMax = 100*time.Millisecond, 400*time.Millisecond
	cfg.Metrics = metrics.New(nil)
	stop := startAgent(t, cfg)
	waitNodeReady(t, c, name)
	plugin := dratest.Start(t, dratest.Options{Name: draDriver, RegistryDir: registry,
		Model: []byte(`{"partitionable":{"resourceInstances":[{"name":"gpu-0"}]}}`)})
	if st := plugin.Status(t); !st.PluginRegistered {
		t.Fatalf("plugin refused: %s", st.Error)
	}
	var log callLog
	// prepared is closed by the first prepare of the new pod's claim: an
	// unprepare in progress then logs after it, which is what the test
	// catches.
	prepared := make(chan struct{})
	var prepareOnce sync.Once
	plugin.OnPrepare(func(req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
		log.add("prepare", req.GetClaims())
		for _, cl := range req.GetClaims() {
			if cl.GetName() == "new-claim" {
				prepareOnce.Do(func() { close(prepared) })
			}
		}
		resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
		for _, cl := range req.GetClaims() {
			resp.Claims[cl.GetUid()] = &drapb.NodePrepareResourceResponse{CdiDevices: []string{dratest.DeviceFor(cl.GetName())}}
		}
		return resp, nil
	})
	plugin.OnUnprepare(func(req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
		// A slow driver: an agent that does not wait for it prepares the
		// new pod's claim meanwhile. Watched for 300 ms (the agent
		// prepares within milliseconds of starting the unprepare when it
		// does not wait), or until that prepare arrives.
		select {
		case <-prepared:
		case <-time.After(300 * time.Millisecond):
		}
		log.add("unprepare", req.GetClaims())
		resp := &drapb.NodeUnprepareResourcesResponse{Claims: map[string]*drapb.NodeUnprepareResourceResponse{}}
		for _, cl := range req.GetClaims() {
			resp.Claims[cl.GetUid()] = &drapb.NodeUnprepareResourceResponse{}
		}
		return resp, nil
	})
	local := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{name}}}}}}

	createClaim(t, c, ns, "old-claim")
	old := claimPod(ns, "old", name, "old-claim").create(t, c)
	allocate(t, c, ns, "old-claim", old, local)
	waitPod(t, c, ns, "old", "old Running", running)

	if restart {
		stop() // containers keep running for the next agent
	} else {
		proxy.cut()
		eventually(t, 30*time.Second, "a heartbeat failed", func() (bool, string) {
			var m dto.Metric
			if err := cfg.Metrics.Heartbeats.WithLabelValues("error").Write(&m); err != nil {
				t.Fatal(err)
			}
			return m.GetCounter().GetValue() > 0, ""
		})
	}
	// Meanwhile the control plane evicts the old pod, and a new pod with
	// the device is bound to the node.
	if err := c.Pods(ns).Delete(callContext(t), "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createClaim(t, c, ns, "new-claim")
	newPod := claimPod(ns, "new", name, "new-claim").create(t, c)
	allocate(t, c, ns, "new-claim", newPod, local)
	if restart {
		cfg.Metrics = metrics.New(nil)
		startAgent(t, cfg)
	} else {
		proxy.restore()
	}

	waitPod(t, c, ns, "new", "the new pod Running", running)
	waitPodGone(t, c, ns, "old")
	calls := log.snapshot()
	un, pre := slices.Index(calls, "unprepare old-claim"), slices.Index(calls, "prepare new-claim")
	if un < 0 || pre < 0 || un > pre {
		t.Fatalf("driver calls %q: the evicted pod's claim must be unprepared before the new pod's is prepared", calls)
	}
}
