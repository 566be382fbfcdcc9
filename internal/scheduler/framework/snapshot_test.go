package framework_test

import (
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	fw "allot.dev/allot/internal/scheduler/framework"
)

func TestNewSnapshot(t *testing.T) {
	snap := fw.NewSnapshot(
		[]*corev1.Node{makeNode("b").Obj(), makeNode("a").Obj()},
		[]*corev1.Pod{
			makePod("bound").Node("a").Req("cpu", "1").Obj(),
			makePod("done").Node("a").Req("cpu", "1").Phase(corev1.PodSucceeded).Obj(),
			makePod("pending").Req("cpu", "1").Obj(),
			makePod("ghost").Node("gone").Obj(),
		})
	if snap.Len() != 2 || snap.Nodes()[0].Name() != "a" {
		t.Fatalf("nodes not sorted: %v", snap.Nodes())
	}
	a, ok := snap.Get("a")
	if !ok || len(a.Pods()) != 1 || a.Requested().MilliCPU != 1000 || a.Requested().Pods != 1 {
		t.Fatalf("node a: %d pods, requested %+v", len(a.Pods()), a.Requested())
	}
	if _, ok := snap.Get("gone"); ok {
		t.Fatal("a node without a Node object is in the snapshot")
	}
}

func TestSnapshotIsImmutable(t *testing.T) {
	snap := fw.NewSnapshot([]*corev1.Node{makeNode("a").Obj(), makeNode("b").Obj()}, nil)
	pod := makePod("p").Node("a").Req("cpu", "2").Obj()
	with, err := snap.WithPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := snap.Get("a")
	added, _ := with.Get("a")
	if len(orig.Pods()) != 0 || len(added.Pods()) != 1 || added.Requested().MilliCPU != 2000 {
		t.Fatal("WithPod changed the original snapshot or lost the pod")
	}
	ob, _ := snap.Get("b")
	wb, _ := with.Get("b")
	if ob != wb {
		t.Fatal("WithPod should share unchanged nodes")
	}
	without := with.WithoutPod(pod)
	if a, _ := without.Get("a"); len(a.Pods()) != 0 {
		t.Fatal("WithoutPod kept the pod")
	}
	if a, _ := with.Get("a"); len(a.Pods()) != 1 {
		t.Fatal("WithoutPod changed its source")
	}
	if _, err := snap.WithPod(makePod("q").Node("zzz").Obj()); err == nil {
		t.Fatal("WithPod onto an unknown node succeeded")
	}
	ext := snap.WithExtension("dra", 42)
	if ext.Extension("dra") != 42 || snap.Extension("dra") != nil {
		t.Fatal("WithExtension leaked into the source")
	}
	only, ok := ext.Only("b")
	if !ok || only.Len() != 1 || only.Nodes()[0] != ob || only.Extension("dra") != 42 || ext.Len() != 2 {
		t.Fatal("Only did not keep just node b and the extensions")
	}
	if _, ok := ext.Only("zzz"); ok {
		t.Fatal("Only found an unknown node")
	}
}

func TestPodRequests(t *testing.T) {
	pod := makePod("p").Req("cpu", "1").Req("memory", "1Gi").Container("cpu", "500m").
		InitReq("cpu", "2").Limit("example.com/gpu", "2").Obj()
	r := fw.PodRequests(pod)
	if r.MilliCPU != 2000 || r.Memory != 1<<30 || r.Scalar["example.com/gpu"] != 2 || r.Pods != 1 {
		t.Fatalf("requests = %+v", r)
	}
	nz := fw.PodRequestsNonZero(makePod("q").Obj())
	if nz.MilliCPU != fw.DefaultMilliCPURequest || nz.Memory != fw.DefaultMemoryRequest {
		t.Fatalf("non-zero requests = %+v", nz)
	}
	if z := fw.PodRequests(makePod("q").Obj()); z.MilliCPU != 0 || z.Memory != 0 {
		t.Fatalf("requests of an empty pod = %+v", z)
	}
}

// NodeInfo keeps what every cycle asks of a node so that filters need
// not read the node object; SetNode and Clone keep it current.
func TestNodeInfoNodeFlags(t *testing.T) {
	ready := makeNode("a").Obj()
	ni := fw.NewNodeInfo(ready)
	if ni.Name() != "a" || !ni.Ready() || ni.Cordoned() {
		t.Fatalf("a ready node: name %q ready %v cordoned %v", ni.Name(), ni.Ready(), ni.Cordoned())
	}
	cordoned := makeNode("b").Unschedulable().Ready(corev1.ConditionFalse).Obj()
	ni.SetNode(cordoned)
	cp := ni.Clone()
	for what, x := range map[string]*fw.NodeInfo{"SetNode": ni, "Clone": cp} {
		if x.Name() != "b" || x.Ready() || !x.Cordoned() {
			t.Fatalf("%s of a cordoned node not ready: name %q ready %v cordoned %v", what, x.Name(), x.Ready(), x.Cordoned())
		}
	}
	if none := fw.NewNodeInfo(nil); none.Name() != "" || none.Ready() || none.Cordoned() {
		t.Fatal("a NodeInfo without a node has flags")
	}
}
