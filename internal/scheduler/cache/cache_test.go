package cache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/schedtest"
)

var (
	makePod  = schedtest.MakePod
	makeNode = schedtest.MakeNode
)

func cpuOn(t *testing.T, c *Cache, node string) int64 {
	t.Helper()
	ni, ok := c.Snapshot().Get(node)
	if !ok {
		t.Fatalf("node %s not in snapshot", node)
	}
	return ni.Requested().MilliCPU
}

func TestAssumeConfirmForget(t *testing.T) {
	c := New()
	c.AddNode(makeNode("a").Alloc("cpu", "4").Obj())
	c.AddNode(makeNode("b").Alloc("cpu", "4").Obj())
	pod := makePod("p").Req("cpu", "1").Node("a").Obj()
	if err := c.AssumePod(pod); err != nil {
		t.Fatal(err)
	}
	if err := c.AssumePod(pod); err == nil {
		t.Fatal("assumed the same pod twice")
	}
	if !c.IsAssumed(pod.UID) || cpuOn(t, c, "a") != 1000 {
		t.Fatal("assumed pod not accounted")
	}
	// The informer shows it bound elsewhere (someone else won the race).
	bound := pod.DeepCopy()
	bound.Spec.NodeName = "b"
	c.AddPod(bound)
	if c.IsAssumed(pod.UID) || cpuOn(t, c, "a") != 0 || cpuOn(t, c, "b") != 1000 {
		t.Fatal("confirmation did not move the pod")
	}
	c.ForgetPod(pod)
	if cpuOn(t, c, "b") != 1000 {
		t.Fatal("ForgetPod removed a confirmed pod")
	}
	q := makePod("q").Req("cpu", "2").Node("a").Obj()
	if err := c.AssumePod(q); err != nil {
		t.Fatal(err)
	}
	c.ForgetPod(q)
	if cpuOn(t, c, "a") != 0 || c.IsAssumed(q.UID) {
		t.Fatal("ForgetPod left the assumed pod")
	}
	if err := c.AssumePod(makePod("nowhere").Obj()); err == nil {
		t.Fatal("assumed a pod without a node")
	}
}

func TestSnapshotReusesUnchangedNodes(t *testing.T) {
	c := New()
	c.AddNode(makeNode("a").Obj())
	c.AddNode(makeNode("b").Obj())
	s1 := c.Snapshot()
	c.AddPod(makePod("p").Node("a").Obj())
	s2 := c.Snapshot()
	a1, _ := s1.Get("a")
	a2, _ := s2.Get("a")
	b1, _ := s1.Get("b")
	b2, _ := s2.Get("b")
	if a1 == a2 || b1 != b2 {
		t.Fatal("snapshot should clone changed nodes and share the others")
	}
	if len(a1.Pods()) != 0 || len(a2.Pods()) != 1 {
		t.Fatal("an earlier snapshot saw a later change")
	}
}

func TestNodeRemovalKeepsPods(t *testing.T) {
	c := New()
	c.AddNode(makeNode("a").Obj())
	pod := makePod("p").Node("a").Req("cpu", "1").Obj()
	c.AddPod(pod)
	c.RemoveNode("a")
	if c.Snapshot().Len() != 0 {
		t.Fatal("removed node in snapshot")
	}
	c.AddNode(makeNode("a").Alloc("cpu", "2").Obj())
	if cpuOn(t, c, "a") != 1000 {
		t.Fatal("a node that came back lost its pods")
	}
	c.RemovePod(pod)
	c.RemoveNode("a")
	if n, p, _ := c.Counts(); n != 0 || p != 0 {
		t.Fatalf("cache holds %d nodes and %d pods", n, p)
	}
}

func TestPodBeforeNode(t *testing.T) {
	c := New()
	c.AddPod(makePod("p").Node("late").Req("cpu", "1").Obj())
	if c.Snapshot().Len() != 0 {
		t.Fatal("a node without its object is in the snapshot")
	}
	c.AddNode(makeNode("late").Alloc("cpu", "2").Obj())
	if cpuOn(t, c, "late") != 1000 {
		t.Fatal("pod that arrived before its node is not counted")
	}
	c.UpdatePod(makePod("p").Node("late").Req("cpu", "1").Phase(corev1.PodRunning).Obj())
	if cpuOn(t, c, "late") != 1000 {
		t.Fatal("update counted the pod twice or lost it")
	}
}

// The incremental snapshot (the last one with changed nodes replaced)
// must equal a snapshot rebuilt from scratch after every change.
func TestSnapshotMatchesRebuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := New()
	nodes := map[string]*corev1.Node{}
	pods := map[string]*corev1.Pod{} // by name; bound or assumed
	prev := c.Snapshot()
	prevDesc := describe(prev)
	for step := range 3000 {
		name := fmt.Sprintf("n%d", rng.IntN(12))
		pod := fmt.Sprintf("p%d", rng.IntN(40))
		switch op := rng.IntN(6); {
		case op == 0:
			n := makeNode(name).Alloc("cpu", strconv.Itoa(1+rng.IntN(8))).Obj()
			c.AddNode(n)
			nodes[name] = n
		case op == 1 && rng.IntN(4) == 0:
			c.RemoveNode(name)
			delete(nodes, name)
		case op == 2:
			if _, ok := pods[pod]; !ok {
				p := makePod(pod).Req("cpu", "1").Node(name).Obj()
				c.AddPod(p)
				pods[pod] = p
			}
		case op == 3:
			if _, ok := pods[pod]; !ok {
				p := makePod(pod).Req("cpu", "1").Node(name).Obj()
				if err := c.AssumePod(p); err != nil {
					t.Fatal(err)
				}
				pods[pod] = p
			}
		case op == 4:
			if p, ok := pods[pod]; ok {
				c.RemovePod(p)
				delete(pods, pod)
			}
		default:
			if p, ok := pods[pod]; ok && c.IsAssumed(p.UID) {
				c.ForgetPod(p)
				delete(pods, pod)
			}
		}
		if rng.IntN(3) > 0 {
			continue // several changes between two snapshots, too
		}
		got := c.Snapshot()
		var ns []*corev1.Node
		for _, n := range nodes {
			ns = append(ns, n)
		}
		var ps []*corev1.Pod
		for _, p := range pods {
			ps = append(ps, p)
		}
		want := framework.NewSnapshot(ns, ps)
		if g, w := describe(got), describe(want); g != w {
			t.Fatalf("step %d: snapshot\n%s\nwant\n%s", step, g, w)
		}
		if describe(prev) != prevDesc {
			t.Fatalf("step %d: an earlier snapshot changed", step)
		}
		prev, prevDesc = got, describe(got)
	}
}

// describe renders a snapshot's nodes, their allocatable CPU and pods.
func describe(s *framework.Snapshot) string {
	var b strings.Builder
	for _, ni := range s.Nodes() {
		var names []string
		for _, p := range ni.Pods() {
			names = append(names, p.Pod.Name)
		}
		slices.Sort(names)
		fmt.Fprintf(&b, "%s cpu=%d requested=%d pods=%v\n", ni.Name(), ni.Allocatable().MilliCPU, ni.Requested().MilliCPU, names)
	}
	return b.String()
}
