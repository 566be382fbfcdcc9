package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/fence"
	"allot.dev/allot/internal/node/runtime/fake"
	resourcev1 "k8s.io/api/resource/v1"
)

// Config is one chaos run.
type Config struct {
	// Duration is how long pods are created and components killed.
	Duration time.Duration
	// Rate is how many pods are created per second.
	Rate float64
	// KillInterval is the mean time between kills; a kill takes down two
	// components at once one time in five.
	KillInterval time.Duration
	// Seed makes the run's choices (pods, deletions, victims) repeatable.
	Seed uint64
	// Nodes are DRA nodes (node agent and the example driver
	// gpu.example.com); UpstreamNodes DRA nodes whose driver is
	// test/upstreamdriver (upstream.example.com, on the upstream
	// kubeletplugin library); SimNodes simulated nodes without devices.
	Nodes, UpstreamNodes, SimNodes int
	// Replicas of the scheduler and the controller manager, with leader
	// election above one: kills of the leader hand the work to a standby.
	Replicas int
	// Settle is, after the churn, how long the cluster may go without a
	// pod finishing, and how long deleted pods and their claims may take
	// to go. It must exceed client-go's relist backoff: after repeated
	// failures (API server kills in a row) an informer waits up to 30s,
	// doubled by jitter, before it lists again, and a controller sees
	// nothing meanwhile.
	Settle time.Duration
	// FenceAfter is the node agents' --self-fence-after (0: the agent's
	// default). Outage is how long each API server outage lasts (0: none):
	// it must exceed FenceAfter, so that the agents raise their fence;
	// the first begins OutageEvery/2 into the churn, the next OutageEvery
	// later. During an outage the killer leaves the API server alone.
	FenceAfter, Outage, OutageEvery time.Duration
	// Log receives progress lines.
	Log io.Writer
}

// Report is what a run found.
type Report struct {
	Config        Config
	PodsCreated   int
	PodsCreatedV1 int // of PodsCreated, with a resource.k8s.io/v1 claim of gpu.example.com
	CreatesFailed int
	PodsDeleted   int // by the harness, at random while running or pending
	// PodsForceDeleted of those were force deleted (grace period 0: gone
	// from the API at once, while their containers may still run).
	PodsForceDeleted int
	PodsReaped       int // finished, deleted by the harness
	Samples          int // consistent snapshots checked during the churn

	// PodsCreatedUpstream is, of PodsCreated, those with a claim of
	// upstream.example.com (a v1 claim too, not in PodsCreatedV1).
	PodsCreatedUpstream int
	// ClaimsRan counts, by kind (v1alpha2, v1, upstream v1), the claims
	// seen reserved for a running pod; ClaimsPrepared those of them in a
	// driver's state file.
	ClaimsRan, ClaimsPrepared map[string]int
	Kills                     map[string]int
	// Exits counts, by component, exits on its own that the harness's
	// supervisor restarted (a leader that lost its lease exits).
	Exits            map[string]int
	Violations       []Violation
	Elapsed          time.Duration
	ComponentLogsDir string

	// UpstreamPrepared is how many claims (UIDs) the upstream drivers'
	// state files show prepared, UpstreamPrepareCalls how many prepare
	// lines they have (a claim prepared again after a kill has two).
	UpstreamPrepared, UpstreamPrepareCalls int

	// Fence is what the API server outages did (fence.go).
	Fence FenceReport
}

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run: seed %d, %v of churn at %.1f pods/s, a kill every %v on average, %d DRA nodes, %d upstream-driver nodes, %d simulated nodes, %d scheduler and controller-manager replicas (%v in all)\n",
		r.Config.Seed, r.Config.Duration, r.Config.Rate, r.Config.KillInterval, r.Config.Nodes, r.Config.UpstreamNodes, r.Config.SimNodes, max(r.Config.Replicas, 1), r.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "pods: %d created (%d with a v1 claim, %d with an upstream.example.com claim; %d creates failed), %d deleted at random (%d of them forced), %d reaped after finishing\n",
		r.PodsCreated, r.PodsCreatedV1, r.PodsCreatedUpstream, r.CreatesFailed, r.PodsDeleted, r.PodsForceDeleted, r.PodsReaped)
	fmt.Fprintf(&b, "claims held by running pods: %d v1alpha2 (%d in a driver's state file), %d v1 (%d in a driver's state file), %d upstream v1 (%d in the upstream driver's state file)\n",
		r.ClaimsRan[versionV1alpha2], r.ClaimsPrepared[versionV1alpha2], r.ClaimsRan[versionV1], r.ClaimsPrepared[versionV1],
		r.ClaimsRan[kindUpstream], r.ClaimsPrepared[kindUpstream])
	fmt.Fprintf(&b, "upstream driver: %d claims prepared (%d prepare calls)\n", r.UpstreamPrepared, r.UpstreamPrepareCalls)
	names := make([]string, 0, len(r.Kills))
	total := 0
	for n, k := range r.Kills {
		names = append(names, n)
		total += k
	}
	sort.Strings(names)
	fmt.Fprintf(&b, "kills: %d:", total)
	for _, n := range names {
		fmt.Fprintf(&b, " %s %d", n, r.Kills[n])
	}
	exited := make([]string, 0, len(r.Exits))
	for n, k := range r.Exits {
		exited = append(exited, fmt.Sprintf(" %s %d", n, k))
	}
	sort.Strings(exited)
	fmt.Fprintf(&b, "\nexits on their own, restarted (leaders that lost their lease):%s", strings.Join(exited, ""))
	fmt.Fprintf(&b, "\n%s", r.Fence.String())
	fmt.Fprintf(&b, "snapshots checked during the churn: %d\n", r.Samples)
	fmt.Fprintf(&b, "violations: %d\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	fmt.Fprintf(&b, "component logs: %s\n", r.ComponentLogsDir)
	return b.String()
}

// namespace holds the run's pods, templates and claims.
const namespace = "chaos"

// run is one chaos run in progress.
type run struct {
	cfg Config
	c   *cluster
	rng *rand.Rand
	rep *Report

	mu      sync.Mutex
	created map[types.UID]string // pods whose create succeeded, by UID
	deleted map[types.UID]bool   // pods the harness deleted
	// versions is the stored version of every claim seen in a snapshot,
	// by UID; ran the kind (version, or kindUpstream) of those seen
	// reserved for a running pod.
	versions, ran map[types.UID]string
	// fence is the state of the fence rule's check (fence.go); apiMu is
	// held by an outage for its length, and by the killer while it holds
	// the API server down, so that neither restarts it under the other.
	fence fenceState
	apiMu sync.Mutex
}

// podNames is the pool of names pods are created with: names are reused
// as soon as their pod is gone, often while a component is down, so that
// informers relisting after a gap find names taken by new pods.
const podNames = 40

// Run starts a cluster from the binaries in dir, runs the churn with
// kills, settles, and checks every invariant. An error means the harness
// itself failed; broken invariants are the report's violations.
func Run(ctx context.Context, bins Binaries, dir string, cfg Config) (*Report, error) {
	start := time.Now()
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	c, err := startCluster(ctx, bins, dir, clusterConfig{Nodes: cfg.Nodes, UpstreamNodes: cfg.UpstreamNodes, SimNodes: cfg.SimNodes, Replicas: cfg.Replicas,
		FenceAfter: cfg.FenceAfter})
	if c != nil {
		defer c.stop()
	}
	if err != nil {
		return nil, fmt.Errorf("start cluster: %w", err)
	}
	r := &run{cfg: cfg, c: c, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		rep:     &Report{Config: cfg, Kills: map[string]int{}, Exits: map[string]int{}, ComponentLogsDir: dir},
		created: map[types.UID]string{}, deleted: map[types.UID]bool{},
		versions: map[types.UID]string{}, ran: map[types.UID]string{}, fence: newFenceState()}
	if err := r.setUp(ctx); err != nil {
		return nil, err
	}
	r.logf("cluster up; churn for %v", cfg.Duration)
	r.churn(ctx)
	r.logf("churn over; settling")
	if err := r.settle(ctx); err != nil {
		return nil, err
	}
	for _, comp := range c.components {
		if comp.kills > 0 {
			r.rep.Kills[comp.name] = comp.kills
		}
		if comp.exits > 0 {
			r.rep.Exits[comp.name] = comp.exits
		}
	}
	if r.rep.Fence.Raised, err = c.countFences(); err != nil {
		return nil, err
	}
	if n := len(r.rep.Fence.Outages); n > 0 && r.rep.Fence.Raised == 0 {
		r.addViolations([]Violation{{RuleOutageUnfenced, fmt.Sprintf("%d outages of %v, the agents' fence time %v", n, cfg.Outage, cfg.FenceAfter)}})
	}
	r.rep.Elapsed = time.Since(start)
	return r.rep, nil
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Log, time.Now().Format("15:04:05.000")+" "+format+"\n", args...)
}

// setUp creates the namespace, the class, two kinds of claim parameters
// (any 8Gi instance: a half or a whole GPU; a whole 16Gi GPU) and a
// template for each; and the same in resource.k8s.io/v1: a DeviceClass
// selecting the driver's devices (its seed slices' instances, seen as v1
// devices) and templates any-v1 and whole-v1; and for the upstream
// driver a v1 DeviceClass upstream.example.com and a template of one
// device of it.
func (r *run) setUp(ctx context.Context) error {
	a := r.c.admin
	if _, err := a.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	if _, err := a.ResourceClasses().Create(ctx, &resourcev1alpha2.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"},
		DriverName: "gpu.example.com"}); err != nil {
		return fmt.Errorf("create class: %w", err)
	}
	for name, selector := range map[string]string{"any": `quantities["memory"] >= "8Gi"`, "whole": `quantities["memory"] >= "16Gi"`} {
		p := &resourcev1alpha2.ResourceClaimParameters{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Requests: []resourcev1alpha2.ResourceRequest{{DriverName: "gpu.example.com",
				ResourceRequestModel: resourcev1alpha2.ResourceRequestModel{Partitionable: &resourcev1alpha2.PartitionableResourceRequests{
					Required: []resourcev1alpha2.PartitionableResourceRequest{{Selector: selector}}}}}}}
		if _, err := a.ResourceClaimParameters(namespace).Create(ctx, p); err != nil {
			return fmt.Errorf("create parameters %s: %w", name, err)
		}
		t := &resourcev1alpha2.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: resourcev1alpha2.ResourceClaimTemplateSpec{Spec: resourcev1alpha2.ResourceClaimSpec{ResourceClassName: "gpu.example.com",
				ParametersRef: &resourcev1alpha2.ResourceClaimParametersReference{APIGroup: resourcev1alpha2.GroupName, Kind: "ResourceClaimParameters", Name: name}}}}
		if _, err := a.ResourceClaimTemplates(namespace).Create(ctx, t); err != nil {
			return fmt.Errorf("create template %s: %w", name, err)
		}
	}
	if _, err := a.DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: v1Class},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "gpu.example.com"`}}}}}); err != nil {
		return fmt.Errorf("create device class: %w", err)
	}
	for name, memory := range map[string]string{"any-v1": "8Gi", "whole-v1": "16Gi"} {
		t := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: v1Class,
					Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
						Expression: fmt.Sprintf(`device.capacity["gpu.example.com"].memory.compareTo(quantity(%q)) >= 0`, memory)}}}}}}}}}}
		if _, err := a.ResourceClaimTemplatesV1(namespace).Create(ctx, t); err != nil {
			return fmt.Errorf("create v1 template %s: %w", name, err)
		}
	}
	if _, err := a.DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: upstreamDriver},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q", upstreamDriver)}}}}}); err != nil {
		return fmt.Errorf("create device class %s: %w", upstreamDriver, err)
	}
	t := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: upstreamTemplate, Namespace: namespace},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: upstreamDriver}}}}}}}
	if _, err := a.ResourceClaimTemplatesV1(namespace).Create(ctx, t); err != nil {
		return fmt.Errorf("create v1 template %s: %w", upstreamTemplate, err)
	}
	return nil
}

// v1Class is the resource.k8s.io/v1 DeviceClass of the driver's devices.
const v1Class = "gpu-v1.example.com"

// upstreamTemplate is the v1 template of one upstream.example.com device.
const upstreamTemplate = "upstream"

// churn creates pods at the configured rate, deletes some at random,
// reaps finished ones, kills components, and checks consistent snapshots,
// until the duration is over.
func (r *run) churn(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	// Each goroutine has its own random source, seeded from the run's.
	killRng := rand.New(rand.NewPCG(r.rng.Uint64(), r.rng.Uint64()))
	wg.Go(func() { r.killer(ctx, killRng) })
	wg.Go(func() { r.c.supervise(ctx, r.logf) })
	wg.Go(func() { r.sampler(ctx) })
	wg.Go(func() { r.reaper(ctx) })
	wg.Go(func() { r.outages(ctx) })
	tick := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.Rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		r.createPod(ctx)
		if r.rng.IntN(5) == 0 {
			r.deleteRandomPod(ctx)
		}
	}
}

// createPod creates one pod: mostly with a claim from a template (one in
// ten asks for a whole GPU, of which a node has one), one in ten without
// claims (it may run on a simulated node); with upstream nodes, one in six
// of the claims is one upstream.example.com device (template upstream);
// of the others, half are resource.k8s.io/v1 claims from a v1 template,
// half v1alpha2 ones. It runs 0.5-3s, then succeeds.
func (r *run) createPod(ctx context.Context) {
	r.mu.Lock()
	name := fmt.Sprintf("p-%03d", r.rng.IntN(podNames))
	kind := r.rng.IntN(30)
	runFor := time.Duration(500+r.rng.IntN(2500)) * time.Millisecond
	v1 := r.rng.IntN(2) == 0
	upstream := r.cfg.UpstreamNodes > 0 && r.rng.IntN(6) == 0
	// With outages, one pod in eight opts into the fence and runs 6-10s,
	// and one in eight of the others runs 5-8s: pods that run through an
	// outage's fence time, to be stopped by it or not.
	optIn := false
	if r.cfg.Outage > 0 {
		switch r.rng.IntN(8) {
		case 0:
			optIn, runFor = true, time.Duration(6000+r.rng.IntN(4000))*time.Millisecond
		case 1:
			runFor = time.Duration(5000+r.rng.IntN(3000)) * time.Millisecond
		}
	}
	r.mu.Unlock()
	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: map[string]string{fake.AnnotationExitAfter: runFor.String()}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if optIn {
		pod.Annotations[fence.AnnotationPodFence] = "true"
	}
	if kind >= 3 {
		tmpl := "any"
		if kind < 6 {
			tmpl = "whole"
		}
		switch {
		case upstream:
			tmpl = upstreamTemplate
		case v1:
			tmpl += "-v1"
		}
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	got, err := r.c.admin.Pods(namespace).Create(cctx, pod)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case apierrors.IsAlreadyExists(err):
		// The name's pod is still there: try another name next time.
	case err != nil:
		// The create may still have happened (the answer was lost): such
		// a pod is reaped like the others, but not counted as created.
		r.rep.CreatesFailed++
	default:
		r.rep.PodsCreated++
		switch {
		case len(pod.Spec.ResourceClaims) == 0:
		case upstream:
			r.rep.PodsCreatedUpstream++
		case v1:
			r.rep.PodsCreatedV1++
		}
		r.created[got.UID] = name
		if optIn {
			r.rep.Fence.PodsOptedIn++
		}
	}
}

// deleteRandomPod deletes one of the harness's pods that is not finished;
// half of them by force (grace period 0), as `kubectl delete --force`
// does: the pod leaves the API at once while its node still stops its
// containers and unprepares its claims.
func (r *run) deleteRandomPod(ctx context.Context) {
	pods, err := r.listPods(ctx)
	if err != nil {
		return
	}
	var live []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		return
	}
	r.mu.Lock()
	victim := live[r.rng.IntN(len(live))]
	force := r.rng.IntN(2) == 0
	r.mu.Unlock()
	if r.deletePodWith(ctx, &victim, force) {
		r.mu.Lock()
		r.rep.PodsDeleted++
		if force {
			r.rep.PodsForceDeleted++
		}
		r.mu.Unlock()
	}
}

// deletePod deletes a pod (that one: its UID is a precondition), recording
// that the harness did first, so that a delete whose answer is lost still
// counts.
func (r *run) deletePod(ctx context.Context, p *corev1.Pod) bool {
	return r.deletePodWith(ctx, p, false)
}

// deletePodWith deletes a pod, by force (grace period 0) when force is set.
func (r *run) deletePodWith(ctx context.Context, p *corev1.Pod, force bool) bool {
	r.mu.Lock()
	r.deleted[p.UID] = true
	r.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	uid := p.UID
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	if force {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	err := r.c.admin.Pods(namespace).Delete(dctx, p.Name, opts)
	return err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err)
}

// reaper deletes finished pods every second, so that devices and names
// are reused.
func (r *run) reaper(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		pods, err := r.listPods(ctx)
		if err != nil {
			continue
		}
		r.mu.Lock()
		r.noteFenced(pods)
		r.mu.Unlock()
		for i := range pods {
			p := &pods[i]
			if p.DeletionTimestamp == nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) {
				if r.deletePod(ctx, p) {
					r.mu.Lock()
					r.rep.PodsReaped++
					r.mu.Unlock()
				}
			}
		}
	}
}

// killer kills a random component (one time in five two of them) every
// KillInterval on average, and restarts it after a moment.
func (r *run) killer(ctx context.Context, rng *rand.Rand) {
	for {
		wait := time.Duration(float64(r.cfg.KillInterval) * (0.5 + rng.Float64()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		victims := []*component{r.c.components[rng.IntN(len(r.c.components))]}
		if rng.IntN(5) == 0 {
			if other := r.c.components[rng.IntN(len(r.c.components))]; other != victims[0] {
				victims = append(victims, other)
			}
		}
		// The API server is the killer's only while no outage holds it.
		heldAPI := false
		if slices.Contains(victims, r.c.apiserver) {
			if heldAPI = r.apiMu.TryLock(); !heldAPI {
				victims = slices.DeleteFunc(victims, func(c *component) bool { return c == r.c.apiserver })
			}
		}
		if len(victims) == 0 {
			continue
		}
		down := time.Duration(100+rng.IntN(900)) * time.Millisecond
		for _, v := range victims {
			r.logf("kill -9 %s; restart in %v", v.name, down)
			r.c.kill(v)
		}
		select {
		case <-ctx.Done():
		case <-time.After(down):
		}
		for _, v := range victims {
			if err := r.c.restart(context.WithoutCancel(ctx), v); err != nil {
				r.logf("restart %s: %v", v.name, err)
			}
		}
		if heldAPI {
			r.apiMu.Unlock()
		}
	}
}

// sampler checks, every two seconds, a snapshot of pods and claims read at
// one revision: no instance is held twice, and running pods hold their
// claims.
func (r *run) sampler(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		pods, claims, err := r.snapshot(ctx)
		if err != nil {
			continue // the API server may be down
		}
		vs := CheckNoDoubleAllocation(claims)
		vs = append(vs, CheckRunningPodsReserved(pods, claims)...)
		r.mu.Lock()
		r.noteClaims(pods, claims)
		r.noteFenced(pods)
		r.rep.Samples++
		r.addViolations(vs)
		r.mu.Unlock()
	}
}

// noteClaims records the version of every claim in a snapshot, and the
// claims reserved for running pods; r.mu is held.
func (r *run) noteClaims(pods []corev1.Pod, claims Claims) {
	running := map[types.UID]bool{}
	for i := range pods {
		if pods[i].Status.Phase == corev1.PodRunning {
			running[pods[i].UID] = true
		}
	}
	for _, c := range claims.stored() {
		r.versions[c.uid] = c.version
		if slices.ContainsFunc(c.reserved, func(uid types.UID) bool { return running[uid] }) {
			r.ran[c.uid] = c.kind()
		}
	}
	maps.Copy(r.fence.multiNode, MultiNodePods(claims))
}

// addViolations records violations once each; r.mu is held.
func (r *run) addViolations(vs []Violation) {
	for _, v := range vs {
		if !containsViolation(r.rep.Violations, v) {
			r.rep.Violations = append(r.rep.Violations, v)
			r.logf("VIOLATION %s", v)
		}
	}
}

func containsViolation(vs []Violation, v Violation) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// snapshot reads the namespace's pods and claims at one revision: pods
// from etcd with a limit (which pins the revision), then claims through
// both versions at that exact revision, views dropped.
func (r *run) snapshot(ctx context.Context) ([]corev1.Pod, Claims, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods, err := r.c.admin.Pods(namespace).List(ctx, metav1.ListOptions{Limit: 100000})
	if err != nil {
		return nil, Claims{}, err
	}
	if pods.Continue != "" {
		return nil, Claims{}, errors.New("more pods than one page")
	}
	at := metav1.ListOptions{Limit: 100000, ResourceVersion: pods.ResourceVersion}
	claims, err := r.c.admin.ResourceClaims(namespace).List(ctx, at)
	if err != nil {
		return nil, Claims{}, err
	}
	claimsV1, err := r.c.admin.ResourceClaimsV1(namespace).List(ctx, at)
	if err != nil {
		return nil, Claims{}, err
	}
	if claims.Continue != "" || claimsV1.Continue != "" {
		return nil, Claims{}, errors.New("more claims than one page")
	}
	return pods.Items, StoredClaims(claims.Items, claimsV1.Items), nil
}

func (r *run) listPods(ctx context.Context) ([]corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := r.c.admin.Pods(namespace).List(ctx, listAll())
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func listAll() metav1.ListOptions { return metav1.ListOptions{} }

// settle brings every component back, lets the pods finish, checks that
// none was lost or stuck, deletes them all, and checks that nothing of
// theirs is left: claims, allocations, prepared claims, CDI specs.
func (r *run) settle(ctx context.Context) error {
	for _, comp := range r.c.components {
		if err := r.c.restart(ctx, comp); err != nil {
			return fmt.Errorf("restart %s: %w", comp.name, err)
		}
	}
	var vs []Violation
	// 1. Every pod finishes. The churn may leave a backlog of pods that
	// wait for devices; it must keep draining: a time of Settle in which
	// no pod finishes is a stuck cluster.
	pods, stuck, err := r.drain(ctx)
	if err != nil {
		return err
	}
	if stuck {
		vs = append(vs, r.stuckPending(ctx, pods)...)
	}
	r.mu.Lock()
	vs = append(vs, CheckNoPodLost(r.created, r.deleted, pods)...)
	r.noteFenced(pods)
	r.mu.Unlock()
	// 2. Delete every pod; each must go.
	for i := range pods {
		r.deletePod(ctx, &pods[i])
	}
	if err := poll(ctx, r.cfg.Settle, func() (bool, error) {
		var err error
		pods, err = r.listPods(ctx)
		return err == nil && len(pods) == 0, nil
	}); err != nil {
		for _, p := range pods {
			vs = append(vs, Violation{RuleStuckTerminating, fmt.Sprintf("pod %s (phase %s, node %q) still there %v after its deletion", p.Name, p.Status.Phase, p.Spec.NodeName, r.cfg.Settle)})
		}
	}
	// 3. Claims follow their pods; allocations are released.
	var claims Claims
	_ = poll(ctx, r.cfg.Settle, func() (bool, error) {
		_, cl, err := r.snapshot(ctx)
		if err != nil {
			return false, nil //nolint:nilerr
		}
		claims = cl
		return len(CheckSettledClaims(pods, cl)) == 0 && cl.Len() == 0, nil
	})
	vs = append(vs, CheckSettledClaims(pods, claims)...)
	vs = append(vs, CheckNoDoubleAllocation(claims)...)
	// 4. Every node's driver unprepared what it prepared, of claims of
	// both versions; and prepared claims of each kind running pods held.
	// The example driver writes a line per claim prepared or unprepared
	// (not per repeated call): the counts must balance. The upstream
	// driver writes one per call (a claim prepared again after a kill has
	// two prepare lines, one unprepared twice two unprepare lines): each
	// claim's last line must be an unprepare.
	r.mu.Lock()
	defer r.mu.Unlock()
	prepared := map[types.UID]bool{}
	for _, n := range r.c.nodes {
		state, err := os.ReadFile(n.stateFile)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		uids := PreparedUIDs(string(state))
		vs = append(vs, CheckNoDevicePreparedTwice(n.name, string(state), !n.upstream)...)
		if n.upstream {
			vs = append(vs, CheckDriverStateLast(n.name+" "+upstreamDriver, string(state), r.versions)...)
			r.rep.UpstreamPrepared += len(uids)
			r.rep.UpstreamPrepareCalls += strings.Count("\n"+string(state), "\nprepare ")
		} else {
			vs = append(vs, CheckDriverState(n.name, string(state), r.versions)...)
		}
		maps.Copy(prepared, uids)
		specs, _ := filepath.Glob(filepath.Join(n.cdiDir, n.cdiGlob))
		for _, s := range specs {
			vs = append(vs, Violation{RuleCDISpecLeft, s})
		}
	}
	vs = append(vs, CheckPreparedVersions(r.ran, prepared)...)
	r.rep.ClaimsRan, r.rep.ClaimsPrepared = map[string]int{}, map[string]int{}
	for uid, v := range r.ran {
		r.rep.ClaimsRan[v]++
		if prepared[uid] {
			r.rep.ClaimsPrepared[v]++
		}
	}
	r.addViolations(vs)
	return nil
}

// drain waits until no pod of the run is Pending or Running. It gives up
// (stuck) when Settle passes without one pod finishing: every pod runs
// at most 3s, so a draining backlog always makes progress.
func (r *run) drain(ctx context.Context) (pods []corev1.Pod, stuck bool, err error) {
	const period = 500 * time.Millisecond
	lastProgress := time.Now()
	minActive := -1
	for {
		pods, err = r.listPods(ctx)
		if err != nil {
			if time.Since(lastProgress) > r.cfg.Settle {
				return nil, false, fmt.Errorf("list pods after the churn: %w", err)
			}
		} else {
			active := 0
			for _, p := range pods {
				if p.DeletionTimestamp == nil && (p.Status.Phase == corev1.PodPending || p.Status.Phase == corev1.PodRunning) {
					active++
				}
			}
			switch {
			case active == 0:
				return pods, false, nil
			case minActive < 0 || active < minActive:
				minActive, lastProgress = active, time.Now()
			case time.Since(lastProgress) > r.cfg.Settle:
				return pods, true, nil
			}
		}
		select {
		case <-ctx.Done():
			return pods, true, ctx.Err()
		case <-time.After(period):
		}
	}
}

// stuckPending reports the pods left Pending or Running when the cluster
// stopped making progress, with how many devices were in use.
func (r *run) stuckPending(ctx context.Context, pods []corev1.Pod) []Violation {
	_, claims, err := r.snapshot(ctx)
	if err != nil {
		return []Violation{{RuleStuckPending, "cannot read claims: " + err.Error()}}
	}
	held := 0
	for _, c := range claims.stored() {
		if len(c.reserved) > 0 {
			held++
		}
	}
	var out []Violation
	for _, p := range pods {
		if p.DeletionTimestamp != nil || (p.Status.Phase != corev1.PodPending && p.Status.Phase != corev1.PodRunning) {
			continue
		}
		out = append(out, Violation{RuleStuckPending, fmt.Sprintf("pod %s is %s on node %q, and no pod finished in %v; %d of %d devices in use",
			p.Name, p.Status.Phase, p.Spec.NodeName, r.cfg.Settle, held, r.c.devices())})
	}
	return out
}
