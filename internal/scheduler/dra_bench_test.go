package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/cache"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/internal/scheduler/schedtest"
)

// The shape of bench/'s BenchmarkDRA: 500 nodes with 10 devices each,
// one single-device claim per pod.
const (
	draBenchDevices = 10
	draBenchDriver  = "gpu.example.com"
	draBenchPods    = benchNodes * draBenchDevices
)

// draBenchLists are the DRA objects with claims claim-0 ... claim-(n-1),
// none allocated.
func draBenchLists(nodes []*corev1.Node, n int) dynamicresources.Lists {
	l := dynamicresources.Lists{
		Classes: []*resourceapi.ResourceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu", UID: "uid-gpu", ResourceVersion: "2"}, DriverName: draBenchDriver}},
		ClaimParameters: []*resourceapi.ResourceClaimParameters{{
			ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: "default", UID: "uid-one", ResourceVersion: "3"},
			Requests: []resourceapi.ResourceRequest{{DriverName: draBenchDriver, ResourceRequestModel: resourceapi.ResourceRequestModel{
				Partitionable: &resourceapi.PartitionableResourceRequests{Required: []resourceapi.PartitionableResourceRequest{
					{Name: "gpu", Selector: `strings["model"] == "A100" && quantities["memory"] >= "1Gi"`},
				}},
			}}},
		}},
		Revision: "10",
	}
	for _, node := range nodes {
		l.Slices = append(l.Slices, schedtest.BenchSlice(node.Name, draBenchDriver, draBenchDevices))
	}
	for i := range n {
		l.Claims = append(l.Claims, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "claim-" + strconv.Itoa(i), Namespace: "default", UID: types.UID("uid-claim-" + strconv.Itoa(i)), ResourceVersion: "10"},
			Spec: resourceapi.ResourceClaimSpec{ResourceClassName: "gpu", ParametersRef: &resourceapi.ResourceClaimParametersReference{
				APIGroup: resourceapi.GroupName, Kind: "ResourceClaimParameters", Name: "one"}},
		})
	}
	return l
}

// draBenchListsV1 are draBenchLists in the form of BenchmarkDRA's
// ALLOT_BENCH_API=v1: v1 ResourceSlices of the same devices
// (schedtest.BenchResourceSlice), a DeviceClass and resource.k8s.io/v1
// claims claim-0 ... claim-(n-1) as the template makes them, none
// allocated.
func draBenchListsV1(nodes []*corev1.Node, n int) dynamicresources.Lists {
	l := dynamicresources.Lists{
		DeviceClasses: []*resourcev1.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu", UID: "uid-gpu", ResourceVersion: "2"},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: `device.driver == "` + draBenchDriver + `" && device.attributes["` + draBenchDriver + `"].family == "GPU"`}}}}}},
		Revision: "10",
	}
	for _, node := range nodes {
		l.V1Slices = append(l.V1Slices, schedtest.BenchResourceSlice(node.Name, draBenchDriver, draBenchDevices))
	}
	for i := range n {
		l.V1Claims = append(l.V1Claims, &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "claim-" + strconv.Itoa(i), Namespace: "default", UID: types.UID("uid-claim-" + strconv.Itoa(i)), ResourceVersion: "10"},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
					Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
						Expression: `device.attributes["` + draBenchDriver + `"].model == "A100" && device.capacity["` + draBenchDriver + `"].memory.compareTo(quantity("1Gi")) >= 0`}}}}}}}},
		})
	}
	return l
}

// BenchmarkDRACycles500Nodes is the scheduler's work per DRA pod without
// the API, in the measured half of BenchmarkDRA's 5000pods_500nodes: a
// snapshot from the cache with the DRA objects, the framework's cycle
// with the node share kube-scheduler looks at, Reserve, the claim as the
// binding leaves it applied to the objects (as the claim informer's event
// does), PostBind, and the assume. Each round fills half of the devices
// untimed and then times the pods that take the other half. seed is the
// workload with v1alpha2 claims, v1 with resource.k8s.io/v1 claims (as
// BenchmarkDRA's ALLOT_BENCH_API=v1).
func BenchmarkDRACycles500Nodes(b *testing.B) {
	nodes := make([]*corev1.Node, benchNodes)
	for i := range nodes {
		n := makeNode(fmt.Sprintf("node-%03d", i)).Alloc("cpu", "32").Alloc("memory", "128Gi").Alloc("pods", "110").
			Label("kubernetes.io/hostname", fmt.Sprintf("node-%03d", i)).Label("kubernetes.io/os", "linux").
			Label("kubernetes.io/arch", "amd64").Label(dynamicresources.LabelCDI, "true")
		nodes[i] = n.Obj()
	}
	b.Run("seed", func(b *testing.B) {
		benchDRACycles(b, nodes, draBenchLists(nodes, draBenchPods), func(objs *dynamicresources.Objects, rev string, state *framework.CycleState) *dynamicresources.Objects {
			upd := map[string]*resourceapi.ResourceClaim{}
			for _, cl := range dynamicresources.BoundClaims(state) {
				cl.ResourceVersion = rev
				upd[cl.Namespace+"/"+cl.Name] = cl
			}
			return objs.WithClaimChanges(rev, dynamicresources.ClaimChanges{Seed: upd})
		})
	})
	b.Run("v1", func(b *testing.B) {
		benchDRACycles(b, nodes, draBenchListsV1(nodes, draBenchPods), func(objs *dynamicresources.Objects, rev string, state *framework.CycleState) *dynamicresources.Objects {
			upd := map[string]*resourcev1.ResourceClaim{}
			for _, cl := range dynamicresources.BoundClaimsV1(state) {
				cl.ResourceVersion = rev
				upd[cl.Namespace+"/"+cl.Name] = cl
			}
			return objs.WithClaimChanges(rev, dynamicresources.ClaimChanges{V1: upd})
		})
	})
}

// benchDRACycles is BenchmarkDRACycles500Nodes on lists; bound applies
// a cycle's bound claims to the objects, as the claim informers do.
func benchDRACycles(b *testing.B, nodes []*corev1.Node, lists dynamicresources.Lists,
	bound func(objs *dynamicresources.Objects, rev string, state *framework.CycleState) *dynamicresources.Objects) {
	ctx := context.Background()
	var (
		fw   *framework.Framework
		c    *cache.Cache
		objs *dynamicresources.Objects
	)
	schedule := func(k int) {
		pod := makePod("pod-"+strconv.Itoa(k)).UID("uid-pod-"+strconv.Itoa(k)).Req("cpu", "100m").Claim("gpu", "claim-"+strconv.Itoa(k)).Obj()
		state := framework.NewCycleState()
		d := fw.Schedule(ctx, state, c.Snapshot().WithExtension(dynamicresources.Name, objs), pod)
		if !d.Status.IsSuccess() {
			b.Fatalf("pod %d: %s", k, d.Message())
		}
		if st := fw.RunReserve(ctx, state, pod, d.Selected); !st.IsSuccess() {
			b.Fatalf("reserve pod %d: %s", k, st.Message())
		}
		pod.Spec.NodeName = d.Selected
		if err := c.AssumePod(pod); err != nil {
			b.Fatal(err)
		}
		rev := strconv.Itoa(11 + k)
		objs = bound(objs, rev, state)
		fw.RunPostBind(ctx, state, pod, d.Selected, rev)
	}
	var untimed time.Duration // CPU time of the fills
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for i := 0; i < b.N; i++ {
		k := draBenchPods/2 + i%(draBenchPods/2)
		if k == draBenchPods/2 {
			b.StopTimer()
			fill0 := cpuTime(b)
			var err error
			fw, err = plugins.NewDefaultFramework(plugins.Options{NodesToFind: framework.NodesToFind(0)})
			if err != nil {
				b.Fatal(err)
			}
			c = cache.New()
			for _, n := range nodes {
				c.AddNode(n)
			}
			objs = dynamicresources.NewObjects(lists)
			for j := range draBenchPods / 2 {
				schedule(j)
			}
			untimed += cpuTime(b) - fill0
			b.StartTimer()
		}
		schedule(k)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	b.ReportMetric(float64((cpuTime(b)-cpu0-untimed).Microseconds())/float64(b.N), "cpu-µs/op")
}

// cpuTime is the CPU time the process has used, user and system: on a
// shared machine it moves less than the wall clock with the neighbours'
// load.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
