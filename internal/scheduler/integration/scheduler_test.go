package integration

import (
	"strings"
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/internal/scheduler/plugins/noderesources"
	"allot.dev/allot/internal/scheduler/schedtest"
)

var (
	makePod  = schedtest.MakePod
	makeNode = schedtest.MakeNode
)

func TestBindsToFeasibleNodes(t *testing.T) {
	e := newEnv(t, nil,
		makeNode("small").Alloc("cpu", "1").Alloc("memory", "2Gi").Obj(),
		makeNode("big").Alloc("cpu", "4").Alloc("memory", "8Gi").Obj(),
		makeNode("notready").Alloc("cpu", "64").Alloc("memory", "64Gi").Ready(corev1.ConditionFalse).Obj(),
		makeNode("cordoned").Alloc("cpu", "64").Alloc("memory", "64Gi").Unschedulable().Obj(),
		makeNode("gpu").Alloc("cpu", "64").Alloc("memory", "64Gi").Alloc("example.com/gpu", "2").
			Taint("gpu", "true", corev1.TaintEffectNoSchedule).Obj(),
	)
	e.createPod(makePod("needs-2-cpus").Req("cpu", "2"))
	e.createPod(makePod("needs-a-gpu").Req("example.com/gpu", "1").Limit("example.com/gpu", "1").
		Toleration("gpu", corev1.TolerationOpExists, "", corev1.TaintEffectNoSchedule))
	if node := e.waitBound("needs-2-cpus"); node != "big" {
		t.Errorf("needs-2-cpus bound to %s, want big (the only ready, schedulable, untainted node with 2 cpus)", node)
	}
	if node := e.waitBound("needs-a-gpu"); node != "gpu" {
		t.Errorf("needs-a-gpu bound to %s, want gpu", node)
	}
	p := e.getPod("needs-2-cpus")
	if c := scheduler.PodScheduledCondition(p); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("PodScheduled = %+v, want True", c)
	}
	e.eventually("a Scheduled event", func() bool {
		for _, ev := range e.events("needs-2-cpus") {
			if ev.Reason == scheduler.ReasonScheduled {
				return true
			}
		}
		return false
	})
}

func TestUnmatchedSelectorIsUnschedulable(t *testing.T) {
	e := newEnv(t, nil,
		makeNode("a").Alloc("cpu", "4").Label("disktype", "hdd").Obj(),
		makeNode("b").Alloc("cpu", "4").Obj(),
		makeNode("c").Alloc("cpu", "4").Obj(),
	)
	e.createPod(makePod("wants-ssd").NodeSelector("disktype", "ssd"))
	msg := e.waitUnschedulable("wants-ssd")
	want := "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
	if !strings.Contains(msg, "didn't match Pod's node affinity/selector") || !strings.HasPrefix(msg, "0/") {
		t.Fatalf("message = %q, want like %q", msg, want)
	}
	e.eventually("a FailedScheduling event", func() bool {
		for _, ev := range e.events("wants-ssd") {
			if ev.Reason == scheduler.ReasonFailedScheduling && ev.Type == corev1.EventTypeWarning &&
				strings.Contains(ev.Message, "node affinity/selector") {
				return true
			}
		}
		return false
	})
	// Labeling a node (an event the selector registered) schedules it.
	n, err := e.c.Nodes().Get(callCtx(t), e.node("b"))
	if err != nil {
		t.Fatal(err)
	}
	n.Labels = map[string]string{"disktype": "ssd"}
	if _, err := e.c.Nodes().Update(callCtx(t), n); err != nil {
		t.Fatal(err)
	}
	if node := e.waitBound("wants-ssd"); node != "b" {
		t.Fatalf("bound to %s, want b", node)
	}
}

func TestDeletionMakesRoom(t *testing.T) {
	e := newEnv(t, nil, makeNode("only").Alloc("cpu", "2").Alloc("memory", "4Gi").Obj())
	e.createPod(makePod("hog").Req("cpu", "2"))
	e.waitBound("hog")
	e.createPod(makePod("late").Req("cpu", "1"))
	if msg := e.waitUnschedulable("late"); !strings.Contains(msg, "Insufficient cpu") {
		t.Fatalf("message = %q", msg)
	}
	// The safety net is an hour: only the deletion event can move it.
	start := time.Now()
	e.deletePod("hog")
	if node := e.waitBound("late"); node != "only" {
		t.Fatalf("bound to %s", node)
	}
	t.Logf("bound %v after the deletion", time.Since(start))
}

func TestLeastAllocatedSpreads(t *testing.T) {
	e := newEnv(t, func(c *scheduler.Config) { c.ScoreStrategy = noderesources.LeastAllocated },
		makeNode("a").Alloc("cpu", "8").Alloc("memory", "16Gi").Obj(),
		makeNode("b").Alloc("cpu", "8").Alloc("memory", "16Gi").Obj(),
	)
	names := []string{"p0", "p1", "p2", "p3"}
	for _, n := range names {
		e.createPod(makePod(n).Req("cpu", "1").Req("memory", "1Gi"))
	}
	count := map[string]int{}
	for _, n := range names {
		count[e.waitBound(n)]++
	}
	if count["a"] != 2 || count["b"] != 2 {
		t.Fatalf("placement = %v, want 2 on each node", count)
	}
}

func TestMostAllocatedPacks(t *testing.T) {
	e := newEnv(t, func(c *scheduler.Config) { c.ScoreStrategy = noderesources.MostAllocated },
		makeNode("a").Alloc("cpu", "8").Alloc("memory", "16Gi").Obj(),
		makeNode("b").Alloc("cpu", "8").Alloc("memory", "16Gi").Obj(),
	)
	for _, n := range []string{"p0", "p1", "p2"} {
		e.createPod(makePod(n).Req("cpu", "1").Req("memory", "1Gi"))
		e.waitBound(n)
	}
	first := e.waitBound("p0")
	for _, n := range []string{"p1", "p2"} {
		if node := e.waitBound(n); node != first {
			t.Fatalf("%s on %s, want packed onto %s", n, node, first)
		}
	}
}

func TestNodeNameLeftAlone(t *testing.T) {
	e := newEnv(t, nil, makeNode("a").Alloc("cpu", "1").Obj())
	// Too big for the node: the scheduler would reject it, but it is not
	// the scheduler's to judge.
	e.createPod(makePod("by-hand").Req("cpu", "4").Node("a"))
	e.createPod(makePod("marker"))
	e.waitBound("marker") // the scheduler has run a cycle since
	time.Sleep(200 * time.Millisecond)
	p := e.getPod("by-hand")
	if p.Spec.NodeName != e.node("a") {
		t.Fatalf("node changed to %q", p.Spec.NodeName)
	}
	if c := scheduler.PodScheduledCondition(p); c != nil {
		t.Fatalf("the scheduler wrote a condition on a pod it does not own: %+v", c)
	}
	for _, ev := range e.events("by-hand") {
		if ev.Source.Component == e.name {
			t.Fatalf("the scheduler reported on a pod it does not own: %+v", ev)
		}
	}
}
