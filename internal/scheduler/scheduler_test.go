package scheduler

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/queue"
	"allot.dev/allot/internal/scheduler/schedtest"
)

var (
	makePod  = schedtest.MakePod
	makeNode = schedtest.MakeNode
)

func TestBindsToFeasibleNode(t *testing.T) {
	f := start(t, Config{})
	f.s.onNodeAdd(makeNode("small").Alloc("cpu", "1").Alloc("memory", "1Gi").Obj())
	f.s.onNodeAdd(makeNode("big").Alloc("cpu", "8").Alloc("memory", "8Gi").Obj())
	f.addPod(makePod("p").Req("cpu", "2").Obj())
	if node := f.waitNode(t, "p"); node != "big" {
		t.Fatalf("bound to %s, want big", node)
	}
	eventually(t, "scheduled event", func() bool {
		_, n := f.counts()
		return n == 1
	})
	if f.events[0] != "Scheduled: Successfully assigned default/p to big" {
		t.Fatalf("events = %v", f.events)
	}
	if got := counterValue(t, f.s.metrics.attempts.WithLabelValues(ResultScheduled)); got != 1 {
		t.Fatalf("scheduled attempts = %v", got)
	}
}

func TestIgnoresOtherPods(t *testing.T) {
	f := start(t, Config{})
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "4").Obj())
	f.addPod(makePod("other").SchedulerName("someone-else").Obj())
	f.addPod(makePod("done").Phase(corev1.PodSucceeded).Obj())
	f.addPod(makePod("deleting").Terminating().Obj())
	f.addPod(makePod("mine").Obj())
	f.waitNode(t, "mine")
	time.Sleep(20 * time.Millisecond)
	for _, p := range []string{"other", "done", "deleting"} {
		if n := f.pod(p).Spec.NodeName; n != "" {
			t.Errorf("pod %s was bound to %s", p, n)
		}
	}
}

func TestAssumedResourcesCountBeforeBinding(t *testing.T) {
	f := start(t, Config{})
	release := make(chan struct{})
	f.bindHook = func(ctx context.Context, pod string) error {
		if pod == "first" {
			<-release
		}
		return nil
	}
	f.s.onNodeAdd(makeNode("a").Alloc("cpu", "2").Obj())
	f.s.onNodeAdd(makeNode("b").Alloc("cpu", "2").Obj())
	f.addPod(makePod("first").Req("cpu", "2").Obj())
	// While "first" is still binding, "second" must not land on its node,
	// and must not wait for the slow write.
	f.addPod(makePod("second").Req("cpu", "2").Obj())
	second := f.waitNode(t, "second")
	close(release)
	first := f.waitNode(t, "first")
	if first == second {
		t.Fatalf("both pods on %s: the assumed pod was not counted", first)
	}
}

func TestBindFailureRetries(t *testing.T) {
	f := start(t, Config{})
	var calls atomic.Int32
	f.bindHook = func(context.Context, string) error {
		if calls.Add(1) == 1 {
			return errors.New("connection reset")
		}
		return nil
	}
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "2").Obj())
	f.addPod(makePod("p").Req("cpu", "2").Obj())
	f.waitNode(t, "p")
	if calls.Load() != 2 {
		t.Fatalf("bind calls = %d, want 2", calls.Load())
	}
	if _, _, assumed := f.s.cache.Counts(); assumed != 0 {
		t.Fatalf("%d pods still assumed", assumed)
	}
	if f.s.cache.Snapshot().Nodes()[0].Requested().MilliCPU != 2000 {
		t.Fatal("the failed attempt's assumption leaked or the pod is missing")
	}
}

func TestUnschedulableConditionAndEvent(t *testing.T) {
	f := start(t, Config{UnschedulableTimeout: 30 * time.Millisecond})
	for _, n := range []string{"a", "b", "c"} {
		f.s.onNodeAdd(makeNode(n).Alloc("cpu", "4").Obj())
	}
	f.addPod(makePod("p").NodeSelector("disktype", "ssd").Obj())
	want := "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
	eventually(t, "PodScheduled=False", func() bool {
		c := PodScheduledCondition(f.pod("p"))
		return c != nil && c.Reason == corev1.PodReasonUnschedulable && c.Message == want
	})
	// The safety net retries the pod; the message is the same, so the
	// condition is not written again, but each attempt has its event.
	eventually(t, "a retry", func() bool {
		_, n := f.counts()
		return n >= 3
	})
	if patches, _ := f.counts(); patches != 1 {
		t.Fatalf("condition patched %d times, want once", patches)
	}
	if !strings.HasPrefix(f.events[0], "FailedScheduling: "+want) {
		t.Fatalf("event = %q", f.events[0])
	}
	// A matching node arrives: the pod is scheduled (event-driven).
	f.s.onNodeAdd(makeNode("d").Alloc("cpu", "4").Label("disktype", "ssd").Obj())
	if node := f.waitNode(t, "p"); node != "d" {
		t.Fatalf("bound to %s", node)
	}
}

func TestDeletionFreesRoomEventDriven(t *testing.T) {
	f := start(t, Config{}) // safety net: one hour
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "2").Obj())
	f.addPod(makePod("hog").Req("cpu", "2").Obj())
	f.waitNode(t, "hog")
	f.addPod(makePod("p").Req("cpu", "1").Obj())
	eventually(t, "p to be parked", func() bool { return f.s.queue.Where("default/p") == queue.Unschedulable })
	// Unrelated changes do not wake it.
	f.s.onNodeUpdate(makeNode("n").Alloc("cpu", "2").Obj(), makeNode("n").Alloc("cpu", "2").Label("x", "y").Obj())
	if f.s.queue.Where("default/p") != queue.Unschedulable {
		t.Fatal("a label change moved the pod")
	}
	f.deletePod("hog")
	if node := f.waitNode(t, "p"); node != "n" {
		t.Fatalf("bound to %s", node)
	}
}

// A relist finds pod p replaced: the bound pod was deleted and a new,
// unbound pod of the same name created while the scheduler was not
// watching. The informer reports one update from the old pod to the new.
// The old pod's resources must leave its node and the new pod be
// scheduled; before the handlers split such updates, the new pod left the
// queue (the update looked like the old pod terminating) and the node
// stayed full.
func TestReplacedPodFromRelistIsScheduled(t *testing.T) {
	f := start(t, Config{})
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "2").Obj())
	f.addPod(makePod("p").Req("cpu", "2").Obj())
	f.waitNode(t, "p")
	old := f.pod("p")
	repl := makePod("p").Req("cpu", "2").Obj()
	repl.UID = "a-new-uid"
	f.mu.Lock()
	repl.ResourceVersion = f.nextRV()
	f.pods["p"] = repl
	f.mu.Unlock()
	f.s.podHandler().OnUpdate(old, repl)
	if node := f.waitNode(t, "p"); node != "n" {
		t.Fatalf("the new pod p was bound to %q", node)
	}
}

func TestWaitAndBindContributor(t *testing.T) {
	w := &waitPlugin{}
	f := start(t, Config{ExtraPlugins: []framework.Plugin{w}})
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "2").Obj())
	f.addPod(makePod("p").Obj())
	eventually(t, "p to wait", func() bool { return f.s.queue.Where("default/p") == queue.Unschedulable })
	if c := PodScheduledCondition(f.pod("p")); c == nil || c.Message != "waiting for claim gpu to be created" {
		t.Fatalf("condition = %+v", c)
	}
	w.mu.Lock()
	w.released = true
	w.mu.Unlock()
	// An unrelated event does not move it; the registered one does.
	f.s.queue.OnEvent(framework.ClusterEvent{Resource: framework.NodeResourceSlice, ActionType: framework.Add}, nil, nil)
	if f.s.queue.Where("default/p") != queue.Unschedulable {
		t.Fatal("an unregistered event moved the waiting pod")
	}
	f.s.queue.OnEvent(framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.Add}, nil, nil)
	f.waitNode(t, "p")
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.bindings["p"]; len(b.ResourceClaims) != 1 || b.ResourceClaims[0].Name != "p-gpu" {
		t.Fatalf("binding = %+v", b)
	}
}

func TestExplain(t *testing.T) {
	fw := start(t, Config{}).s.fw
	bound := makePod("p").Req("cpu", "3").NodeSelector("disktype", "ssd").Node("b").Obj()
	bound.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResourceClaimsAllocated, Status: corev1.ConditionFalse,
		Reason: ReasonUnallocatable, Message: "waiting for resource claim default/c to be created"}}
	snap := framework.NewSnapshot([]*corev1.Node{
		makeNode("a").Alloc("cpu", "4").Obj(),
		makeNode("b").Alloc("cpu", "4").Label("disktype", "ssd").Obj(),
	}, []*corev1.Pod{bound})
	pod := snap.Nodes()[1].Pods()[0].Pod
	d := Explain(context.Background(), fw, snap, pod)
	if d.Selected != "b" {
		t.Fatalf("a bound pod must not be counted against its own node: %s", d.Message())
	}
	var out strings.Builder
	if err := WriteExplanation(&out, pod, d); err != nil {
		t.Fatal(err)
	}
	t.Logf("explanation:\n%s", out.String())
	for _, want := range []string{
		"Condition:  ResourceClaimsAllocated=False Unallocatable: waiting for resource claim default/c to be created",
		"NODE", "RESULT", "PLUGIN", "REASON",
		"a     UnschedulableAndUnresolvable  NodeAffinity  node(s) didn't match Pod's node affinity/selector: nodeSelector disktype=ssd: node has no label disktype",
		"b     Selected",
		"NodeResourcesFit(x1)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explanation lacks %q:\n%s", want, out.String())
		}
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
