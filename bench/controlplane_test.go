package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/examples/fabric-driver/deploy"
	"allot.dev/allot/examples/fabric-driver/fabricdriver"
	"allot.dev/allot/internal/controller/resourceclaim"
	"allot.dev/allot/internal/node"
	"allot.dev/allot/internal/node/runtime/fake"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/pkg/client"
	drivercontroller "allot.dev/allot/pkg/driver/controller"
)

// BenchmarkControlPlaneDRA measures pods with one claim each from a
// ResourceClaimTemplate (WaitForFirstConsumer), created at a steady rate
// by 16 clients on simulated nodes labelled into racks of ten (status
// writes off), through the API server and etcd, the claim controller
// (which creates each pod's claim) and the scheduler, in two shapes run
// side by side:
//
//   - structured: the class has no controllerName; every node publishes a
//     NodeResourceSlice with enough instances and the scheduler allocates
//     (claim parameters with a trivial selector) and binds in one step.
//   - control-plane: the class of examples/fabric-driver/deploy
//     (fabric.example.com) and the driver's controller
//     (fabricdriver.RunController) with one pool per rack, reachable by
//     the rack's label, with enough units for all pods; every pod goes
//     through its PodSchedulingContext (seed 003).
//
// Each reports pods/s (first create to last bound), p50 and p99 create to
// bound, API writes per pod (apiserver_request_total: create, update,
// patch, delete) and API requests per pod (every verb but watch), and
// logs the writes per pod by resource. The control-plane shape also
// reports slowdown (structured pods/s divided by control-plane pods/s)
// and writes-vs-structured, when the structured shape ran before it.
//
// Sizes: ALLOT_BENCH_NODES (100), ALLOT_BENCH_PODS (1000),
// ALLOT_BENCH_RATE (arrival rate, 1000/s).
func BenchmarkControlPlaneDRA(b *testing.B) {
	nodes, pods := envInt("ALLOT_BENCH_NODES", 100), envInt("ALLOT_BENCH_PODS", 1000)
	var structured claimRun // the last structured run, for the ratios
	b.Run("structured", func(b *testing.B) {
		for range b.N {
			structured = runClaimShape(b, false, nodes, pods)
		}
	})
	b.Run("control-plane", func(b *testing.B) {
		var cp claimRun
		for range b.N {
			cp = runClaimShape(b, true, nodes, pods)
		}
		if structured.rate > 0 && cp.rate > 0 {
			b.ReportMetric(structured.rate/cp.rate, "slowdown")
			b.ReportMetric(cp.writes/structured.writes, "writes-vs-structured")
		}
	})
}

// The objects of both shapes. The structured driver has no kubelet
// plugin: the measurement ends at the binding.
const (
	cpRackSize         = 10 // nodes per rack (and per fabric pool)
	cpRackLabel        = "fabric.example.com/rack"
	cpTemplate         = "one-unit"
	cpClaimName        = "unit" // the pod's name for its claim
	cpStructuredDriver = "structured.bench.allot.dev"
	cpStructuredClass  = cpStructuredDriver
	cpStructuredParams = "any-instance"
	cpClaimWorkers     = resourceclaim.DefaultWorkers // as internal/controller/manager runs the claim controller
	cpTimeout          = 10 * time.Minute
)

// claimRun is what one run measured.
type claimRun struct {
	rate   float64 // pods/s
	writes float64 // API writes per pod
}

// runClaimShape runs one shape (control-plane or structured) and reports
// its metrics.
func runClaimShape(b *testing.B, controlPlane bool, nodes, pods int) claimRun {
	e := newEnv(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Every component has its own connection, as separate processes would.
	c, fleetC, schedC, ctrlC, driverC := e.newClient(b), e.newClient(b), e.newClient(b), e.newClient(b), e.newClient(b)
	errs := make(chan error, 4)
	run := func(what string, fn func() error) {
		go func() {
			if err := fn(); err != nil && !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("%s: %w", what, err)
			}
		}()
	}
	startRackFleet(ctx, b, fleetC, nodes)
	if controlPlane {
		createControlPlaneObjects(ctx, b, c)
		cfg := fabricdriver.ControllerConfig{PoolsFile: writeRackPools(b, nodes, pods+1),
			Controller: drivercontroller.Config{Client: driverC, Logger: quietLogger()}}
		run("fabric controller", func() error { return fabricdriver.RunController(ctx, cfg) })
	} else {
		createStructuredObjects(ctx, b, c, nodes, pods+1)
	}
	f := client.NewFactory(ctrlC, 0, client.WithoutManagedFields())
	claims, err := resourceclaim.New(ctrlC, f, resourceclaim.Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	f.Start(ctx)
	run("resourceclaim controller", func() error { return claims.Run(ctx, cpClaimWorkers) })
	run("scheduler", func() error {
		return scheduler.Run(ctx, scheduler.Config{Client: schedC, Logger: quietLogger()})
	})
	// One pod through the whole path first, unmeasured: every component
	// has started and synced its informers.
	warmUp(ctx, b, c, errs)

	bound := watchBound(ctx, b, c, pods)
	api0 := apiCounts(b, e)
	created := make([]time.Time, pods)
	interval := time.Second / time.Duration(envInt("ALLOT_BENCH_RATE", 1000))
	start := time.Now()
	runParallel(b, benchClients, pods, func(i int) error {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		created[i] = time.Now()
		_, err := c.Pods("default").Create(ctx, claimPod(fmt.Sprintf("pod-%d", i)))
		return err
	})
	times := bound.wait(b, cpTimeout)
	api1 := apiCounts(b, e)
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	checkClaims(ctx, b, c, controlPlane, pods+1)

	lat := make([]time.Duration, 0, pods)
	last := start
	for i := range pods {
		t := times[fmt.Sprintf("pod-%d", i)]
		lat = append(lat, t.Sub(created[i]))
		if t.After(last) {
			last = t
		}
	}
	r := claimRun{rate: float64(pods) / last.Sub(start).Seconds()}
	writes, requests := api1.sub(api0)
	r.writes = float64(writes.total()) / float64(pods)
	b.ReportMetric(r.rate, "pods/s")
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(r.writes, "writes/pod")
	b.ReportMetric(float64(requests.total())/float64(pods), "requests/pod")
	b.Logf("writes per pod by verb and resource: %s", writes.perPod(pods))
	return r
}

// startRackFleet registers n simulated nodes, node i in rack r(i/10)
// (label fabric.example.com/rack), with status writes off, and waits
// until all are registered.
func startRackFleet(ctx context.Context, b *testing.B, c *client.Client, n int) {
	b.Helper()
	cfgs := make([]node.Config, n)
	for i := range cfgs {
		rt, err := fake.New(fake.Options{})
		if err != nil {
			b.Fatal(err)
		}
		cfgs[i] = node.Config{NodeName: fmt.Sprintf("sim-%03d", i), Client: c, Runtime: rt,
			Labels: map[string]string{cpRackLabel: rackName(i / cpRackSize)},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"),
				corev1.ResourceMemory: resource.MustParse("128Gi")},
			HeartbeatInterval: time.Hour, DisableStatusUpdates: true, DisableEvents: true,
			Logger: quietLogger()}
	}
	fleet, err := node.NewFleet(c, cfgs)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = fleet.Run(ctx) }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		list, err := c.Nodes().List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("simulated nodes did not register")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func rackName(i int) string { return "r" + strconv.Itoa(i) }

// writeRackPools writes the fabric controller's pools file: one pool per
// rack, reachable by the rack's label, together with room for want units
// at twice the even share (the scheduler spreads pods, not units).
func writeRackPools(b *testing.B, nodes, want int) string {
	b.Helper()
	racks := (nodes + cpRackSize - 1) / cpRackSize
	capacity := min(fabricdriver.MaxPoolCapacity, 2*((want+racks-1)/racks))
	if racks*capacity < want {
		b.Fatalf("ALLOT_BENCH_PODS=%d: %d racks of at most %d fabric units hold fewer units than pods; add nodes",
			want-1, racks, fabricdriver.MaxPoolCapacity)
	}
	var p fabricdriver.Pools
	for r := range racks {
		p.Pools = append(p.Pools, fabricdriver.Pool{Name: "rack-" + strconv.Itoa(r), Model: "fpga-a",
			Capacity: capacity, NodeSelector: map[string]string{cpRackLabel: rackName(r)}})
	}
	data, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "pools.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// createControlPlaneObjects creates the driver's class as
// examples/fabric-driver/deploy has it and a template of claims without
// parameters (one unit of any model).
func createControlPlaneObjects(ctx context.Context, b *testing.B, c *client.Client) {
	b.Helper()
	var class resourceapi.ResourceClass
	if err := yaml.UnmarshalStrict(deploy.Class, &class); err != nil {
		b.Fatalf("decode the fabric class: %v", err)
	}
	if _, err := c.ResourceClasses().Create(ctx, &class); err != nil {
		b.Fatalf("create class %s: %v", class.Name, err)
	}
	createTemplate(ctx, b, c, resourceapi.ResourceClaimSpec{ResourceClassName: class.Name})
}

// createStructuredObjects creates one NodeResourceSlice per node with
// room for want instances at twice the even share, a class without
// controllerName, claim parameters asking for one instance of any kind,
// and a template of claims with those parameters.
func createStructuredObjects(ctx context.Context, b *testing.B, c *client.Client, nodes, want int) {
	b.Helper()
	instances := max(4, 2*((want+nodes-1)/nodes))
	runParallel(b, benchClients, nodes, func(i int) error {
		name := fmt.Sprintf("sim-%03d", i)
		s := &resourceapi.NodeResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + cpStructuredDriver}}
		s.Spec.NodeName, s.Spec.DriverName = name, cpStructuredDriver
		s.Spec.Partitionable = &resourceapi.PartitionableResources{}
		for j := range instances {
			s.Spec.Partitionable.ResourceInstances = append(s.Spec.Partitionable.ResourceInstances,
				resourceapi.ResourceInstance{Name: "unit-" + strconv.Itoa(j)})
		}
		_, err := c.NodeResourceSlices().Create(ctx, s)
		return err
	})
	class := &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: cpStructuredClass}, DriverName: cpStructuredDriver}
	if _, err := c.ResourceClasses().Create(ctx, class); err != nil {
		b.Fatalf("create class %s: %v", class.Name, err)
	}
	params := &resourceapi.ResourceClaimParameters{
		ObjectMeta: metav1.ObjectMeta{Name: cpStructuredParams, Namespace: "default"},
		Requests: []resourceapi.ResourceRequest{{DriverName: cpStructuredDriver, ResourceRequestModel: resourceapi.ResourceRequestModel{
			Partitionable: &resourceapi.PartitionableResourceRequests{Required: []resourceapi.PartitionableResourceRequest{
				{Name: "one", Selector: "true"},
			}},
		}}},
	}
	if _, err := c.ResourceClaimParameters("default").Create(ctx, params); err != nil {
		b.Fatalf("create claim parameters: %v", err)
	}
	createTemplate(ctx, b, c, resourceapi.ResourceClaimSpec{ResourceClassName: cpStructuredClass,
		ParametersRef: &resourceapi.ResourceClaimParametersReference{
			APIGroup: resourceapi.GroupName, Kind: "ResourceClaimParameters", Name: cpStructuredParams,
		}})
}

// createTemplate creates the template of the pods' claims, allocated
// for their first consumer.
func createTemplate(ctx context.Context, b *testing.B, c *client.Client, spec resourceapi.ResourceClaimSpec) {
	b.Helper()
	spec.AllocationMode = resourceapi.AllocationModeWaitForFirstConsumer
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: cpTemplate, Namespace: "default"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: spec}}
	if _, err := c.ResourceClaimTemplates("default").Create(ctx, tmpl); err != nil {
		b.Fatalf("create claim template: %v", err)
	}
}

// claimPod is benchPod with one claim from the template.
func claimPod(name string) *corev1.Pod {
	p := benchPod(name)
	tmpl := cpTemplate
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: cpClaimName, ResourceClaimTemplateName: &tmpl}}
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: cpClaimName}}
	return p
}

// warmUp creates one pod with a claim and waits until it is bound, or a
// component fails.
func warmUp(ctx context.Context, b *testing.B, c *client.Client, errs <-chan error) {
	b.Helper()
	if _, err := c.Pods("default").Create(ctx, claimPod("warm-up")); err != nil {
		b.Fatalf("create the warm-up pod: %v", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
		p, err := c.Pods("default").Get(ctx, "warm-up")
		if err == nil && p.Spec.NodeName != "" {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the warm-up pod was not bound within 2m (last error: %v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkClaims fails unless there are want claims, each allocated and
// reserved for one pod; for the control-plane shape, by fabric.example.com
// with units no other claim has.
func checkClaims(ctx context.Context, b *testing.B, c *client.Client, controlPlane bool, want int) {
	b.Helper()
	list, err := c.ResourceClaims("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatalf("list claims: %v", err)
	}
	if len(list.Items) != want {
		b.Fatalf("%d claims, want %d (one per pod)", len(list.Items), want)
	}
	units := map[string]string{} // unit -> claim
	for _, cl := range list.Items {
		a := cl.Status.Allocation
		if a == nil || len(cl.Status.ReservedFor) != 1 {
			b.Fatalf("claim %s: allocation %v, reservedFor %v; want allocated and reserved for its pod",
				cl.Name, a != nil, cl.Status.ReservedFor)
		}
		if !controlPlane {
			continue
		}
		if cl.Status.DriverName != fabricdriver.DriverName || len(a.ResourceHandles) != 1 {
			b.Fatalf("claim %s: driver %q with %d handles, want one handle of %s",
				cl.Name, cl.Status.DriverName, len(a.ResourceHandles), fabricdriver.DriverName)
		}
		h, err := fabricdriver.DecodeHandle(a.ResourceHandles[0].Data)
		if err != nil || h.Fallback || len(h.Units) != 1 {
			b.Fatalf("claim %s: handle %+v (%v), want one unit", cl.Name, h, err)
		}
		if other, taken := units[h.Units[0]]; taken {
			b.Fatalf("unit %s allocated to both %s and %s", h.Units[0], other, cl.Name)
		}
		units[h.Units[0]] = cl.Name
	}
}

// apiCount is apiserver_request_total summed over codes, by "verb
// resource".
type apiCount map[string]int64

// apiCounts scrapes the API server's apiserver_request_total.
func apiCounts(b *testing.B, e *env) apiCount {
	b.Helper()
	res, err := e.client.Get(e.srv.URL + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Fatalf("metrics: %d", res.StatusCode)
	}
	out := apiCount{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "apiserver_request_total{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(line, "} ")
		if !ok {
			b.Fatalf("metrics: cannot read %q", sc.Text())
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			b.Fatalf("metrics: cannot read %q: %v", sc.Text(), err)
		}
		l := map[string]string{}
		for kv := range strings.SplitSeq(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			l[k] = strings.Trim(v, `"`)
		}
		out[l["verb"]+" "+l["resource"]] += int64(n)
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

// sub returns the writes (create, update, patch, delete) and the requests
// (every verb but watch, API resources only) made since before.
func (a apiCount) sub(before apiCount) (writes, requests apiCount) {
	writes, requests = apiCount{}, apiCount{}
	for k, n := range a {
		n -= before[k]
		verb, res, _ := strings.Cut(k, " ")
		if n == 0 || res == "" || verb == "watch" {
			continue
		}
		requests[k] = n
		switch verb {
		case "create", "update", "patch", "delete":
			writes[k] = n
		}
	}
	return writes, requests
}

func (a apiCount) total() int64 {
	var t int64
	for _, n := range a {
		t += n
	}
	return t
}

// perPod formats the counts per pod, largest first.
func (a apiCount) perPod(pods int) string {
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int {
		if a[x] != a[y] {
			return int(a[y] - a[x])
		}
		return strings.Compare(x, y)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2f", k, float64(a[k])/float64(pods))
	}
	return strings.Join(parts, ", ")
}
