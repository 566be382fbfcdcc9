package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	kcorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/controller/controllerutil"
	"allot.dev/allot/internal/controller/resourceclaim"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/internal/scheduler/schedtest"
	"allot.dev/allot/pkg/client"
)

// The DRA fixtures, shaped after Kubernetes' scheduler_perf DRA workloads:
// one driver publishing draDevices whole instances per node, one class,
// and in each namespace claim parameters asking for one instance and a
// template that refers to them.
const (
	draDriver      = "test-driver.cdi.k8s.io"
	draDevices     = 10
	draClass       = "test-class"
	draClassParams = "test-class-parameters"
	draClaimParams = "one-instance"
	draTemplate    = "one-instance"
	// draClaimWorkers is the claim controller's worker count in
	// internal/controller/manager (allot up, allot controller-manager).
	draClaimWorkers = resourceclaim.DefaultWorkers
)

// draCluster is an API server and etcd, simulated nodes with a slice
// each, the claim controller and the scheduler, all in this process; each
// component has its own connection, as separate processes would.
type draCluster struct {
	e     *env
	c     *client.Client // the load generator's
	nodes []string
	sched *scheduler.Metrics
	ctrl  *prometheus.Registry // the claim controller's work queue metrics
	errs  chan error           // a component that stopped with an error
}

// startDRACluster starts everything and creates the cluster-wide DRA
// objects; namespaces get theirs from addNamespace.
func startDRACluster(ctx context.Context, b *testing.B, nodes int, statusWrites bool) *draCluster {
	b.Helper()
	e := newEnv(b)
	cl := &draCluster{e: e, c: e.newClient(b), sched: scheduler.NewMetrics(), errs: make(chan error, 2)}
	fleetC, schedC, ctrlC := e.newClient(b), e.newClient(b), e.newClient(b)
	startFleet(ctx, b, fleetC, nodes, statusWrites)
	for i := range nodes {
		cl.nodes = append(cl.nodes, fmt.Sprintf("sim-%03d", i))
	}
	cl.createClusterObjects(ctx, b)

	f := client.NewFactory(ctrlC, 0, client.WithoutManagedFields())
	cl.ctrl = prometheus.NewRegistry()
	queues, err := controllerutil.NewQueueMetrics(cl.ctrl)
	if err != nil {
		b.Fatal(err)
	}
	ctrl, err := resourceclaim.New(ctrlC, f, resourceclaim.Options{Logger: quietLogger(), QueueMetrics: queues})
	if err != nil {
		b.Fatal(err)
	}
	f.Start(ctx)
	go cl.run("resourceclaim controller", func() error { return ctrl.Run(ctx, draClaimWorkers) })
	go cl.run("scheduler", func() error {
		return scheduler.Run(ctx, scheduler.Config{Client: schedC, Metrics: cl.sched, Logger: quietLogger()})
	})
	return cl
}

// run runs a component and records how it failed, unless ctx ended.
func (cl *draCluster) run(what string, fn func() error) {
	if err := fn(); err != nil && !errors.Is(err, context.Canceled) {
		select {
		case cl.errs <- fmt.Errorf("%s: %w", what, err):
		default:
		}
	}
}

// check fails the benchmark if a component stopped with an error.
func (cl *draCluster) check(b *testing.B) {
	b.Helper()
	select {
	case err := <-cl.errs:
		b.Fatal(err)
	default:
	}
}

// createClusterObjects creates one slice per node (draDevices instances
// with a few attributes, as Kubernetes' benchmark driver publishes: a
// NodeResourceSlice, or in the v1 form a resource.k8s.io/v1 ResourceSlice
// of the same devices), the class parameters and the class.
func (cl *draCluster) createClusterObjects(ctx context.Context, b *testing.B) {
	b.Helper()
	runParallel(b, benchClients, len(cl.nodes), func(i int) error {
		if benchV1() {
			_, err := cl.c.ResourceSlices().Create(ctx, schedtest.BenchResourceSlice(cl.nodes[i], draDriver, draDevices))
			return err
		}
		_, err := cl.c.NodeResourceSlices().Create(ctx, schedtest.BenchSlice(cl.nodes[i], draDriver, draDevices))
		return err
	})
	cp := &resourceapi.ResourceClassParameters{
		ObjectMeta: metav1.ObjectMeta{Name: draClassParams},
		Filters: []resourceapi.ResourceFilter{{DriverName: draDriver, ResourceFilterModel: resourceapi.ResourceFilterModel{
			Partitionable: &resourceapi.PartitionableResourceFilter{Selector: `strings["family"] == "GPU"`},
		}}},
	}
	if _, err := cl.c.ResourceClassParameters().Create(ctx, cp); err != nil {
		b.Fatalf("create class parameters: %v", err)
	}
	class := &resourceapi.ResourceClass{
		ObjectMeta: metav1.ObjectMeta{Name: draClass}, DriverName: draDriver,
		ParametersRef: &resourceapi.ResourceClassParametersReference{
			APIGroup: resourceapi.GroupName, Kind: "ResourceClassParameters", Name: draClassParams,
		},
	}
	if _, err := cl.c.ResourceClasses().Create(ctx, class); err != nil {
		b.Fatalf("create class: %v", err)
	}
	if benchV1() {
		dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: draClass},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: `device.driver == "` + draDriver + `" && device.attributes["` + draDriver + `"].family == "GPU"`}}}}}
		if _, err := cl.c.DeviceClasses().Create(ctx, dc); err != nil {
			b.Fatalf("create device class: %v", err)
		}
	}
}

// benchV1 reports ALLOT_BENCH_API=v1: the claim templates are
// resource.k8s.io/v1 ones (a DeviceClass and a CEL selector over the same
// devices, seen as v1 devices), so the same workload measures the v1 path.
func benchV1() bool { return os.Getenv("ALLOT_BENCH_API") == "v1" }

// addNamespace creates a namespace with the claim parameters (one
// instance, a CEL selector) and the claim template.
func (cl *draCluster) addNamespace(ctx context.Context, b *testing.B, ns string) {
	b.Helper()
	if err := cl.e.api.EnsureNamespaces(ctx, ns); err != nil {
		b.Fatal(err)
	}
	params := &resourceapi.ResourceClaimParameters{
		ObjectMeta: metav1.ObjectMeta{Name: draClaimParams, Namespace: ns},
		Requests: []resourceapi.ResourceRequest{{DriverName: draDriver, ResourceRequestModel: resourceapi.ResourceRequestModel{
			Partitionable: &resourceapi.PartitionableResourceRequests{Required: []resourceapi.PartitionableResourceRequest{
				{Name: "gpu", Selector: `strings["model"] == "A100" && quantities["memory"] >= "1Gi"`},
			}},
		}}},
	}
	if _, err := cl.c.ResourceClaimParameters(ns).Create(ctx, params); err != nil {
		b.Fatalf("create claim parameters in %s: %v", ns, err)
	}
	if benchV1() {
		tmpl := &resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: draTemplate, Namespace: ns},
			Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: draClaimSpecV1()},
		}
		if _, err := cl.c.ResourceClaimTemplatesV1(ns).Create(ctx, tmpl); err != nil {
			b.Fatalf("create v1 claim template in %s: %v", ns, err)
		}
		return
	}
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: draTemplate, Namespace: ns},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: draClaimSpec()},
	}
	if _, err := cl.c.ResourceClaimTemplates(ns).Create(ctx, tmpl); err != nil {
		b.Fatalf("create claim template in %s: %v", ns, err)
	}
}

// draClaimSpecV1 is draClaimSpec in the v1 form: one device of the class
// chosen by a CEL selector over the same attributes.
func draClaimSpecV1() resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
			DeviceClassName: draClass,
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: `device.attributes["` + draDriver + `"].model == "A100" && device.capacity["` + draDriver + `"].memory.compareTo(quantity("1Gi")) >= 0`}}},
		}}}}}
}

func draClaimSpec() resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{
		ResourceClassName: draClass,
		ParametersRef: &resourceapi.ResourceClaimParametersReference{
			APIGroup: resourceapi.GroupName, Kind: "ResourceClaimParameters", Name: draClaimParams,
		},
	}
}

// draPod is benchPod with one claim from the namespace's template.
func draPod(name string) *corev1.Pod {
	p := benchPod(name)
	tmpl := draTemplate
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	return p
}

// preallocate puts n claims in namespace ns into use before a steady-state
// run, as Kubernetes' allocResourceClaims step does: the instances are
// picked at random (fixed seed) over all nodes. allot accepts structured
// allocations only through pods/binding, and the claim controller frees a
// claim nobody reserves, so each node that gets claims gets one filler pod
// (no scheduler picks it up) that uses them, and one binding allocates and
// reserves them all.
func (cl *draCluster) preallocate(ctx context.Context, b *testing.B, ns string, n int) {
	b.Helper()
	slots := len(cl.nodes) * draDevices
	if n > slots {
		b.Fatalf("cannot preallocate %d claims on %d instances", n, slots)
	}
	perm := rand.New(rand.NewPCG(6, 2)).Perm(slots)[:n]
	byNode := make([][]int, len(cl.nodes))
	for _, s := range perm {
		byNode[s/draDevices] = append(byNode[s/draDevices], s%draDevices)
	}
	runParallel(b, benchClients, len(cl.nodes), func(i int) error {
		if len(byNode[i]) == 0 {
			return nil
		}
		return cl.fillNode(ctx, ns, cl.nodes[i], byNode[i])
	})
}

// fillNode creates one claim per instance and a filler pod using them,
// and binds the pod to node with the claims allocated there.
func (cl *draCluster) fillNode(ctx context.Context, ns, node string, instances []int) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "filler-" + node},
		Spec: corev1.PodSpec{SchedulerName: "bench-filler",
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	binding := &corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	for _, inst := range instances {
		name := fmt.Sprintf("filler-%s-%s", node, schedtest.BenchInstance(inst))
		var alloc []byte
		var err error
		if benchV1() {
			claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: draClaimSpecV1()}
			if _, err := cl.c.ResourceClaimsV1(ns).Create(ctx, claim); err != nil {
				return fmt.Errorf("create claim %s: %w", name, err)
			}
			alloc, err = json.Marshal(draAllocationV1(node, inst))
		} else {
			claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: draClaimSpec()}
			if _, err := cl.c.ResourceClaims(ns).Create(ctx, claim); err != nil {
				return fmt.Errorf("create claim %s: %w", name, err)
			}
			alloc, err = json.Marshal(draAllocation(node, inst))
		}
		if err != nil {
			return err
		}
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimName: &name})
		binding.ResourceClaims = append(binding.ResourceClaims, corev1.BindingResourceClaim{
			Name: name, DriverName: draDriver, Allocation: &runtime.RawExtension{Raw: alloc},
		})
	}
	created, err := cl.c.Pods(ns).Create(ctx, pod)
	if err != nil {
		return fmt.Errorf("create filler pod on %s: %w", node, err)
	}
	// Nothing else has allocated on this node yet, so the allocation
	// revision seen is complete at any revision up to now.
	binding.AllocationFences = []corev1.AllocationFence{{NodeName: node, DriverName: draDriver, Revision: created.ResourceVersion}}
	if _, err := cl.c.Bind(ctx, ns, pod.Name, binding); err != nil {
		return fmt.Errorf("bind filler pod to %s: %w", node, err)
	}
	return nil
}

// draAllocationV1 is draAllocation in the v1 form: device inst of the
// node's pool, as the scheduler writes a v1 claim's allocation.
func draAllocationV1(node string, inst int) *resourcev1.AllocationResult {
	return &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: draDriver, Pool: node, Device: schedtest.BenchInstance(inst)}}},
		NodeSelector: &kcorev1.NodeSelector{NodeSelectorTerms: []kcorev1.NodeSelectorTerm{{
			MatchFields: []kcorev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: kcorev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}
}

// draAllocation is the structured allocation of one instance on node, as
// the scheduler's allocator writes it.
func draAllocation(node string, inst int) *resourceapi.AllocationResult {
	return &resourceapi.AllocationResult{
		AvailableOnNodes: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
		ResourceHandles: []resourceapi.ResourceHandle{{DriverName: draDriver, StructuredData: &resourceapi.StructuredResourceHandle{
			NodeName: node,
			Partitionable: &resourceapi.PartitionableAllocationResult{
				Instances: []resourceapi.AllocatedResourceInstance{{ID: schedtest.BenchInstance(inst)}},
			},
		}}},
	}
}
